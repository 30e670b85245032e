"""Serve the ingestion flow on a cron schedule: ``python -m flows.serve --cron CRON PATH... [options]``, the same
command as ``citeline schedule`` (the deployment is built by :mod:`citeline.orchestration.serve`)."""

from __future__ import annotations

import sys

from citeline.orchestration.serve import build_deployment, serve

__all__ = ["build_deployment", "main", "serve"]


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.serve --cron CRON PATH... [options]``: the same command as ``citeline schedule`` (one
    option table, the CLI's)."""
    from citeline.cli.main import cli

    cli.main(["schedule", *(sys.argv[1:] if argv is None else argv)], prog_name="python -m flows.serve")


if __name__ == "__main__":
    main()
