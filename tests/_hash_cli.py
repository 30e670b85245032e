"""``python tests/_hash_cli.py ARGS...``: the real ``citeline ARGS...`` command (its ``main``: signal handlers, exit
statuses, stdout and stderr as an operator sees them) in a process of its own, with the model replaced by the
tests' HashEmbedder, so CLI tests that need a real process (``citeline watch``, progress lines on a pipe, signals)
run in seconds. ``HASH_CLI_SECONDS_PER_TEXT`` slows each embedded text by that many seconds (a run long enough to
watch its progress lines)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import HashEmbedder  # noqa: E402

#: The environment variable of :data:`SECONDS_PER_TEXT`.
SLOW_ENV = "HASH_CLI_SECONDS_PER_TEXT"


class PacedHashEmbedder(HashEmbedder):
    """The HashEmbedder, at :data:`SLOW_ENV` seconds a text."""

    def encode(self, texts: Any, *, batch_size: int | None = 64) -> Any:
        time.sleep(float(os.environ.get(SLOW_ENV, "0")) * len(texts))
        return super().encode(texts, batch_size=batch_size)


def command(*args: str) -> list[str]:
    """The command line of ``citeline ARGS...`` in a process of this script."""
    return [sys.executable, str(Path(__file__).resolve()), *args]


def main(args: list[str]) -> None:
    """``citeline ARGS`` with the (paced) HashEmbedder wherever the CLI would load the real model."""
    import citeline.index

    embedder = PacedHashEmbedder()
    citeline.index.SentenceTransformerEmbedder = lambda *a, **k: embedder  # type: ignore[assignment,misc]
    from citeline.cli.main import main as citeline

    sys.argv = ["citeline", *args]
    citeline()


if __name__ == "__main__":
    main(sys.argv[1:])
