"""The defaults of a writing run's settings, in a module of their own: the front classes name them in their
signatures, and a search, which imports those classes, then loads neither the planning nor the source parsing
modules (``planning`` and ``sources`` re-export them)."""

from citeline.sources import DEFAULT_MAX_FILE_BYTES, DEFAULT_SOURCE  # noqa: F401  (re-exported)

#: Chunks per commit of a run (``commit_every``, counted as ~1,000 characters of text each): a run holds about
#: this many chunks (texts, rows, vectors) at a time, and a crash loses at most this much work. Each commit costs
#: O(index), so fewer, larger commits; 20,000 keeps a group's own memory near 0.5 GB
#: (docs/scale.md#choices-measured-in-the-code).
COMMIT_EVERY = 20_000

#: Share of a root's indexed documents one run may remove without ``allow_removals``.
DEFAULT_REMOVAL_THRESHOLD = 0.5
