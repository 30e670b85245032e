"""Live folders: keep an index current as the files under its roots change (``citeline watch``, ``Index.watch``).

A watch is a loop around the one ingest: the file events of the roots (watchfiles: inotify, FSEvents or
ReadDirectoryChangesW through the Rust ``notify`` crate, so no polling of large trees) are grouped until the roots
have been quiet for ``debounce`` seconds (at most :data:`MAX_GROUP_SECONDS`), and each group starts one run of the
caller's ``ingest`` (:meth:`citeline.Index.ingest` with the watch's options): the same discovery, include/exclude
and ``.citelineignore`` rules, encoding, removal guard, writer lock and ledger row as ``citeline ingest``, and one
commit per group (more only past ``commit_every`` chunks). There is no second pipeline here.

What the patterns of real changes become:

- an editor's save (a temporary file written, then renamed over the document): the temporary file's events are
  not relevant (its suffix is not read, or the default filter's ``.swp``/``~``), the rename's are; one run;
- a burst (``git checkout`` of 500 files, an unzip): its events arrive within a second and form one group; events
  during a run wait (the watcher keeps them) and form the next group: one run, or a few;
- a deleted folder: its documents are removed by the run under the removal guard, which refuses (one line, the
  ledger's ``refused`` row, nothing removed) a run that would remove more than ``removal_threshold`` of a root;
- a file that fails to parse: the run is ``partial``, the file is one line, the watch goes on; a run that fails
  or is refused as a whole is one line too, and the next change starts a new run (a run that gave up waiting for
  another writer's lock is tried again at the next quiet tick without waiting for a change);
- Ctrl-C or SIGTERM: a run in progress stops as an ingest does (``citeline.ingest.stopping``: what was embedded
  whole is committed, the ledger row says ``interrupted``); an idle watch just ends. The stop propagates to the
  caller (the CLI exits 130 or 143).

Changes inside the index directory (a watch whose index lies under a root) are the watch's own commits and never
start a run. The first run starts once the watcher is listening, so a file written while it runs is not missed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from citeline.errors import CitelineError, IndexLockedError, SettingsError
from citeline.ingest import stopping
from citeline.ingest.options import DEFAULT_DEBOUNCE, MAX_GROUP_SECONDS
from citeline.sources.registry import supported_suffixes
from citeline.sources.selection import IGNORE_FILE, RootRules, Selection
from citeline.store.ledger import RunSummary

if TYPE_CHECKING:
    from watchfiles import Change

logger = logging.getLogger(__name__)

#: Seconds between the watcher's quiet ticks (the first run starts at the first; a run that could not take the
#: writer lock is tried again at the next).
TICK_SECONDS = 1.0


def watch(
    ingest: Callable[[], RunSummary],
    roots: Sequence[str],
    *,
    index_dir: str | os.PathLike[str],
    selection: Selection | None = None,
    debounce: float = DEFAULT_DEBOUNCE,
    on_run: Callable[[RunSummary], None] | None = None,
    on_error: Callable[[str], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Run ``ingest`` (one ingest of ``roots``, resolved) once, then again after each group of relevant changes
    under ``roots``, until ``stop`` is set (returns the number of runs) or a stop signal (raised to the caller).

    ``on_run`` gets each run's ledger row; ``on_error`` one line for each run that failed or was refused as a
    whole (the default for both: the ``citeline.ingest.watching`` logger); ``on_ready`` is called once the first
    run is over and the watcher listens. ``selection`` (the run's include/exclude) and each root's
    ``.citelineignore`` decide which changes are worth a run, as they decide what the run reads; ``index_dir``'s
    own changes never are."""
    import watchfiles  # imported here: only a watch needs it (the CLI's other commands start without it)

    if debounce <= 0:
        raise SettingsError(f"debounce must be more than 0 seconds, not {debounce}")
    relevant = Relevant(roots, index_dir, selection or Selection())
    report_run = on_run or (lambda run: logger.info("run %s %s", run.run_id, run.status))
    report_error = on_error or logger.warning
    runs, pending, ready, locked = 0, True, False, False  # pending: the first run, or one to try again
    changes_seen = watchfiles.watch(
        *roots,
        watch_filter=relevant,
        debounce=int(max(MAX_GROUP_SECONDS, debounce) * 1000),
        step=int(debounce * 1000),
        stop_event=stop,
        rust_timeout=int(TICK_SECONDS * 1000),
        yield_on_timeout=True,
        raise_interrupt=True,  # Ctrl-C or SIGTERM while idle: the caller ends as a stopped ingest does
    )
    for changes in changes_seen:
        if not changes and not pending:
            continue
        if changes:
            logger.info("%d changes, first %s", len(changes), min(path for _, path in changes))
        pending = False
        try:
            report_run(ingest())
            runs, locked = runs + 1, False
        except IndexLockedError as exc:  # another writer held the lock past --wait: try again at the next tick
            if not locked:  # one line while the other writer runs, not one a second
                report_error(f"{exc}; trying again each second while it is held")
            pending = locked = True
        except Exception as exc:  # refused (the removal guard), a root gone, a failed run: one line, watch on
            if stopping.is_stop(exc):  # a host's own stop exception (Prefect's): stop as the run did
                raise
            report_error(str(exc) if isinstance(exc, CitelineError) else f"run failed: {type(exc).__name__}: {exc}")
            runs, locked = runs + 1, False
        relevant.reload()  # a changed .citelineignore changes what is relevant
        if not ready:
            ready = True
            if on_ready is not None:
                on_ready()
    return runs


class Relevant:
    """Which file events are worth a run (a watchfiles filter): a file a run would read (a supported suffix, not
    excluded), a ``.citelineignore``, a folder (made, moved in or out, deleted); never the index's own files nor what
    watchfiles' default filter drops (``.git``, ``__pycache__``, editors' swap and backup files)."""

    def __init__(self, roots: Sequence[str], index_dir: str | os.PathLike[str], selection: Selection):
        import watchfiles

        self.roots = [str(root) for root in roots]
        self.index_dir = str(Path(index_dir).resolve())
        self.selection = selection
        self.default = watchfiles.DefaultFilter()
        self.suffixes = set(supported_suffixes())
        self.rules: dict[str, RootRules | None] = {}
        self.reload()

    def reload(self) -> None:
        """Read each root's rules again (its ``.citelineignore`` may have changed)."""
        self.rules = {root: self._rules_of(root) for root in self.roots if os.path.isdir(root)}

    def _rules_of(self, root: str) -> RootRules | None:
        try:
            return self.selection.for_root(root)
        except CitelineError:  # a bad .citelineignore: every change is relevant, and the run says what is wrong
            return None

    def __call__(self, change: Change, path: str) -> bool:
        if path == self.index_dir or path.startswith(self.index_dir + os.sep) or not self.default(change, path):
            return False
        for root in self.roots:
            if path == root:
                return True
            if path.startswith(root.rstrip(os.sep) + os.sep):
                return self._relevant_under(root, path)
        return False

    def _relevant_under(self, root: str, path: str) -> bool:
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        rules, name = self.rules.get(root), os.path.basename(path)
        if name == IGNORE_FILE:
            return True
        suffix = os.path.splitext(name)[1].lower()
        folder = os.path.isdir(path) or (suffix == "" and not os.path.exists(path))  # made, or gone (no suffix)
        if suffix not in self.suffixes and not folder:
            return False
        if rules is None:
            return True
        parts = relative.split("/")
        for depth in range(1, len(parts)):  # a file or folder inside an excluded folder is left out with it
            parent = "/".join(parts[:depth])
            if rules.excluded_folder(parent, os.path.join(root, *parts[:depth])):
                return False
        if folder:
            return not rules.excluded_folder(relative, path)
        return not rules.excluded_file(relative)
