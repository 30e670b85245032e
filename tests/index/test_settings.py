"""Each index setting and run option is declared once (``citeline.ingest.options``): the CLI flags and the flow's
parameters are made from the declarations, and the Python signatures that stay hand-written (for the IDE) are tied
to them here, name for name and default for default, so none can drift."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index, SettingsError
from citeline.cli.main import cli
from citeline.ingest.options import DEFAULTS, MIN_CHUNK_TOKENS, IndexSettings, IngestOptions
from citeline.model import chunking
from citeline.model.embedding import BACKENDS
from citeline.orchestration.parameters import IngestParameters
from citeline.sharding.index import ShardedIndex
from citeline.util.declared import offered
from citeline.vectors import load_all

DECLARED = [*offered(IndexSettings), *offered(IngestOptions)]


def _keywords(function: Any, leave_out: set[str]) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY and p.name not in leave_out}


def test_hand_written_signatures_are_the_declarations() -> None:
    # Index.create: every index setting, same default (embedder is a Python object, not a setting)
    create = _keywords(Index.create, {"embedder"})
    assert create == {spec.name: spec.default for spec in fields(IndexSettings)}
    # ShardedIndex.create is Index.create (a sharded root is a layout Index.create picks: no second signature)
    assert ShardedIndex.create.__func__ is Index.create.__func__  # type: ignore[attr-defined]
    assert ShardedIndex.open.__func__ is Index.open.__func__  # type: ignore[attr-defined]
    # Index.ingest: every run option a caller sets (the flow's batch sizes are the flow's), same default
    ingest = _keywords(Index.ingest, {"options", "placement"})  # placement: where a root's parts run
    run_options = {spec.name for spec in offered(IngestOptions, "cli")} | {"progress", "storage_options"}
    assert set(ingest) == run_options
    for name, default in ingest.items():
        assert default == getattr(DEFAULTS, name), name
    # the other writers' run options (wait, dry_run, progress) default as a run's do
    for method in (Index.add_texts, Index.remove, Index.rebuild):
        for name, default in IngestOptions.pick(_keywords(method, set())).items():
            assert default == getattr(DEFAULTS, name), (method.__name__, name)


def test_choices_come_from_the_registries() -> None:
    meta = {spec.name: spec.metadata for spec in fields(IndexSettings)}
    assert meta["backend"]["choices"] == BACKENDS
    assert set(meta["vector_index"]["choices"]) == set(load_all())


def test_max_tokens_has_one_lower_bound_everywhere(tmp_path: Path, seeds_dir: Path) -> None:
    # the declared bound is the one the chunker enforces for every model
    with pytest.raises(SettingsError, match="max_tokens must be between 8"):
        chunking.check_settings(MIN_CHUNK_TOKENS - 1, 0, 256)
    chunking.check_settings(MIN_CHUNK_TOKENS, 0, 256)
    # and Python, the CLI and the flow refuse below it, before any index exists
    with pytest.raises(SettingsError, match="max_tokens must be at least 8, not 7"):
        Index.create(tmp_path / "py", embedder=HashEmbedder(), max_tokens=7)
    result = CliRunner().invoke(cli, ["ingest", str(seeds_dir), "--index", str(tmp_path / "cli"), "--max-tokens", "7"])
    assert result.exit_code == 2 and "x>=8" in result.output, result.output
    with pytest.raises(SettingsError, match="max_tokens: Input should be greater than or equal to 8"):
        IngestParameters.parse(paths=[str(seeds_dir)], max_tokens=7)
    assert not (tmp_path / "py").exists() and not (tmp_path / "cli").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"backend": "tensorflow"}, "backend must be one of torch, onnx, onnx-int8, not 'tensorflow'"),
        ({"overlap_tokens": -1}, "overlap_tokens must be at least 0, not -1"),
        ({"shards": 0}, "shards must be at least 1, not 0"),
    ],
)
def test_index_create_checks_every_setting_it_is_given(tmp_path: Path, setting: dict[str, Any], message: str) -> None:
    # With an embedder of its own, a bad backend used to be ignored in silence
    with pytest.raises(SettingsError, match=message):
        Index.create(tmp_path / "index", embedder=HashEmbedder(), **setting)
    assert not (tmp_path / "index").exists()


def _help(command: str) -> str:
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return "".join(result.output.split())  # without the line breaks click wraps it at


@pytest.mark.parametrize("command", ["ingest", "schedule"])
def test_cli_flags_are_the_declarations(command: str) -> None:
    params = {param.name: param for param in cli.commands[command].params}
    shown = _help(command)
    for spec in DECLARED:
        meta = spec.metadata
        if not meta["cli"]:
            assert spec.name not in params, spec.name
            continue
        param = params[spec.name]
        assert isinstance(param, click.Option)
        assert param.opts == ["--" + spec.name.replace("_", "-")], spec.name
        assert param.help == meta["help"] and "".join(meta["help"].split()) in shown, spec.name
        assert param.default == spec.default, spec.name
        if isinstance(param.type, click.Choice):
            assert tuple(param.type.choices) == meta["choices"], spec.name
        else:
            assert meta.get("choices") is None, spec.name
        if isinstance(param.type, click.IntRange | click.FloatRange):
            assert (param.type.min, param.type.max) == (meta["minimum"], meta["maximum"]), spec.name
        else:
            assert meta["minimum"] is None and meta["maximum"] is None, spec.name


def test_flow_parameters_are_the_declarations() -> None:
    for spec in DECLARED:
        meta = spec.metadata
        if not meta["flow"]:
            assert spec.name not in IngestParameters.model_fields, spec.name
            continue
        field = IngestParameters.model_fields[spec.name]
        default = tuple(field.default) if isinstance(field.default, list) else field.default
        assert default == (None if spec.default is MISSING else spec.default), spec.name
        assert field.description == meta["help"], spec.name
        schema = IngestParameters.model_json_schema()["properties"][spec.name]
        value = next((branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"), schema)
        assert value.get("minimum") == meta["minimum"] and value.get("maximum") == meta["maximum"], spec.name
        assert tuple(value.get("enum", ())) == tuple(meta.get("choices", ())), spec.name


def test_texts_from_stdin_refuse_shards_rather_than_ignore_them(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["ingest", "-", "--index", str(tmp_path / "ix"), "--shards", "2"], input="")
    assert result.exit_code == 2 and "--shards applies to folders" in result.output, result.output
