"""Does one result per document put more documents in the top k? Distinct documents in the top 5, flat and grouped.

    python bench/grouping.py --index INDEX --queries QUERIES.jsonl [--qrels QRELS.tsv] [--k 5] [--mode hybrid]

``QUERIES.jsonl`` holds ``{"_id": ..., "text": ...}`` lines (BEIR's ``queries.jsonl``); with ``--qrels`` (BEIR's
``qrels/test.tsv``) only the judged queries run, and the share of queries with a relevant document in the top k is
reported too. Per setting (``group`` off: the API's default; on: the CLI's and the page's) it prints the mean number
of distinct documents (files, or records) among the top k results, the share of answers with k distinct ones, the
passages listed under the grouped results, and the mean wall time of a search. The index is read as ``Index.search``
reads it, with the default relevance floor. Run by hand; the figures are in docs/quality.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from citeline import Index


def _queries(path: Path, qrels: Path | None) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    queries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    relevant: dict[str, set[str]] = {}
    if qrels is not None:
        with qrels.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if int(row["score"]) > 0:
                    relevant.setdefault(row["query-id"], set()).add(row["corpus-id"])
        queries = [query for query in queries if str(query["_id"]) in relevant]
    return [(str(query["_id"]), query["text"]) for query in queries], relevant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, type=Path)
    parser.add_argument("--queries", required=True, type=Path)
    parser.add_argument("--qrels", type=Path, default=None)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    index = Index.open(args.index, repair=False)
    queries, relevant = _queries(args.queries, args.qrels)
    index.search(queries[0][1], args.k, mode=args.mode)  # the model loaded before timing
    print(f"{len(queries)} queries, k={args.k}, mode {args.mode}, index {args.index}")
    for group in (False, True):
        distinct, full, more, hit, seconds = [], 0, [], 0, []
        for query_id, text in queries:
            started = time.perf_counter()
            results = index.search(text, args.k, mode=args.mode, group=group)
            seconds.append(time.perf_counter() - started)
            # A record's document is its record (JSONL: the corpus id), a file's its path.
            names = [result.record_id or result.source_path for result in results]
            distinct.append(len(set(names)))
            full += len(set(names)) == args.k
            more.append(sum(len(result.more_passages) for result in results))
            hit += bool(relevant.get(query_id, set()) & set(names))
        line = (
            f"group={'on ' if group else 'off'}: distinct documents in the top {args.k}: "
            f"{statistics.mean(distinct):.2f} (all {args.k} distinct: {full}/{len(queries)}); passages listed under "
            f"them: {statistics.mean(more):.2f}; {1000 * statistics.mean(seconds):.1f} ms a search"
        )
        if relevant:
            line += f"; a relevant document in the top {args.k}: {hit}/{len(queries)}"
        print(line)


if __name__ == "__main__":
    main()
