"""The speed of a search on each surface, one subcommand each (`--help` after a subcommand gives its options).

    python bench/search.py latency [--index DIR] [--cold-runs 10]   # cold CLI, in-process; --tree, --stages, --scoped
    python bench/search.py mcp --scifact ../shared/benchmarks/scifact --docs 2000   # what MCP over stdio adds
    python bench/search.py serve --index-cache /tmp/serve-bench --workers 1   # citeline serve under load

Run by hand; not part of CI. Figures are in docs/performance.md with their commands.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import cProfile
import dataclasses
import functools
import inspect
import itertools
import json
import os
import pstats
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

import anyio
import httpx
import psutil
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from citeline import Index
from citeline.errors import IndexNotFoundError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the raw MCP client, shared with the tests
from _mcp_wire import Wire  # noqa: E402

DEFAULT_QUERIES = REPO.parent / "shared" / "benchmarks" / "scifact" / "queries.jsonl"
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


# --- latency ---------------------------------------------------------------------------------------------------------

LATENCY_DOC = """\
Query latency: cold CLI wall time and in-process ``Index.search`` p50/p99.

    python bench/search.py latency [--index DIR] [--queries ../shared/benchmarks/scifact/queries.jsonl] [--cold-runs 10]
    python bench/search.py latency --index DIR --tree PATH [--tree PATH ...] [--cold-runs 15]  # trees side by side
    python bench/search.py latency --index DIR --stages [-n 100]                                # CPU per query stage
    python bench/search.py latency --index DIR --scoped [--hash-bow] [-n 300]               # a token's scope, its cost

Without ``--index`` it builds an index of ``seeds/`` in a temporary folder. Cold runs start a new
``citeline search`` process each time (the query path imports no Prefect, torch, transformers, bm25s, scipy or
pandas) and report its wall time, CPU time (user+sys, from wait4) and peak RSS; in-process timings run every query
once per mode after one warm-up query (``--cold-only`` skips them). Where a cold search spends its time:
``python -X importtime -m citeline.cli.main search QUERY --index DIR`` and ``python -m cProfile -s cumtime -m
citeline.cli.main ...``.

``--tree`` (repeatable) compares the cold ``citeline search`` cost of source trees, each put first on ``PYTHONPATH``
(e.g. ``git archive HEAD~3 | tar -x -C /tmp/base`` for a before/after), runs interleaved so the shared machine's
noise falls on every tree alike; it prints each tree's median and min CPU-s (user + sys, from ``wait4``) and wall s.

``--stages`` says where a warm hybrid query's time goes: ``n`` queries (``Index.search(k=10, mode="hybrid",
collapse=True)``, the CLI's default) after 5 warm-up ones, first plain (CPU and wall ms per query), then with
wall-clock timers around each stage's function (``WALL_STAGES``; a nested stage counts in its parent), then under
cProfile with a CPU-time clock, printing each stage's cumulative CPU ms per query. cProfile's own cost inflates every
figure (about 2x); the shares are what count. Stages overlap where one calls another (``hybrid`` holds ``encode``).
The profiled run embeds the query on the main thread (``PARALLEL_HYBRID`` off), so each stage's CPU is its own.

``--scoped`` measures what a scoped token adds to a served search: ``n`` SciFact test queries (those of
``qrels/test.tsv`` beside ``--queries``), each searched through the server's reader (``IndexService.search``, hybrid,
k=10, collapsed: ``GET /search``'s defaults) as the owner and as a token whose scope is ``--scope-glob`` (a path glob
over the records' source ids), the two interleaved query by query (which goes first alternates) so the shared
machine's noise falls on both alike; it prints each side's mean and p50 wall and CPU ms and the overhead of the means.
With ``--hash-bow`` the index is opened with bench/_synthetic.py's model-free embedder, and a missing ``--index`` is
built from SciFact's corpus with it first.

Run by hand; not part of CI.
"""


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


#: stage -> (file suffix, function name) of the function whose cumulative time is the stage's (``--stages``)
STAGES = {
    "search (all)": ("citeline/query/plan.py", "search"),
    "hybrid ranking (both legs)": ("citeline/query/plan.py", "hybrid_candidates"),
    "  query encoding": ("citeline/index.py", "encode_query"),
    "    onnxruntime run": ("~", "<built-in method onnxruntime.capi.onnxruntime_pybind11_state.run>"),
    "  lexical leg": ("citeline/lexical/segments.py", "ranked"),
    "passage rows": ("citeline/query/plan.py", "fetch_passages"),
    "highlights": ("citeline/query/highlight.py", "highlight"),
    "  copies lookup": ("citeline/lexical/lookup.py", "find"),
    "  unranked copies": ("citeline/query/collapse.py", "add_unranked_copies"),
    "  grouping": ("citeline/query/collapse.py", "collapse"),
}


#: stage -> (file suffix, function or method name) of the functions ``--stages`` wraps in wall-clock timers (the
#: second table): each row is the wall time inside that function, nested rows included in their parent's.
WALL_STAGES = {
    "search (all)": ("citeline/query/plan.py", "search"),
    "rank (both legs and the stages)": ("citeline/query/plan.py", "rank"),
    "  hybrid candidates (both legs)": ("citeline/query/plan.py", "hybrid_candidates"),
    "    query encoding": ("citeline/index.py", "encode_query"),
    "    dense leg (vector search)": ("citeline/vectors/segments.py", "search"),
    "    lexical leg": ("citeline/lexical/segments.py", "ranked"),
    "  ranking stages (fusion, feedback)": ("citeline/query/stages.py", "ranked"),
    "passage rows": ("citeline/query/plan.py", "fetch_passages"),
    "highlights": ("citeline/query/highlight.py", "highlight"),
    "collapse: grouping": ("citeline/query/collapse.py", "collapse"),
    "collapse: unranked copies": ("citeline/query/collapse.py", "add_unranked_copies"),
    "  copies lookup": ("citeline/lexical/lookup.py", "find"),
    "relevance floor": ("citeline/query/relevance.py", "apply_floor"),
}


def wrap_in_timers(stages: dict[str, tuple[str, str]]) -> dict[str, list[float]]:
    """Replace each stage's function, wherever a loaded citeline module or class holds it, by one that adds its
    wall seconds to the returned ``stage -> [seconds, calls]`` (calls on the pool's threads count too)."""
    import functools

    totals: dict[str, list[float]] = {}
    owners: list[Any] = [m for name, m in list(sys.modules.items()) if name.startswith("citeline") and m is not None]
    owners += [v for m in list(owners) for v in vars(m).values() if isinstance(v, type)]
    for stage, (suffix, name) in stages.items():
        total = totals[stage] = [0.0, 0.0]
        for owner in owners:
            value = vars(owner).get(name)
            code = getattr(value, "__code__", None)
            if code is None or not code.co_filename.endswith(suffix):
                continue

            def timed(*args: Any, _function: Any = value, _total: list[float] = total, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _function(*args, **kwargs)
                finally:
                    _total[0] += time.perf_counter() - start
                    _total[1] += 1

            setattr(owner, name, functools.update_wrapper(timed, value))
    return totals


def compare_trees(index: str, trees: list[Path], runs: int, query: str) -> None:
    """Cold ``citeline search`` CPU and wall seconds of each source tree, runs interleaved."""
    cpu: dict[Path, list[float]] = {tree: [] for tree in trees}
    wall: dict[Path, list[float]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            command = [sys.executable, "-m", "citeline.cli.main", "search", query, "--index", index]
            start = time.perf_counter()
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = process.stderr.read()  # type: ignore[union-attr]
            _, status, usage = os.wait4(process.pid, 0)
            wall[tree].append(time.perf_counter() - start)
            if status:
                raise SystemExit(f"{tree}: exit status {status}: {err.decode()[-500:]}")
            cpu[tree].append(usage.ru_utime + usage.ru_stime)
    for tree in trees:
        print(
            f"{tree}: CPU-s median {statistics.median(cpu[tree]):.3f} min {min(cpu[tree]):.3f}; "
            f"wall s median {statistics.median(wall[tree]):.3f} ({runs} runs)"
        )


def query_stages(index_path: Path, queries: list[str], n: int) -> None:
    """CPU ms per query of each stage of a warm hybrid search with collapse (see the module docstring)."""
    from citeline import Index

    index = Index.open(index_path)
    for query in queries[:5]:
        index.search(query, k=10, mode="hybrid", collapse=True)
    timed = queries[5 : 5 + n]
    wall, cpu = time.perf_counter(), time.process_time()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    count = len(timed)
    print(
        f"plain: {1000 * (time.process_time() - cpu) / count:.2f} CPU ms, "
        f"{1000 * (time.perf_counter() - wall) / count:.2f} wall ms per query ({count} queries)"
    )
    totals = wrap_in_timers(WALL_STAGES)
    wall = time.perf_counter()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    whole = time.perf_counter() - wall
    print(f"\n{'stage (wall-clock timers)':<38} {'wall ms/query':>13} {'calls/query':>11} {'share':>6}")
    for stage, (seconds, calls) in totals.items():
        print(f"{stage:<38} {1000 * seconds / count:>13.2f} {calls / count:>11.1f} {seconds / whole:>6.0%}")
    print(f"{'(the timed loop, per query)':<38} {1000 * whole / count:>13.2f}\n")
    # cProfile sees this thread only, and a CPU clock counts every thread's time: the query's embedding on the
    # pool's thread (plan.PARALLEL_HYBRID) would be charged to whatever this thread runs meanwhile.
    from citeline.query import plan

    plan.PARALLEL_HYBRID = False
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (file, _, name), (_, _, _, cum, _) in stats.items():
        for suffix_name in STAGES.values():
            if file.endswith(suffix_name[0]) and name == suffix_name[1]:
                cumulative[suffix_name] = cumulative.get(suffix_name, 0.0) + cum
    total = cumulative.get(STAGES["search (all)"], 0.0)
    print(f"{'stage (profiled)':<30} {'CPU ms/query':>12} {'share':>6}")
    for stage, key in STAGES.items():
        seconds = cumulative.get(key, 0.0)
        print(f"{stage:<30} {1000 * seconds / count:>12.2f} {seconds / total if total else 0:>6.0%}")


def scoped_overhead(index_path: Path, queries_file: Path, n: int, glob: str, hash_bow: bool) -> None:
    """``--scoped``: a scoped search's cost against an unscoped one on the server's read path (see the docstring)."""
    from _synthetic import HashBowEmbedder, open_index

    from citeline import Index, SearchRequest
    from citeline.server import IndexService
    from citeline.server.access import CALLER, OWNER, Caller
    from citeline.store.filters import Filters

    if not index_path.exists():
        if not hash_bow:
            sys.exit("--scoped builds a missing --index only with --hash-bow (the real model: build it yourself)")
        started = time.perf_counter()
        Index.create(index_path, embedder=HashBowEmbedder()).ingest([queries_file.parent / "corpus.jsonl"])
        print(
            f"built {index_path} from SciFact's corpus (model-free embedder) in {time.perf_counter() - started:.0f} s"
        )
    index = open_index(index_path, hash_bow)
    tested = {line.split("\t")[0] for line in (queries_file.parent / "qrels" / "test.tsv").open(encoding="utf-8")}
    queries = [json.loads(line) for line in queries_file.open(encoding="utf-8")]
    texts = [query["text"] for query in queries if query["_id"] in tested][:n]
    scope = Filters.from_value({"path_glob": [glob]})
    visible = len(index.documents(scope))
    reader = IndexService(index, timeout=600)
    callers = {"unscoped": OWNER, "scoped": Caller("bench", scope)}
    wall: dict[str, list[float]] = {name: [] for name in callers}
    cpu: dict[str, list[float]] = {name: [] for name in callers}

    def timed(name: str, text: str) -> None:
        reset = CALLER.set(callers[name])
        try:
            start, started_cpu = time.perf_counter(), time.process_time()
            reader.search(SearchRequest.of(text, 10), time.monotonic() + 600)
            wall[name].append((time.perf_counter() - start) * 1000)
            cpu[name].append((time.process_time() - started_cpu) * 1000)
        finally:
            CALLER.reset(reset)

    for text in texts[:5]:  # warm-up: caches, the view generation
        timed("unscoped", text)
        timed("scoped", text)
    for name in callers:
        wall[name].clear()
        cpu[name].clear()
    for at, text in enumerate(texts):
        order = ("unscoped", "scoped") if at % 2 == 0 else ("scoped", "unscoped")
        for name in order:
            timed(name, text)
    print(
        f"index {index_path}: {index.status().documents} documents, {index.status().chunks} chunks; scope "
        f"path_glob={glob!r} sees {visible} documents; {len(texts)} SciFact test queries, hybrid, k=10, collapsed"
    )
    for name in callers:
        print(
            f"{name:>9}: wall mean {statistics.mean(wall[name]):.2f} ms, p50 {percentile(wall[name], 0.5):.2f} ms; "
            f"CPU mean {statistics.mean(cpu[name]):.2f} ms, p50 {percentile(cpu[name], 0.5):.2f} ms"
        )
    print(
        f"overhead of the scope: wall {statistics.mean(wall['scoped']) / statistics.mean(wall['unscoped']) - 1:+.1%}, "
        f"CPU {statistics.mean(cpu['scoped']) / statistics.mean(cpu['unscoped']) - 1:+.1%} (means); "
        f"load average {os.getloadavg()[0]:.1f}"
    )


def latency_main() -> None:
    parser = argparse.ArgumentParser(description=LATENCY_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--cold-only", action="store_true", help="skip the in-process timings")
    parser.add_argument("--tree", action="append", type=Path, help="compare the cold search of these source trees")
    parser.add_argument("--query", default="levee", help="the query of --tree's cold searches")
    parser.add_argument("--stages", action="store_true", help="CPU per query stage of a warm hybrid search")
    parser.add_argument("-n", type=int, default=100, help="--stages, --scoped: queries timed")
    parser.add_argument("--scoped", action="store_true", help="a scoped token's search against the owner's")
    parser.add_argument("--scope-glob", default="*#[0-4]*", help="--scoped: the token's scope (a path glob)")
    parser.add_argument("--hash-bow", action="store_true", help="--scoped: the model-free embedder")
    args = parser.parse_args()
    if args.scoped:
        if args.index is None:
            parser.error("--scoped needs --index")
        scoped_overhead(args.index, args.queries, args.n, args.scope_glob, args.hash_bow)
        return
    if args.tree:
        if args.index is None:
            parser.error("--tree needs --index")
        compare_trees(str(args.index), args.tree, args.cold_runs, args.query)
        return
    if args.stages:
        if args.index is None:
            parser.error("--stages needs --index")
        query_stages(args.index, [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")], args.n)
        return

    from citeline import Index

    tmp = None
    index_path = args.index
    if index_path is None:
        tmp = tempfile.mkdtemp(prefix="citeline-bench-")
        index_path = Path(tmp) / "index"
        Index.create(index_path).ingest([REPO / "seeds"])
    citeline = shutil.which("citeline") or str(Path(sys.executable).parent / "citeline")
    queries = [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")]

    cold, cold_cpu, cold_rss = [], [], []
    for i in range(args.cold_runs):
        start = time.perf_counter()
        process = subprocess.Popen(
            [citeline, "search", queries[i % len(queries)], "--index", str(index_path), "-k", str(args.k)],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        _, status, usage = os.wait4(process.pid, 0)
        cold.append(time.perf_counter() - start)
        if status:
            sys.exit(f"citeline search failed (wait status {status})")
        cold_cpu.append(usage.ru_utime + usage.ru_stime)
        cold_rss.append(usage.ru_maxrss / 1024)  # KiB on Linux
    print(f"index {index_path}: {Index.open(index_path).status().chunks} chunks")
    print(
        f"cold CLI search ({args.cold_runs} runs): median {statistics.median(cold):.3f} s, "
        f"max {max(cold):.3f} s; CPU time (user+sys) median {statistics.median(cold_cpu):.3f} s, "
        f"min {min(cold_cpu):.3f} s; peak RSS median {statistics.median(cold_rss):.0f} MiB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )

    index = Index.open(index_path)
    modes: list[str | None] = [None]
    if "mode" in inspect.signature(index.search).parameters:
        modes = ["dense", "lexical", "hybrid"]
    if args.cold_only:
        modes = []
    for mode in modes:
        kwargs: dict[str, Any] = {} if mode is None else {"mode": mode}
        index.search(queries[0], k=args.k, **kwargs)
        timings, cpu = [], []
        for query in queries:
            start, started_cpu = time.perf_counter(), time.process_time()
            index.search(query, k=args.k, **kwargs)
            timings.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        print(
            f"in-process {mode or 'dense'} search, {len(queries)} queries: p50 {percentile(timings, 0.5):.1f} ms, "
            f"p99 {percentile(timings, 0.99):.1f} ms; CPU time p50 {percentile(cpu, 0.5):.1f} ms"
        )
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


# --- mcp -------------------------------------------------------------------------------------------------------------

MCP_DOC = """\
What MCP over stdio adds to a search: the ``search`` tool called on ``citeline mcp`` against ``Index.search`` in
this process, on the same index, the same queries interleaved.

    python bench/search.py mcp [--scifact ../shared/benchmarks/scifact] [--docs 2000] [--index /tmp/mcp-scifact]
                                [--queries 200] [--mode hybrid] [--client sdk|raw|both] [--no-output-check]
                                [--baseline DIR]

Builds (once) an index of the first ``--docs`` documents of SciFact's corpus with the default model and backend
(int8 ONNX where the CPU allows) in ``--index``, then opens it here and starts ``citeline mcp --index`` as a
subprocess for each client (and from the citeline source in ``--baseline DIR`` too, e.g. ``git archive`` of an
older commit unpacked there). The clients: ``sdk``, the ``mcp`` SDK's own ``ClientSession`` (its JSON-RPC models
and its check of each answer against the tool's output schema; ``--no-output-check`` leaves that check out);
``raw``, the least a client can do (each request one JSON line written to the server's stdin, each answer one line
read and given to ``json.loads``), which leaves the protocol's own cost: JSON-RPC over pipes and the server's side.
Each query runs once through each path, the order rotating (so the shared machine's drift falls on all alike),
after 10 warm-up queries each. Prints the p50/p90 of each and of the per-query difference (stdio call minus
in-process call): the protocol's overhead. Also the CPU a call costs: the server's beyond the search (its process's
CPU minus the in-process search's, and minus its busiest thread's, the one that ran the searches) and the client's,
with the SDK client's check; CPU time is inflated less than wall time by the machine's load.
bench/mcp_client_node.mjs measures the TypeScript SDK's client.

Run by hand; not part of CI.
"""


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


def mcp_percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` by the rank rule the MCP figures in the docs were made with."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


RAW_INFO = {"name": "mcp_latency-raw", "version": "1"}


@dataclasses.dataclass
class Served:
    """One server process under measurement, with its client: its wall times and the CPU its calls cost (summed,
    in seconds)."""

    name: str
    call: Any  # async (query, mode) -> None
    process: psutil.Process
    wall: list[float] = dataclasses.field(default_factory=list)
    difference: list[float] = dataclasses.field(default_factory=list)
    cpu: dict[str, float] = dataclasses.field(default_factory=lambda: dict.fromkeys(("client", "check", "server"), 0.0))
    threads: dict[int, float] = dataclasses.field(default_factory=dict)

    def thread_cpu(self) -> dict[int, float]:
        return {thread.id: thread.user_time + thread.system_time for thread in self.process.threads()}


def _new_child(before: set[int]) -> psutil.Process:
    return next(child for child in psutil.Process().children() if child.pid not in before)


def _check_source(folder: Path, env: dict[str, str]) -> None:
    """That a server started in ``folder`` imports citeline from there."""
    imported = subprocess.run(
        [sys.executable, "-c", "import citeline; print(citeline.__file__)"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(imported).resolve().is_relative_to(folder.resolve()), (folder, imported)


async def _sdk_server(
    stack: contextlib.AsyncExitStack, name: str, command: list[str], env: Any, folder: Path, check: bool
) -> Served:
    children = {child.pid for child in psutil.Process().children()}
    read, write = await stack.enter_async_context(
        stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=folder))
    )
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    await session.list_tools()  # the client checks structured answers against the listed output schemas

    async def call(query: str, mode: str) -> None:
        result = await session.call_tool("search", {"query": query, "k": 10, "mode": mode})
        assert not result.is_error, result.content

    served = Served(name, call, _new_child(children))
    _time_check(served, session, check)
    return served


def _raw_server(stack: contextlib.AsyncExitStack, name: str, command: list[str], env: Any, folder: Path) -> Served:
    client = Wire(command, env, folder, client_info=RAW_INFO)
    stack.callback(client.close, wait=True)

    async def call(query: str, mode: str) -> None:
        result = client.request("tools/call", {"name": "search", "arguments": {"query": query, "k": 10, "mode": mode}})
        assert not result.get("isError"), result

    return Served(name, call, psutil.Process(client.process.pid))


async def measure(
    index: Index,
    queries: list[str],
    mode: str,
    check_output: bool = True,
    baseline: Path | None = None,
    clients: tuple[str, ...] = ("sdk",),
) -> tuple[list[Served], list[float], float]:
    """Each query through each server (``citeline mcp`` from this checkout, and from ``baseline``'s source when
    given), one per client, and through ``Index.search`` here, the order rotating. Per server: wall ms per call and
    its difference from the in-process call of the same query; CPU per call: the client's, of which its
    output-schema check, and the server process's (summed over all calls, so the clock's ticks average out). Also
    the in-process search's wall ms per query and CPU s in all."""
    sources = {"this checkout": None, **({f"baseline {baseline}": baseline} if baseline else {})}
    served: list[Served] = []
    local_wall: list[float] = []
    local_cpu = 0.0
    async with contextlib.AsyncExitStack() as stack:
        for name, source in sources.items():
            # `python -m` puts its working folder first on sys.path, ahead of PYTHONPATH and the editable install:
            # each server runs in the folder of the source it is to run (a baseline started from this checkout's
            # folder would run this checkout's code).
            folder = source or REPO
            env = dict(os.environ, PYTHONPATH=str(folder))
            _check_source(folder, env)
            command = [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(index.path)]
            for client in clients:
                label = f"{name}, {client} client"
                if client == "sdk":
                    served.append(await _sdk_server(stack, label, command, env, folder, check_output))
                else:
                    served.append(_raw_server(stack, label, command, env, folder))

        async def call(server: Served, query: str) -> float:
            started, own, theirs = time.perf_counter(), time.process_time(), sum(server.process.cpu_times()[:2])
            await server.call(query, mode)
            elapsed = time.perf_counter() - started
            server.cpu["client"] += time.process_time() - own
            server.cpu["server"] += sum(server.process.cpu_times()[:2]) - theirs
            return elapsed

        def local(query: str) -> tuple[float, float]:
            started, own = time.perf_counter(), time.process_time()
            index.search(query, 10, mode=mode)
            return time.perf_counter() - started, time.process_time() - own

        for query in queries[:10]:  # warm-up: models loaded, caches filled, on both sides
            for server in served:
                await call(server, query)
            local(query)
        for server in served:
            server.cpu = dict.fromkeys(server.cpu, 0.0)
            server.threads = server.thread_cpu()
        for n, query in enumerate(queries):
            turn: list[Served | None] = [
                None,
                *served,
            ]  # None: in process; the order rotates so each path goes first as often
            turn = turn[n % len(turn) :] + turn[: n % len(turn)]
            walls: dict[str | None, float] = {}
            for path in turn:
                if path is None:
                    walls[None], cpu = local(query)
                    local_cpu += cpu
                else:
                    walls[path.name] = await call(path, query)
            local_wall.append(walls[None] * 1000)
            for server in served:
                server.wall.append(walls[server.name] * 1000)
                server.difference.append((walls[server.name] - walls[None]) * 1000)
        for server in served:  # each thread's CPU over the measured calls; the busiest one ran the searches
            after = server.thread_cpu()
            busiest = max(after[tid] - server.threads.get(tid, 0.0) for tid in after)
            server.cpu["beyond_busiest"] = server.cpu["server"] - busiest
    return served, local_wall, local_cpu


def _time_check(server: Served, session: ClientSession, check_output: bool) -> None:
    """Time the SDK client's check of each answer against the tool's output schema (its ``validate_tool_result``),
    or leave it out (``--no-output-check``: a client that does not check)."""
    checker = session.validate_tool_result

    async def timed(name: str, result: Any) -> None:
        if check_output:
            own = time.process_time()
            await checker(name, result)
            server.cpu["check"] += time.process_time() - own

    session.validate_tool_result = timed  # type: ignore[method-assign]


def mcp_main() -> None:
    parser = argparse.ArgumentParser(description=MCP_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "benchmarks" / "scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--index", type=Path, default=Path("/tmp/mcp-scifact"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument(
        "--client",
        choices=("sdk", "raw", "both"),
        default="sdk",
        help="the mcp SDK's ClientSession, the least client (a JSON line out, a line in), or both (a server each)",
    )
    parser.add_argument(
        "--no-output-check",
        action="store_true",
        help="the client skips its jsonschema check of each structured answer (as a client that does not check)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also a server run from the citeline source in this folder (e.g. `git archive` of an older commit, "
        "unpacked), its calls interleaved with this checkout's",
    )
    args = parser.parse_args()
    index = build(args.scifact, args.docs, args.index)
    with (args.scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line in itertools.islice(lines, args.queries)]
    served, local_wall, local_cpu = anyio.run(
        measure,
        index,
        queries,
        args.mode,
        not args.no_output_check,
        args.baseline,
        ("sdk", "raw") if args.client == "both" else (args.client,),
    )
    status = index.status()
    checked = "unchecked" if args.no_output_check else "checked"
    print(
        f"{status.documents} documents, {status.chunks} chunks; {len(queries)} queries, mode {args.mode}, k 10; "
        f"answers {checked} against the output schema by the client; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    search = local_cpu * 1000 / len(queries)
    print(
        f"in process  p50 {statistics.median(local_wall):7.2f} ms  p90 {mcp_percentile(local_wall, 0.9):7.2f} ms; "
        f"CPU {search:.2f} ms a search"
    )
    for server in served:
        cpu = {name: seconds * 1000 / len(queries) for name, seconds in server.cpu.items()}
        print(f"{server.name}:")
        for name, values in (("stdio", server.wall), ("difference", server.difference)):
            print(
                f"  {name:<11} p50 {statistics.median(values):7.2f} ms  p90 {mcp_percentile(values, 0.9):7.2f} ms  "
                f"mean {statistics.fmean(values):7.2f} ms"
            )
        print(
            f"  CPU ms a call: server process {cpu['server']:.2f} - search {search:.2f} = {cpu['server'] - search:.2f} "
            f"beyond the search ({cpu['beyond_busiest']:.2f} beyond its busiest thread, the search's); "
            f"client {cpu['client']:.2f} (its output-schema check {cpu['check']:.2f}); "
            f"the protocol's (client + server - search) {cpu['client'] + cpu['server'] - search:.2f}"
        )


# --- serve -----------------------------------------------------------------------------------------------------------

SERVE_DOC = """\
``citeline serve`` under sustained load while a writer commits beside it (issue 32 part 3).

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

    python bench/search.py serve                      # 32 clients, 60 s, 1 worker, real model
    python bench/search.py serve --workers 2 --seconds 30
    python bench/search.py serve --index-cache /tmp/serve-bench --versus-in-process [--baseline DIR] [--idle 3]

``--versus-in-process`` measures instead what serving adds to a search's CPU (issue 51): no writer and no
concurrent load; the SciFact test queries (those of ``qrels/test.tsv``, ``--queries`` of them) are searched one
at a time by ``GET /search?q=...`` (the route's defaults: hybrid, k=10, collapsed) on ``citeline serve`` and by
``Index.search`` in this process on the same index (``SearchRequest.of(q)``: the same defaults; ``--concurrency N``:
N requests at once to the server, whose searches still run one at a time), in rounds of 25
queries whose order rotates, so the shared machine's noise falls on every side alike. A side's CPU is the user +
system seconds of the server process over its rounds (its scheduler clock, :func:`cpu_clock`) or of this process
around its in-process searches (``time.process_time``, the same clock), divided by the searches; wall is each
request's or call's. ``--baseline DIR`` (repeatable) adds a server run from the citeline source in ``DIR`` (``git
archive main | tar -x -C DIR``) to the rotation, and checks that it answers every query with the same status,
headers (but ``date``) and body bytes as this checkout's server. The side "in process, each after a request" runs
the in-process searches again, each after a ``GET /health`` to this checkout's server (not counted), as a server's
searches are each after a round trip; ``--idle MS`` (repeatable) adds the in-process searches each after sleeping
``MS`` milliseconds. A server's CPU is given against each of these (on a shared machine a search costs more the
longer its core was idle or elsewhere before it: docs/performance.md). Each server's CPU is also split by
thread (each thread's scheduler clock, ``/proc/PID/task/TID/schedstat``): the main thread, which runs the event
loop (HTTP, middleware, parameters, the answer's JSON), and the others (the worker thread that runs the search).
"""


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


def serve_main() -> None:
    parser = argparse.ArgumentParser(description=SERVE_DOC.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--commit-every", type=float, default=3.0, help="seconds between the writer's commits")
    parser.add_argument("--workers", type=int, default=1, help="`citeline serve --workers`")
    parser.add_argument("--docs", type=int, default=300, help="SciFact abstracts in the index")
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "dense", "lexical"])
    parser.add_argument("--check-share", type=float, default=0.1, help="share of generation-checking requests")
    parser.add_argument("--hash", action="store_true", help="a hashed bag-of-words embedder instead of the model")
    parser.add_argument("--index-cache", type=Path, help="keep the built index here and start each run from a copy")
    parser.add_argument(
        "--versus-in-process", action="store_true", help="CPU per search: the server against Index.search"
    )
    parser.add_argument("--queries", type=int, default=300, help="--versus-in-process: SciFact test queries")
    parser.add_argument(
        "--baseline", type=Path, action="append", help="--versus-in-process: also a server from this source tree"
    )
    parser.add_argument("--concurrency", type=int, default=1, help="--versus-in-process: requests a server has at once")
    parser.add_argument(
        "--idle", type=float, action="append", help="--versus-in-process: also in process, each after sleeping MS ms"
    )
    args = parser.parse_args()
    if args.hash and args.workers > 1:
        parser.error("--hash serves with an embedder object: one worker only")
    if (args.baseline is not None or args.idle is not None) and not args.versus_in_process:
        parser.error("--baseline and --idle go with --versus-in-process")

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
        if args.versus_in_process:
            versus_in_process(args, index_path, workdir, env)
            return
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(_serve_command(index_path, port, args.hash, args.workers), env=env)
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


def test_queries(count: int) -> list[str]:
    """The first ``count`` SciFact test queries (those ``qrels/test.tsv`` judges)."""
    tested = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").open(encoding="utf-8")}
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as source:
        texts = [query["text"] for query in map(json.loads, source) if query["_id"] in tested]
    return texts[:count]


def cpu_clock(pid: int) -> float:
    """The CPU seconds (user + system, all threads, exited ones too) of the process ``pid`` from the kernel's
    scheduler clock (Linux's ``clock_getcpuclockid``; the clock ``time.process_time`` reads for this process), not
    from ``/proc``'s tick counts, which sample whichever task the 10 ms tick finds running and so can misplace a
    process's short bursts."""
    return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


def thread_clocks(pid: int) -> dict[str, int]:
    """The CPU nanoseconds of each thread of the process ``pid`` (the scheduler's clock, as :func:`cpu_clock`'s, by
    thread id: the first field of ``/proc/PID/task/TID/schedstat``); threads that ended meanwhile are left out."""
    clocks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            clocks[task.name] = int((task / "schedstat").read_text().split()[0])
    return clocks


def fetch(client: httpx.Client, text: str) -> tuple[float, httpx.Response]:
    """``GET /search?q=text`` and its wall seconds."""
    began = time.perf_counter()
    response = client.get("/search", params={"q": text})
    return time.perf_counter() - began, response


def _serve_command(index_path: Path, port: int, hash_embedder: bool, workers: int | None = None) -> list[str]:
    # `citeline serve` on index_path at port (--workers when given), or serve() with the hashed embedder (--hash).
    if hash_embedder:
        code = (
            f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); from _synthetic import HashBowEmbedder; "
            f"from citeline.server import serve; serve({str(index_path)!r}, port={port}, "
            "embedder=HashBowEmbedder(), log_level='warning')"
        )
        return [sys.executable, "-c", code]
    command = [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index_path), "--port", str(port)]
    return command + (["--workers", str(workers)] if workers is not None else []) + ["--log-level", "warning"]


def versus_in_process(args: argparse.Namespace, index_path: Path, workdir: Path, env: dict[str, str]) -> None:
    """``--versus-in-process``: CPU and wall per search of each server and of ``Index.search`` here (the docstring)."""
    from citeline import SearchRequest

    trees = {"server": REPO} | {f"baseline {tree.name}": tree.resolve() for tree in args.baseline or []}
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    texts = test_queries(args.queries)
    index = Index.open(index_path, embedder=_hash_embedder() if args.hash else None)
    try:
        for name, tree in trees.items():
            port = free_port()
            command = _serve_command(index_path, port, args.hash)
            # The access log (on, as by default) goes to a file, as a service's stderr goes to its journal; the
            # process starts in the work folder so that its current directory puts no citeline source first.
            log = (workdir / f"{name.replace(' ', '-')}.log").open("wb")
            tree_env = {**env, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
            servers[name] = (
                subprocess.Popen(command, env=tree_env, cwd=workdir, stderr=log),
                f"http://127.0.0.1:{port}",
            )
        limits = httpx.Limits(max_connections=args.concurrency)
        clients = {name: httpx.Client(base_url=url, timeout=120, limits=limits) for name, (_, url) in servers.items()}
        senders = concurrent.futures.ThreadPoolExecutor(args.concurrency)  # the requests a server has at once
        for server, url in servers.values():
            _wait_up(url, server)
        for text in texts[:10]:  # warm-up: the model, the caches
            index.search(SearchRequest.of(text))
            for client in clients.values():
                client.get("/search", params={"q": text})
        # "in process, each after a request": the same searches, each after a GET /health to this checkout's server
        # (not counted): a search interleaved with a round trip, as a server's searches always are.
        idle = {f"in process, each after {ms:g} ms idle": ms / 1000 for ms in args.idle or []}
        sides = ["in process", "in process, each after a request", *idle, *servers]
        cpu = dict.fromkeys(sides, 0.0)
        wall: dict[str, list[float]] = {side: [] for side in sides}
        answers: dict[str, list[tuple[int, list[tuple[str, str]], bytes]]] = {side: [] for side in servers}
        threads = {side: {"loop": 0.0, "others": 0.0} for side in servers}
        for number, start in enumerate(range(0, len(texts), 25)):
            batch = texts[start : start + 25]
            for side in sides[number % len(sides) :] + sides[: number % len(sides)]:
                if side == "in process":
                    began_cpu = time.process_time()
                    for text in batch:
                        began = time.perf_counter()
                        index.search(SearchRequest.of(text))
                        wall[side].append(time.perf_counter() - began)
                    cpu[side] += time.process_time() - began_cpu
                    continue
                if side == "in process, each after a request" or side in idle:
                    for text in batch:
                        if side in idle:
                            time.sleep(idle[side])
                        else:
                            clients["server"].get("/health")
                        began, began_cpu = time.perf_counter(), time.process_time()
                        index.search(SearchRequest.of(text))
                        cpu[side] += time.process_time() - began_cpu
                        wall[side].append(time.perf_counter() - began)
                    continue
                pid = servers[side][0].pid
                began_cpu, began_threads = cpu_clock(pid), thread_clocks(pid)
                for took, response in senders.map(functools.partial(fetch, clients[side]), batch):
                    wall[side].append(took)
                    headers = sorted((k, v) for k, v in response.headers.items() if k != "date")
                    answers[side].append((response.status_code, headers, response.content))
                cpu[side] += cpu_clock(pid) - began_cpu
                for thread, clock in thread_clocks(pid).items():
                    part = "loop" if thread == str(pid) else "others"
                    threads[side][part] += (clock - began_threads.get(thread, 0)) / 1e9
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(30)
    status = index.status()
    at_once = "one at a time" if args.concurrency == 1 else f"{args.concurrency} at a time"
    print(
        f"{status.documents} documents, {status.chunks} chunks, "
        f"{'hashed bag-of-words' if args.hash else 'the real model'}; "
        f"{len(texts)} SciFact test queries, GET /search?q= (hybrid, k=10, collapsed) {at_once}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    local = cpu["in process"] / len(texts)
    for side in sides:
        per = cpu[side] / len(texts)
        versus = "" if side == "in process" else f"; {per / local - 1:+.0%} against in process"
        if side in servers:  # and against the same searches paced as a server's are (after a round trip, idle)
            for paced in (other for other in sides[1:] if other not in servers):
                versus += f", {per / (cpu[paced] / len(texts)) - 1:+.0%} against {paced.removeprefix('in process, ')}"
        print(
            f"{side:<33} CPU {1000 * per:6.2f} ms a search{versus}; "
            f"wall p50 {1000 * statistics.median(wall[side]):6.2f} ms, p90 {1000 * percentile(wall[side], 0.9):6.2f} ms"
        )
        if side in threads:
            loop, others = (1000 * threads[side][part] / len(texts) for part in ("loop", "others"))
            print(f"{'':<33} by thread: event loop {loop:.2f} ms, the others (the search's) {others:.2f} ms")
    failed = [side for side in servers for status_code, _, _ in answers[side] if status_code != 200]
    for side in servers:
        if side != "server":
            differing = sum(a != b for a, b in zip(answers["server"], answers[side], strict=True))
            print(f"answers differing from the server's, {side} (status, headers but date, body): {differing}")
            failed += ["difference"] * differing
    if failed:
        raise SystemExit(1)


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


COMMANDS = {
    "latency": latency_main,
    "mcp": mcp_main,
    "serve": serve_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
