"""The defaults of a writing run's settings, in a module of their own: the front classes name them in their
signatures, and a search, which imports those classes, then loads neither the planning nor the source parsing
modules (``planning`` and ``sources`` re-export them)."""

from citeline.sources import DEFAULT_MAX_FILE_BYTES, DEFAULT_SOURCE  # noqa: F401  (re-exported)

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
