"""Discovery: find the files under the roots a user ingests, and report everything that could not be read.

A root is a directory (searched recursively, hidden entries skipped) or a single file. What lies below a root
fails alone: an unreadable folder or a name that is not UTF-8 becomes a :class:`Problem` of the
:class:`Discovery`, and the folders whose contents are unknown this run are listed so the planner keeps what is
stored under them. A symbolic link that is (rightly) not followed, broken, looping or leaving the root, is a
skip, not a failure: listed in :attr:`Discovery.skipped`, it leaves the run ``succeeded``.
"""

from __future__ import annotations

import errno
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from citeline.errors import SourceError
from citeline.sources import remote
from citeline.sources.parsers import (
    PARSERS,
    SourceFile,
    display_path,
    is_valid_text,
    source_suffix,
    supported_suffixes,
    unsupported,
)
from citeline.sources.selection import IGNORE_FILE, RootRules, Selection, under_any

#: Skipped files (unsupported or excluded) a discovery lists by path; past this it only counts them.
SKIPPED_LISTED = 1000


def is_under(path: str, folders: Iterable[str]) -> bool:
    """True when ``path`` is one of ``folders`` or lies below one (by path components, not string prefix).

    The planner's test for "this stored document is in a folder this run could not read": ``/a/bc`` is not
    under ``/a/b``.
    """
    for folder in folders:
        if folder == os.sep or path == folder or path.startswith(folder.rstrip(os.sep) + os.sep):
            return True
    return False


@dataclass(frozen=True)
class Problem:
    """An item discovery could not take: ``path`` is printable (see :func:`display_path`), ``reason`` one line."""

    path: str
    reason: str
    #: what is stored from it is kept (False: a web URL that is gone, whose document is removed)
    kept: bool = True


@dataclass
class Discovery:
    """Everything a scan of the roots found, including what it could not read.

    ``files`` are the supported files to parse. ``errors`` are per-item problems (an unreadable folder, a name
    that is not UTF-8, a link that cannot be resolved for want of permission); each belongs in the run's ledger
    and makes the run partial. ``unreadable_dirs`` and ``unreadable_roots`` are paths whose contents are unknown this
    run: every stored document under them must be kept. ``empty_roots`` are directory roots that were read and
    hold no supported file (an unmounted share looks like this): removing their documents needs an explicit
    choice. ``skipped`` are the symbolic links not followed, with why: a broken link, a link loop, a link leaving
    the root, or one whose target is indexed already under another path. Not following them is the policy, not
    a failure: they are counted in the run's summary (``links_skipped``) and listed one a line with ``-v``, and
    the run stays ``succeeded``. ``unsupported`` and ``excluded`` count the files left out because no parser
    reads their suffix, and the files and folders the selection rules left out (``citeline.sources.selection``);
    ``unsupported_paths`` and ``excluded_paths`` list the first :data:`SKIPPED_LISTED` of each (display paths,
    a folder with a trailing ``/``). ``excluded_roots`` holds the absolute paths of everything excluded: what is
    stored under them is kept, never removed (an exclude rule chooses what to read, it deletes nothing).
    """

    roots: list[str] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)
    unreadable_dirs: list[str] = field(default_factory=list)
    unreadable_roots: list[str] = field(default_factory=list)
    empty_roots: list[str] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    unsupported: int = 0
    excluded: int = 0
    unsupported_paths: list[str] = field(default_factory=list)
    excluded_paths: list[str] = field(default_factory=list)
    excluded_roots: list[str] = field(default_factory=list)

    def contents_unknown(self, path: str) -> bool:
        """True when ``path`` (absolute) lies in a root or folder this scan could not read, or one it was told to
        leave out: keep what is stored."""
        return (
            is_under(path, self.unreadable_roots)
            or is_under(path, self.unreadable_dirs)
            or (bool(self.excluded_roots) and under_any(path, self._excluded_set()))
        )

    def _excluded_set(self) -> set[str]:
        # ``excluded_roots`` as a set, made once per size (the planner asks once per stored document).
        cached: set[str] | None = self.__dict__.get("_excluded")
        if cached is None or len(cached) != len(set(self.excluded_roots[-1:]) | cached):
            cached = self.__dict__["_excluded"] = set(self.excluded_roots)
        return cached

    def skip(self, path: str, excluded: bool, folder: bool = False) -> None:
        """Count a file (or folder) left out: excluded by the rules, or unsupported."""
        shown = display_path(path) + ("/" if folder else "")
        if excluded:
            self.excluded += 1
            self.excluded_roots.append(path)
            if len(self.excluded_paths) < SKIPPED_LISTED:
                self.excluded_paths.append(shown)
        else:
            self.unsupported += 1
            if len(self.unsupported_paths) < SKIPPED_LISTED:
                self.unsupported_paths.append(shown)


def resolve_root(root: str | os.PathLike[str]) -> Path:
    """One root as an absolute, resolved path; a root that cannot be used raises :class:`SourceError`.

    The user named the root, so a typo, a missing folder, a link loop or a name that is not UTF-8 stops the run
    with one line rather than silently ingesting nothing.
    """
    shown = display_path(root)
    try:
        path = Path(root).expanduser().resolve(strict=True)
    except FileNotFoundError:
        raise SourceError(shown, "no such file or directory") from None
    except RuntimeError as exc:  # Python 3.11: "Could not determine home directory", "Symlink loop from ..."
        reason = "symbolic link loop" if "loop" in str(exc).lower() else "unknown user in ~ path"
        raise SourceError(shown, reason) from None
    except ValueError as exc:  # an embedded NUL byte
        raise SourceError(shown, f"invalid path ({exc})") from None
    except OSError as exc:
        reason = "symbolic link loop" if exc.errno == errno.ELOOP else f"cannot resolve: {exc.strerror or exc}"
        raise SourceError(shown, reason) from None
    if not is_valid_text(str(path)):
        raise SourceError(display_path(path), "path is not valid UTF-8; rename it")
    return path


def resolve_roots(roots: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Roots as absolute, resolved paths (a remote root as its normalized URL, ``citeline.sources.remote``): the
    scope a run's removals are limited to."""
    return [remote.normalized(str(root)) if remote.is_remote(root) else str(resolve_root(root)) for root in roots]


def scan(roots: Iterable[str | os.PathLike[str]], selection: Selection | None = None) -> Discovery:
    """Find the supported files under each root and report everything that could not be read.

    A root may be a directory (searched recursively; ``selection``'s rules, the root's ``.citelineignore`` and the
    defaults leave out hidden entries, ``node_modules`` and the like: ``citeline.sources.selection``) or a single
    file (always taken). A root that does not exist or cannot be resolved, or a file root with an unsupported
    suffix, raises :class:`SourceError`. Everything below a root fails alone into :attr:`Discovery.errors`.
    Symbolic links: see :class:`_RootWalk`.
    """
    selection = selection or Selection()
    discovery = Discovery()
    roots = list(roots)
    # Web URLs are asked together, each waiting on its own server only (a dead one costs its bound once).
    listed = remote.list_web_roots(remote.normalized(str(root)) for root in roots if remote.is_remote(root))
    for root in roots:
        if remote.is_remote(root):
            url = remote.normalized(str(root))
            _scan_remote(url, discovery, selection, listed.get(url))
            continue
        root_path = resolve_root(root)
        discovery.roots.append(str(root_path))
        if root_path.is_file():
            if root_path.suffix.lower() not in PARSERS:
                raise SourceError(
                    str(root_path),
                    f"unsupported file type {root_path.suffix or '(none)'}; "
                    f"citeline reads {', '.join(supported_suffixes())}",
                )
            discovery.files.append(SourceFile(str(root_path), str(root_path), root_path.name))
        elif root_path.is_dir():
            _RootWalk(str(root_path), discovery, selection.for_root(str(root_path))).run()
        else:
            raise SourceError(str(root_path), "not a regular file or directory")
    discovery.files.sort(key=lambda f: (f.root, f.source_id))
    return discovery


def _scan_remote(
    root: str, discovery: Discovery, selection: Selection, listed: remote.Listing | SourceError | None = None
) -> None:
    """List one remote root (keys and stamps only: ``remote.list_root``) into ``discovery``, with the same rules as
    a folder: the defaults, the root's ``.citelineignore`` object, then ``exclude`` and ``include``. An empty
    listing is an empty root (the removal guard keeps what is stored); one that cannot be taken raises.

    A web URL fails alone, as a file of a folder does: the server's answer in its own words is a problem of the
    run (its ledger's errors) and the other roots are read. A URL answering 404 or 410 is gone: it holds no file
    now and its document is removed, under the removal guard (which counts the URLs of one site together, as the
    files of a folder: ``citeline.ingest.planning.removal_problems``); any other failure (a 500, a TLS failure, no
    connection, a type no parser reads) keeps what is stored from it. ``listed``: the root's listing (or its
    failure) when it was taken already (:func:`remote.list_web_roots`)."""
    web = remote.protocol_of(root) in remote.WEB_PROTOCOLS
    try:
        if isinstance(listed, SourceError):
            raise listed
        listing = listed if listed is not None else remote.list_root(root)
    except remote.Gone as gone:
        if not web:
            raise
        discovery.roots.append(root)
        discovery.errors.append(Problem(root, f"{gone.reason} (gone: its document is removed)", kept=False))
        return
    except SourceError as exc:
        if not web:
            raise
        discovery.roots.append(root)
        discovery.errors.append(Problem(root, exc.reason))
        discovery.unreadable_roots.append(root)
        return
    discovery.roots.append(root)
    found_before = len(discovery.files)
    rules = selection.with_ignore(listing.ignore_lines or [], f"{root}/{IGNORE_FILE}")
    for source in remote.source_files(root, listing):
        suffix = source_suffix(source.source_id, source.media_type)
        if listing.single:  # the user named the object: always taken, if a parser reads it
            if suffix not in PARSERS:
                if not web:
                    raise SourceError(root, unsupported(source))
                discovery.errors.append(Problem(root, unsupported(source)))
                discovery.unreadable_roots.append(root)
                return
        elif rules.excluded_file(source.source_id):
            discovery.skip(source.path, excluded=True)
            continue
        elif suffix not in PARSERS:
            discovery.skip(source.path, excluded=False)
            continue
        discovery.files.append(source)
    if len(discovery.files) == found_before:
        discovery.empty_roots.append(root)


def discover(roots: Iterable[str | os.PathLike[str]]) -> list[SourceFile]:
    """The supported files under each root (see :func:`scan`, which also reports what could not be read)."""
    return scan(roots).files


class _RootWalk:
    """Walks one directory root without ever raising for what lies below it.

    Symbolic-link policy: the real tree is walked first, without following links. Then each link (not hidden)
    is resolved: a link whose target stays inside the root is followed, unless that file or folder was already
    found under another path (then it is reported in ``skipped``, indexed once); its files keep the link's
    path as their source id. A link leaving the root, a broken link, a link loop (``a -> b -> a``) and a folder
    link to its own ancestor are never followed, and are skips (``skipped``), not errors: the policy worked.
    Each real folder is listed at most once, so no tree of links can make the walk loop or grow exponentially.
    """

    def __init__(self, root: str, discovery: Discovery, rules: RootRules | None = None) -> None:
        self.root = root
        self.out = discovery
        self.rules = rules or Selection().for_root(root)
        self.seen_real: set[str] = set()  # real paths of folders listed and files taken
        self.links: deque[tuple[str, str, str]] = deque()  # (path as seen, source id, real parent folder)

    def run(self) -> None:
        found_before = len(self.out.files)
        self.walk(self.root, "", self.root)
        while self.links:
            self.follow(*self.links.popleft())
        if self.root not in self.out.unreadable_roots and len(self.out.files) == found_before:
            self.out.empty_roots.append(self.root)

    def error(self, path: str, reason: str) -> None:
        self.out.errors.append(Problem(display_path(path), reason))

    def not_followed(self, link: str, reason: str) -> None:
        self.out.skipped.append(Problem(display_path(link), reason))

    def walk(self, top: str, top_id: str, top_real: str) -> None:
        """List ``top`` and everything below it (an explicit stack: a 10,000-deep tree must not overflow)."""
        stack = [(top, top_id, top_real)]
        while stack:
            folder, folder_id, folder_real = stack.pop()
            self.seen_real.add(folder_real)
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                self.error(folder, f"cannot read folder: {exc.strerror or exc}; its indexed documents are kept")
                (self.out.unreadable_roots if folder == self.root else self.out.unreadable_dirs).append(folder)
                continue
            subfolders = []
            for entry in entries:
                source_id = f"{folder_id}/{entry.name}" if folder_id else entry.name
                if not folder_id and entry.name == IGNORE_FILE:
                    continue  # the rules themselves
                try:
                    is_link = entry.is_symlink()
                    is_dir = not is_link and entry.is_dir(follow_symlinks=False)
                    is_file = not is_link and not is_dir and entry.is_file(follow_symlinks=False)
                except OSError as exc:
                    self.error(entry.path, f"cannot inspect: {exc.strerror or exc}; its indexed documents are kept")
                    if is_valid_text(entry.path):  # a name that is not UTF-8 was never stored: nothing to keep
                        self.out.unreadable_dirs.append(entry.path)
                    continue
                if is_dir and self.rules.excluded_folder(source_id, entry.path):
                    self.out.skip(entry.path, excluded=True, folder=True)
                    continue
                if (is_file and self.rules.excluded_file(source_id)) or (
                    is_link and self.rules.excluded_link(source_id)
                ):
                    self.out.skip(entry.path, excluded=True)
                    continue
                if is_file and _suffix(entry.name) not in PARSERS:
                    self.out.skip(entry.path, excluded=False)
                    continue
                if not (is_link or is_dir or is_file):
                    continue  # sockets, fifos, devices
                if not is_valid_text(entry.name):
                    self.error(entry.path, "name is not valid UTF-8; rename it to index it")
                elif is_link:
                    self.links.append((entry.path, source_id, folder_real))
                elif is_dir:
                    subfolders.append((entry.path, source_id, os.path.join(folder_real, entry.name)))
                else:
                    self.seen_real.add(os.path.join(folder_real, entry.name))
                    self.out.files.append(SourceFile(self.root, entry.path, source_id))
            stack.extend(reversed(subfolders))

    def follow(self, link: str, source_id: str, parent_real: str) -> None:
        """Apply the link policy to one link found by :meth:`walk`."""
        try:
            resolved = os.path.realpath(link, strict=True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.not_followed(link, "symbolic link loop; not followed")
            elif isinstance(exc, FileNotFoundError):
                destination = display_path(_readlink(link))
                self.not_followed(link, f"broken symbolic link (its target {destination} does not exist); not followed")
            else:
                self.error(link, f"cannot follow symbolic link: {exc.strerror or exc}")
            return
        if not is_under(resolved, [self.root]):
            self.not_followed(link, f"symbolic link leaves the root (to {display_path(resolved)}); not followed")
            return
        if not is_valid_text(resolved):
            self.error(link, "symbolic link target's name is not valid UTF-8; not followed")
            return
        is_dir = os.path.isdir(resolved)
        if self.rules.excluded_folder(source_id, resolved) if is_dir else self.rules.excluded_file(source_id):
            self.out.skip(link, excluded=True, folder=is_dir)
            return
        if is_dir:
            if is_under(parent_real, [resolved]):
                self.not_followed(link, f"symbolic link loop: points to its own parent folder {display_path(resolved)}")
            elif resolved in self.seen_real:
                self.not_followed(link, f"same folder as {display_path(resolved)}, indexed there")
            else:
                self.walk(link, source_id, resolved)
        elif os.path.isfile(resolved) and _suffix(link) not in PARSERS:
            self.out.skip(link, excluded=False)
        elif os.path.isfile(resolved):
            if resolved in self.seen_real:
                self.not_followed(link, f"same file as {display_path(resolved)}, indexed there")
            else:
                self.seen_real.add(resolved)
                self.out.files.append(SourceFile(self.root, link, source_id))


def _suffix(name: str) -> str:
    return os.path.splitext(name)[1].lower()


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
