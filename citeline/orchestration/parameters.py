"""The parameters of an ingestion run (:class:`IngestParameters`): the flow's, the deployment's and the CLI's,
validated in one place with the descriptions, bounds and choices the Prefect UI's run form shows. The index settings
and run options among them are made from their declarations (:class:`citeline.ingest.options.IndexSettings`,
:class:`~citeline.ingest.options.IngestOptions`); the flow's signature is made from this model
(``citeline.orchestration.ingest``)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from citeline.errors import SettingsError, SourceError
from citeline.ingest.options import IndexSettings, IngestOptions, placement_help
from citeline.sharding.remote import parse_shard_workers
from citeline.sources.encoding import codec_name
from citeline.sources.remote import is_remote
from citeline.util.declared import offered, pydantic_field


class _Parameters(BaseModel):
    """What every ingestion run is given (the paths and the index), and the checks across parameters; the declared
    settings are added by :data:`IngestParameters`."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        min_length=1,
        description="Folders or files to ingest (absolute paths as the flow run's machine sees them), or URLs "
        "(s3://bucket/prefix, gs://, az://, https://; credentials from the worker's environment, the file named "
        "by CITELINE_STORAGE_OPTIONS or the Prefect block storage_block names, never a parameter).",
    )
    index_path: str = Field(
        "index", description="The index directory; created on the first run (env CITELINE_INDEX in the CLI)."
    )

    @field_validator("paths")
    @classmethod
    def _paths_exist(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if "{{" in path:  # a prefect.yaml placeholder whose environment variable was not set at deploy time
                raise SourceError(path, "unresolved placeholder: set the variable before `prefect deploy`")
            if not is_remote(path) and not os.path.exists(path):  # a URL is listed by the run (one line if it fails)
                raise SourceError(path, "no such file or directory")
        return paths

    @field_validator("encoding", check_fields=False)
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        return None if value is None else codec_name(value)  # an unknown codec is one line, before any work

    @field_validator("shard_workers", check_fields=False)
    @classmethod
    def _shard_workers_parse(cls, value: dict[int, str] | str | None) -> dict[int, str] | str | None:
        parse_shard_workers(value, None)  # a bad entry is one line here; the shard count is checked by the run
        return value

    @model_validator(mode="after")
    def _one_dask_setting(self) -> _Parameters:
        # The Dask fields are declared on the model create_model builds from this base (IngestParameters).
        dask = self.model_dump(include={"dask_address", "dask_workers", "shard_workers"})
        dask_address, dask_workers = dask.get("dask_address"), dask.get("dask_workers")
        if dask_address and dask_workers:
            raise ValueError("give either dask_address (an existing cluster) or dask_workers (a local one), not both")
        if dask.get("shard_workers") and not (dask_address or dask_workers):
            raise ValueError("shard_workers pins shards to Dask workers: give dask_address or dask_workers too")
        return self

    @classmethod
    def parse(cls, **values: Any) -> Any:
        """Validate ``values``; a bad one raises :class:`SourceError` (paths) or one-line ``ValueError``."""
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'parameters'}: {error['msg']}"
                for error in exc.errors()
            )
            raise SettingsError(problems) from None


#: Where a run's work runs, and where its credentials come from, by name (never the secret itself:
#: ``citeline.orchestration.blocks``): declared once, in ``citeline.ingest.options.Placement``.
_PLACEMENT: dict[str, Any] = {
    "dask_address": (str | None, Field(None, description=placement_help("dask_address"))),
    "dask_workers": (int | None, Field(None, ge=1, description=placement_help("dask_workers"))),
    "shard_workers": (dict[int, str] | str | None, Field(None, description=placement_help("shard_workers"))),
    "storage_block": (str | None, Field(None, description=placement_help("storage_block"))),
}

#: The parameters of an ingestion run: the flow's, the deployment's and the CLI's (``citeline ingest``,
#: ``citeline schedule``): the paths and index, each declared index setting and run option marked ``flow`` (their
#: help texts are what the Prefect UI's run form shows beside each field), and where the work runs.
_DECLARED: dict[str, Any] = {
    **{spec.name: pydantic_field(IndexSettings, spec) for spec in offered(IndexSettings, "flow")},
    **{spec.name: pydantic_field(IngestOptions, spec) for spec in offered(IngestOptions, "flow")},
}
IngestParameters = create_model(
    "IngestParameters", __base__=_Parameters, __module__=__name__, **_DECLARED, **_PLACEMENT
)
