"""docker-compose.yml, Dockerfile, prefect.yaml and the serve command line agree with each other and with the flow.

Docker cannot run here, so these check what can be checked without it: the files parse, name the services,
variables, volumes and health checks the flow needs, and every command line in them is accepted by the parser
that will run it. ``tests/test_flows.py`` deploys prefect.yaml and runs the served schedule on a real server.
"""

from __future__ import annotations

import inspect
import re
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

from citeline import SourceError
from citeline.cli import cli
from flows import ingest as flow_module
from flows import serve
from flows.ingest import dask_task_runner, ingest_flow, transient_failure

REPO = Path(__file__).resolve().parent.parent
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
        "postgres", postgres_env["POSTGRES_USER"], postgres_env["POSTGRES_PASSWORD"], postgres_env["POSTGRES_DB"]
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


def test_compose_ingest_command_is_accepted_by_flows_serve() -> None:
    ingest = compose()["services"]["ingest"]
    command = [interpolate(part) for part in ingest["command"]]
    assert command[:3] == ["python", "-m", "flows.serve"]
    # `python -m flows.serve` is `citeline schedule`: one option table, parsed by the CLI's own command.
    args = cli.commands["schedule"].make_context("schedule", command[3:]).params
    Cron(args["cron"])  # the default schedule is a valid cron string
    volumes = mounts(ingest)
    assert args["index_path"] in volumes and volumes[args["index_path"]] == "citeline-index"
    assert args["paths"] and all(path in volumes for path in args["paths"])
    assert ingest["volumes"][0].endswith(":ro")  # documents are only read
    assert "citeline-index" in compose()["volumes"]
    assert ingest["build"] == "."


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
    (step,) = config["pull"]
    assert step["prefect.deployments.steps.set_working_directory"]["directory"] == "/app"  # Dockerfile WORKDIR
    (deployment,) = config["deployments"]
    assert deployment["name"] == "scheduled"
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
    assert deployment["parameters"]["index_path"] in volumes
    assert all(path in volumes for path in deployment["parameters"]["paths"])


def _long_options(params: list[click.Parameter]) -> set[str]:
    return {opt for param in params for opt in param.opts if opt.startswith("--")} - {"--help"}


def test_python_m_flows_serve_and_flows_ingest_are_the_cli_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # One option table: the flows' entry points run the CLI's own commands.
    for module, command in ((serve, "schedule"), (flow_module, "ingest")):
        with pytest.raises(SystemExit) as exited:
            module.main(["--help"])
        assert exited.value.code == 0
        shown = capsys.readouterr().out
        assert all(option in shown for option in _long_options(cli.commands[command].params))


def test_citeline_schedule_options_are_deployment_parameters() -> None:
    command = cli.commands["schedule"]
    # Every option is a parameter of serve.build_deployment (the flow's parameters, plus the schedule's).
    accepted = set(inspect.signature(serve.build_deployment).parameters)
    cli_names = {param.name for param in command.params}
    assert cli_names <= accepted


def test_cli_does_not_import_prefect() -> None:
    code = "import sys, citeline.cli; sys.exit(any(m.split('.')[0] in ('prefect', 'flows') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["schedule", "{missing}", "--cron", "0 * * * *"], 1, "no such file or directory"),
        (["schedule", "{seeds}", "--cron", "61 * * *"], 2, "Invalid cron string"),
        (["schedule", "{seeds}", "--cron", "0 * * * *", "--dask-workers", "0"], 2, "0 is not in the range x>=1"),
        (["schedule", "{seeds}", "--cron", "0 * * * *", "--dask-workers", "2", "--dask-address", "tcp://x:8786"],
         2, "not both"),
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

