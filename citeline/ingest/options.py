"""The settings of an index and of an ingestion run, each declared once: :class:`IndexSettings` (what a new index
is built with) and :class:`IngestOptions` (how one run goes).

Each setting is a field with its default, help text, bounds and choices (:func:`citeline.util.declared.option`;
choices read from their registries). Everything that takes settings builds from these: :meth:`citeline.Index.create`
and :meth:`citeline.Index.ingest` (their keyword arguments make an ``IndexSettings`` and an ``IngestOptions``; a
test ties those signatures to the fields), the ``citeline ingest``/``schedule`` options (``citeline.cli.common``
makes a click option of each field marked ``cli``), and the Prefect flow's parameters
(``citeline.orchestration.parameters`` makes a pydantic field of each field marked ``flow``; the flow's signature,
and so the Prefect UI's run form with its help texts, bounds and choices, is made from those). A new setting is one
field here, then a use (docs/architecture.md#settings).

This module imports nothing heavy: the CLI loads it at every command and a search loads it through ``Index``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from citeline.errors import SettingsError
from citeline.model.embedding import BACKENDS, DEFAULT_MODEL
from citeline.sources import DEFAULT_MAX_FILE_BYTES, DEFAULT_SOURCE  # noqa: F401  (DEFAULT_SOURCE re-exported)
from citeline.util.declared import INTERNAL, check, offered, option, pick
from citeline.vectors import KIND_MODULES

if TYPE_CHECKING:
    from citeline.ingest.progress import Reporter

#: Chunks per commit of a run (``commit_every``, counted as ~1,000 characters of text each): a run holds about
#: this many chunks (texts, rows, vectors) at a time, and a crash loses at most this much work. Larger commits cost
#: a little less CPU and more memory; each commit still costs O(index) with the flat kind's copy-on-write update,
#: so fewer, larger commits, and 20,000 keeps a group's own memory near half a gigabyte (figures:
#: docs/scale.md#choices-measured-in-the-code).
COMMIT_EVERY = 20_000

#: Share of a root's indexed documents one run may remove without ``allow_removals``.
DEFAULT_REMOVAL_THRESHOLD = 0.5

#: Files per parse batch and chunks per chunk/embed batch (about 1,000 characters a chunk): one Prefect task per
#: batch, because per-task overhead (about 11 ms) and the server's handling of bursts make per-item tasks slow.
FILES_PER_BATCH = 500
CHUNKS_PER_BATCH = 2000


#: Seconds between the progress lines of a run without a progress bar (``progress_every``): often enough that a log
#: shows a stalled run within a minute, rarely enough that a 5-minute run writes ten lines, not hundreds.
PROGRESS_EVERY = 30.0


#: Seconds of quiet after the last change before a watch (``citeline watch``, ``Index.watch``) starts a run: an
#: editor's save or a ``git checkout`` of hundreds of files is over well within it, so each is one run.
DEFAULT_DEBOUNCE = 1.0
#: The longest a watch's group of changes waits for quiet: files changing without a pause still reach the index
#: this often.
MAX_GROUP_SECONDS = 30.0


#: The smallest chunk, in model tokens, an index may be created with: ``max_tokens``' one lower bound, on every
#: surface. Below it a chunk holds a word or two, too little context to embed; ``chunking.check_settings`` refuses
#: it for every model (its upper bound is the model's window, known only once the model is loaded), so the CLI and
#: the flow refuse it at once rather than after loading the model.
MIN_CHUNK_TOKENS = 8


@dataclass(frozen=True)
class IndexSettings:
    """The settings a new index is created with (:meth:`citeline.Index.create`'s keyword arguments, and the CLI
    flags and Prefect parameters of the same names). None means "the existing index's, or the default"; an existing
    index refuses a setting that differs from its own."""

    model: str | None = option(None, f"Model name or local model folder [default: the index's, or {DEFAULT_MODEL}].")
    backend: str | None = option(
        None,
        "Embedding backend of a new index: PyTorch, ONNX Runtime, or ONNX Runtime with int8 weights (fastest) "
        "[default: onnx-int8 where the CPU has AVX2, AVX-512 or is ARM64, else onnx].",
        choices=BACKENDS,  # the embedding backends there are (citeline.model.embedding)
    )
    max_tokens: int | None = option(
        None, "Chunk size in model tokens [default: the model's limit].", minimum=MIN_CHUNK_TOKENS
    )
    # Its upper bound depends on max_tokens (below half of it), checked with the model (chunking.check_settings).
    overlap_tokens: int | None = option(None, "Token overlap between chunks [default: 32].", minimum=0)
    vector_index: str | None = option(
        None,
        "Vector index of a new index: exact (flat), inverted lists (ivf), a graph (hnsw), or flat until it is large, "
        "then ivf (auto) [default: auto].",
        choices=tuple(KIND_MODULES),  # the registry's kinds, named without importing them (citeline.vectors)
    )
    document_vectors: bool | None = option(
        None,
        "A new index also embeds each document whole (title and text, one vector more per document), a hybrid "
        "ranking signal [default: off].",
    )
    shards: int | None = option(
        None,
        "A new index of N shards (documents routed by a hash of their id; each shard a complete index, ingested in "
        "parallel: processes, or Dask with --dask-address/--dask-workers) [default: unsharded, or the index's own].",
        minimum=1,
    )

    def __post_init__(self) -> None:
        check(self)

    @classmethod
    def pick(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of ``values`` that are fields of this class (a command's or flow's parameters)."""
        return pick(cls, values)

    def arguments(self) -> dict[str, Any]:
        """The settings as keyword arguments of :meth:`citeline.Index.create`."""
        return asdict(self)


@dataclass(frozen=True)
class IngestOptions:
    """The settings of one ingestion run (the Python keyword arguments, CLI flags and Prefect parameters of the
    same names)."""

    max_file_bytes: int = option(
        DEFAULT_MAX_FILE_BYTES,
        "Skip (and report) files larger than this many bytes, for the formats read whole.",
        minimum=1,
    )
    wait: float | None = option(
        None, "Seconds to wait for another writer of the index [default: as long as it takes].", minimum=0
    )
    commit_every: int = option(
        COMMIT_EVERY,
        "Commit about this many chunks at a time: bounds the run's memory; a crash loses at most that much.",
        minimum=1,
    )
    allow_removals: bool = option(
        False,
        "Let this run remove the documents of a root that came back empty, or more than the removal threshold of a "
        "root's documents (otherwise such a run is refused and changes nothing).",
    )
    removal_threshold: float = option(
        DEFAULT_REMOVAL_THRESHOLD,
        "Share of a root's documents a run may remove without allowing removals (--allow-removals).",
        minimum=0.0,
        maximum=1.0,
    )
    dry_run: bool = option(False, "Only plan: report what the run would add, update and remove; write nothing.")
    include: tuple[str, ...] = option(
        (),
        "Only files matching this glob (gitignore style, relative to the root, e.g. '*.md' or 'docs/**'); "
        "repeatable [default: every supported file].",
        metavar="GLOB",
    )
    exclude: tuple[str, ...] = option(
        (),
        "Leave out files and folders matching this glob (gitignore style, e.g. 'drafts/' or '*.tmp'); repeatable. "
        "Added to the defaults (hidden entries, node_modules, __pycache__, virtualenvs) and the root's "
        ".citelineignore.",
        metavar="GLOB",
    )
    encoding: str | None = option(
        None,
        "Read the text files that are neither UTF-8 nor marked (a byte-order mark) in this encoding (a Python codec "
        "name: cp1250, latin-1, ...) instead of detecting theirs; a file not valid in it fails alone "
        "[default: detect each file's].",
        metavar="NAME",
    )
    strict: bool = option(
        False,
        "Treat a partial run (some files failed) as a failure: exit status 3 (the CLI), a Failed flow run (Prefect).",
    )
    progress_every: float = option(
        PROGRESS_EVERY,
        "Seconds between progress lines (files listed and parsed, chunks embedded of the planned total, rate, time "
        "left) when no progress bar is drawn: on stderr when it is not a terminal (cron, systemd, nohup, a "
        "container), in Prefect's log in the flow; 0: none.",
        minimum=0.0,
        env="CITELINE_PROGRESS_EVERY",
    )
    files_per_batch: int = option(FILES_PER_BATCH, "Files per parse task.", minimum=1, cli=False)
    chunks_per_batch: int = option(
        CHUNKS_PER_BATCH, "About this many chunks per chunk+embed task.", minimum=1, cli=False
    )
    #: a progress bar on stderr (the CLI's --progress/--no-progress decides it from the terminal)
    progress: bool = field(default=False, compare=False, metadata=INTERNAL)
    #: who hears about the run's progress [default: a bar when ``progress``, else log lines only]
    reporter: Reporter | None = field(default=None, compare=False, metadata=INTERNAL)
    #: fsspec storage options of the run's remote roots (credentials, ``endpoint_url``; flat or one mapping per
    #: protocol): kept in memory for the run only, never shown (``repr``), stored or made a Prefect parameter
    #: (``citeline.sources.remote``); None: ``CITELINE_STORAGE_OPTIONS``'s file, else the clients' own defaults
    storage_options: Mapping[str, Any] | None = field(default=None, compare=False, repr=False, metadata=INTERNAL)
    #: prepare the index's query encoder after the commit (the ingest target's ``prepare_queries()``), as a
    #: stage of its own: searches then start fast. The Prefect flow does it in a task of its own instead.
    prepare_queries: bool = field(default=True, compare=False, metadata=INTERNAL)

    def __post_init__(self) -> None:
        if self.encoding is not None:  # an unknown codec is one line before any work; kept by its Python name
            # Imported here: a search's cold start builds options but never reads a file (test_cold_search.py).
            from citeline.sources.encoding import codec_name

            object.__setattr__(self, "encoding", codec_name(self.encoding))
        check(self)

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
        return pick(cls, values)


def user_options(where: str) -> Iterator[Field[Any]]:
    """The fields of :class:`IngestOptions` offered ``where`` (``"cli"`` or ``"flow"``), in declaration order."""
    return offered(IngestOptions, where)


#: The default options (its attributes are the defaults the signatures of ``Index.ingest`` and the flow name).
DEFAULTS = IngestOptions()


@dataclass(frozen=True)
class Placement:
    """Where a run's parts run: a sharded root's shards' jobs (``citeline.sharding``) in worker ``parallel``
    (``"processes"``, ``"threads"``, ``"serial"``), on a Dask cluster (``dask_address``, or a local one of
    ``dask_workers`` processes; ``shard_workers`` pins shards to its workers), or by ``run_jobs`` (the Prefect
    flow's tasks). Given to an index's ``committer``: a plain index has no parts and ignores it, so a caller hands
    it to any index without asking which kind it is. The declared fields' help is the one text of the CLI's
    options (``citeline ingest``, ``schedule``) and the flow's parameters of the same names (:func:`placement_help`);
    ``storage_block`` names where the parts' credentials come from (the flow loads it, never the secret itself)."""

    parallel: str = "processes"
    dask_address: str | None = option(
        None,
        "Parse and embed on this Dask scheduler (tcp://HOST:8786), which must see the same paths: the Prefect flow's "
        "tasks (--prefect), and a sharded index's shards.",
    )
    dask_workers: int | None = option(
        None,
        "Parse and embed on a local Dask cluster of this many processes: the Prefect flow's tasks (--prefect), and a "
        "sharded index's shards.",
        minimum=1,
    )
    shard_workers: Mapping[int, str] | str | None = option(
        None,
        "On a sharded index with a Dask cluster: pin shards to the workers that hold their disks, SHARD=WORKER by "
        "address or name (0=tcp://10.0.0.5:8786,1=worker-b); a pinned shard runs only there, and fails in one line "
        "when that worker is gone [default: any worker; the shards on a filesystem every worker sees].",
    )
    #: runs the shards' jobs itself (each job's summary, or the exception that stopped it, in order)
    run_jobs: Callable[[list[Any]], list[Any]] | None = field(default=None, compare=False)
    storage_block: str | None = option(
        None,
        "The name of a Prefect Secret block holding the storage options of remote paths (JSON: "
        '{"key": ..., "secret": ..., "client_kwargs": {...}} or one mapping per protocol, {"s3": {...}}), loaded by '
        "the flow run (and by Dask workers that fetch objects); never stored in its parameters, logs or the index.",
        metavar="NAME",
    )

    @property
    def on_dask(self) -> bool:
        """Whether the parts run on Dask workers (whose processes do not share this one's model)."""
        return bool(self.dask_address or self.dask_workers)


def placement_help(name: str) -> str:
    """The one help text of a :class:`Placement` field (the CLI's option and the flow's parameter of its name)."""
    return str(next(spec for spec in fields(Placement) if spec.name == name).metadata["help"])
