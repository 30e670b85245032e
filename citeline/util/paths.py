"""A path as a user named it, made absolute and resolved the way ``citeline ingest`` resolves its roots."""

from __future__ import annotations

import os
from pathlib import Path


class UnresolvablePath(ValueError):
    """A path that cannot be resolved: ``~nosuchuser/...``, a symbolic link loop, a NUL byte."""


def resolved(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` expanded, absolute and resolved, not strict (the file may be gone already). Raises
    :class:`UnresolvablePath` with the reason instead of the ``RuntimeError`` (an unknown user, a loop on Python
    3.11), ``OSError`` or ``ValueError`` (a NUL byte) that pathlib raises, which reached users as tracebacks or
    a server's 500."""
    try:
        return Path(path).expanduser().resolve()
    except (RuntimeError, OSError, ValueError) as exc:
        raise UnresolvablePath(str(exc)) from None
