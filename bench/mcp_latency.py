"""What MCP over stdio adds to a search: the ``search`` tool called through the SDK's client on ``citeline mcp``
against ``Index.search`` in this process, on the same index, the same queries interleaved.

    python bench/mcp_latency.py [--scifact ../shared/benchmarks/scifact] [--docs 2000] [--index /tmp/mcp-scifact]
                                [--queries 200] [--mode hybrid]

Builds (once) an index of the first ``--docs`` documents of SciFact's corpus with the default model and backend
(int8 ONNX where the CPU allows) in ``--index``, then opens it here and starts ``citeline mcp --index`` as the
client's subprocess. Each query runs once through each, the order alternating (so the shared machine's drift falls
on both alike), after 10 warm-up queries each. Prints the p50/p90 of each and of the per-query difference
(stdio call minus in-process call): the protocol's overhead (JSON-RPC over pipes, argument validation, the
structured answer and its text, the client's check of it against the output schema; ``--no-output-check``
leaves that check out). Also the CPU a call costs each side, which the machine's load does not inflate as much.

Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
import psutil
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from citeline import Index
from citeline.errors import IndexNotFoundError

ROOT = Path(__file__).resolve().parent.parent


def build(scifact: Path, docs: int, index_dir: Path) -> Index:
    """The index of the first ``docs`` documents of the corpus (built once; reused when it exists)."""
    try:
        return Index.open(index_dir)
    except IndexNotFoundError:
        pass
    source = index_dir.parent / f"{index_dir.name}-corpus"
    source.mkdir(parents=True, exist_ok=True)
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as corpus:
        lines = list(itertools.islice(corpus, docs))
    (source / "corpus.jsonl").write_text("".join(lines), encoding="utf-8")
    index = Index.create(index_dir)
    started = time.process_time()
    summary = index.ingest([source])
    print(f"built {index_dir}: {summary.added} documents, {time.process_time() - started:.0f} CPU-s", file=sys.stderr)
    return index


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(
    index: Index, queries: list[str], mode: str, check_output: bool = True
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Wall ms per query of each path and their difference; and CPU ms per call: the client's part of a call, the
    server process's, and the in-process search's (summed over all calls, so the clock's 10 ms ticks average out)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "citeline.cli.main", "mcp", "--index", str(index.path)]
    )
    times: dict[str, list[float]] = {"stdio": [], "in_process": [], "difference": []}
    cpu = {"client": 0.0, "server": 0.0, "in_process": 0.0}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client checks structured answers against the listed output schemas
        server = psutil.Process().children()[-1]
        if not check_output:  # what a client pays that does not check answers against the output schema in Python

            async def unchecked(name: str, result: object) -> None:
                return None

            session.validate_tool_result = unchecked  # type: ignore[method-assign]

        async def call(query: str) -> float:
            started, own, theirs = time.perf_counter(), time.process_time(), sum(server.cpu_times()[:2])
            result = await session.call_tool("search", {"query": query, "k": 10, "mode": mode})
            elapsed = time.perf_counter() - started
            cpu["client"] += time.process_time() - own
            cpu["server"] += sum(server.cpu_times()[:2]) - theirs
            assert not result.is_error, result.content
            return elapsed

        def local(query: str) -> float:
            started, own = time.perf_counter(), time.process_time()
            index.search(query, 10, mode=mode)
            cpu["in_process"] += time.process_time() - own
            return time.perf_counter() - started

        for query in queries[:10]:  # warm-up: models loaded, caches filled, on both sides
            await call(query)
            local(query)
        cpu = dict.fromkeys(cpu, 0.0)
        for n, query in enumerate(queries):
            if n % 2:
                remote, here = await call(query), local(query)
            else:
                here, remote = local(query), await call(query)
            times["stdio"].append(remote * 1000)
            times["in_process"].append(here * 1000)
            times["difference"].append((remote - here) * 1000)
    return times, {name: seconds * 1000 / len(queries) for name, seconds in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "benchmarks" / "scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--index", type=Path, default=Path("/tmp/mcp-scifact"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument(
        "--no-output-check",
        action="store_true",
        help="the client skips its jsonschema check of each structured answer (as a client that does not check)",
    )
    args = parser.parse_args()
    index = build(args.scifact, args.docs, args.index)
    with (args.scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line in itertools.islice(lines, args.queries)]
    times, cpu = anyio.run(measure, index, queries, args.mode, not args.no_output_check)
    status = index.status()
    checked = "unchecked" if args.no_output_check else "checked"
    print(
        f"{status.documents} documents, {status.chunks} chunks; {len(queries)} queries, mode {args.mode}, k 10; "
        f"answers {checked} against the output schema by the client"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, values in times.items():
        print(
            f"{name:<11} p50 {statistics.median(values):7.2f} ms  p90 {percentile(values, 0.9):7.2f} ms  "
            f"mean {statistics.fmean(values):7.2f} ms"
        )
    protocol = cpu["client"] + cpu["server"] - cpu["in_process"]
    print(
        f"CPU ms a call: client {cpu['client']:.2f}, server process {cpu['server']:.2f}, in-process search "
        f"{cpu['in_process']:.2f}; the protocol's (client + server - search) {protocol:.2f}"
    )


if __name__ == "__main__":
    main()
