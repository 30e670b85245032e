"""A sharded ingest on a local Dask cluster: the coordinator's memory as the corpus grows, and the workers' throughput.

    python bench/dask_ingest.py --out /tmp/dask-ingest [--megabytes 16] [--scales 1 2 4] [--workers 2] [--shards 2]
    PYTHONPATH=/path/to/other/checkout python bench/dask_ingest.py ...   # the same, with another checkout's citeline
    python bench/dask_ingest.py --remote --out /tmp/dask-remote --megabytes 4 --scales 1 2   # from an S3 server

Writes a corpus of ``--megabytes`` x scale of generated text (``.txt`` files of about 16 KB of sentences drawn from
a fixed vocabulary, the same on every machine) for each scale, then ingests each into a new root of ``--shards``
shards with ``ShardedIndex.ingest(dask_workers=--workers)``, each run in a child process of its own (the
coordinator: it starts the local cluster, whose scheduler runs in it, and whose workers are its child processes).
The vectors are the tests' HashEmbedder (tests/conftest.py): what is measured is where the texts go, not the model.

A thread samples every 0.1 s the coordinator's RSS and each worker's; the line per scale gives the coordinator's
RSS before the run (imports, index open) and its peak (``ru_maxrss``), the workers' peak RSS, the source megabytes
and documents, the run's wall seconds and the source megabytes a second per worker. Run by hand (a few minutes on
2 cores); not part of CI.

``--remote``: the corpus is put into moto's S3 server (the tests' server, tests/_object_store.py: a subprocess on a
loopback port, its own RSS not counted) and the run ingests ``s3://docs/corpus``: no folder is shared, the workers
fetch the objects themselves, with the credentials of the file named by ``CITELINE_STORAGE_OPTIONS`` in their
environment. Then the same run again (unchanged: a second line, ``rerun``); each line adds the object GETs the
server served during the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: Generated text: sentences of 8-20 words drawn from this many made-up words (a realistic share of distinct terms).
VOCABULARY = 20_000
FILE_BYTES = 16_000


def write_corpus(folder: Path, megabytes: float, seed: int = 7) -> tuple[int, int]:
    """``megabytes`` of generated text as files of about :data:`FILE_BYTES` under ``folder`` (kept if there);
    returns (files, bytes)."""
    done = folder / ".done"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(seed)
        letters = "etaoinshrdlucmfwypvbgkqjxz"
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(VOCABULARY)]
        total, number = 0, 0
        while total < megabytes * 1_000_000:
            sentences, size = [], 0
            while size < FILE_BYTES:
                sentence = " ".join(rng.choice(words) for _ in range(rng.randint(8, 20))).capitalize() + "."
                sentences.append(sentence)
                size += len(sentence) + 1
            text = "\n".join(" ".join(sentences[n : n + 5]) for n in range(0, len(sentences), 5)) + "\n"
            (folder / f"doc-{number:06d}.txt").write_text(text)
            total += len(text)
            number += 1
        done.write_text(json.dumps([number, total]))
    files, total = json.loads(done.read_text())
    return int(files), int(total)


class Sampler(threading.Thread):
    """Samples this process's RSS and its children's (the Dask workers) every ``interval`` seconds."""

    def __init__(self, interval: float = 0.1):
        super().__init__(daemon=True)
        import psutil

        self.process, self.interval = psutil.Process(), interval
        self.peak_self = self.peak_worker = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stopped.is_set():
            self.peak_self = max(self.peak_self, self.process.memory_info().rss)
            for child in self.process.children(recursive=True):
                try:
                    self.peak_worker = max(self.peak_worker, child.memory_info().rss)
                except psutil.Error:
                    continue
            self.stopped.wait(self.interval)


def coordinator(corpus: str, root: Path, workers: int, shards: int) -> dict[str, Any]:
    """One sharded run of ``corpus`` (a folder or a URL) into ``root`` (made if it is not there; this process is
    its coordinator); its figures."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import HashEmbedder

    import citeline
    from citeline import Index
    from citeline.sharding.index import ShardedIndex

    if root.exists():
        index = Index.open(root, embedder=HashEmbedder())
    else:
        index = Index.create(root, embedder=HashEmbedder(), vector_index="flat", shards=shards)
    assert isinstance(index, ShardedIndex)
    sampler = Sampler()
    before = sampler.process.memory_info().rss
    sampler.start()
    started = time.perf_counter()
    run = index.ingest([corpus], dask_workers=workers, prepare_queries=False)
    seconds = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    return {
        "citeline": str(Path(citeline.__file__).parent),
        "status": run.status,
        "documents": run.added,
        "unchanged": run.unchanged,
        "seconds": round(seconds, 1),
        "coordinator_rss_before_mb": round(before / 1e6),
        "coordinator_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3),
        "worker_peak_mb": round(sampler.peak_worker / 1e6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--megabytes", type=float, default=16)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--remote", action="store_true", help="ingest the corpus from an S3 server (moto)")
    parser.add_argument("--one", nargs=2, metavar=("CORPUS", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(coordinator(args.one[0], Path(args.one[1]), args.workers, args.shards)))
        return
    tag = str(int(time.time()))
    for scale in args.scales:
        corpus = args.out / f"corpus-{scale}x"
        files, size = write_corpus(corpus, args.megabytes * scale)
        root = args.out / f"root-{scale}x-{tag}"
        with contextlib.ExitStack() as stack:
            source, environment, server = str(corpus), dict(os.environ), None
            if args.remote:
                server = stack.enter_context(_served(corpus, args.out))
                source, environment["CITELINE_STORAGE_OPTIONS"] = "s3://docs/corpus", str(args.out / "storage.json")
            for name in ("run", "rerun") if args.remote else ("run",):
                gets = server.object_gets() if server else 0
                command = [sys.executable, __file__, "--out", str(args.out), "--one", source, str(root)]
                command += ["--workers", str(args.workers), "--shards", str(args.shards)]
                done = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
                line = json.loads(done.stdout.splitlines()[-1])
                line.update(scale=scale, files=files, source_mb=round(size / 1e6, 1))
                line["mb_per_s_per_worker"] = round(size / 1e6 / line["seconds"] / args.workers, 2)
                if server:
                    line.update(step=name, object_gets=server.object_gets() - gets)
                print(json.dumps(line), flush=True)


@contextlib.contextmanager
def _served(corpus: Path, out: Path) -> Iterator[Any]:
    # moto's S3 server holding the corpus's files under corpus/ of bucket docs, and the storage options file that
    # reaches it (the coordinator's and, through their environment, the Dask workers' credentials)
    sys.path.insert(0, str(REPO / "tests"))
    from _object_store import S3Server

    server = S3Server(out)
    try:
        for path in sorted(corpus.glob("*.txt")):
            server.put(f"corpus/{path.name}", path.read_bytes())
        (out / "storage.json").write_text(json.dumps(server.options()))
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    main()
