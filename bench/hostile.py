"""Peak memory of an ingest run per hostile kind: each kind of tests/_hostile.py alone beside two ordinary files,
against the same run without it (the real CLI in a child process, the HashEmbedder as its model).

    python bench/hostile.py [KIND ...] [--root local|http|s3]

prints one row per kind: the child's peak RSS, how far above the run without the file, seconds, exit status and
what the run said about the file. ``--root http`` serves each kind's files as web URLs (a local server in this
process, tests/_web_server.py) and adds the web's own attacks (a HEAD lying about the size before an endless chunked
body, a gzip bomb, a redirect to an endless body); ``--root s3`` puts them in a SeaweedFS server it starts
(tests/_object_store.py). The figures are in docs/reliability.md ("Hostile files", "Remote roots").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _hostile import MEMORY_BOUND, Case, Outcome, cases, measured_ingest, neighbours
from _object_store import SeaweedServer
from _web_server import MiB, Route, WebServer, endless, gzip_bomb


def said(outcome: Outcome, names: list[str]) -> str:
    """The first line of the run's output naming one of ``names``, shortened ("" if none)."""
    for line in outcome.output.splitlines():
        for name in names:
            if f"/{name}: " in line:
                return line.split(f"/{name}: ", 1)[1][:90]
    return ""


#: The web's own hostile answers (``--root http``): kind -> how to serve it.
WEB_KINDS = ("web-lying-head", "web-gzip-bomb", "web-redirect-to-endless")


def _web_attack(web: WebServer, kind: str) -> str:
    # Serve one of WEB_KINDS; the path it is served at.
    text = {"Content-Type": "text/plain"}
    if kind == "web-lying-head":
        web.routes["/attack.txt"] = Route(200, text, head={"Content-Length": "100"}, body=endless())
    elif kind == "web-gzip-bomb":
        web.routes["/attack.txt"] = Route(200, {**text, "Content-Encoding": "gzip"}, body=gzip_bomb(1024 * MiB))
    else:
        web.routes["/attack.txt"] = Route(302, {"Location": "/endless.txt"}, body=b"")
        web.routes["/endless.txt"] = Route(200, text, head={"Content-Length": "10"}, body=endless())
    return "/attack.txt"


class _Roots:
    """Where a folder's files are read from: the folder itself, web URLs, or objects of a SeaweedFS server."""

    def __init__(self, kind: str, work: Path) -> None:
        self.kind = kind
        self.web = WebServer() if kind == "http" else None
        self.store = SeaweedServer(work / "seaweedfs") if kind == "s3" else None

    def of(self, folder: Path) -> list[str]:
        """The roots (and storage options) that read ``folder``'s files."""
        if self.web is not None:
            self.web.routes.clear()
            return self.web.serve_folder(folder)
        if self.store is not None:
            prefix = folder.name
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    self.store.upload(f"{prefix}/{path.relative_to(folder).as_posix()}", path)
            return [f"s3://{self.store.bucket}/{prefix}", *self.store.option_pairs()]
        return [str(folder)]

    def close(self) -> None:
        """Stop the servers."""
        if self.web is not None:
            self.web.stop()
        if self.store is not None:
            self.store.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", help="kinds to run [default: all]")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    parser.add_argument(
        "--root", choices=("local", "http", "s3"), default="local", help="where the files are read from"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        roots = _Roots(args.root, work)
        try:
            _run(args, work, roots)
        finally:
            roots.close()


def _run(args: argparse.Namespace, work: Path, roots: _Roots) -> None:
    neighbours(work / "baseline")
    baseline = measured_ingest(work / "baseline-index", *roots.of(work / "baseline"))  # type: ignore[arg-type]
    print(f"baseline (two ordinary files, {args.root}): peak {baseline.peak >> 20} MiB, {baseline.seconds:.1f} s")
    print("| kind | peak RSS | above baseline | seconds | exit | what the run said |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    worst = 0
    kinds: list[tuple[str, Case | None]] = [
        (case.name, case) for case in cases(bench=True, remote=args.root != "local")
    ]
    if roots.web is not None:
        kinds += [(kind, None) for kind in WEB_KINDS]
    for name, case in kinds:
        if args.kinds and name not in args.kinds:
            continue
        folder = work / name
        neighbours(folder)
        names = case.build(folder) if case is not None else []
        where = roots.of(folder)
        if case is None and roots.web is not None:
            path = _web_attack(roots.web, name)
            where.append(roots.web.base + path)
            names = [path.lstrip("/")]
        try:
            run = measured_ingest(work / f"{name}-index", *where, timeout=args.timeout)  # type: ignore[arg-type]
        except AssertionError:
            print(f"| {name} | | | > {args.timeout:g} | killed | (timed out) |", flush=True)
            continue
        above = run.peak - baseline.peak
        worst = max(worst, above)
        print(
            f"| {name} | {run.peak >> 20} MiB | {above >> 20} MiB | {run.seconds:.1f} | {run.status} | "
            f"{said(run, names) or '(indexed or skipped)'} |",
            flush=True,
        )
    print(f"largest: {worst >> 20} MiB above the baseline (bound: {MEMORY_BOUND >> 20} MiB)")


if __name__ == "__main__":
    main()
