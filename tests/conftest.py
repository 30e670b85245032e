"""Shared fixtures. Prefect is pointed at a throwaway home before anything imports it."""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

# Prefect reads these at import time; a shared ~/.prefect would hand back cached task results from other runs.
# One folder per session, made only where none is set: the crash trials' children import this module and are
# killed before atexit runs, so a folder of their own was left behind by each (about 40 a CI run, 1,175 seen).
# Under pytest-xdist each worker is a session of its own: it inherits the controller's folder, and two workers'
# ephemeral Prefect servers on one SQLite database lock each other out, so a worker makes its own (marked with
# the worker's name, which its children inherit, so they keep it).
if "PREFECT_HOME" not in os.environ or os.environ.get(
    "CITELINE_PREFECT_HOME_OF", os.environ.get("PYTEST_XDIST_WORKER", "")
) != os.environ.get("PYTEST_XDIST_WORKER", ""):
    os.environ["CITELINE_PREFECT_HOME_OF"] = os.environ.get("PYTEST_XDIST_WORKER", "")
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"citeline-prefect-{os.environ['CITELINE_PREFECT_HOME_OF']}")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from citeline.model.embedding import resolve_model_path

# Hypothesis's profiles (docs/development.md#test-tiers). The default tier (``pytest``) is the fast feedback: property
# tests run a fifth of their examples (:func:`_common.examples`) and a test that names no count runs 20. CI's second
# run, ``pytest -m "slow or hypothesis" --hypothesis-profile=ci-slow``, runs every property test again with its full
# count (Hypothesis's own default of 100 where none is named).
settings.register_profile("fast", max_examples=20)
settings.register_profile("ci-slow", max_examples=100)
settings.load_profile("fast")  # --hypothesis-profile, read after this module is imported, overrides it

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO / "seeds"
#: An index written by citeline 0.1.0 (tests/data/index-0.1.0): upgrade and repair tests start from a copy of it.
LEGACY = REPO / "tests" / "data" / "index-0.1.0"
_WORD = re.compile(r"\w+")


class HashEmbedder:
    """A fast, deterministic stand-in for the real model: hashed bag of words, L2-normalised.

    Texts sharing words get similar vectors, which is enough to test plumbing (storage, offsets, incremental
    runs, filters) without loading torch. It uses the real model's tokenizer file, so chunk sizes are real.
    """

    model_name = "hash-bow-64"
    backend = "test"
    fingerprint = "hash-bow-64-v1"
    dimension = 64
    max_seq_length = 256
    model_path = None  #: no model files (the ``Embedder`` Protocol's answer for that)

    def __init__(self) -> None:
        self.tokenizer_file = str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")
        self.calls = 0
        self.texts_encoded = 0

    @property
    def query_encoder(self) -> HashEmbedder:
        """Itself: queries are embedded as documents are."""
        return self

    def prepare_query_encoder(self) -> None:
        """Nothing to prepare."""

    def encode(self, texts: Sequence[str], *, batch_size: int | None = 64) -> np.ndarray:
        self.calls += 1
        self.texts_encoded += len(texts)
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
                vectors[row, bucket % self.dimension] += 1.0
            norm = float(np.linalg.norm(vectors[row]))
            vectors[row] = vectors[row] / norm if norm else 1.0 / np.sqrt(self.dimension)
        return vectors


#: The test tiers, one folder each; every test is marked with its folder's name (``-m unit``, ``-m "not system"``).
TIERS = ("unit", "index", "system")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier, from the folder it lives in (tests/unit, tests/index, tests/system)."""
    for item in items:
        tier = item.path.resolve().parent.name
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def fake_embedder() -> HashEmbedder:
    """A fresh :class:`HashEmbedder`."""
    return HashEmbedder()


@pytest.fixture
def seeds_dir() -> Path:
    """The repository's seed documents."""
    return SEEDS


# ---------------------------------------------------------------- reliability figures, printed at the end

_RELIABILITY_FIGURES: dict[str, dict[str, object]] = {}


@pytest.fixture
def reliability_figures() -> dict[str, dict[str, object]]:
    """Where the crash and concurrency tests put their figures, for the end-of-session summary."""
    return _RELIABILITY_FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the reliability figures (trials, kills survived, queries during writes, inconsistencies)."""
    if not _RELIABILITY_FIGURES:
        return
    terminalreporter.section("citeline reliability figures")
    for name, figures in _RELIABILITY_FIGURES.items():
        shown = {key: value for key, value in figures.items() if key != "problems"}
        terminalreporter.write_line(f"{name}: " + ", ".join(f"{key}={value}" for key, value in shown.items()))


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A copy of the index citeline 0.1.0 wrote (:data:`LEGACY`)."""
    path = tmp_path / "legacy"
    shutil.copytree(LEGACY, path)
    return path


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SeaweedFS S3 server for the session (tests/_object_store.py's ``SeaweedServer``), torn down at its end;
    each test keeps to a prefix of its own in its bucket. Skipped where the ``weed`` binary is not installed."""
    pytest.importorskip("s3fs")
    pytest.importorskip("boto3")
    from _object_store import SeaweedServer

    try:
        server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    except RuntimeError as exc:
        if "not installed" in str(exc):
            pytest.skip(str(exc))
        raise
    yield server
    server.stop()
