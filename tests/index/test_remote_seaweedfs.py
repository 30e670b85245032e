"""Remote roots against a real S3 server: SeaweedFS (``weed server -s3``, tests/_object_store.py's SeaweedServer,
one per test session). A 20 MB JSONL export, past the size fetched in one GET, is streamed through the same line
reader as a local file (on fsspec's buffered file ``readline(size)`` raised TypeError, reported as "the store
stopped answering", and the whole run failed on every re-run); an object changed, deleted, refused credentials."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.errors import SourceError
from citeline.sources import remote

pytest.importorskip("s3fs")


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def _export(path: Path, megabytes: int) -> int:
    # A JSONL export of about ``megabytes`` MB: records of about 2 KB, as a help-desk export has them: a short
    # text and the ticket's fields (its log the bulk of it), so the test's time goes to reading, not embedding.
    records = 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < megabytes * 1_000_000:
            record = {
                "id": f"t{records}",
                "title": f"Ticket {records}",
                "text": f"Ticket {records} about the pump at station {records % 97}: the seal was replaced.",
                "station": records % 97,
                "log": f"opened {records}; " + "status checked, no change; " * 70,
            }
            out.write(json.dumps(record) + "\n")
            records += 1
    return records


def test_a_20_mb_jsonl_object_is_streamed_and_indexed_with_its_neighbours(tmp_path: Path, seaweed: Any) -> None:
    prefix = _prefix()
    export = tmp_path / "export.jsonl"
    records = _export(export, 20)
    assert export.stat().st_size > remote.BLOCK_BYTES  # past one GET: streamed in blocks
    seaweed.upload(f"{prefix}/export.jsonl", export)
    seaweed.put(f"{prefix}/notes/pump.md", "# Pump\n\nThe pump at the north station failed twice in March.\n")
    seaweed.put(f"{prefix}/notes/wells.txt", "The survey counted forty wells along the old road.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    started = time.monotonic()
    run = index.ingest([f"s3://{seaweed.bucket}/{prefix}"], storage_options=seaweed.options())
    assert (run.status, run.added, run.failed) == ("succeeded", records + 2, 0), index.runs(1)[0].errors
    assert time.monotonic() - started < 60
    again = index.ingest([f"s3://{seaweed.bucket}/{prefix}"], storage_options=seaweed.options())
    assert (again.unchanged, again.added, again.updated) == (records + 2, 0, 0)
    # one record changed: the object is read again, the record alone re-embedded
    lines = export.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[records // 2] = json.dumps({"id": f"t{records // 2}", "text": "The pump was replaced by a windmill."}) + "\n"
    export.write_text("".join(lines), encoding="utf-8")
    seaweed.upload(f"{prefix}/export.jsonl", export)
    changed = index.ingest([f"s3://{seaweed.bucket}/{prefix}"], storage_options=seaweed.options())
    assert (changed.updated, changed.chunks_embedded) == (1, 1)
    assert "windmill" in index.search("windmill pump", k=1)[0].text


def test_changed_and_deleted_objects_and_refused_credentials(tmp_path: Path, seaweed: Any) -> None:
    prefix = _prefix()
    root = f"s3://{seaweed.bucket}/{prefix}"
    seaweed.put(f"{prefix}/a.md", "# A\n\nThe ferry crossed at dawn.\n")
    seaweed.put(f"{prefix}/b.md", "# B\n\nThe granary was rebuilt in stone.\n")
    seaweed.put(f"{prefix}/c.md", "# C\n\nThe lighthouse keeper logged the storm.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    assert index.ingest([root], storage_options=seaweed.options()).added == 3
    seaweed.put(f"{prefix}/a.md", "# A\n\nThe ferry crossed at noon.\n")
    seaweed.delete(f"{prefix}/c.md")
    run = index.ingest([root], storage_options=seaweed.options())
    assert (run.updated, run.removed, run.unchanged) == (1, 1, 1)
    with pytest.raises(SourceError, match=r"SignatureDoesNotMatch|access denied|cannot list"):
        index.ingest([root], storage_options=seaweed.options(secret="wrong"))
    assert len(index.documents()) == 2
