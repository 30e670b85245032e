"""``citeline serve`` under sustained load while a writer commits beside it (issue 32 part 3).

Builds an index of the first ``--docs`` SciFact abstracts (JSONL, the real bundled model unless ``--hash``), starts
``citeline serve`` on 127.0.0.1 in its own process (``--workers`` processes), and for ``--seconds`` drives it with
``--clients`` concurrent asyncio/httpx clients, each sending its next request as soon as the last one is answered
(closed loop). Meanwhile a writer process adds one Markdown file every ``--commit-every`` seconds and ingests it,
each ingest committing a new generation.

The requests: SciFact test queries on ``/search`` (hybrid, or ``--mode``), plus one request in ``--check-share``
that asks ``/search?q=bulletin&mode=lexical&collapse=false&k=100``: every file the writer adds says "bulletin" and
nothing else does, so that answer must list exactly the files committed at or before the generation the response
names (``X-Citeline-Generation``) — a response mixing two generations, or naming one it did not read, fails that.

Reports requests/s, latency p50/p90/p99/max, errors (any non-200 or transport error: must be 0), the checked
responses and how many disagreed with their generation (must be 0), the generations seen, and the CPU seconds of the
server (all its processes), the writer and the load generator beside the wall time. Traffic goes only to 127.0.0.1.

    python bench/serve_load.py                      # 32 clients, 60 s, 1 worker, real model
    python bench/serve_load.py --workers 2 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"

WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from citeline import Index
    index_path, folder, every, seconds = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    hashed = sys.argv[5] == "1"
    embedder = None
    if hashed:
        sys.path.insert(0, sys.argv[6])
        from _synthetic import HashBowEmbedder
        embedder = HashBowEmbedder()
    index = Index.open(index_path, embedder=embedder)
    index.encode(["warm up"])  # the model loaded before the clock starts
    print("ready", flush=True)
    until = time.time() + seconds
    n = 0
    while time.time() + every < until:
        time.sleep(every)
        n += 1
        name = f"bulletin-{n:04d}.md"
        text = f"# Bulletin {n}\\n\\nThe bulletin number {n} of the ward reports item {n * 7919}.\\n"
        (folder / name).write_text(text)
        summary = index.ingest([folder])
        print(json.dumps({"file": name, "generation": summary.generation, "status": summary.status}), flush=True)
    """
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_index(workdir: Path, docs: int, hashed: bool) -> tuple[Path, Path]:
    """An index of the first ``docs`` SciFact abstracts; returns it and the writer's (empty) folder."""
    from citeline import Index

    corpus = workdir / "corpus"
    corpus.mkdir()
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as source:
        lines = [next(source) for _ in range(docs)]
    (corpus / "scifact.jsonl").write_text("".join(lines), encoding="utf-8")
    bulletins = workdir / "bulletins"
    bulletins.mkdir()
    embedder = _hash_embedder() if hashed else None
    index = Index.create(workdir / "ix", embedder=embedder)
    index.ingest([corpus])  # the writer's folder becomes a root of its own with its first file
    return index.path, bulletins


def _hash_embedder() -> Any:
    sys.path.insert(0, str(REPO / "bench"))
    from _synthetic import HashBowEmbedder

    return HashBowEmbedder()


def queries() -> list[str]:
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as source:
        return [json.loads(line)["text"] for line in source][:300]


def cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU seconds of ``process`` and its children, live or reaped."""
    total = 0.0
    for proc in [process, *process.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            pass
    return total


async def drive(url: str, clients: int, seconds: float, mode: str, check_share: float) -> dict[str, Any]:
    texts = queries()
    latencies: list[float] = []
    errors: list[str] = []
    checks: list[tuple[int, list[str]]] = []
    stop = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(number: int, http: httpx.AsyncClient) -> None:
        sent = 0
        while time.monotonic() < stop:
            sent += 1
            check = (sent * clients + number) % round(1 / check_share) == 0
            if check:
                params: dict[str, Any] = {"q": "bulletin", "mode": "lexical", "collapse": "false", "k": 100}
            else:
                params = {"q": texts[(sent * clients + number) % len(texts)], "mode": mode, "k": 10}
            started = time.perf_counter()
            try:
                response = await http.get("/search", params=params)
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                errors.append(f"{response.status_code}: {response.text[:200]}")
                continue
            generation = int(response.headers["X-Citeline-Generation"])
            if generation != response.json()["generation"]:
                errors.append("header and body name different generations")
            if check:
                checks.append((generation, sorted(r["source_id"] for r in response.json()["results"])))

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        began = time.perf_counter()
        await asyncio.gather(*(client(n, http) for n in range(clients)))
        wall = time.perf_counter() - began
    return {"latencies": latencies, "errors": errors, "checks": checks, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--commit-every", type=float, default=3.0, help="seconds between the writer's commits")
    parser.add_argument("--workers", type=int, default=1, help="`citeline serve --workers`")
    parser.add_argument("--docs", type=int, default=300, help="SciFact abstracts in the index")
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "dense", "lexical"])
    parser.add_argument("--check-share", type=float, default=0.1, help="share of generation-checking requests")
    parser.add_argument("--hash", action="store_true", help="a hashed bag-of-words embedder instead of the model")
    parser.add_argument("--index-cache", type=Path, help="keep the built index here and start each run from a copy")
    args = parser.parse_args()
    if args.hash and args.workers > 1:
        parser.error("--hash serves with an embedder object: one worker only")

    workdir = Path(tempfile.mkdtemp(prefix="citeline-serve-load-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:
        began = time.perf_counter()
        cached = (
            args.index_cache / f"scifact-{args.docs}-{'hash' if args.hash else 'model'}" if args.index_cache else None
        )
        if cached is not None and cached.is_dir():
            shutil.copytree(cached, workdir, dirs_exist_ok=True)
            index_path, bulletins = workdir / "ix", workdir / "bulletins"
        else:
            index_path, bulletins = build_index(workdir, args.docs, args.hash)
            if cached is not None:
                shutil.copytree(workdir, cached)
        print(f"index of {args.docs} SciFact abstracts ready in {time.perf_counter() - began:.1f} s", flush=True)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        if args.hash:
            code = (
                f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); from _synthetic import HashBowEmbedder; "
                f"from citeline.server import serve; serve({str(index_path)!r}, port={port}, "
                "embedder=HashBowEmbedder(), log_level='warning')"
            )
            command = [sys.executable, "-c", code]
        else:
            command = [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index_path)]
            command += ["--port", str(port), "--workers", str(args.workers), "--log-level", "warning"]
        server = subprocess.Popen(command, env=env)
        try:
            _wait_up(url, server)
            # One search per worker process loads its model before the clock starts.
            for _ in range(args.workers * 4):
                httpx.get(f"{url}/search", params={"q": "warm up", "mode": args.mode}, timeout=120)
            server_process = psutil.Process(server.pid)
            server_cpu = cpu_seconds(server_process)
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(index_path), str(bulletins), str(args.commit_every),
                 str(args.seconds), "1" if args.hash else "0", str(REPO / "bench")],
                env=env, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            writer_process = psutil.Process(writer.pid)
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
            writer_cpu = cpu_seconds(writer_process)  # its start (imports, model) is not part of the load
            own_cpu = _own_cpu()
            result = asyncio.run(drive(url, args.clients, args.seconds, args.mode, args.check_share))
            own_cpu = _own_cpu() - own_cpu
            server_cpu = cpu_seconds(server_process) - server_cpu
            server_rss = sum(proc.memory_info().rss for proc in [server_process, *server_process.children()])
            writer_cpu = cpu_seconds(writer_process) - writer_cpu
            commits = [json.loads(line) for line in writer.communicate(timeout=300)[0].splitlines()]
        finally:
            server.terminate()
            server.wait(30)
        print(f"server memory (RSS, all its processes): {server_rss / 2**20:.0f} MiB")
        report(args, result, commits, server_cpu, writer_cpu, own_cpu)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wait_up(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{url}/health")
            return
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("citeline serve did not start") from None
            time.sleep(0.2)


def report(
    args: argparse.Namespace,
    result: dict[str, Any],
    commits: list[dict[str, Any]],
    server_cpu: float,
    writer_cpu: float,
    own_cpu: float,
) -> None:
    """Print the figures, and exit 1 if any request failed or any checked answer disagreed with its generation."""
    latencies = sorted(result["latencies"])
    wall = result["wall"]

    def quantile(q: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    # The files committed at or before each generation the writer made; earlier ones hold none.
    committed: dict[int, list[str]] = {}
    files: list[str] = []
    for commit in commits:
        files.append(commit["file"])
        committed[commit["generation"]] = sorted(files)
    first = min(committed) if committed else None
    mismatched = 0
    generations = set()
    for generation, found in result["checks"]:
        generations.add(generation)
        known = [g for g in committed if g <= generation]
        expected = committed[max(known)] if known else []
        if first is not None and generation > max(committed):
            mismatched += 1  # a generation nobody committed
        elif found != expected:
            mismatched += 1
    requests = len(latencies) + sum(1 for e in result["errors"] if not e[0].isdigit())
    print(
        f"{args.clients} clients x {wall:.1f} s, {args.workers} worker(s), mode {args.mode}, {args.docs} docs, "
        f"{'hashed bag-of-words' if args.hash else 'the real model'}"
    )
    print(f"requests: {requests} ({requests / wall:.1f}/s); errors: {len(result['errors'])}")
    if latencies:
        print(
            f"latency ms: p50 {quantile(0.5):.0f}, p90 {quantile(0.9):.0f}, p99 {quantile(0.99):.0f}, "
            f"max {1000 * latencies[-1]:.0f}, mean {1000 * statistics.fmean(latencies):.0f}"
        )
    print(
        f"writer: {len(commits)} commits (generations {min(committed, default=0)}..{max(committed, default=0)}); "
        f"checked responses: {len(result['checks'])} over {len(generations)} generations, "
        f"disagreeing with their generation: {mismatched}"
    )
    print(
        f"CPU seconds: server {server_cpu:.1f}, writer {writer_cpu:.1f}, load generator {own_cpu:.1f} "
        f"(wall {wall:.1f} s, {os.cpu_count()} CPUs shared)"
    )
    for error in result["errors"][:5]:
        print(f"  error: {error}")
    if result["errors"] or mismatched:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
