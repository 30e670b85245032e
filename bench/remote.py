"""Remote (s3://) roots against moto's S3 server on the loopback, one subcommand each (`--help` after a subcommand
gives its options).

    python bench/remote.py listing --objects 10000 100000   # listing, planning and an unchanged re-run at scale
    python bench/remote.py fetch --objects 2000 --latency-ms 0 20  # one GET at a time against fetched ahead
    python bench/remote.py dead                                    # dead web URLs beside honest ones

Run by hand; not part of CI. Results are written to bench/results/ and quoted in docs/sources.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))  # the tests' S3 server (moto's server mode), shared
from _object_store import S3Server  # noqa: E402  (bench/ and tests/ on the path first)
from _synthetic import HashBowEmbedder  # noqa: E402

from citeline import Index  # noqa: E402
from citeline.ingest import freshness, pipeline  # noqa: E402
from citeline.sources import discovery, remote  # noqa: E402

# --- listing ---------------------------------------------------------------------------------------------------------

LISTING_DOC = """\
Remote roots at scale: what listing and planning an ``s3://`` root of 10k and 100k objects cost, and what an
unchanged re-run costs (CPU-seconds of the run's process, and GETs of objects counted in the server's own log).

    python bench/remote.py listing --objects 10000 100000 [--ingest 10000] [--workdir DIR]

The store is moto's S3 server (``python -m moto.server``, the tests' server: tests/_object_store.py) in a
subprocess on a loopback port, filled with ``N`` small Markdown objects under ``corpus/`` in folders of 1,000 (put
straight into its in-memory backend by the launcher, so filling 100k takes seconds, not 100k PUTs). Its own CPU is
not counted: the figures are citeline's.

For each size, in this process:

  list      ``remote.list_root``: wall and CPU seconds; peak traced Python memory while listing (tracemalloc) and
            what the listing holds once made (bytes an object), against what ``fs.find(detail=True)`` (the
            fsspec way, a dict of the store's metadata per object) holds for the same root
  discover  ``discovery.scan`` of the root (listing, selection rules, one ``SourceFile`` an object)
  plan      ``freshness.unchanged_files`` against an index holding every object (the files table's stamps joined in
            DuckDB): only with ``--ingest`` of that size, which also measures
  ingest    the first ingest (hashed bag-of-words embedder: the fetch, parse, chunk and commit are measured)
  rerun     the unchanged re-run: wall, CPU-s, object GETs (0 expected)

Results are printed and written to ``bench/results/remote-listing.txt``.
"""


def _timed(call: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _traced(call: Any) -> tuple[Any, int, int]:
    # (result, peak bytes while it ran, bytes it holds after): Python allocations (tracemalloc)
    gc.collect()
    tracemalloc.start()
    result = call()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, peak, held


ROOT = "s3://bench/corpus"


def listing_measure(objects: int, ingest: bool, workdir: Path) -> list[str]:
    """The figures of one size, as lines."""
    lines = [f"objects: {objects:,}"]
    server = S3Server(workdir, bucket="bench", fill=objects)
    try:
        with remote.storage(server.options()):
            listing, wall, cpu = _timed(lambda: remote.list_root(ROOT))
            assert len(listing.entries) == objects, len(listing.entries)
            lines.append(f"  list      {wall:7.2f} s wall  {cpu:7.2f} CPU-s  ({objects / wall:,.0f} objects/s)")
            del listing
            # a listing's fixed cost (botocore loads its S3 model, ~12 MiB, for each new client): an empty prefix's
            _, _, fixed = _traced(lambda: remote.list_root("s3://bench/nothing-here"))
            listing, peak, held = _traced(lambda: remote.list_root(ROOT))
            lines.append(
                f"            peak {peak / 2**20:6.1f} MiB traced while listing, {held / 2**20:6.1f} MiB held after, "
                f"{fixed / 2**20:.1f} MiB of it the client's fixed cost ({(held - fixed) / objects:,.0f} bytes an "
                "object: key, size, time, ETag)"
            )
            del listing
            fs, path = remote.filesystem(ROOT)
            found, peak_find, held_find = _traced(lambda: fs.find(path, detail=True))
            lines.append(
                f"            fs.find(detail=True) for comparison: peak {peak_find / 2**20:6.1f} MiB, "
                f"{held_find / 2**20:6.1f} MiB held ({held_find / objects:,.0f} bytes an object)"
            )
            del found
            scanned, wall, cpu = _timed(lambda: discovery.scan([ROOT]))
            lines.append(f"  discover  {wall:7.2f} s wall  {cpu:7.2f} CPU-s  ({len(scanned.files):,} files)")
            _, _, held_scan = _traced(lambda: discovery.scan([ROOT]))
            per_object = held_scan / objects
            lines.append(f"            {held_scan / 2**20:6.1f} MiB held by the discovery ({per_object:,.0f} B/obj)")
            if ingest:
                index_dir = workdir / f"index-{objects}"
                index = Index.create(index_dir, embedder=HashBowEmbedder())
                gets = server.object_gets()
                run, wall, cpu = _timed(lambda: index.ingest([ROOT]))
                lines.append(
                    f"  ingest    {wall:7.2f} s wall  {cpu:7.2f} CPU-s  {server.object_gets() - gets:,} object GETs "
                    f"({run.added:,} added)"
                )
                plan = lambda: freshness.unchanged_files(index_dir, [ROOT], scanned.files)  # noqa: E731
                (fresh, to_read), wall, cpu = _timed(plan)
                lines.append(
                    f"  plan      {wall:7.2f} s wall  {cpu:7.2f} CPU-s  ({len(fresh.fresh_files):,} unchanged, "
                    f"{len(to_read)} to fetch)"
                )
                gets = server.object_gets()
                run, wall, cpu = _timed(lambda: index.ingest([ROOT]))
                lines.append(
                    f"  rerun     {wall:7.2f} s wall  {cpu:7.2f} CPU-s  {server.object_gets() - gets} object GETs "
                    f"({run.unchanged:,} unchanged, {run.added + run.updated + run.removed} changed)"
                )
    finally:
        server.stop()
    return lines


def save(lines: list[str], name: str) -> None:
    """Print the figures and write them to ``bench/results/NAME``."""
    out = BENCH / "results" / name
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def listing_main() -> None:
    """Run the sizes asked for and print and save the figures."""
    parser = argparse.ArgumentParser(description=LISTING_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--ingest", type=int, nargs="*", default=[10_000], help="sizes to ingest and re-run too")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="citeline-remote-"))
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [f"bench/remote.py listing --objects {' '.join(map(str, args.objects))} --ingest "
             f"{' '.join(map(str, args.ingest))}; {os.cpu_count()} CPUs, python {sys.version.split()[0]}"]  # fmt: skip
    for objects in args.objects:
        lines += listing_measure(objects, objects in args.ingest, workdir)
        print("\n".join(lines[-9:]), flush=True)
    save(lines, "remote-listing.txt")


# --- fetch -----------------------------------------------------------------------------------------------------------

FETCH_DOC = """\
Fetching remote objects: what reading ``N`` objects of an ``s3://`` root costs one at a time (one GET after the
other, as runs did before ``remote.fetch_ahead``) and fetched ahead, several GETs in flight.

    python bench/remote.py fetch --objects 2000 --bytes 4096 --latency-ms 0 20 [--ahead 1 16]

The store is moto's S3 server (the tests' server: tests/_object_store.py) in a subprocess on a loopback port,
filled with ``N`` Markdown objects of about ``--bytes`` each; ``--latency-ms`` delays each object GET at the server
(the round trip of a store farther than the loopback: 0 is the loopback itself). What is timed is the parse step
of a run (``pipeline.parse_files`` over the discovered objects: every object fetched and parsed, nothing planned,
embedded or committed), wall seconds and CPU seconds of this process (the server's CPU is not counted), with the
object GETs counted in the server's log. ``--ahead 1`` is the sequential fetch (one GET at a time); with
``PYTHONPATH`` set to a checkout from before ``remote.fetch_ahead``, every row measures that code's fetch.

Results are printed and written to ``bench/results/remote-fetch.txt``.
"""


def fetch_measure(objects: int, size: int, latency_ms: float, aheads: list[int], workdir: Path) -> list[str]:
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


def fetch_main() -> None:
    """Run the sizes and latencies asked for, print and save the figures."""
    parser = argparse.ArgumentParser(description=FETCH_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        f"bench/remote.py fetch --objects {args.objects} --bytes {args.bytes} --latency-ms "
        f"{' '.join(f'{ms:g}' for ms in args.latency_ms)} --ahead {' '.join(map(str, args.ahead))}; "
        f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    ]
    for latency in args.latency_ms:
        lines += fetch_measure(args.objects, args.bytes, latency, args.ahead, workdir)
    save(lines, "remote-fetch.txt")


# --- dead ------------------------------------------------------------------------------------------------------------

DEAD_DOC = """\
Dead web URLs beside honest ones: how long a run of two honest pages and the dead URLs asked for takes, at the
default bounds (remote.WEB_CONNECT_SECONDS, WEB_SILENCE_SECONDS, WEB_REQUEST_SECONDS), and each dead URL's line.

    python bench/remote.py dead [--deaths silent hang claims trickle loop refused]

The server is the tests' (tests/_web_server.py, http.server on a loopback port): ``silent`` accepts and never
answers, ``hang`` sends its headers (Content-Length 100) and nothing more, ``claims`` says 40 MiB and sends
nothing, ``trickle`` sends five bytes every second without end, ``loop`` redirects to itself, ``refused`` is a port
with no server. With citeline imported from a checkout from before the bounds (``PYTHONPATH``, where citeline is
not installed editable), it measures that code.

Results are printed and written to ``bench/results/remote-dead.txt``.
"""

DEATHS = ("silent", "hang", "claims", "trickle", "loop", "refused")


def dead_main() -> None:
    """Ingest two honest pages beside the dead URLs asked for; print and save wall, CPU-s and each URL's line."""
    import socket

    from _web_server import Route, WebServer, stalled, trickle

    parser = argparse.ArgumentParser(description=DEAD_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deaths", nargs="+", choices=DEATHS, default=list(DEATHS))
    args = parser.parse_args()
    web = WebServer()
    md = {"Content-Type": "text/markdown"}
    honest = [web.page("/ferry.md", "# Ferry\n\nThe ferry crosses.\n"), web.page("/mill.md", "# Mill\n\nBarley.\n")]
    web.routes["/silent.md"] = Route(200, md, body=b"# Silent\n", silent=900)
    web.routes["/hang.md"] = Route(200, {**md, "Content-Length": "100"}, body=stalled(b"# Hang", 900))
    web.routes["/claims.md"] = Route(200, {**md, "Content-Length": str(40 * 1024 * 1024)}, body=stalled(b"", 900))
    web.routes["/trickle.md"] = Route(200, md, head={"Content-Length": "60"}, body=trickle(b"word ", 1.0, 900))
    web.routes["/loop.md"] = Route(302, {"Location": "/loop.md"})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    urls = {death: f"{web.base}/{death}.md" for death in DEATHS} | {"refused": f"http://127.0.0.1:{closed}/x.md"}
    workdir = Path(tempfile.mkdtemp(prefix="citeline-dead-"))
    index = Index.create(workdir / "ix", embedder=HashBowEmbedder())
    wall, cpu = time.perf_counter(), time.process_time()
    run = index.ingest([honest[0], *(urls[death] for death in args.deaths), honest[1]])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    lines = [
        f"bench/remote.py dead --deaths {' '.join(args.deaths)}; {os.cpu_count()} CPUs, "
        f"python {sys.version.split()[0]}",
        f"  {wall:.1f} s wall  {cpu:.1f} CPU-s  run {run.status}, {run.added} of 2 honest pages added",
    ]
    by_url = {error["path"]: error["reason"] for error in index.runs(1)[0].errors}
    lines += [f"  {death:8s} {by_url.get(urls[death], '(no line)')[:110]}" for death in args.deaths]
    web.stop()
    save(lines, "remote-dead.txt")


COMMANDS = {
    "listing": listing_main,
    "fetch": fetch_main,
    "dead": dead_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
