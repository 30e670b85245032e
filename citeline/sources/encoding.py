"""Text files in any encoding: a byte-order mark, then UTF-8, then the run's ``--encoding`` or detection.

The decoded text is what citeline stores for the document, so every chunk offset is exact into it (not into the
file's bytes), and the encoding found is recorded as the document's ``encoding`` property (``citeline show``).

Detection (bytes with no mark that are not UTF-8) decodes them with each legacy code page of :data:`CANDIDATES` and
scores each result by how implausible it is as text (:func:`implausibility`): characters prose never holds
(controls, spacing accents such as ``ˆ``, private-use characters), a symbol glued to a letter (``£odzi``) or
punctuation inside a word (``Za¿ó³``), a word mixing scripts (``Dйjа``) or with a capital inside it (KOI8-R read as
Windows-1251), a word of only accented Latin letters (``Ïðèâåò``: Cyrillic read as Windows-1252), and letters no one
language's alphabet holds together (``naďve`` next to ``ç``). The least implausible reading wins; between readings
equally plausible (``El ni\xf1o``: "niño" in Windows-1252, "nińo" in Windows-1250) chardet's language models decide,
Windows-1252 weighted ahead as the commonest legacy encoding. When no reading is flawless, chardet's own answer over
every encoding it knows competes too (Shift JIS, GBK, EUC-KR read as a code page are full of flaws). A large file is
judged on a sample: its start and the stretches around its bytes above 127. Measured on short texts in twelve
languages (tests/_encodings.py; ``python bench/ingest.py encodings``): docs/sources.md#encodings-and-empty-files.
A reading that was a close call is *low confidence* (:attr:`Decoded.confident`): the run names the file in its log
with the encoding chosen.

A run's ``encoding`` option (``--encoding cp1250``, carried by each :class:`SourceFile`) replaces detection: a
byte-order mark and valid UTF-8 still win (neither is a guess), and bytes not valid in the named encoding fail the
file with the byte offset. Bytes no encoding fits are refused with a one-line error saying how to fix the file.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import itertools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

from citeline.errors import SettingsError, SourceError
from citeline.sources.document import EmptySource, SourceFile

#: Byte-order marks that say the encoding outright (UTF-32 before UTF-16: its little-endian mark starts the same).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)

#: Among equally plausible readings, the encoding weighted ahead (see the module docstring) ...
PREFERRED_LEGACY = "cp1252"
#: ... by this factor on chardet's confidence.
_PREFERENCE = 1.5
#: The legacy code pages detection tries, in order of preference: Western, Central European and Cyrillic Windows
#: code pages, then Greek, Turkish, Baltic and KOI8-R. Latin-1 is not one: it reads bytes 0x80-0x9F as control
#: characters, and every other byte as Windows-1252 does.
CANDIDATES = ("cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1257", "koi8-r")
#: Never detected: UTF-16/32 and UTF-7 without a byte-order mark (a UTF-16 file without a mark has NUL bytes and
#: is refused as binary before detection).
_NOT_DETECTED = ["utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "utf-32-le", "utf-7"]
#: Detection reads at most this much of a file (its start, and stretches around the bytes above 127 further in):
#: enough words to tell, at a bounded cost for a large file (the reading chosen must still decode the whole file).
_SAMPLE_BYTES = 64 * 1024
#: chardet's language models read this much of the sample (their cost grows with it; their answer soon stops
#: changing).
_CHARDET_BYTES = 16 * 1024
#: Between equally plausible readings, chardet's preference counts as clear at this ratio of confidences.
_CLEAR_LEAD = 2.0
#: A control character other than whitespace: no text holds one, whatever the reading.
_REFUSED = 1000


@dataclass(frozen=True)
class Decoded:
    """A file's text and the encoding it was read in (a Python codec name: ``utf-8``, ``cp1252``, ``utf-16``);
    ``confident`` is False for a detection that was a close call (the run's log names the file)."""

    text: str
    encoding: str
    confident: bool = True


def read_as(files: list[SourceFile], encoding: str | None) -> list[SourceFile]:
    """``files`` to be read in ``encoding`` (a run's ``--encoding``; None: detect each file's)."""
    return files if encoding is None else [replace(source, encoding=encoding) for source in files]


def is_blank(data: bytes) -> bool:
    """True for a file of nothing but ASCII whitespace (or nothing): skipped, never a document or a failure."""
    return not data.strip()


def codec_name(name: str) -> str:
    """The codec ``name`` stands for, by its Python name (``Latin-1`` -> ``iso8859-1``, ``CP1250`` -> ``cp1250``);
    a name Python does not know, or a codec that is not a text encoding, is a :class:`SettingsError`."""
    try:
        info = codecs.lookup(name)
    except (LookupError, TypeError, ValueError):
        raise SettingsError(f"unknown encoding {name!r} (a Python codec name: cp1252, cp1250, latin-1, ...)") from None
    if not getattr(info, "_is_text_encoding", True):
        raise SettingsError(f"{name!r} is not a text encoding")
    return info.name


#: Where :func:`decode` notes its low-confidence readings while :func:`guesses` collects them.
_GUESSES: contextvars.ContextVar[list[SourceError] | None] = contextvars.ContextVar("citeline_guesses", default=None)


@contextlib.contextmanager
def guesses() -> Iterator[list[SourceError]]:
    """Collect, while the block runs (one file's parse), a line for each file :func:`decode` read with low
    confidence: ``encoding guessed as cp1252 (low confidence; pass --encoding to set it)``."""
    found: list[SourceError] = []
    token = _GUESSES.set(found)
    try:
        yield found
    finally:
        _GUESSES.reset(token)


def decode(source: SourceFile, data: bytes) -> Decoded:
    """Decode ``data``: a byte-order mark, UTF-8 (a leading UTF-8 mark dropped), the run's encoding
    (``source.encoding``), else the encoding detection finds (see the module docstring).

    Raises :class:`EmptySource` for text of only whitespace, and :class:`SourceError` for binary content (NUL bytes
    without a UTF-16/32 mark), bytes that fit no text encoding, or bytes not valid in the run's encoding.
    """
    decoded = _decode(source, data)
    if "\0" in decoded.text[:8192]:  # UTF-16 or UTF-32 text holding NUL characters: binary data with a mark
        raise SourceError(source.path, "looks like a binary file (contains NUL characters)")
    if not decoded.text.strip():
        raise EmptySource(source.path, "file is empty or only whitespace")
    noted = _GUESSES.get()
    if not decoded.confident and noted is not None:
        noted.append(
            SourceError(
                source.path, f"encoding guessed as {decoded.encoding} (low confidence; pass --encoding to set it)"
            )
        )
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
    if b"\0" in data[:8192]:  # binary, or UTF-16/32 without a mark: only the run's encoding may say which
        if source.encoding is None:
            raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
        return _decode_as(source, data, source.encoding)
    try:
        return Decoded(data.decode("utf-8-sig"), "utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    if source.encoding is not None:
        return _decode_as(source, data, source.encoding)
    decoded = detect(data)
    if decoded is None:
        raise SourceError(
            source.path,
            f"not valid UTF-8 at byte {utf8_error.start}, and no other text encoding fits it "
            "(re-save the file as UTF-8, or pass --encoding)",
        ) from utf8_error
    return decoded


def _decode_as(source: SourceFile, data: bytes, encoding: str) -> Decoded:
    # The run's encoding (--encoding), instead of detection.
    try:
        return Decoded(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            source.path, f"not valid {encoding} at byte {exc.start} (--encoding {encoding}): {exc.reason}"
        ) from exc


def detect(data: bytes) -> Decoded | None:
    """The most plausible reading of ``data`` (bytes that are not UTF-8) in a legacy encoding, or None when no
    text encoding fits (see the module docstring)."""
    sample = _sample(data)
    readings: dict[str, tuple[float, str]] = {}  # decoded sample -> (implausibility, first encoding reading it so)
    for encoding in CANDIDATES:
        try:
            text = sample.decode(encoding)
        except UnicodeDecodeError:  # a byte the code page leaves undefined
            continue
        if text not in readings:
            readings[text] = (implausibility(text), encoding)
    ranked = sorted(readings.values(), key=lambda reading: (reading[0], CANDIDATES.index(reading[1])))
    if not ranked or ranked[0][0] > 0:  # no flawless reading: chardet's own answer (a multi-byte encoding?) too
        other = _chardet(data, sample)
        if other is not None and (not ranked or other[0] < ranked[0][0]):
            return Decoded(data.decode(other[1]), other[1], False)
    if not ranked or ranked[0][0] >= _REFUSED:
        return None
    best, encoding = ranked[0]
    tied = [name for score, name in ranked if score == best]
    # A close call: the reading has flaws of its own, or another is about as plausible and chardet's language
    # models do not clearly prefer one.
    confident = best == 0 and (len(ranked) == 1 or ranked[1][0] > best + 1)
    if len(tied) > 1:
        encoding, confident = _likeliest(sample, tied)
        confident = confident and best == 0
    for name in [encoding] + [name for _, name in ranked if name != encoding]:
        with contextlib.suppress(UnicodeDecodeError):  # the whole file, past the sample, must decode too
            return Decoded(data.decode(name), name, confident)
        confident = False
    return None


def _sample(data: bytes) -> bytes:
    # The bytes detection reads: the file's start, then (a large file) stretches around the bytes above 127 of the
    # rest, so that accented words far into a mostly ASCII file are read too; at most _SAMPLE_BYTES in all.
    head = data[: _SAMPLE_BYTES // 2]
    if len(data) <= _SAMPLE_BYTES // 2:
        return head
    rest, budget = [], _SAMPLE_BYTES // 2
    for match in _AROUND_FOREIGN.finditer(data, len(head)):
        rest.append(match.group())
        budget -= len(rest[-1]) + 1
        if budget <= 0:
            break
    return b"\n".join([head, *rest])


def _likeliest(sample: bytes, encodings: list[str]) -> tuple[str, bool]:
    # Between equally plausible readings: chardet's language models, Windows-1252 weighted ahead; and whether the
    # winner led clearly.
    import chardet

    scores = {name: 0.0 for name in encodings}
    # chardet's answer when nothing fits is Windows-1252, and it warns (a UserWarning line on the user's terminal)
    # when that is not among the encodings allowed: allowed always, scored only when a candidate.
    allowed = [*encodings, PREFERRED_LEGACY] if PREFERRED_LEGACY not in encodings else encodings
    for result in chardet.detect_all(sample[:_CHARDET_BYTES], include_encodings=allowed, compat_names=False):
        name = codecs.lookup(result["encoding"]).name if result["encoding"] else None
        if name in scores:
            scores[name] = max(scores[name], result["confidence"] * (_PREFERENCE if name == PREFERRED_LEGACY else 1))
    ranked = sorted(encodings, key=lambda name: (scores[name], -encodings.index(name)), reverse=True)
    return ranked[0], scores[ranked[0]] >= _CLEAR_LEAD * scores[ranked[1]]


def _chardet(data: bytes, sample: bytes) -> tuple[float, str] | None:
    # chardet's answer over every encoding it knows (the multi-byte ones: Shift JIS, GBK, EUC-KR), with how
    # implausible its reading of the sample is; None when it has none, or its reading does not decode the file.
    import chardet

    result = chardet.detect(sample, prefer_superset=True, compat_names=False, exclude_encodings=_NOT_DETECTED)
    if result["encoding"] is None:
        return None
    try:
        name = codecs.lookup(result["encoding"]).name
        data.decode(name)
    except (LookupError, UnicodeDecodeError):
        return None
    return implausibility(sample.decode(name, "ignore")), name  # a character cut at a stretch's edge dropped


# ---------------------------------------------------------------- how implausible a reading is

_ASCII = frozenset(string.ascii_lowercase)


def _letters(extra: str, rare: str = "") -> frozenset[str]:
    return frozenset(_ASCII - set(rare)) | frozenset(extra)


#: The letters of each language's alphabet (lower case): its Latin letters less those used only in foreign words,
#: and its own accented letters. A reading whose letters no one alphabet holds (``ç`` with ``ď``) is implausible.
ALPHABETS = {
    "English": _letters(""),
    "French": _letters("àâæçéèêëîïôœùûüÿ"),
    "Spanish": _letters("áéíñóúü"),
    "Portuguese": _letters("áàâãçéêíóôõú"),
    "Italian": _letters("àèéìíîòóùú", "jkwxy"),
    "German": _letters("äöüß"),
    "Dutch": _letters("éëïóöüèáà"),
    "Catalan": _letters("àçèéíïòóúü"),
    "Swedish": _letters("åäö"),
    "Danish/Norwegian": _letters("æøå"),
    "Finnish": _letters("äöåšž"),
    "Icelandic": _letters("áðéíóúýþæö", "cqwz"),
    "Polish": _letters("ąćęłńóśźż", "qvx"),
    "Czech": _letters("áčďéěíňóřšťúůýž"),
    "Slovak": _letters("áäčďéíĺľňóôŕšťúýž"),
    "Hungarian": _letters("áéíóöőúüű"),
    "Romanian": _letters("ăâîșşțţ"),
    "Croatian/Slovene": _letters("čćđšž", "qwxy"),
    "Turkish": _letters("çğıöşüâî", "qwx"),
    "Lithuanian": _letters("ąčęėįšųūž", "qwx"),
    "Latvian": _letters("āčēģīķļņšūž", "qwxy"),
    "Estonian": _letters("äõöüšž", "cqwxy"),
    "Albanian": _letters("çë", "w"),
    "Russian": frozenset("абвгдеёжзийклмнопрстуфхцчшщъыьэюя"),
    "Ukrainian": frozenset("абвгґдеєжзиіїйклмнопрстуфхцчшщьюя"),
    "Belarusian": frozenset("абвгдеёжзійклмнопрстуўфхцчшыьэюя"),
    "Bulgarian": frozenset("абвгдежзийклмнопрстуфхцчшщъьюя"),
    "Serbian": frozenset("абвгдђежзијклљмнњопрстћуфхцчџш"),
    "Macedonian": frozenset("абвгдѓежзѕијклљмнњопрстќуфхцчџш"),
    "Greek": frozenset("αβγδεζηθικλμνξοπρστυφχψωάέήίόύώϊϋΐΰς"),
}
_ALPHABETS = tuple(ALPHABETS.values())
#: What reading a text as two languages costs (the points of one accented letter outside the alphabet): at 1, the
#: wrong readings of one-language texts came close enough to the right ones that twice as many files were flagged
#: low confidence (tests/_encodings.py, bench/ingest.py encodings).
_SECOND_LANGUAGE = 2
#: Two languages' letters together, for a text written in both: pairs of one script (Latin alphabets hold the
#: ASCII letters, the Cyrillic and Greek ones none).
_PAIRS = tuple(
    first | second for first, second in itertools.combinations(_ALPHABETS, 2) if ("a" in first) == ("a" in second)
)
#: Words (runs of letters); only those holding a character that is not ASCII differ between readings.
_WORDS = re.compile(r"[^\W\d_]+")
_ASCII_BYTES = bytes(range(128))
#: A byte above 127 with up to 64 bytes either side (a word or two of context), from the first such byte.
_AROUND_FOREIGN = re.compile(rb"[\x00-\x7f]{0,64}[\x80-\xff][\x00-\xff]{0,64}")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
#: Characters no reading of text holds: controls other than whitespace.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
#: What may touch a letter on either side, inside a word too: apostrophes, hyphens, the Catalan middle dot, and
#: the degree sign (``25°C``). Other punctuation may touch a letter on one side (``¿Dónde``, ``“Don’t``).
_MAY_TOUCH_LETTERS = frozenset("’‘-‐·°")


#: Scripts one language writes together: Japanese mixes kana and kanji within a word.
_SCRIPT_FAMILY = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HALFWIDTH": "CJK", "IDEOGRAPHIC": "CJK"}
#: The scripts whose letters :data:`ALPHABETS` covers.
_ALPHABETIC = ("LATIN", "CYRILLIC", "GREEK")


def _script(character: str) -> str:
    script = unicodedata.name(character, "?").split(" ", 1)[0]
    return _SCRIPT_FAMILY.get(script, script)


def implausibility(text: str) -> float:
    """How unlike real text ``text`` (one reading of a file's bytes) is: 0 for nothing odd, a point or more for
    each oddity (see the module docstring); :data:`_REFUSED` or more for a control character."""
    if _CONTROLS.search(text):
        return _REFUSED
    score = 0.0
    for match in _NON_ASCII.finditer(text):
        at, character = match.start(), match.group()
        category = unicodedata.category(character)
        if category in ("Lm", "Sk", "Co", "Cn"):  # spacing accents (ˆ ˜ ´), private use, unassigned
            score += 3
        elif not category.startswith(("L", "Z")) and character not in _MAY_TOUCH_LETTERS:
            before = at > 0 and text[at - 1].isalpha()
            after = at + 1 < len(text) and text[at + 1].isalpha()
            if before and after:  # inside a word: no symbol, digit or punctuation but apostrophes and hyphens
                score += 3
            elif (before or after) and (category[0] == "S" or category == "No"):  # glued to one: a symbol, ¹
                score += 2
    words = Counter(_WORDS.findall(text))  # each distinct word once (a long file)
    for word, count in ((word, count) for word, count in words.items() if not word.isascii()):
        flaws = 4 if len({_script(letter) for letter in word}) > 1 else 0
        # a capital after a small letter (KOI8-R read as Windows-1251, or the reverse); Greek's word-final sigma
        # inside a word (Cyrillic read as Windows-1253)
        flaws += 2 * sum(1 for a, b in itertools.pairwise(word) if (a.islower() and b.isupper()) or a == "ς")
        if len(word) >= 3 and not any(letter < "\x80" for letter in word) and _script(word[0]) == "LATIN":
            flaws += 2
        score += flaws * count
    # Letters outside every one alphabet: two points an accented one, one an ASCII one (a loanword's ``w``, or
    # English beside the language of the accents). A text may be written in two languages (French and Spanish
    # in one cp1252 file): the letters outside two alphabets cost the same, plus _SECOND_LANGUAGE points, so a
    # one-language reading still wins a near tie. Found by the stateful test: one alphabet alone read a French and
    # Spanish Windows-1252 file as Windows-1250 (``prčs``, ``seńora``), whose letters Czech nearly holds.
    letters = {letter for letter in set(text.lower()) if letter.isalpha() and _script(letter) in _ALPHABETIC}
    if any(letter >= "\x80" for letter in letters):
        alone = min(_outside(letters, alphabet) for alphabet in _ALPHABETS)
        if alone > _SECOND_LANGUAGE:  # only then can two languages read it better
            alone = min(alone, min(_outside(letters, pair) for pair in _PAIRS) + _SECOND_LANGUAGE)
        score += alone
    return score


def _outside(letters: set[str], alphabet: frozenset[str]) -> int:
    # Points for the letters ``alphabet`` does not hold: two an accented one, one an ASCII one.
    return sum(1 if letter.isascii() else 2 for letter in letters - alphabet)
