"""The settings of an ingestion run, declared once: :class:`IngestOptions`.

Each option is a field with its default, its bounds and its help text. Everything that takes run settings builds
from it: :meth:`citeline.Index.ingest` and :meth:`citeline.sharding.index.ShardedIndex.ingest` (their keyword
arguments make an ``IngestOptions``), the ``citeline ingest``/``schedule`` options (``citeline.cli.common`` makes a
click option of each field marked ``cli``), and the Prefect flow's parameters
(``citeline.orchestration.parameters`` makes a pydantic field of each field marked ``flow``, whose help text is what
the Prefect UI's run form shows). A new option is one field here, then a use in the pipeline.

This module imports nothing heavy: the CLI loads it at every command and a search loads it through ``Index``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from citeline.errors import SettingsError
from citeline.sources import DEFAULT_MAX_FILE_BYTES, DEFAULT_SOURCE  # noqa: F401  (DEFAULT_SOURCE re-exported)

if TYPE_CHECKING:
    from citeline.ingest.progress import Reporter

#: Chunks per commit of a run (``commit_every``, counted as ~1,000 characters of text each): a run holds about
#: this many chunks (texts, rows, vectors) at a time, and a crash loses at most this much work. Measured (hash
#: embedder, 43k synthetic chunks, one process each, 2 loaded cores): 5,000 -> 7 commits, 38.0 CPU-s, 0.65 GB peak;
#: 10,000 -> 3, 36.6 CPU-s, 0.78 GB; 20,000 -> 2, 34.5 CPU-s, 0.96 GB; 40,000 -> 1, 34.0 CPU-s, 1.16 GB.
#: 100k chunks at 20,000: 4 commits, 82.9 CPU-s, 1.39 GB peak, against
#: 84.2 CPU-s and 2.19 GB for one commit of everything (bench/scale.py). Each commit still costs O(index) with the
#: flat kind's copy-on-write update, so fewer, larger commits; 20,000 keeps a group's own memory near 0.5 GB.
COMMIT_EVERY = 20_000

#: Share of a root's indexed documents one run may remove without ``allow_removals``.
DEFAULT_REMOVAL_THRESHOLD = 0.5

#: Files per parse batch and chunks per chunk/embed batch (about 1,000 characters a chunk): one Prefect task per
#: batch, because per-task overhead (about 11 ms) and the server's handling of bursts make per-item tasks slow.
FILES_PER_BATCH = 500
CHUNKS_PER_BATCH = 2000


def _option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    cli: bool = True,
    flow: bool = True,
    metavar: str | None = None,
) -> Any:
    # A field of IngestOptions: its default, bounds and help text, and whether the CLI and the flow offer it.
    meta = {"help": help, "minimum": minimum, "maximum": maximum, "cli": cli, "flow": flow, "metavar": metavar}
    return field(default=default, metadata=meta)


#: The metadata of a setting of the library's callers only (a reporter object, a switch of the flow's).
_INTERNAL = {"cli": False, "flow": False}


@dataclass(frozen=True)
class IngestOptions:
    """The settings of one ingestion run (the Python keyword arguments, CLI flags and Prefect parameters of the
    same names)."""

    max_file_bytes: int = _option(
        DEFAULT_MAX_FILE_BYTES,
        "Skip (and report) files larger than this many bytes, for the formats read whole.",
        minimum=1,
    )
    wait: float | None = _option(
        None, "Seconds to wait for another writer of the index [default: as long as it takes].", minimum=0
    )
    commit_every: int = _option(
        COMMIT_EVERY,
        "Commit about this many chunks at a time: bounds the run's memory; a crash loses at most that much.",
        minimum=1,
    )
    allow_removals: bool = _option(
        False,
        "Let this run remove the documents of a root that came back empty, or more than the removal threshold of a "
        "root's documents (otherwise such a run is refused and changes nothing).",
    )
    removal_threshold: float = _option(
        DEFAULT_REMOVAL_THRESHOLD,
        "Share of a root's documents a run may remove without allowing removals (--allow-removals).",
        minimum=0.0,
        maximum=1.0,
    )
    dry_run: bool = _option(False, "Only plan: report what the run would add, update and remove; write nothing.")
    include: tuple[str, ...] = _option(
        (),
        "Only files matching this glob (gitignore style, relative to the root, e.g. '*.md' or 'docs/**'); "
        "repeatable [default: every supported file].",
        metavar="GLOB",
    )
    exclude: tuple[str, ...] = _option(
        (),
        "Leave out files and folders matching this glob (gitignore style, e.g. 'drafts/' or '*.tmp'); repeatable. "
        "Added to the defaults (hidden entries, node_modules, __pycache__, virtualenvs) and the root's "
        ".citelineignore.",
        metavar="GLOB",
    )
    encoding: str | None = _option(
        None,
        "Read the text files that are neither UTF-8 nor marked (a byte-order mark) in this encoding (a Python codec "
        "name: cp1250, latin-1, ...) instead of detecting theirs; a file not valid in it fails alone "
        "[default: detect each file's].",
        metavar="NAME",
    )
    strict: bool = _option(
        False,
        "Treat a partial run (some files failed) as a failure: exit status 3 (the CLI), a Failed flow run (Prefect).",
    )
    files_per_batch: int = _option(FILES_PER_BATCH, "Files per parse task.", minimum=1, cli=False)
    chunks_per_batch: int = _option(
        CHUNKS_PER_BATCH, "About this many chunks per chunk+embed task.", minimum=1, cli=False
    )
    #: a progress bar on stderr (the CLI's --progress/--no-progress decides it from the terminal)
    progress: bool = field(default=False, compare=False, metadata=_INTERNAL)
    #: who hears about the run's progress [default: a bar when ``progress``, else log lines only]
    reporter: Reporter | None = field(default=None, compare=False, metadata=_INTERNAL)
    #: prepare the target's query encoder after the commit (``target.prepare_queries()``, if it has one), as a
    #: stage of its own: searches then start fast. The Prefect flow does it in a task of its own instead.
    prepare_queries: bool = field(default=True, compare=False, metadata=_INTERNAL)

    def __post_init__(self) -> None:
        if self.encoding is not None:  # an unknown codec is one line before any work; kept by its Python name
            # Imported here: a search's cold start builds options but never reads a file (test_cold_search.py).
            from citeline.sources.encoding import codec_name

            object.__setattr__(self, "encoding", codec_name(self.encoding))
        for spec in fields(self):
            value, low, high = getattr(self, spec.name), spec.metadata.get("minimum"), spec.metadata.get("maximum")
            if isinstance(value, list):  # include=["*.md"] from Python or JSON: kept as a tuple (hashable)
                object.__setattr__(self, spec.name, value := tuple(value))
            if isinstance(value, str) and spec.type == "tuple[str, ...]":
                object.__setattr__(self, spec.name, value := (value,))
            if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if (low is not None and value < low) or (high is not None and value > high):
                bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
                raise SettingsError(f"{spec.name} must be {bounds}, not {value}")

    @classmethod
    def of(cls, options: IngestOptions | None = None, **values: Any) -> IngestOptions:
        """``options`` (or the defaults) with ``values`` replacing its fields; an unknown name is a
        :class:`SettingsError` naming it."""
        unknown = sorted(set(values) - {spec.name for spec in fields(cls)})
        if unknown:
            raise SettingsError(f"unknown ingest option(s): {', '.join(unknown)}")
        base = options or cls()
        return cls(**{spec.name: values.get(spec.name, getattr(base, spec.name)) for spec in fields(cls)})

    @classmethod
    def pick(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of ``values`` that are fields of this class (a command's or flow's parameters)."""
        names = {spec.name for spec in fields(cls)}
        return {name: value for name, value in values.items() if name in names}


def user_options(where: str) -> Iterator[Field[Any]]:
    """The fields of :class:`IngestOptions` offered ``where`` (``"cli"`` or ``"flow"``), in declaration order."""
    for spec in fields(IngestOptions):
        if spec.metadata.get(where):
            yield spec


#: The default options (its attributes are the defaults the signatures of ``Index.ingest`` and the flow name).
DEFAULTS = IngestOptions()
