"""Issue 18's held-out case, approximated on SciFact: a collection of short abstracts (one or two chunks each).

    python bench/experiments/short_docs.py --beir ../shared/benchmarks/scifact --chunked /tmp/q18-scifact \\
        --out /tmp/short-beir --index /tmp/short-torch [--backend onnx-int8] > bench/results/scifact-short-docs.txt

One of the maintainers' held-out collections is short technical abstracts of under two chunks each, where dense
mode once scored below plain whole-document encoding and hybrid beat the plain RRF row by only +0.008. This script
keeps the SciFact documents that an index of the whole corpus (``--chunked``) split into at most two chunks (1,904
of 5,183), keeps the qrels that point at them (train and test), writes that as a BEIR directory, and scores every
mode with its baseline rows on both splits (``citeline.eval.beir.evaluate_beir``; a given ``--index`` is reused),
then hybrid with the feedback stage off, so its share shows.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import duckdb

from citeline.eval.beir import evaluate_beir
from citeline.query.plan import DEFAULT_FUSION


def write_subset(beir: Path, chunked: Path, out: Path, most: int = 2) -> int:
    """Write the BEIR directory of ``beir``'s documents of at most ``most`` chunks; returns their count."""
    connection = duckdb.connect(str(chunked / "meta.duckdb"), read_only=True)
    counts = connection.execute(
        "SELECT d.source_id, count(*) FROM chunks c JOIN documents d USING (doc_id) GROUP BY 1"
    ).fetchall()
    connection.close()
    keep = {source_id.split("#", 1)[1] for source_id, n in counts if n <= most}
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (beir / "corpus.jsonl").open() as source, (out / "corpus.jsonl").open("w") as target:
        target.writelines(line for line in source if json.loads(line)["_id"] in keep)
    (out / "queries.jsonl").write_text((beir / "queries.jsonl").read_text())
    for split in ("train", "test"):
        header, *pairs = (beir / "qrels" / f"{split}.tsv").read_text().splitlines()
        kept = [pair for pair in pairs if pair.split("\t")[1] in keep]
        (out / "qrels" / f"{split}.tsv").write_text("\n".join([header, *kept]) + "\n")
    return len(keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--chunked", type=Path, required=True, help="an index of the whole corpus (chunk counts)")
    parser.add_argument("--out", type=Path, required=True, help="where the subset's BEIR directory is written")
    parser.add_argument("--index", type=Path, required=True, help="the subset's index (created, or reused)")
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    documents = write_subset(args.beir, args.chunked, args.out)
    print(f"# {documents} SciFact documents of at most 2 chunks, index {args.index}")
    print(f"# {'split':5s} {'mode':28s} nDCG@10  Recall@100")
    for split in ("test", "train"):
        report = evaluate_beir(args.out, index_path=args.index, mode="all", split=split, backend=args.backend)
        for result in report.results:
            print(f"  {split:5s} {result.mode:28s} {result.ndcg_at_10:.4f}   {result.recall_at_100:.4f}")
        off = replace(DEFAULT_FUSION, feedback=0.0)
        report = evaluate_beir(args.out, index_path=args.index, mode="hybrid", split=split, baseline=False, fusion=off)
        result = report.results[0]
        print(f"  {split:5s} {'hybrid, feedback stage off':28s} {result.ndcg_at_10:.4f}   {result.recall_at_100:.4f}")
    print(f"# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
