"""Text files in any encoding: UTF-8 first, then a byte-order mark, then detection by charset-normalizer.

The decoded text is what citeline stores for the document, so every chunk offset is exact into it (not into the
file's bytes), and the encoding found is recorded as the document's ``encoding`` property (``citeline show``).

Detection is statistical: charset-normalizer decodes the bytes with each plausible code page and keeps those whose
result looks least like noise. A short text often fits several equally well (``caf\\xe9`` is "café" in Windows-1252
and "cafй" in Windows-1251, with the same score); among such ties Windows-1252 wins, as the commonest legacy
encoding (what Windows editors wrote, and what browsers read a page labelled Latin-1 as). Bytes no encoding fits are
refused with a one-line error saying how to fix the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from citeline.errors import SourceError
from citeline.sources.document import EmptySource, SourceFile

#: Byte-order marks that say the encoding outright (UTF-32 before UTF-16: its little-endian mark starts the same).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)

#: Among equally good detections, the encoding preferred (see the module docstring).
PREFERRED_LEGACY = "cp1252"
#: Never detected: UTF-16/32 and UTF-7 without a byte-order mark. charset-normalizer otherwise reads the four bytes
#: ``caf\xe9`` as two CJK characters in UTF-16-BE; a UTF-16 file without a mark has NUL bytes and is refused
#: as binary before detection.
_NOT_DETECTED = ["utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le", "utf_7"]


@dataclass(frozen=True)
class Decoded:
    """A file's text and the encoding it was read in (a Python codec name: ``utf-8``, ``cp1252``, ``utf-16``)."""

    text: str
    encoding: str


def is_blank(data: bytes) -> bool:
    """True for a file of nothing but ASCII whitespace (or nothing): skipped, never a document or a failure."""
    return not data.strip()


def decode(source: SourceFile, data: bytes) -> Decoded:
    """Decode ``data``: UTF-8 (a leading BOM dropped), a UTF-16/32 BOM, else the encoding charset-normalizer finds.

    Raises :class:`EmptySource` for text of only whitespace, and :class:`SourceError` for binary content (NUL bytes
    without a UTF-16/32 mark) or bytes that fit no text encoding.
    """
    decoded = _decode(source, data)
    if "\0" in decoded.text[:8192]:  # UTF-16 or UTF-32 text holding NUL characters: binary data with a mark
        raise SourceError(source.path, "looks like a binary file (contains NUL characters)")
    if not decoded.text.strip():
        raise EmptySource(source.path, "file is empty or only whitespace")
    return decoded


def _decode(source: SourceFile, data: bytes) -> Decoded:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return Decoded(data.decode(codec), codec)  # the codec reads the mark and drops it
            except UnicodeDecodeError as exc:
                raise SourceError(
                    source.path,
                    f"starts with a {codec.upper()} byte-order mark but is not valid {codec.upper()} "
                    f"at byte {exc.start} (re-save the file as UTF-8)",
                ) from exc
    if b"\0" in data[:8192]:
        raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
    try:
        return Decoded(data.decode("utf-8-sig"), "utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    import charset_normalizer  # only for files that are not UTF-8

    matches = charset_normalizer.from_bytes(data, cp_exclusion=_NOT_DETECTED)
    best = matches.best()
    if best is None:
        raise SourceError(
            source.path,
            f"not valid UTF-8 at byte {utf8_error.start}, and no other text encoding fits it "
            "(re-save the file as UTF-8)",
        ) from utf8_error
    # charset-normalizer lists encodings that decode these bytes alike once, under one name (``could_be_from``).
    tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    preferred = next((m for m in tied if PREFERRED_LEGACY in m.could_be_from_charset), None)
    if preferred is not None:
        return Decoded(str(preferred), PREFERRED_LEGACY)
    return Decoded(str(best), best.encoding)
