"""The hostile corpus (tests/_hostile.py) served by remote roots: every format's hostile files as web URLs (a local
server, tests/_web_server.py) and as objects of a real S3 server (SeaweedFS), ingested by the real CLI in a child
process whose peak RSS is measured. Each source stays within the per-source memory bound (no more than
``MEMORY_BOUND`` above the same run without the hostile files), each refusal names its URL or object and the limit,
and the ordinary documents beside them stay searchable. Over HTTP, the web's own attacks join them: a HEAD that
lies about the size before a chunked body, a gzip bomb, a redirect to an endless body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hostile import MEMORY_BOUND, NEIGHBOURS, RSS_SLACK, Case, cases, cli, measured_ingest, neighbours
from _web_server import MiB, Route, WebServer, endless, gzip_bomb

#: The web's own hostile answers, by path, and the refusal each must get.
WEB_ATTACKS = {
    "/web/lying-head.txt": "bytes read, above the",
    "/web/gzip-bomb.txt": "bytes read, above the",
    "/web/redirect.md": "bytes read, above the",
}


def _attacks(web: WebServer) -> None:
    text = {"Content-Type": "text/plain"}
    web.routes["/web/lying-head.txt"] = Route(200, text, head={"Content-Length": "100"}, body=endless())
    web.routes["/web/gzip-bomb.txt"] = Route(200, {**text, "Content-Encoding": "gzip"}, body=gzip_bomb(1024 * MiB))
    web.routes["/web/redirect.md"] = Route(302, {"Location": "/web/endless.md"}, body=b"")
    web.routes["/web/endless.md"] = Route(200, text, head={"Content-Length": "10"}, body=endless())


def _build(docs: Path, group: list[Case]) -> dict[str, tuple[str | None, list[str]]]:
    # Each case of ``group`` in a folder of its own under ``docs``: its refusal and the names it wrote.
    built = {}
    for case in group:
        (docs / case.name).mkdir(parents=True)
        built[case.name] = (case.refusal, case.build(docs / case.name))
    return built


def _check(run: Any, baseline: int, built: dict[str, tuple[str | None, list[str]]], index: Path) -> None:
    tail = run.output[-4000:]
    assert run.status == 0, tail  # partial, not failed: the rest of the run is committed
    assert run.peak - baseline <= MEMORY_BOUND + RSS_SLACK, (
        f"peak {run.peak >> 20} MiB, {(run.peak - baseline) >> 20} MiB above the run without these sources:\n{tail}"
    )
    for case_name, (refusal, names) in built.items():
        if refusal is None:
            continue
        for name in names:
            said = [line for line in run.output.splitlines() if f"{case_name}/{name}: " in line]
            assert len(said) == 1 and refusal in said[0], (case_name, said, tail)
    assert cli(index, "verify").status == 0
    for name, (_, word) in NEIGHBOURS.items():
        found = cli(index, "search", word, "--mode", "lexical", "--format", "json")
        assert found.status == 0 and name in found.output, found.output[-2000:]


@pytest.fixture
def web() -> Iterator[WebServer]:
    server = WebServer()
    yield server
    server.stop()


def _groups() -> list[list[Case]]:
    # Two runs, as the local corpus's (tests/index/test_hostile.py): the files that must be refused by name, then
    # the rest; each run's peak is held to the bound.
    servable = cases(remote=True)
    return [
        [case for case in servable if case.refusal is not None],
        [case for case in servable if case.refusal is None],
    ]


@pytest.mark.slow  # a minute or two: two measured runs of the corpus in a child, as the local corpus's
def test_hostile_corpus_over_http_stays_within_the_memory_bound(tmp_path: Path, web: WebServer) -> None:
    plain, docs, index = tmp_path / "plain", tmp_path / "docs", tmp_path / "index"
    neighbours(plain)
    ordinary = web.serve_folder(plain)
    first = measured_ingest(index, *ordinary)  # type: ignore[arg-type]
    assert first.status == 0, first.output
    _attacks(web)
    attacks = [web.base + path for path in WEB_ATTACKS]
    for number, group in enumerate(_groups()):
        built = _build(docs / str(number), group)
        urls = web.serve_folder(docs / str(number))
        run = measured_ingest(index, *ordinary, *urls, *attacks, "--allow-removals", timeout=600)  # type: ignore[arg-type]
        for path, refusal in WEB_ATTACKS.items() if attacks else ():
            said = [line for line in run.output.splitlines() if f"{web.base}{path}: " in line]
            assert len(said) == 1 and refusal in said[0], (path, said, run.output[-3000:])
        _check(run, first.peak, built, index)
        attacks = []  # the web's attacks join the first run only


@pytest.mark.slow
def test_hostile_corpus_over_s3_stays_within_the_memory_bound(tmp_path: Path, seaweed: Any) -> None:
    import uuid

    docs, index = tmp_path / "docs", tmp_path / "index"
    neighbours(docs / "plain")
    for number, group in enumerate([[], *_groups()]):
        # each run a prefix of its own: the ordinary documents, with one group of hostile files beside them
        prefix = f"hostile{uuid.uuid4().hex[:8]}"
        built = _build(docs / str(number), group)
        for folder in (docs / "plain", docs / str(number)):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    seaweed.upload(f"{prefix}/{path.relative_to(docs).as_posix()}", path)
        root = f"s3://{seaweed.bucket}/{prefix}"
        run = measured_ingest(index / str(number), root, *seaweed.option_pairs(), timeout=600)  # type: ignore[arg-type]
        if number == 0:
            first = run
            assert first.status == 0, first.output
            continue
        _check(run, first.peak, built, index / str(number))
