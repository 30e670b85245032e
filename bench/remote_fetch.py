"""Fetching remote objects: what reading ``N`` objects of an ``s3://`` root costs one at a time (one GET after the
other, as runs did before ``remote.fetch_ahead``) and fetched ahead, several GETs in flight.

    python bench/remote_fetch.py --objects 2000 --bytes 4096 --latency-ms 0 20 [--ahead 1 16]

The store is moto's S3 server (the tests' server: tests/_object_store.py) in a subprocess on a loopback port,
filled with ``N`` Markdown objects of about ``--bytes`` each; ``--latency-ms`` delays each object GET at the server
(the round trip of a store farther than the loopback: 0 is the loopback itself). What is timed is the parse step
of a run (``pipeline.parse_files`` over the discovered objects: every object fetched and parsed, nothing planned,
embedded or committed), wall seconds and CPU seconds of this process (the server's CPU is not counted), with the
object GETs counted in the server's log. ``--ahead 1`` is the sequential fetch (one GET at a time); with
``PYTHONPATH`` set to a checkout from before ``remote.fetch_ahead``, every row measures that code's fetch.

Results are printed and written to ``bench/results/remote-fetch.txt``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))  # the tests' S3 server (moto's server mode), shared

from _object_store import S3Server  # noqa: E402  (tests/ and bench/ on the path first)
from remote_listing import save  # noqa: E402

from citeline.ingest import pipeline  # noqa: E402
from citeline.sources import discovery, remote  # noqa: E402

ROOT = "s3://bench/corpus"


def measure(objects: int, size: int, latency_ms: float, aheads: list[int], workdir: Path) -> list[str]:
    """One line per fetch-ahead bound: wall, CPU-s and GETs of parsing every object."""
    lines = [f"objects: {objects:,} of ~{size:,} bytes, {latency_ms:g} ms a GET at the server"]
    server = S3Server(workdir, bucket="bench", fill=objects, fill_bytes=size, latency_ms=latency_ms)
    try:
        with remote.storage(server.options()):
            files = discovery.scan([ROOT]).files
            pipeline.parse_files(files[:20], hold_chars=0)  # the client made and warm, for every bound alike
            for ahead in aheads:
                remote.AHEAD_OBJECTS = ahead
                gets = server.object_gets()
                wall, cpu = time.perf_counter(), time.process_time()
                parsed = pipeline.parse_files(files, hold_chars=0)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                assert not parsed.errors, parsed.errors[:3]
                lines.append(
                    f"  ahead {ahead:3d}  {wall:7.2f} s wall  {cpu:7.2f} CPU-s  {objects / wall:8,.0f} objects/s  "
                    f"{server.object_gets() - gets:,} GETs"
                )
                print(lines[-1], flush=True)
    finally:
        server.stop()
    return lines


def main() -> None:
    """Run the sizes and latencies asked for, print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=4096, help="each object's size, about")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    # getattr: the code before fetch_ahead (PYTHONPATH set to an older checkout) fetches one at a time, --ahead or not
    parser.add_argument("--ahead", type=int, nargs="+", default=[1, getattr(remote, "AHEAD_OBJECTS", 1)])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="citeline-fetch-"))
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [
        f"bench/remote_fetch.py --objects {args.objects} --bytes {args.bytes} --latency-ms "
        f"{' '.join(f'{ms:g}' for ms in args.latency_ms)} --ahead {' '.join(map(str, args.ahead))}; "
        f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    ]
    for latency in args.latency_ms:
        lines += measure(args.objects, args.bytes, latency, args.ahead, workdir)
    save(lines, "remote-fetch.txt")


if __name__ == "__main__":
    main()
