"""What MCP over stdio adds to a search: the ``search`` tool called through the SDK's client on ``citeline mcp``
against ``Index.search`` in this process, on the same index, the same queries interleaved.

    python bench/mcp_latency.py [--scifact ../shared/benchmarks/scifact] [--docs 2000] [--index /tmp/mcp-scifact]
                                [--queries 200] [--mode hybrid]

Builds (once) an index of the first ``--docs`` documents of SciFact's corpus with the default model and backend
(int8 ONNX where the CPU allows) in ``--index``, then opens it here and starts ``citeline mcp --index`` as the
client's subprocess. Each query runs once through each, the order alternating (so the shared machine's drift falls
on both alike), after 10 warm-up queries each. Prints the p50/p90 of each and of the per-query difference
(stdio call minus in-process call): the protocol's overhead (JSON-RPC over pipes, argument validation, the
structured answer and its text, the client's check of it against the output schema).

Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import anyio
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


async def measure(index: Index, queries: list[str], mode: str) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "citeline.cli.main", "mcp", "--index", str(index.path)]
    )
    times: dict[str, list[float]] = {"stdio": [], "in_process": [], "difference": []}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client checks structured answers against the listed output schemas

        async def call(query: str) -> float:
            started = time.perf_counter()
            result = await session.call_tool("search", {"query": query, "k": 10, "mode": mode})
            elapsed = time.perf_counter() - started
            assert not result.is_error, result.content
            return elapsed

        def local(query: str) -> float:
            started = time.perf_counter()
            index.search(query, 10, mode=mode)
            return time.perf_counter() - started

        for query in queries[:10]:  # warm-up: models loaded, caches filled, on both sides
            await call(query)
            local(query)
        for n, query in enumerate(queries):
            if n % 2:
                remote, here = await call(query), local(query)
            else:
                here, remote = local(query), await call(query)
            times["stdio"].append(remote * 1000)
            times["in_process"].append(here * 1000)
            times["difference"].append((remote - here) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "benchmarks" / "scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--index", type=Path, default=Path("/tmp/mcp-scifact"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    index = build(args.scifact, args.docs, args.index)
    with (args.scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line in itertools.islice(lines, args.queries)]
    times = anyio.run(measure, index, queries, args.mode)
    status = index.status()
    print(f"{status.documents} documents, {status.chunks} chunks; {len(queries)} queries, mode {args.mode}, k 10")
    for name, values in times.items():
        print(
            f"{name:<11} p50 {statistics.median(values):7.2f} ms  p90 {percentile(values, 0.9):7.2f} ms  "
            f"mean {statistics.fmean(values):7.2f} ms"
        )


if __name__ == "__main__":
    main()
