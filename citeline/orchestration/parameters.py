"""The parameters of an ingestion run (:class:`IngestParameters`): the flow's, the deployment's and the CLI's,
validated in one place with the descriptions the Prefect UI's run form shows. (Split from flows/ingest.py, which
runs the flow.)"""

from __future__ import annotations

import os
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from citeline.errors import SettingsError, SourceError
from citeline.ingest.options import user_options
from citeline.model.embedding import BACKENDS
from citeline.sharding.remote import parse_shard_workers
from citeline.sources.encoding import codec_name

Backend = Literal["torch", "onnx", "onnx-int8"]


def option_field(name: str) -> Any:
    """The pydantic field of the run option ``name``: default, bounds and description from
    :class:`citeline.ingest.options.IngestOptions`, where they are declared once."""
    spec = {spec.name: spec for spec in user_options("flow")}[name]
    low, high = spec.metadata["minimum"], spec.metadata["maximum"]
    default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
    return Field(default, ge=low, le=high, description=spec.metadata["help"])


assert get_args(Backend) == BACKENDS, "Backend must list citeline.model.embedding.BACKENDS"


class IngestParameters(BaseModel):
    """The parameters of an ingestion run: the flow's, the deployment's and the CLI's (``citeline ingest``,
    ``citeline schedule``). The descriptions are what the Prefect UI's run form shows beside each field."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        min_length=1, description="Folders or files to ingest (absolute paths as the flow run's machine sees them)."
    )
    index_path: str = Field(
        "index", description="The index directory; created on the first run (env CITELINE_INDEX in the CLI)."
    )
    model: str | None = Field(
        None, description="Model name or local model folder; default: the index's, or all-MiniLM-L6-v2."
    )
    backend: Backend | None = Field(
        None,
        description="Embedding backend of a new index: torch, onnx, or onnx-int8 (fastest); default onnx-int8 where "
        "the CPU allows, else onnx.",
    )
    max_tokens: int | None = Field(None, ge=8, description="Chunk size in model tokens; default: the model's limit.")
    overlap_tokens: int | None = Field(None, ge=0, description="Token overlap between chunks; default 32.")
    max_file_bytes: int = option_field("max_file_bytes")
    wait: float | None = option_field("wait")
    dask_address: str | None = Field(
        None, description="Parse and embed on this Dask scheduler (tcp://HOST:8786); it must see the same paths."
    )
    dask_workers: int | None = Field(
        None, ge=1, description="Parse and embed on a local Dask cluster of this many processes."
    )
    files_per_batch: int = option_field("files_per_batch")
    chunks_per_batch: int = option_field("chunks_per_batch")
    commit_every: int = option_field("commit_every")
    vector_index: Literal["auto", "flat", "ivf", "hnsw"] | None = Field(
        None, description="Vector index kind of a new index: auto (flat, then ivf when large), flat, ivf or hnsw."
    )
    document_vectors: bool | None = Field(
        None, description="A new index also embeds each document whole (a hybrid ranking signal) [default: off]."
    )
    allow_removals: bool = option_field("allow_removals")
    removal_threshold: float = option_field("removal_threshold")
    dry_run: bool = option_field("dry_run")
    include: list[str] = option_field("include")
    exclude: list[str] = option_field("exclude")
    encoding: str | None = option_field("encoding")
    strict: bool = option_field("strict")
    shards: int | None = Field(
        None,
        ge=1,
        description="A new index of this many shards (each shard's run a task); default: unsharded, or the index's.",
    )

    shard_workers: dict[int, str] | str | None = Field(
        None,
        description="On a sharded index with dask_address or dask_workers: pin shards to the workers that hold their "
        "disks, SHARD=WORKER by address or name (0=tcp://10.0.0.5:8786,1=worker-b); a pinned shard runs only there.",
    )

    @field_validator("paths")
    @classmethod
    def _paths_exist(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if "{{" in path:  # a prefect.yaml placeholder whose environment variable was not set at deploy time
                raise SourceError(path, "unresolved placeholder: set the variable before `prefect deploy`")
            if not os.path.exists(path):
                raise SourceError(path, "no such file or directory")
        return paths

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        return None if value is None else codec_name(value)  # an unknown codec is one line, before any work

    @field_validator("shard_workers")
    @classmethod
    def _shard_workers_parse(cls, value: dict[int, str] | str | None) -> dict[int, str] | str | None:
        parse_shard_workers(value, None)  # a bad entry is one line here; the shard count is checked by the run
        return value

    @model_validator(mode="after")
    def _one_dask_setting(self) -> IngestParameters:
        if self.dask_address and self.dask_workers:
            raise ValueError("give either dask_address (an existing cluster) or dask_workers (a local one), not both")
        if self.shard_workers and not (self.dask_address or self.dask_workers):
            raise ValueError("shard_workers pins shards to Dask workers: give dask_address or dask_workers too")
        return self

    @classmethod
    def parse(cls, **values: Any) -> IngestParameters:
        """Validate ``values``; a bad one raises :class:`SourceError` (paths) or one-line ``ValueError``."""
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'parameters'}: {error['msg']}"
                for error in exc.errors()
            )
            raise SettingsError(problems) from None
