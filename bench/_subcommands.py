"""The subcommand dispatch of the bench scripts that measure one concept several ways (``collapse.py cost``,
``search.py mcp`` ...): each subcommand keeps the options it had as a script of its own."""

from __future__ import annotations

import sys
from collections.abc import Callable


def run(doc: str | None, commands: dict[str, Callable[[], None]]) -> None:
    """Run the subcommand named first on the command line; it parses the options after it (its own ``--help``).

    Without a known subcommand, print the script's docstring (which lists them) and exit 2 (0 for ``--help``).
    """
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(doc)
        raise SystemExit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    command = commands[sys.argv[1]]
    sys.argv = [f"{sys.argv[0]} {sys.argv[1]}", *sys.argv[2:]]
    command()
