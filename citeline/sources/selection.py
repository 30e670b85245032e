"""Which files under a root a run takes: ``include``/``exclude`` globs, the root's ``.citelineignore`` and the
defaults, all with gitignore semantics (through ``pathspec``, the library git-compatible tools use; a
hand-written matcher would get ``**``, anchoring, directory-only and negated patterns subtly wrong).

Rules, in order, a later matching rule winning (as in a ``.gitignore``):

1. :data:`DEFAULT_EXCLUDES`: hidden files and folders (``.git``, ``.venv``, ``.cache``), ``node_modules/`` and
   ``__pycache__/``; a folder holding a ``pyvenv.cfg`` (a virtualenv under any name, e.g. ``venv/``) is also
   left out.
2. The root's :data:`IGNORE_FILE` (``.citelineignore``), one pattern a line, ``#`` comments, ``!`` re-includes
   (``!node_modules/`` takes node_modules back).
3. The run's ``exclude`` globs.

Then, when ``include`` globs are given, only files matching one of them are taken. Patterns are matched against
the path relative to the root, ``/``-separated; a pattern without a ``/`` matches at any depth (``*.md``), one
with a ``/`` is anchored at the root (``docs/**``), one ending in ``/`` matches folders only (``drafts/``). An
excluded folder is not listed at all (as git does, a file below it cannot be re-included). A root given as a
single file is always taken: the user named it.

Files indexed before that an exclusion now leaves out are **kept** (their stored documents are not removed; see
:mod:`citeline.sources.discovery`): an exclude rule is a choice about what to read, and a mistyped one must never
delete what was indexed. Remove them on purpose with ``citeline remove PATH``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pathspec

from citeline.errors import SettingsError, SourceError

#: The ignore file read from each root (gitignore syntax).
IGNORE_FILE = ".citelineignore"
#: Left out unless a ``.citelineignore`` or ``include`` takes them back.
DEFAULT_EXCLUDES = (".*", "node_modules/", "__pycache__/")
#: A folder holding this file is a Python virtualenv (``python -m venv``, virtualenv, uv): never documents.
VIRTUALENV_MARKER = "pyvenv.cfg"


#: What pathspec raises for a pattern it cannot compile: its GitWildMatchPatternError is a ValueError, and a
#: character range it passes on to ``re`` (``[z-a]``) fails there with ``re.error``, which is not one.
_BAD_PATTERN = (ValueError, TypeError, re.error)


def _spec(patterns: Iterable[str], where: str | None = None) -> pathspec.PathSpec:
    """The patterns compiled; a bad one raises :class:`SettingsError` naming ``where`` (an option) and the pattern,
    or with ``where`` None, :class:`_BadPattern` with its position (the caller names the file and line)."""
    lines = list(patterns)
    try:
        return _compiled(lines)
    except _BAD_PATTERN:
        for number, line in enumerate(lines, 1):  # which one: each is compiled on its own
            try:
                _compiled([line])
            except _BAD_PATTERN as exc:
                # re.error's own message without "at position N", a position in the translated regex, not the glob
                reason = getattr(exc, "msg", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
                if where is None:
                    raise _BadPattern(number, line, reason) from None
                raise SettingsError(f"{where}: bad pattern {line!r} ({reason})") from None
        raise


def _compiled(lines: list[str]) -> pathspec.PathSpec:
    # Quiet: ``re`` warns (FutureWarning "Possible nested set at position 10") when pathspec's translation of a
    # bracket holding "[" (``[[a]``) might mean a nested set in some future Python. Today it means what git means (a
    # set holding "[" and "a"), and the position is in the regex, not in anything the user wrote.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pathspec.GitIgnoreSpec.from_lines(lines)


class _BadPattern(Exception):
    """A pattern of an ignore file that cannot be compiled: its 1-based position among the lines, and why."""

    def __init__(self, number: int, pattern: str, reason: str) -> None:
        super().__init__(number, pattern, reason)
        self.number, self.pattern, self.reason = number, pattern, reason


@dataclass(frozen=True)
class Selection:
    """A run's ``include`` and ``exclude`` globs (:class:`citeline.ingest.options.IngestOptions` fields)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _spec(self.include, "--include (include)")  # a bad glob is one line before any work
        _spec(self.exclude, "--exclude (exclude)")

    @classmethod
    def of(cls, options: Any) -> Selection:
        """The selection of an object with ``include`` and ``exclude`` attributes (``IngestOptions``)."""
        return cls(tuple(options.include), tuple(options.exclude))

    def for_root(self, root: str) -> RootRules:
        """The rules of one directory root: the defaults, its ``.citelineignore``, then ``exclude``."""
        ignore_file = os.path.join(root, IGNORE_FILE)
        try:
            with open(ignore_file, encoding="utf-8") as handle:
                ignored = handle.read().splitlines()
        except OSError as exc:
            if os.path.lexists(ignore_file):  # there, but unreadable: its rules are unknown
                raise SourceError(ignore_file, f"cannot read the ignore file: {exc.strerror or exc}") from None
            ignored = []  # none (or the root itself cannot be read: discovery reports that)
        except UnicodeDecodeError as exc:
            raise SourceError(ignore_file, f"the ignore file is not UTF-8 ({exc.reason}); save it as UTF-8") from None
        return self.with_ignore(ignored, ignore_file)

    def with_ignore(self, ignored: list[str], ignore_file: str) -> RootRules:
        """The rules of a root whose ignore file (named ``ignore_file`` in errors) holds the lines ``ignored``: a
        directory's (:meth:`for_root`) or a remote root's ``.citelineignore`` object (``citeline.sources.remote``)."""
        try:
            _spec(ignored)
        except _BadPattern as bad:  # the user's file: its path and line (exit 1, like an unreadable ignore file)
            raise SourceError(
                ignore_file, f"line {bad.number}: bad pattern {bad.pattern!r} ({bad.reason}); nothing was indexed"
            ) from None
        excludes = _spec([*DEFAULT_EXCLUDES, *ignored, *self.exclude], "--exclude (exclude)")
        return RootRules(excludes, _spec(self.include, "--include (include)") if self.include else None)


@dataclass(frozen=True)
class RootRules:
    """The compiled rules of one root; paths are relative to it, ``/``-separated."""

    excludes: pathspec.PathSpec
    includes: pathspec.PathSpec | None

    def excluded_folder(self, relative: str, path: str) -> bool:
        """True when the folder is left out (by the rules, or because it is a virtualenv)."""
        return bool(self.excludes.match_file(relative + "/")) or os.path.isfile(os.path.join(path, VIRTUALENV_MARKER))

    def excluded_link(self, relative: str) -> bool:
        """True when a symbolic link's own name is excluded (checked before it is followed: editors' lock files
        are broken links named ``.#name``)."""
        return bool(self.excludes.match_file(relative))

    def excluded_file(self, relative: str) -> bool:
        """True when the file is left out by an exclude rule or, with ``include`` globs, matches none of them."""
        if self.excludes.match_file(relative):
            return True
        return self.includes is not None and not self.includes.match_file(relative)


def under_any(path: str, paths: set[str]) -> bool:
    """True when ``path`` is one of ``paths`` or lies below one (checks each ancestor: O(depth), not O(paths))."""
    while True:
        if path in paths:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def listed(paths: Sequence[str], limit: int) -> str:
    """Up to ``limit`` of ``paths``, comma-separated, with ``and N more``."""
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
