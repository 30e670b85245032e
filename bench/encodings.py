"""Encoding detection measured: the short texts of ``tests/_encodings.py`` (twelve languages, one to three
sentences) in every encoding that can hold them, decoded as citeline decodes a text file, and compared with the
sentence itself (the decoded text, not the codec's name).

    python bench/encodings.py [--compare] [--json]

Prints the share decoded exactly per encoding and per language, how many readings were flagged low confidence
(named in a run's log), every wrong reading, and the CPU cost of decoding: per short file, and per 1 MB file
(mostly ASCII with accented words, as a long document is). ``--compare`` also measures the detectors tried before
(docs/decisions/encoding-detection.md): charset-normalizer with Windows-1252 winning exact ties (citeline's rule
until then) and chardet alone, each behind the same byte-order-mark and UTF-8 steps. CI asserts the 99 % floor
(``tests/unit/test_encoding_accuracy.py``); this prints the table that docs/sources.md quotes. Run by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _encodings import ENCODINGS, TEXTS, Sample, samples

from citeline.errors import SourceError
from citeline.sources.document import SourceFile
from citeline.sources.encoding import decode, guesses

SOURCE = SourceFile("/docs", "/docs/short.txt", "short.txt")
#: A decoder: bytes to (text, low confidence).
Decoder = Callable[[bytes], tuple[str, bool]]


def citeline_decoder(data: bytes) -> tuple[str, bool]:
    """citeline's own decoding (``citeline.sources.encoding.decode``)."""
    with guesses() as noted:
        try:
            text = decode(SOURCE, data).text
        except SourceError as exc:
            return f"<{exc.reason}>", True
    return text, bool(noted)


def _unicode_first(data: bytes) -> str | None:
    # The steps every decoder shares: a byte-order mark, then UTF-8.
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def charset_normalizer_decoder(data: bytes) -> tuple[str, bool]:
    """charset-normalizer's best match, Windows-1252 winning exact ties (citeline's rule before this measure)."""
    import charset_normalizer

    text = _unicode_first(data)
    if text is not None:
        return text, False
    matches = charset_normalizer.from_bytes(data, cp_exclusion=["utf_16", "utf_16_be", "utf_16_le", "utf_7"])
    best = matches.best()
    if best is None:
        return "<none>", True
    tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    preferred = next((m for m in tied if "cp1252" in m.could_be_from_charset), None)
    return str(preferred or best), False


def chardet_decoder(data: bytes) -> tuple[str, bool]:
    """chardet 7's answer alone."""
    import chardet

    text = _unicode_first(data)
    if text is not None:
        return text, False
    result = chardet.detect(data, prefer_superset=True, compat_names=False)
    return (data.decode(result["encoding"]) if result["encoding"] else "<none>"), False


def measure(decoder: Decoder, items: list[Sample]) -> dict[str, object]:
    """Exact decodings per encoding and per language, low-confidence counts, the wrong readings, CPU per file."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    low: Counter[str] = Counter()
    wrong = []
    started = time.process_time()
    for sample in items:
        text, guessed = decoder(sample.data)
        for key in ("all", f"encoding {sample.encoding}", f"language {sample.language}"):
            total[key] += 1
            right[key] += text == sample.text
            low[key] += guessed
        if text != sample.text:
            wrong.append({"encoding": sample.encoding, "text": sample.text, "read": text, "low": guessed})
    cpu = time.process_time() - started
    return {
        "rows": {key: {"right": right[key], "total": total[key], "low": low[key]} for key in total},
        "wrong": wrong,
        "cpu_ms_per_file": 1000 * cpu / len(items),
    }


def large_file_cost(decoder: Decoder, encoding: str, repeat: int = 3) -> float:
    """CPU ms to decode a 1 MB file of English prose with a few accented words per line, in ``encoding``."""
    line = "The committee met on Tuesday and agreed the budget for the café and the crèche; nothing else changed.\n"
    data = (line * (1_000_000 // len(line))).encode(encoding)
    started = time.process_time()
    for _ in range(repeat):
        decoder(data)
    return 1000 * (time.process_time() - started) / repeat


def main() -> None:
    """Print the accuracy table (or JSON) of citeline's decoding, and of the earlier detectors with --compare."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true", help="also measure charset-normalizer and chardet alone")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    items = list(samples())
    decoders: dict[str, Decoder] = {"citeline": citeline_decoder}
    if args.compare:
        decoders |= {"charset-normalizer (before)": charset_normalizer_decoder, "chardet alone": chardet_decoder}
    results = {}
    for name, decoder in decoders.items():
        result = measure(decoder, items)
        result["cpu_ms_1mb"] = {enc: large_file_cost(decoder, enc) for enc in ("utf-8", "cp1252")}
        results[name] = result
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
        return
    texts = sum(len(t) for t in TEXTS.values())
    print(f"{texts} texts in {len(TEXTS)} languages, {len(items)} files ({', '.join(ENCODINGS)})\n")
    names = list(results)
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    keys = ["all"] + [f"encoding {e}" for e in ENCODINGS] + [f"language {language}" for language in TEXTS]
    for key in keys:
        cells = []
        for name in names:
            row = results[name]["rows"][key]  # type: ignore[index]
            cells.append(f"{row['right']}/{row['total']} ({100 * row['right'] / row['total']:.1f} %)")
        print(f"| {key} | " + " | ".join(cells) + " |")
    for name in names:
        result = results[name]
        flagged = result["rows"]["all"]["low"]  # type: ignore[index]
        print(
            f"\n{name}: {flagged} flagged low confidence; CPU {result['cpu_ms_per_file']:.2f} ms per short file, "
            f"{result['cpu_ms_1mb']['utf-8']:.1f} ms per 1 MB UTF-8 file, "  # type: ignore[index]
            f"{result['cpu_ms_1mb']['cp1252']:.1f} ms per 1 MB Windows-1252 file"  # type: ignore[index]
        )
        for miss in result["wrong"]:  # type: ignore[attr-defined]
            flag = "low" if miss["low"] else "confident"
            print(f"  wrong ({miss['encoding']}, {flag}): {miss['text']!r} -> {miss['read']!r}")


if __name__ == "__main__":
    main()
