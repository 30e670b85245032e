"""Hostile files, made on the fly, and a harness that ingests them with the real CLI in a child process.

The generator writes each hostile kind into a folder (nothing big is committed: a 400 MiB zip bomb is a 1 MB file
written in a second or two). :data:`KINDS` maps a kind's name to its builder; each builder returns the names it
wrote and the line the run must print about them (a refusal naming the limit, or None when the file may be
indexed or skipped as long as memory and time stay bounded). :data:`FORMAT_CASES` gives every registered format
(``@parser`` suffix) its own hostile cases, so a new format without any fails the contract test.

Run as a script it is the child of a measured run:

``python tests/_hostile.py ingest INDEX DOCS [CLI OPTIONS...]``
    runs ``citeline ingest --index INDEX DOCS ...`` in this process (the real CLI, click and all) with the
    HashEmbedder standing in for the model and an address-space limit (:data:`ADDRESS_LIMIT`) so that a bomb
    cannot eat the machine. :func:`measured_ingest` starts it and returns its exit status, output and peak RSS
    (the child's VmHWM, see :func:`_wait4`).

``python tests/_hostile.py cli INDEX COMMAND [ARGS...]`` runs ``citeline COMMAND --index INDEX ARGS`` likewise
(:func:`cli`: ``verify``, ``search``).
"""

from __future__ import annotations

import atexit
import io
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for _path in (TESTS, TESTS.parent):  # the child may be a Python where citeline is not installed (pytest's own)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from citeline.sources import MAX_SOURCE_CHARS  # noqa: E402

MiB = 1024 * 1024
#: The address space a measured child may map: a bomb that gets through fails with MemoryError instead of eating
#: the shared machine (the parent sees it as a failed run and a peak near this).
ADDRESS_LIMIT = 6 * 1024 * MiB
#: The issue's bound: no single source may push ingest this far above the same run without it.
MEMORY_BOUND = 512 * MiB
#: What comparing two peak RSS figures of two processes can err by: each is rounded to pages and holds what the
#: allocator kept of freed memory. A source over the bound by more than this is a failure.
RSS_SLACK = 16 * MiB

#: Ordinary documents beside the hostile ones: each must stay searchable by its own word.
NEIGHBOURS = {
    "harbour.md": ("# Harbour\n\nThe harbour master counted forty salt barges before the winter storms.\n", "barges"),
    "orchard.txt": ("Orchard\n\nThe orchard keeper grafted pear scions onto quince rootstock in March.\n", "rootstock"),
}


def neighbours(folder: Path) -> None:
    """The ordinary documents (:data:`NEIGHBOURS`) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (text, _) in NEIGHBOURS.items():
        (folder / name).write_text(text)


# ---------------------------------------------------------------- .docx: zip bombs and entity bombs

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_DOCUMENT_HEAD = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="{_W}"><w:body>'
_DOCUMENT_TAIL = "<w:sectPr/></w:body></w:document>"


def _docx_parts() -> dict[str, bytes]:
    # The parts of a small valid .docx by python-docx, to replace word/document.xml in.
    import docx

    out = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("A small valid document.")
    document.save(out)
    with zipfile.ZipFile(out) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def docx_with_body(path: Path, body: Callable[[Callable[[bytes], object]], object], head: str = _DOCUMENT_HEAD) -> None:
    """A .docx whose word/document.xml is ``head``, what ``body(write)`` writes, and the closing tags; streamed, so
    a part of gigabytes costs no memory to write."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in _docx_parts().items():
            if name != "word/document.xml":
                archive.writestr(name, data)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(head.encode())
            body(part.write)
            part.write(_DOCUMENT_TAIL.encode())


def tiny_paragraphs(inflated: int) -> Callable[[Callable[[bytes], object]], None]:
    """A body of ``inflated`` bytes of one-letter paragraphs: the most XML elements per byte python-docx reads."""
    block = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>" * 30_000

    def write(out: Callable[[bytes], object]) -> None:
        for _ in range(max(1, inflated // len(block))):
            out(block)

    return write


def lie_about_sizes(path: Path, member: str, claimed: int) -> None:
    """Rewrite the zip's local and central headers (and zip64 extras) of ``member`` to claim it inflates to
    ``claimed`` bytes: what a zip bomb does to pass a check that trusts headers."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    name = member.encode()
    for signature, size_at, name_len_at, extra_len_at, name_at in ((b"PK\x03\x04", 22, 26, 28, 30),
                                                                  (b"PK\x01\x02", 24, 28, 30, 46)):  # fmt: skip
        start = 0
        while (at := data.find(signature, start)) >= 0:
            start = at + 4
            (name_len,) = struct.unpack_from("<H", data, at + name_len_at)
            (extra_len,) = struct.unpack_from("<H", data, at + extra_len_at)
            if bytes(data[at + name_at : at + name_at + name_len]) != name:
                continue
            if struct.unpack_from("<I", data, at + size_at)[0] != 0xFFFFFFFF:
                struct.pack_into("<I", data, at + size_at, claimed)
            extra = at + name_at + name_len
            end = extra + extra_len
            while extra + 4 <= end:  # the zip64 extra field holds the real sizes when the header says 0xFFFFFFFF
                tag, length = struct.unpack_from("<HH", data, extra)
                if tag == 1 and length >= 8:
                    struct.pack_into("<Q", data, extra + 4, claimed)
                extra += 4 + length
    assert info.file_size != claimed
    path.write_bytes(bytes(data))


def docx_media_bomb(path: Path, inflated: int = 300 * MiB) -> None:
    """A .docx with an "image" part of ``inflated`` zero bytes (a few hundred KB deflated): past the inflation
    limit while its XML is small."""
    docx_with_body(path, lambda out: out(b"<w:p><w:r><w:t>an image below</w:t></w:r></w:p>"))
    with (
        zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("word/media/image1.png", "w", force_zip64=True) as part,
    ):
        for _ in range(inflated // MiB):
            part.write(bytes(MiB))


def billion_laughs(levels: int = 10, root: str = "lol") -> str:
    """An internal DTD whose entity ``&lolN;`` expands to 10**levels copies of a word."""
    lines = [f'<!ENTITY lol0 "{root}">']
    lines += [f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10}">' for n in range(1, levels)]
    return "[\n" + "\n".join(lines) + "\n]"


def docx_entity_bomb(path: Path) -> None:
    """A .docx whose document.xml declares a billion-laughs DTD and uses it in a paragraph."""
    head = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<!DOCTYPE w:document {billion_laughs()}>\n<w:document xmlns:w="{_W}"><w:body>'
    )
    docx_with_body(path, lambda out: out(b"<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>"), head)


def docx_deep(path: Path, depth: int = 200_000) -> None:
    """A .docx whose body nests ``depth`` elements in one another."""

    def write(out: Callable[[bytes], object]) -> None:
        out(b"<w:p><w:r><w:t>deep</w:t></w:r></w:p>")
        out(b"<w:sdt><w:sdtContent>" * depth)
        out(b"</w:sdtContent></w:sdt>" * depth)

    docx_with_body(path, write)


# ---------------------------------------------------------------- PDFs


def _pdf(objects: dict[int, bytes], root: int = 1) -> bytes:
    # A PDF of these objects with a correct cross-reference table.
    out = bytearray(b"%PDF-1.7\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    xref = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    free = b"0000000000 65535 f \n"
    out += b"".join(b"%010d 00000 n \n" % offsets[n] if n in offsets else free for n in range(1, size))
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, xref)
    return bytes(out)


def pdf_flate_bomb(pages: int = 40, inflated: int = 70 * MiB) -> bytes:
    """Pages whose content streams each inflate to ``inflated`` bytes of text-showing operators (one stream
    shared by every page: a few hundred KB of file)."""
    import zlib

    ops = b"BT /F1 12 Tf 72 720 Td " + b"(many words of text) Tj " * (inflated // 24) + b"ET"
    stream = zlib.compress(ops, 9)
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (5 + i) for i in range(pages)), pages),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        4: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    }
    for i in range(pages):
        objects[5 + i] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents 4 0 R >>"
        )
    return _pdf(objects)


def pdf_reference_loop() -> bytes:
    """A page tree whose Kids point back at themselves, and objects referring to each other in a ring."""
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R /Outlines 4 0 R >>",
        2: b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
        3: b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 3 0 R] /Count 1 >>",
        4: b"<< /First 5 0 R >>",
        5: b"<< /Next 6 0 R /Title (a) >>",
        6: b"<< /Next 5 0 R /Title (b) >>",
    }
    return _pdf(objects)


def pdf_deep_nesting(depth: int = 100_000) -> bytes:
    """An object of arrays nested ``depth`` deep, as a page's resources."""
    return _pdf({
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: b"<< /Type /Page /Parent 2 0 R /Resources " + b"[" * depth + b"]" * depth + b" >>",
    })  # fmt: skip


def pdf_huge_length() -> bytes:
    """A content stream declaring a length of terabytes."""
    return _pdf({
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
        4: b"<< /Length 999999999999 >>\nstream\nBT (x) Tj ET\nendstream",
    })  # fmt: skip


# ---------------------------------------------------------------- the kinds


@dataclass(frozen=True)
class Case:
    """One hostile kind: ``build(folder)`` writes its file(s) and returns their names; ``refusal`` is a fragment
    the run's output must hold naming the file (None: the file may be indexed, skipped or failed, as long as the
    run's memory and time stay bounded and the rest is committed)."""

    name: str
    suffix: str
    build: Callable[[Path], list[str]]
    refusal: str | None = None
    #: built in the benchmark only (too slow or too big for every CI run)
    bench_only: bool = False
    #: a thing only a local folder holds (a fifo, a socket, a link): not served by a remote root
    local_only: bool = False


def _writes(name: str, data: Callable[[], bytes | str]) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        value = data()
        if isinstance(value, str):
            (folder / name).write_text(value, encoding="utf-8")
        else:
            (folder / name).write_bytes(value)
        return [name]

    return build


def _docx(name: str, make: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        make(folder / name)
        return [name]

    return build


def _lying(path: Path) -> None:
    docx_with_body(path, tiny_paragraphs(400 * MiB))
    lie_about_sizes(path, "word/document.xml", 64 * 1024)


def _fifo(folder: Path) -> list[str]:
    os.mkfifo(folder / "pipe.txt")
    os.mkfifo(folder / "pipe.md")
    return ["pipe.txt", "pipe.md"]


def _socket(folder: Path) -> list[str]:
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(folder / "socket.txt"))
    except OSError:  # a path too long for a socket name: nothing to test here
        return []
    finally:
        server.close()
    return ["socket.txt"]


def _links(folder: Path) -> list[str]:
    (folder / "loop-a.txt").symlink_to(folder / "loop-b.txt")
    (folder / "loop-b.txt").symlink_to(folder / "loop-a.txt")
    (folder / "zero.txt").symlink_to("/dev/zero")
    (folder / "urandom.md").symlink_to("/dev/urandom")
    (folder / "self").symlink_to(folder)
    os.mkfifo(folder / "target-fifo")
    (folder / "fifo-link.txt").symlink_to(folder / "target-fifo")
    return ["loop-a.txt", "loop-b.txt", "zero.txt", "urandom.md", "self", "fifo-link.txt"]


def _bad_lines(folder: Path) -> list[str]:
    good = b"A line of ordinary words about the granary ledger.\n"
    (folder / "bad-lines.txt").write_bytes((good + b"\xff\xfe\x80 bad \xc3\x28\n") * 20_000)
    record = json.dumps({"_id": "r", "text": "granary ledger"}).encode()
    lines = [record.replace(b'"r"', b'"r%d"' % n) if n % 2 else b'{"_id": "b%d", "text": "\xff\xfe"}' % n
             for n in range(20_000)]  # fmt: skip
    (folder / "bad-lines.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return ["bad-lines.txt", "bad-lines.jsonl"]


def _huge(size: int, unit: str, sep: str = " ") -> Callable[[], str]:
    return lambda: "Enormous\n\n" + (unit + sep) * (size // (len(unit) + len(sep)))


_BIG = 60 * MiB  # under the 64 MiB file limit: the largest text file a run reads

KINDS: list[Case] = [
    Case(
        "docx-zip-bomb-honest",
        ".docx",
        _docx("bomb.docx", lambda p: docx_with_body(p, tiny_paragraphs(400 * MiB))),
        "limit for one source",
        bench_only=True,
    ),
    Case(
        "docx-zip-bomb-tiny-paragraphs",
        ".docx",
        _docx("paragraphs.docx", lambda p: docx_with_body(p, tiny_paragraphs(150 * MiB))),
        "limit for one source",
    ),
    Case("docx-zip-bomb-lying-headers", ".docx", _docx("lying.docx", _lying), "corrupt or unreadable"),
    Case("docx-zip-bomb-media", ".docx", _docx("media.docx", docx_media_bomb), "limit for one source"),
    Case("docx-entity-bomb", ".docx", _docx("laughs.docx", docx_entity_bomb), "declares a DTD"),
    # The costliest .docx the limits admit: just under MAX_XML_ELEMENTS, every paragraph styled.
    Case(
        "docx-at-the-element-limit",
        ".docx",
        _docx(
            "styled.docx",
            lambda p: docx_with_body(
                p,
                lambda out: out(
                    b'<w:p><w:pPr><w:pStyle w:val="BodyText"/></w:pPr><w:r><w:t>a styled word</w:t></w:r></w:p>'
                    * 95_000
                ),
            ),
        ),
        bench_only=True,
    ),
    Case("docx-deep-nesting", ".docx", _docx("deep.docx", docx_deep)),
    Case(
        "html-entity-bomb",
        ".html",
        _writes(
            "laughs.html",
            lambda: (
                f'<?xml version="1.0"?>\n<!DOCTYPE html {billion_laughs()}>\n'
                '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head>'
                "<body><article><p>&lol9; words</p></article></body></html>"
            ),
        ),
    ),
    Case(
        "xhtml-entity-bomb-htm",
        ".htm",
        _writes(
            "laughs.htm",
            lambda: f"<!DOCTYPE html {billion_laughs(root='&#x26;lol0;')}><html><body><p>&lol9;</p></body></html>",
        ),
    ),
    Case(
        "html-deep-nesting",
        ".html",
        _writes(
            "deep.html",
            lambda: "<html><body>" + "<div>" * 200_000 + "deep text" + "</div>" * 200_000 + "</body></html>",
        ),
    ),
    Case(
        "html-largest-page",  # just under the element limit: the linear visible-text path, not trafilatura
        ".html",
        _writes(
            "largest.html",
            lambda: "<html><body><article>" + "<p>short words here</p>" * 240_000 + "</article></body></html>",
        ),
        bench_only=True,  # +263 MiB alone, as the costliest .docx and texts the limits admit
    ),
    Case(
        "html-huge-page",
        ".html",
        _writes(
            "huge.html",
            lambda: "<html><body><article>" + "<p>short words here</p>" * (_BIG // 24) + "</article></body></html>",
        ),
        refusal="elements, the limit for one source",
    ),
    Case(
        "jsonl-deep-nesting",
        ".jsonl",
        _writes(
            "deep.jsonl",
            lambda: (
                '{"_id": "a", "text": "fine record"}\n'
                + '{"_id": "d", "x": '
                + '{"a": ' * 300_000
                + "1"
                + "}" * 300_000
                + "}\n"
                + "[" * 1_000_000
                + "]" * 1_000_000
                + "\n"
            ),
        ),
    ),
    Case(
        "jsonl-huge-value",
        ".jsonl",
        _writes(
            "huge.jsonl",
            lambda: (
                json.dumps({"_id": "big", "text": _huge(_BIG, "word")()})
                + "\n"
                + json.dumps({"_id": "small", "text": "a small record after the big one"})
                + "\n"
            ),
        ),
        "limit for one record",
    ),
    # JSONL files are streamed and have no size limit: a line of 200 MiB is skipped unread.
    Case(
        "jsonl-200-mib-line",
        ".jsonl",
        _writes("line.jsonl", lambda: json.dumps({"_id": "big", "text": _huge(200 * MiB, "word")()}) + "\n"),
        "limit for one record",
        bench_only=True,
    ),
    Case(
        "markdown-deep-lists-quotes",
        ".md",
        _writes(
            "deep.md",
            lambda: "# Deep\n\n" + "".join("  " * i + "- item\n" for i in range(5_000)) + ">" * 100_000 + " quoted\n",
        ),
    ),
    Case(
        "markdown-yaml-aliases",
        ".markdown",
        _writes(
            "aliases.markdown",
            lambda: (
                "---\na: &a [x,x,x,x,x,x,x,x,x]\n"
                + "".join(
                    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
                    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
                )
                + "---\n# Body\n\ntext\n"
            ),
        ),
        "YAML aliases",
    ),
    Case(
        "rst-deep-nesting",
        ".rst",
        _writes(
            "deep.rst",
            lambda: (
                "Deep\n====\n\n"
                + "".join("  " * i + "- item\n\n" for i in range(300))
                + "\n"
                + "".join(" " * i + "quote\n\n" for i in range(0, 3000, 3))
            ),
        ),
    ),
    # The issue-50 file: every line indented one space more than the last (4.5 MB), which docutils copied once
    # per level (1.57 GiB) before its stack ran out; refused by the pre-scan before docutils runs.
    Case(
        "rst-deep-indentation",
        ".rst",
        _writes("stairs.rst", lambda: "Stairs\n======\n\n" + "".join(" " * i + "x\n\n" for i in range(3000))),
        "indentation nested deeper than 64 levels",
    ),
    # Thirty levels around 200,000 short lines: 619 MiB in docutils; past MAX_RST_LINE_LEVELS.
    Case(
        "rst-nested-blocks-wide",
        ".rst",
        _writes(
            "wide.rst",
            lambda: "Wide\n====\n\n" + "".join(" " * i + "x\n\n" for i in range(30)) + (" " * 30 + "y\n") * 200_000,
        ),
        "lines counted once for each level",
    ),
    # Just inside both rst bounds: indexed, within the memory bound.
    Case(
        "rst-at-the-nesting-limit",
        ".rst",
        _writes(
            "limit.rst",
            lambda: "Limit\n=====\n\n" + "".join(" " * i + "x\n\n" for i in range(60)) + (" " * 60 + "y\n") * 15_500,
        ),
    ),
    # Metadata the door refuses (each reader walks metadata recursively; a table this wide broke the commit).
    Case(
        "markdown-deep-front-matter",
        ".md",
        _writes("deep.md", lambda: "---\na: " + "[" * 500 + "]" * 500 + "\n---\n\n# Deep\n\nA body.\n"),
        "nested deeper than 32 levels",
    ),
    Case(
        "jsonl-deep-metadata",
        ".jsonl",
        _writes(
            "meta.jsonl",
            lambda: (
                '{"_id": "m", "text": "a record", "tree": '
                + '{"x": ' * 500
                + "1"
                + "}" * 500
                + "}\n"
                + '{"_id": "n", "text": "the record after it"}\n'
            ),
        ),
        "nested deeper than 32 levels",
    ),
    Case(
        "csv-wide-table",
        ".csv",
        _writes(
            "wide.csv",
            lambda: ",".join(f"c{i}" for i in range(60_000)) + "\n" + ",".join(f"v{i}" for i in range(60_000)) + "\n",
        ),
        "more than the 1,000 one document may hold",
    ),
    Case(
        "rst-many-substitutions",
        ".rst",
        _writes(
            "subs.rst",
            lambda: "Subs\n====\n\n" + ".. |a| replace:: " + "word " * 1000 + "\n\n" + "|a| " * 20_000 + "\n",
        ),
    ),
    Case(
        "rst-unknown-directives-at-the-limit",  # a Sphinx changelog's version notes, as many as the text limit holds
        ".rst",
        _writes(
            "notes.rst",
            lambda: "".join(
                f".. versionchanged:: {n}\n   Changed thing number {n} with :func:`frob`.\n\n" for n in range(52_000)
            ),
        ),
        bench_only=True,
    ),
    Case("txt-one-enormous-line", ".txt", _writes("line.txt", _huge(_BIG, "word")), "limit for one source"),
    Case(
        "txt-one-enormous-token", ".txt", _writes("token.txt", lambda: "Token\n\n" + "a" * _BIG), "limit for one source"
    ),
    Case(
        "csv-huge-cell",
        ".csv",
        _writes(
            "huge.csv", lambda: 'id,text\nbig,"' + _huge(_BIG, "cell")() + '"\nsmall,a small row after the big one\n'
        ),
        "the limit for one record",
    ),
    Case(
        "tsv-huge-cell",
        ".tsv",
        _writes(
            "huge.tsv",
            lambda: "id\ttext\nbig\t" + "cell " * (20 * MiB // 5) + "\nsmall\ta small row after the big one\n",
        ),
        "the limit for one record",
    ),
    Case("bad-bytes-per-line", ".txt", _bad_lines),
    # Texts just under the per-source limit, which are indexed: what the largest source a run accepts costs, for
    # prose and for the densest text (one-letter words: the most words, tokens and chunks a character).
    Case("txt-prose-at-the-limit", ".txt", _writes("prose.txt", _huge(MAX_SOURCE_CHARS - 99, "word")), bench_only=True),
    Case("txt-dense-at-the-limit", ".txt", _writes("dense.txt", _huge(MAX_SOURCE_CHARS - 99, "a")), bench_only=True),
    Case("pdf-flate-bomb", ".pdf", _writes("bomb.pdf", pdf_flate_bomb)),
    Case("pdf-reference-loop", ".pdf", _writes("loop.pdf", pdf_reference_loop)),
    Case("pdf-deep-nesting", ".pdf", _writes("deep.pdf", pdf_deep_nesting)),
    Case("pdf-huge-length", ".pdf", _writes("length.pdf", pdf_huge_length)),
    Case("fifo", ".txt", _fifo, local_only=True),
    Case("socket", ".txt", _socket, local_only=True),
    Case("links-loops-devices", ".txt", _links, local_only=True),
]


def cases(*, bench: bool = False, remote: bool = False) -> list[Case]:
    """The hostile kinds a test run builds (``bench``: also the big and slow ones; ``remote``: those a remote root
    can serve)."""
    return [case for case in KINDS if (bench or not case.bench_only) and not (remote and case.local_only)]


# ---------------------------------------------------------------- the measured child


@dataclass
class Outcome:
    """A child run: exit status, its output (stdout and stderr), peak RSS in bytes, seconds."""

    status: int
    output: str
    peak: int
    seconds: float


def _python() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve())]


def measured_ingest(index: Path, docs: Path, *options: str, timeout: float = 600) -> Outcome:
    """``citeline ingest --index INDEX DOCS OPTIONS`` in a child, measured (the HashEmbedder as its model)."""
    return _wait4([*_python(), "ingest", str(index), str(docs), *options], timeout)


def _wait4(command: list[str], timeout: float) -> Outcome:
    # The child's own peak: its VmHWM, which it writes at exit (_report_peak). Not ru_maxrss: Linux carries the
    # parent's high-water mark into a child across fork and exec, so a parent that built a 60 MiB file would
    # count in its child's peak. A child that dies without reporting falls back to ru_maxrss (an upper bound).
    started = time.monotonic()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"hostile-{os.getpid()}-{time.monotonic_ns()}"
    log, peak = scratch.with_suffix(".log"), scratch.with_suffix(".peak")
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HOSTILE_PEAK": str(peak)}
        )
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                os.wait4(process.pid, 0)
                text = log.read_text(errors="replace")
                log.unlink()
                peak.unlink(missing_ok=True)
                raise AssertionError(f"{command[2:]} took over {timeout} s:\n{text[-2000:]}")
            time.sleep(0.05)
    process.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    log.unlink()
    reported = int(peak.read_text()) if peak.exists() else usage.ru_maxrss * 1024
    peak.unlink(missing_ok=True)
    return Outcome(process.returncode, text, reported, time.monotonic() - started)


def _report_peak() -> None:
    # The child's peak RSS (VmHWM of /proc/self/status, in bytes) to the file its parent named.
    target = os.environ.get("HOSTILE_PEAK")
    if not target:
        return
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            Path(target).write_text(str(int(line.split()[1]) * 1024))


def cli(index: Path, *args: str, timeout: float = 300) -> Outcome:
    """``citeline COMMAND --index INDEX ARGS`` in a child (HashEmbedder), measured."""
    return _wait4([*_python(), "cli", str(index), *args], timeout)


def _child(argv: list[str]) -> None:
    # The child side: limit the address space, stand the HashEmbedder in for the model, run the real CLI.
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    atexit.register(_report_peak)
    from conftest import HashEmbedder

    import citeline.index
    from citeline.cli.main import main

    citeline.index.SentenceTransformerEmbedder = lambda *a, **k: HashEmbedder()  # type: ignore[assignment,misc]
    command, index, *rest = argv
    if command == "ingest":
        if not Path(index).exists():
            citeline.index.Index.create(index, embedder=HashEmbedder())
        docs, *options = rest
        rest = ["ingest", docs, "--no-progress", *options]
    sys.argv = ["citeline", rest[0], "--index", index, *rest[1:]]
    main()


if __name__ == "__main__":
    _child(sys.argv[1:])
