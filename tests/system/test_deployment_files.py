"""docker-compose.yml, Dockerfile, prefect.yaml and the serve command line agree with each other and with the flow.

Docker cannot run here, so these check what can be checked without it: the files parse, name the services,
variables, volumes and health checks the flow needs, and every command line in them is accepted by the parser
that will run it. ``tests/system/test_flows.py`` deploys prefect.yaml and runs the served schedule on a real server.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import prefect
import prefect.settings
import pytest
import yaml
from click.testing import CliRunner
from prefect.flows import load_flow_from_entrypoint
from prefect.schedules import Cron
from prefect.states import Failed

import flows.ingest
import flows.serve
from citeline import SourceError
from citeline.cli.main import cli
from citeline.orchestration import ingest, serve
from citeline.orchestration.ingest import dask_task_runner, ingest_flow, transient_failure

REPO = Path(__file__).resolve().parents[2]
_DEFAULTED = re.compile(r"\$\{(\w+):-([^}]*)\}")


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with the default (what `docker compose up` uses when VAR is unset)."""
    return _DEFAULTED.sub(lambda match: match.group(2), value)


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source of each volume of a service."""
    result = {}
    for volume in service["volumes"]:
        source, target, *_ = interpolate(volume).split(":")
        result[target] = source
    return result


def test_compose_names_the_services_and_their_dependencies() -> None:
    services = compose()["services"]
    assert {"postgres", "prefect-server", "ingest"} <= services.keys()
    assert services["prefect-server"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["ingest"]["depends_on"]["prefect-server"]["condition"] == "service_healthy"
    for name in ("postgres", "prefect-server", "ingest", "worker"):
        assert services[name]["healthcheck"]["test"], f"{name} has no health check"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "/api/health" in " ".join(services["prefect-server"]["healthcheck"]["test"])
    # The ingest health check asks the runner's webserver, which only runs when enabled, on the port it asks.
    ingest_env = services["ingest"]["environment"]
    assert ingest_env["PREFECT_RUNNER_SERVER_ENABLE"] == "true"
    assert f"localhost:{ingest_env['PREFECT_RUNNER_SERVER_PORT']}/health" in " ".join(
        services["ingest"]["healthcheck"]["test"]
    )
    worker = services["worker"]
    assert f"localhost:{worker['environment']['PREFECT_WORKER_WEBSERVER_PORT']}/health" in " ".join(
        worker["healthcheck"]["test"]
    )
    assert "--with-healthcheck" in " ".join(worker["command"])


def test_compose_points_the_server_at_postgres_and_the_ingest_service_at_the_server() -> None:
    services = compose()["services"]
    server = services["prefect-server"]
    database = urlsplit(server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"])
    postgres_env = services["postgres"]["environment"]
    assert database.scheme == "postgresql+asyncpg"
    assert (database.hostname, database.username, database.password, database.path.lstrip("/")) == (
        "postgres",
        postgres_env["POSTGRES_USER"],
        postgres_env["POSTGRES_PASSWORD"],
        postgres_env["POSTGRES_DB"],
    )
    assert "--host 0.0.0.0" in server["command"]
    assert server["ports"] == ["4200:4200"]
    for name in ("ingest", "worker"):
        api = urlsplit(services[name]["environment"]["PREFECT_API_URL"])
        assert (api.hostname, api.port, api.path) == ("prefect-server", 4200, "/api")
    # The server runs the same Prefect version as the client citeline is tested with.
    assert server["image"].startswith(f"prefecthq/prefect:{prefect.__version__}-")


def test_compose_prefect_variables_are_real_prefect_settings() -> None:
    for name, service in compose()["services"].items():
        for variable in service.get("environment", {}):
            if variable.startswith("PREFECT_"):
                assert hasattr(prefect.settings, variable), f"{name}: {variable} is not a Prefect setting"


def _citeline_commands() -> list[tuple[str, list[str]]]:
    """Every ``citeline ...`` command line in docker-compose.yml: each service's command, and the documented
    one-off commands in its comments (``docker compose run --rm SERVICE citeline ...``)."""
    text = (REPO / "docker-compose.yml").read_text()
    found = []
    for name, service in compose()["services"].items():
        command = service.get("command")
        if isinstance(command, list) and command[0] == "citeline":
            found.append((name, [interpolate(part) for part in command[1:]]))
    for line in text.splitlines():
        match = re.search(r"docker compose run --rm (\S+) citeline (.*)$", line)
        if match:
            found.append((match.group(1), shlex.split(match.group(2))))
    return found


def test_every_compose_command_is_accepted_by_the_cli() -> None:
    commands = _citeline_commands()
    assert {"schedule", "search", "status"} <= {args[0] for _, args in commands}
    for service, args in commands:
        command = cli.commands[args[0]]
        # The CLI's own parser: an unknown option or a missing argument raises here.
        params = command.make_context(args[0], list(args[1:])).params
        if "index_path" in params:  # every command reads or writes the index on the service's volume
            assert mounts(compose()["services"][service])[params["index_path"]] == "citeline-index", (service, args)


def test_compose_ingest_service_runs_at_once_then_on_its_schedule() -> None:
    service = compose()["services"]["ingest"]
    args = [interpolate(part) for part in service["command"]]
    params = cli.commands["schedule"].make_context("schedule", args[2:]).params
    assert params["run_now"] is True
    Cron(params["cron"])  # the default schedule is a valid cron string
    volumes = mounts(service)
    assert params["index_path"] in volumes and volumes[params["index_path"]] == "citeline-index"
    assert params["paths"] and all(path in volumes for path in params["paths"])
    assert service["volumes"][0].endswith(":ro")  # documents are only read
    assert "citeline-index" in compose()["volumes"]
    assert service["build"] == "."


def test_compose_ui_reaches_its_api_from_the_host_browser() -> None:
    server = compose()["services"]["prefect-server"]
    ui_api = urlsplit(interpolate(server["environment"]["PREFECT_UI_API_URL"]))
    # 0.0.0.0 is where the server listens, not an address a browser can call (Prefect's known pitfall).
    assert ui_api.hostname == "localhost" and ui_api.path == "/api"
    assert f"{ui_api.port}:4200" in server["ports"]


def test_compose_keeps_the_model_cache_on_a_volume() -> None:
    services = compose()["services"]
    for name in ("ingest", "worker"):
        cache = services[name]["environment"]["CITELINE_CACHE"]
        volumes = mounts(services[name])
        assert any(cache.startswith(target) and source == "citeline-cache" for target, source in volumes.items())
    assert "citeline-cache" in compose()["volumes"]
    assert "ENV CITELINE_CACHE=/cache/citeline" in (REPO / "Dockerfile").read_text()


def test_compose_images_are_pinned_tags_and_the_built_image_is_named() -> None:
    services = compose()["services"]
    assert services["postgres"]["image"] == "postgres:16"
    assert services["prefect-server"]["image"] == f"prefecthq/prefect:{prefect.__version__}-python3.11"
    assert services["ingest"]["image"] == services["worker"]["image"] == "citeline:local"


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "index", "**/__pycache__"} <= ignored
    dockerfile = (REPO / "Dockerfile").read_text()
    for copied in re.findall(r"^COPY (.*) \S+$", dockerfile, re.MULTILINE):
        assert not set(copied.split()) & ignored, copied


def test_dockerfile_installs_the_project_and_what_compose_runs() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "WORKDIR /app" in dockerfile
    assert re.search(r"pip install .*torch==2\.13\.0", dockerfile)
    assert re.search(r"pip install --no-cache-dir \. ", dockerfile)  # the project, with its model package
    assert "resolve_model_path" in dockerfile  # the build fails if the model is missing
    for copied in ("citeline", "flows", "prefect.yaml", "pyproject.toml"):
        assert re.search(rf"^COPY .*\b{re.escape(copied)}\b", dockerfile, re.MULTILINE), copied
    assert "HF_HUB_OFFLINE=1" in dockerfile


def test_prefect_yaml_deploys_the_flow_with_valid_parameters_and_schedule() -> None:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    assert config["prefect-version"] == prefect.__version__
    # No pull step: Prefect's default runs the flow from the directory `prefect deploy` ran in (no hard-coded /app).
    assert "pull" not in config and "/app" not in (REPO / "prefect.yaml").read_text().replace("image's /app", "")
    (deployment,) = config["deployments"]
    # One source of truth: not the name `citeline schedule` registers, so the two definitions never merge.
    assert deployment["name"] == serve.WORKER_NAME != serve.DEFAULT_NAME
    limit = serve.concurrency()
    assert deployment["concurrency_limit"] == {
        "limit": limit.limit,
        "collision_strategy": limit.collision_strategy.value,
    }
    assert deployment["schedules"][0]["cron"] == serve.DEFAULT_CRON
    # Paths from the environment at deploy time; the worker service of docker-compose.yml sets them.
    assert deployment["parameters"] == {"paths": ["{{ $CITELINE_DOCUMENTS }}"], "index_path": "{{ $CITELINE_INDEX }}"}
    flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
    assert flow.name == ingest_flow.name == "citeline-ingest"
    signature = inspect.signature(ingest_flow.fn)
    assert set(deployment["parameters"]) <= set(signature.parameters)
    required = {name for name, p in signature.parameters.items() if p.default is inspect.Parameter.empty}
    assert required <= set(deployment["parameters"])
    (schedule,) = deployment["schedules"]
    Cron(schedule["cron"], timezone=schedule["timezone"])
    # The worker of docker-compose.yml serves this pool, and the parameters name its volumes.
    worker = compose()["services"]["worker"]
    assert f"--pool {deployment['work_pool']['name']}" in " ".join(worker["command"])
    assert "--type process" in " ".join(worker["command"])
    volumes = mounts(worker)
    assert worker["environment"]["CITELINE_INDEX"] in volumes
    assert worker["environment"]["CITELINE_DOCUMENTS"] in volumes


def _long_options(params: list[click.Parameter]) -> set[str]:
    return {opt for param in params for opt in param.opts if opt.startswith("--")} - {"--help"}


def test_python_m_flows_serve_and_flows_ingest_are_the_cli_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # One option table: the flows' entry points run the CLI's own commands.
    for module, command in ((flows.serve, "schedule"), (flows.ingest, "ingest")):
        with pytest.raises(SystemExit) as exited:
            module.main(["--help"])
        assert exited.value.code == 0
        shown = capsys.readouterr().out
        assert all(option in shown for option in _long_options(cli.commands[command].params))


def test_citeline_schedule_options_are_deployment_parameters() -> None:
    command = cli.commands["schedule"]
    # Every option is a parameter of serve.build_deployment (the flow's parameters, plus the schedule's).
    accepted = set(inspect.signature(serve.build_deployment).parameters)
    accepted |= set(ingest.IngestParameters.model_fields)
    # run_now is serve()'s, and storage_options_file the runs' environment (credentials): neither is a parameter
    cli_names = {param.name for param in command.params} - {"run_now", "storage_options_file"}
    assert cli_names <= accepted


def test_cli_does_not_import_prefect() -> None:
    code = "import sys, citeline.cli.main; sys.exit(any(m.split('.')[0] in ('prefect', 'flows') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["schedule", "{missing}", "--cron", "0 * * * *"], 1, "no such file or directory"),
        (["schedule", "{seeds}", "--cron", "61 * * *"], 2, "Invalid cron string"),
        (["schedule", "{seeds}", "--cron", "0 * * * *", "--dask-workers", "0"], 2, "0 is not in the range x>=1"),
        (
            ["schedule", "{seeds}", "--cron", "0 * * * *", "--dask-workers", "2", "--dask-address", "tcp://x:8786"],
            2,
            "not both",
        ),
        (["ingest", "{seeds}", "--dask-workers", "2"], 2, "add --prefect"),
    ],
)
def test_schedule_and_dask_options_refuse_bad_input_on_one_line(
    args: list[str], exit_code: int, message: str, tmp_path: Path, seeds_dir: Path
) -> None:
    argv = [a.format(missing=tmp_path / "missing", seeds=seeds_dir) for a in args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == exit_code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_build_deployment_checks_paths_before_registering(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file or directory"):
        serve.build_deployment([str(tmp_path / "missing")], cron="0 * * * *")


def test_dask_task_runner_settings() -> None:
    assert dask_task_runner() is None
    remote = dask_task_runner(dask_address="tcp://10.0.0.5:8786")
    assert remote is not None and remote.address == "tcp://10.0.0.5:8786"  # type: ignore[attr-defined]
    local = dask_task_runner(dask_workers=2)
    assert local is not None and local.cluster_kwargs["n_workers"] == 2  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not both"):
        dask_task_runner(dask_address="tcp://x:8786", dask_workers=2)
    with pytest.raises(ValueError, match="at least 1"):
        dask_task_runner(dask_workers=0)


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (OSError(5, "Input/output error"), True),
        (TimeoutError("read timed out"), True),
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (FileNotFoundError(2, "No such file or directory"), False),
        (PermissionError(13, "Permission denied"), False),
        (SourceError("x.txt", "no such file or directory"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_transient_failures_are_retried(error: Exception, retried: bool) -> None:
    assert transient_failure(None, None, Failed(data=error)) is retried  # type: ignore[arg-type]


# ---------------------------------------------------------------- the run form, refusals, what operators read


def test_run_form_describes_every_parameter_and_offers_backend_as_a_choice() -> None:
    from prefect.utilities.callables import parameter_schema

    from citeline.model.embedding import BACKENDS

    schema = parameter_schema(ingest_flow.fn).model_dump()["properties"]
    assert set(schema) == set(ingest.IngestParameters.model_fields)
    for name, field in ingest.IngestParameters.model_fields.items():
        assert schema[name].get("description") == field.description, name
    (choice, _) = schema["backend"]["anyOf"]
    assert tuple(choice["enum"]) == BACKENDS


def test_run_form_carries_each_declared_setting_its_bounds_and_choices() -> None:
    from prefect.utilities.callables import parameter_schema

    from citeline.ingest.options import IndexSettings, IngestOptions
    from citeline.util.declared import offered

    schema = parameter_schema(ingest_flow.fn).model_dump()["properties"]
    for spec in [*offered(IndexSettings, "flow"), *offered(IngestOptions, "flow")]:
        meta, form = spec.metadata, schema[spec.name]
        value = next((branch for branch in form.get("anyOf", [form]) if branch.get("type") != "null"), form)
        assert form["description"] == meta["help"], spec.name
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        assert form.get("default") == default, spec.name
        assert (value.get("minimum"), value.get("maximum")) == (meta["minimum"], meta["maximum"]), spec.name
        assert tuple(value.get("enum", ())) == tuple(meta.get("choices", ())), spec.name


def test_deployment_has_one_run_at_a_time_and_the_flow_a_timeout(seeds_dir: Path, tmp_path: Path) -> None:
    deployment = serve.build_deployment([str(seeds_dir)], cron="0 * * * *", index_path=str(tmp_path / "ix"))
    assert deployment.concurrency_limit == 1
    assert deployment.concurrency_options is not None
    assert deployment.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert ingest_flow.timeout_seconds == ingest.FLOW_TIMEOUT
    for direct in (ingest.discover_task, ingest.plan_task, ingest.commit_task):
        assert direct.timeout_seconds, direct.name  # tasks on the flow's thread, where a timeout interrupts
    assert ingest.index_key(tmp_path / "ix") in (deployment.description or "")
    with pytest.raises(ValueError, match=r"belongs to prefect\.yaml"):
        serve.build_deployment([str(seeds_dir)], cron="0 * * * *", name=serve.WORKER_NAME)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"paths": []}, "paths: List should have at least 1 item"),
        ({"paths": ["{seeds}"], "backend": "tensorflow"}, "backend: Input should be 'torch', 'onnx' or 'onnx-int8'"),
        ({"paths": ["{seeds}"], "wait": -1}, "wait: Input should be greater than or equal to 0"),
        ({"paths": ["{seeds}"], "dask_address": "tcp://x:1", "dask_workers": 2}, "not both"),
    ],
)
def test_bad_parameters_are_one_line(values: dict[str, Any], message: str, seeds_dir: Path) -> None:
    values = {k: [p.format(seeds=seeds_dir) for p in v] if k == "paths" else v for k, v in values.items()}
    with pytest.raises(ValueError) as raised:
        ingest.IngestParameters.parse(**values)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_unresolved_prefect_yaml_placeholder_names_the_variable() -> None:
    with pytest.raises(SourceError, match="unresolved placeholder"):
        ingest.IngestParameters.parse(paths=["{{ $CITELINE_DOCUMENTS }}"])


def test_index_key_is_lowercase_dashes_of_the_path(tmp_path: Path) -> None:
    assert ingest.index_key("/data/index") == "citeline-data-index"
    assert ingest.index_key("/Data/My Index") == "citeline-data-my-index"
    long_a, long_b = ingest.index_key("/x" * 80 + "/a"), ingest.index_key("/x" * 80 + "/b")
    assert long_a != long_b and len(long_a) <= 70
    assert re.fullmatch(r"[a-z0-9-]+", long_a)


def test_schedule_refuses_at_once_without_a_server(seeds_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    for url, message in ((None, "PREFECT_API_URL is not set"), ("http://127.0.0.1:9/api", "does not answer")):
        with temporary_settings({PREFECT_API_URL: url}):
            result = CliRunner().invoke(cli, ["schedule", str(seeds_dir), "--cron", "0 * * * *"])
        assert result.exit_code == 1, result.output
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_ingest_prefect_user_errors_are_one_line(tmp_path: Path) -> None:
    # A real process: what the user sees on the terminal, Prefect's console handler included.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "citeline.cli.main",
            "ingest",
            "--prefect",
            "nosuchdir",
            "--index",
            str(tmp_path / "ix"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "Error: nosuchdir: no such file or directory", result.stderr
    assert result.stdout == ""


def test_pipeline_reports_each_stage_with_counts_and_seconds(
    tmp_path: Path, seeds_dir: Path, fake_embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from citeline import Index

    (tmp_path / "docs").mkdir()
    for source in seeds_dir.iterdir():
        (tmp_path / "docs" / source.name).write_bytes(source.read_bytes())
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"not a pdf")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    with caplog.at_level(logging.INFO, logger="citeline.ingest"):
        run = index.ingest([tmp_path / "docs"])
    lines = [record.getMessage() for record in caplog.records if record.name == "citeline.ingest"]
    files, documents = len(list(seeds_dir.iterdir())) + 1, run.added
    assert run.failed == 1
    assert f"discovered {files} files under {tmp_path / 'docs'}" in lines
    assert f"parsed {files} files: {documents} documents, 1 failed" in lines
    assert any(line.startswith(f"failed {tmp_path / 'docs' / 'broken.pdf'}: ") for line in lines)
    assert f"plan: {documents} added, 0 updated, 0 unchanged, 0 removed (documents)" in lines
    chunks = rf"chunks: \d+ made from {documents} documents, \d+ embedded, 0 reused"
    assert any(re.fullmatch(chunks, line) for line in lines)
    assert any(line.startswith("committed generation 1") for line in lines)
    for stage in ("discover", "parse", "plan", "chunk", "embed", "commit", "query model"):
        assert any(re.fullmatch(rf"{stage}: \d+\.\d s", line) for line in lines), stage


def test_a_run_waiting_for_another_writer_names_it(tmp_path: Path, seeds_dir: Path, fake_embedder: Any) -> None:
    from citeline import Index, IndexLockedError
    from citeline.ingest import pipeline
    from citeline.ingest.progress import Reporter
    from citeline.store import locks

    class Recorder(Reporter):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def emit(self, level: int, message: str) -> None:
            self.lines.append(message)

    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    recorder = Recorder()
    with locks.writer_lock(index.path):
        pattern = rf"held by pid {os.getpid()} since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
        with pytest.raises(IndexLockedError, match=pattern):
            pipeline.run(index, [seeds_dir], pipeline.Options(wait=0.3, reporter=recorder))
        with pytest.raises(IndexLockedError, match=pattern):  # wait=0 fails at once, naming the holder too
            pipeline.run(index, [seeds_dir], pipeline.Options(wait=0))
    assert re.fullmatch(
        rf"waiting for the writer lock of {index.path}: {pattern}; giving up after 0.3 s", recorder.lines[0]
    ), recorder.lines


def test_progress_fraction_moves_through_the_stages() -> None:
    from citeline.ingest.progress import STAGE_WEIGHTS, Reporter

    reporter = Reporter()
    seen = [reporter.fraction()]
    for stage in STAGE_WEIGHTS:
        reporter.stage(stage, 10)
        for _ in range(10):
            reporter.advance(1)
            seen.append(reporter.fraction())
    reporter.finish()
    seen.append(reporter.fraction())
    assert seen == sorted(seen) and seen[0] == 0.0 and seen[-1] == 1.0
    assert abs(sum(STAGE_WEIGHTS.values()) - 1.0) < 1e-9
