"""Prefect entry point of the ingestion flow (prefect.yaml's ``flows/ingest.py:ingest_flow``).

The flow lives in :mod:`citeline.orchestration.ingest`, so the CLI (``citeline ingest --prefect``) runs the same
object without importing this folder. ``python -m flows.ingest PATH... [options]`` is ``citeline ingest --prefect``.
"""

from __future__ import annotations

import sys

from citeline.orchestration.ingest import ingest_flow

__all__ = ["ingest_flow", "main"]


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.ingest PATH... [options]``: the same command as ``citeline ingest --prefect``."""
    from citeline.cli.main import cli

    cli.main(["ingest", "--prefect", *(sys.argv[1:] if argv is None else argv)], prog_name="python -m flows.ingest")


if __name__ == "__main__":
    main()
