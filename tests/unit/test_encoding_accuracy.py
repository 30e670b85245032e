"""Encoding detection measured, not guessed: the short texts of tests/_encodings.py (twelve languages) written in
every encoding that can hold them, each decoded by ``citeline.sources.encoding.decode`` and compared with the
sentence (the decoded text, not the codec's name). ``python bench/ingest.py encodings`` prints the same per encoding and
per language."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from _encodings import ENCODINGS, TEXTS, samples, text_count

from citeline.errors import SourceError
from citeline.sources.document import SourceFile
from citeline.sources.encoding import Decoded, decode, guesses

#: The share of samples that must decode to exactly their sentence.
REQUIRED = 0.99

SOURCE = SourceFile("/docs", "/docs/short.txt", "short.txt")


def _decode(data: bytes) -> tuple[Decoded, bool]:
    with guesses() as noted:
        decoded = decode(SOURCE, data)
    return decoded, bool(noted)


def test_the_set_is_short_texts_in_many_languages_and_encodings() -> None:
    assert text_count() >= 200 and len(TEXTS) >= 8
    assert all(1 <= len(re.findall(r"[.!?…]+(?=\s|$)", text)) <= 3 for t in TEXTS.values() for text in t)
    by_encoding = Counter(sample.encoding for sample in samples())
    assert set(by_encoding) == set(ENCODINGS) and min(by_encoding.values()) >= 60
    for sample in samples():  # only where the encoding holds every character
        assert sample.data.decode(sample.encoding) == sample.text


def test_at_least_99_percent_of_short_texts_decode_exactly() -> None:
    wrong = []
    total = 0
    for sample in samples():
        total += 1
        decoded, low = _decode(sample.data)
        if decoded.text != sample.text:
            wrong.append((sample.language, sample.encoding, sample.text, decoded.text, decoded.encoding, low))
    assert (total - len(wrong)) / total >= REQUIRED, wrong
    # A wrong reading is never a confident one: each is named in the run's log.
    assert all(low for *_, low in wrong), wrong


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Naïve façade.", "cp1252"),  # read as cp1257 ("Naļve faēade") before
        ("El niño.", "cp1252"),  # read as cp1250 ("El nińo") before
        ("Le maïs pousse mal cette année à cause de la sécheresse.", "latin-1"),
        ("Déjà vu, again.", "cp1252"),
        ("A smörgåsbord of old maps covered the table.", "cp1252"),
        ("Příliš žluťoučký kůň úpěl ďábelské ódy.", "cp1250"),
        ("Съешь же ещё этих мягких французских булок, да выпей чаю.", "cp1251"),
    ],
)
def test_the_reported_short_files_decode_exactly(text: str, encoding: str) -> None:
    decoded, _ = _decode(text.encode(encoding))
    assert decoded.text == text


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        # found by the stateful test: read as Windows-1250 ("prčs", "seńora"), whose letters Czech nearly holds
        (
            "L'été dernier, nous avons visité une église près du château, où la cérémonie était très émouvante. "
            "La señora García compró café, azúcar y piñones en el mercado de la plaza mayor del pueblo.",
            "cp1252",
        ),
        ("Die Brücke über den Fluß. Le pont près de la forêt, où l'on pêche.", "cp1252"),
        ("A casa é grande e o pão está quente. Il caffè è già pronto, però è amaro.", "cp1252"),
        ("Dzień dobry, jak się masz? Dobrý den, jak se máte, přítel?", "cp1250"),
        ("Добрий день, як справи? Добрый вечер, всё хорошо.", "cp1251"),
    ],
)
def test_a_text_in_two_languages_decodes_exactly(text: str, encoding: str) -> None:
    """A file written in two languages of one code page (a bilingual notice, a quote in another language): no one
    alphabet holds its letters, and a wrong code page's reading may come closer to one than the right one does."""
    decoded, _ = _decode(text.encode(encoding))
    assert decoded.text == text


def test_a_plain_reading_is_confident_and_a_close_call_is_not() -> None:
    assert _decode("Die Straße ist nach dem Regen nass.".encode("cp1252"))[1] is False
    decoded, low = _decode("Holnap esni fog az eső.".encode("cp1250"))  # "esõ" in cp1252 is as plausible
    assert low is True and decoded.encoding in ("cp1252", "cp1250")
    assert _decode("Grüße".encode())[1] is False  # UTF-8 is never a guess


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Καλημέρα, τι κάνεις; Όλα καλά.", "cp1253"),
        ("İstanbul’da güzel bir gün geçirdik.", "cp1254"),
        ("Labdien, kā jums klājas?", "cp1257"),
        ("Привет, как дела?", "koi8-r"),
        ("日本語のテキストです。これはテストです。", "shift_jis"),
        ("中文文本，这是一个测试。", "gbk"),
        ("한국어 텍스트입니다. 테스트입니다.", "euc-kr"),
    ],
)
def test_other_legacy_encodings_decode_too(text: str, encoding: str) -> None:
    assert _decode(text.encode(encoding))[0].text == text


def test_accents_far_into_a_large_file_are_read() -> None:
    text = "The river rose over the bridge.\n" * 5000 + "Zażółć gęślą jaźń: pociąg do Krakowa odjeżdża.\n"
    decoded, _ = _decode(text.encode("cp1250"))  # the first 150 KB are ASCII: every code page reads them alike
    assert decoded.text == text and decoded.encoding == "cp1250"


def test_bytes_no_encoding_fits_are_refused() -> None:
    with pytest.raises(SourceError, match="no other text encoding fits it"):
        decode(SOURCE, b"caf\xe9\x01\x02\x03\x04\x05\x06\x07\x08")
