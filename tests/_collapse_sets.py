"""Collapse precision's generated test sets: templated records, syndicated copies, one text in several formats.

Shared by tests/unit/test_collapse_frames.py, tests/index/test_collapse_precision.py and
bench/collapse.py precision (which reports false and missed merges).

- **Templated records**: records made from one sentence frame (a catalogue, a log, a form), each with its own
  year, building, place, event, authority and delay, and a title line ``Record N``. No two are the same passage.
- **Syndicated copies**: each seed article (seeds/, original text) as another outlet prints it: American
  spelling, re-punctuated, curly quotes, contractions, a few words dropped or added, another casing of the dateline.
- **Formats**: each seed article rendered as an MkDocs-like HTML page (Python-Markdown, with ``¶`` permalinks, a
  navigation bar, a sidebar and a footer), as a reStructuredText source, and that source rendered by docutils into
  a Sphinx-like page (``headerlink`` anchors, a sidebar).
"""

from __future__ import annotations

import html
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[1] / "seeds"

YEARS = list(range(1901, 1990))
BUILDINGS = [
    "hospital",
    "school",
    "library",
    "granary",
    "chapel",
    "brewery",
    "tannery",
    "warehouse",
    "bakery",
    "foundry",
    "mill",
    "theatre",
]
PLACES = ["harbour", "station", "market", "bridge", "quarry", "cathedral", "barracks", "orchard", "canal", "ferry"]
EVENTS = ["collapsed", "burned", "flooded", "closed", "reopened"]
BODIES = ["council", "guild", "parish", "militia", "railway", "company"]
ACTIONS = ["rebuilt it", "demolished it", "sold the site", "fenced the ruins", "opened an inquiry"]
UNITS = ["weeks", "months", "years"]

#: The frame: a title line, the answering sentence, and a sentence whose middle is the same in every record.
FRAME = (
    "In {year} the {building} near the {place} {event}. Witnesses recall the sirens sounding across the whole "
    "district for most of that night, and the {body} {action} within {n} {unit}."
)


@dataclass(frozen=True)
class Record:
    """One templated record: its id, title line, body and the sentence that answers a question about it."""

    id: str
    title: str
    body: str
    answer: str

    @property
    def text(self) -> str:
        """The record's text as citeline stores it: the title line, a blank line, the body."""
        return f"{self.title}\n\n{self.body}"


def templated_records(count: int = 60, seed: int = 42) -> list[Record]:
    """``count`` records of :data:`FRAME`, every one with its own slots (no two alike)."""
    rng = random.Random(seed)
    seen: set[tuple[object, ...]] = set()
    out: list[Record] = []
    while len(out) < count:
        slots = {
            "year": rng.choice(YEARS),
            "building": rng.choice(BUILDINGS),
            "place": rng.choice(PLACES),
            "event": rng.choice(EVENTS),
            "body": rng.choice(BODIES),
            "action": rng.choice(ACTIONS),
            "n": rng.randint(2, 11),
            "unit": rng.choice(UNITS),
        }
        key = tuple(slots.values())
        if key in seen:
            continue
        seen.add(key)
        body = FRAME.format(**slots)
        number = 1900 + len(out) * 7 % 100 + 1
        out.append(Record(f"rec{number}", f"Record {number}", body, body.split(". ")[0] + "."))
    return out


def write_records(folder: Path, records: list[Record]) -> Path:
    """The records as one JSON Lines file (``id``, ``title``, ``text``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    lines = [json.dumps({"id": r.id, "title": r.title, "text": r.body}) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------- the seed articles and their copies


def seed_articles() -> dict[str, str]:
    """Each seed article's Markdown (front matter, if any, left out), by file stem."""
    out = {}
    for path in sorted(SEEDS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("---\n"):
            text = text[text.index("\n---", 3) + 4 :].lstrip("\n")
        out[path.stem] = text
    return out


#: British spellings of the seeds and the American ones a syndicating outlet prints.
SPELLING = {
    "neighbours": "neighbors",
    "harbour": "harbor",
    "favour": "favor",
    "metre": "meter",
    "metres": "meters",
    "centre": "center",
    "defence": "defense",
    "organised": "organized",
    "colour": "color",
    "travelled": "traveled",
    "grey": "gray",
    "labour": "labor",
    "programme": "program",
    "recognised": "recognized",
}
#: Words an editor drops, and words an editor adds after a verb.
DROPPABLE = ["also", "now", "still", "only", "just", "already", "even"]


def syndicated(text: str, seed: int = 0) -> str:
    """``text`` as another outlet prints it: spelling, punctuation, quote marks, casing and a few words changed."""
    rng = random.Random(seed)
    text = re.sub(r"^\*A citeline seed document.*\n+", "", text, flags=re.MULTILINE)
    text = re.sub(r"^# (.*)$", lambda m: m.group(1).upper(), text, flags=re.MULTILINE)  # the headline in capitals
    for british, american in SPELLING.items():
        text = re.sub(rf"\b{british}\b", american, text)
        text = re.sub(rf"\b{british.capitalize()}\b", american.capitalize(), text)
    text = re.sub(r'"([^"]*)"', "“\\1”", text)
    text = text.replace(" did not ", " didn't ").replace(" would not ", " wouldn't ").replace(" — ", " -- ")
    paragraphs = text.split("\n\n")
    edited = []
    for paragraph in paragraphs:
        words = paragraph.split(" ")
        if len(words) > 20:
            # One comma dropped, one adverb dropped if there is one, "reportedly" added after one "was".
            commas = [i for i, w in enumerate(words) if w.endswith(",") and not w.endswith('",')]
            if commas:
                at = rng.choice(commas)
                words[at] = words[at][:-1]
            drop = [i for i, w in enumerate(words) if w in DROPPABLE]
            if drop:
                del words[rng.choice(drop)]
            was = [i for i, w in enumerate(words) if w == "was"]
            if was:
                words.insert(rng.choice(was) + 1, "reportedly")
        edited.append(" ".join(words))
    return "\n\n".join(edited)


# ---------------------------------------------------------------- one text in several formats

MKDOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - Salmor Gazette docs</title>
<link rel="stylesheet" href="assets/main.css"></head>
<body>
<header class="md-header"><a href="index.html" class="md-header__button md-logo">Salmor Gazette</a>
<div class="md-search">Search</div></header>
<nav class="md-tabs"><ul><li><a href="index.html">Home</a></li><li><a href="news.html">News archive</a></li>
<li><a href="about.html">About the project</a></li></ul></nav>
<div class="md-container"><main class="md-main">
<div class="md-sidebar md-sidebar--primary"><nav class="md-nav md-nav--primary" aria-label="Navigation">
<ul class="md-nav__list"><li class="md-nav__item"><a class="md-nav__link" href="levee.html">The levee</a></li>
<li class="md-nav__item"><a class="md-nav__link" href="garrison.html">The garrison</a></li>
<li class="md-nav__item"><a class="md-nav__link" href="letters.html">Letters home</a></li></ul></nav></div>
<div class="md-content"><article class="md-content__inner md-typeset">
{body}
</article></div></main>
<footer class="md-footer"><nav class="md-footer__inner" aria-label="Footer">
<a href="previous.html" class="md-footer__link--prev">Previous: The garrison</a>
<a href="next.html" class="md-footer__link--next">Next: Letters home</a></nav>
<div class="md-copyright">Made with Material for MkDocs</div></footer></div>
</body></html>
"""

SPHINX_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title} &#8212; Salmor Gazette 1.0 documentation</title></head>
<body>
<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3>
<ul><li class="right"><a href="genindex.html" title="General Index">index</a></li>
<li class="right"><a href="next.html" title="Letters home">next</a> |</li>
<li class="nav-item nav-item-0"><a href="index.html">Salmor Gazette 1.0 documentation</a> &#187;</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div class="body" role="main">
{body}
</div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
<h3><a href="index.html">Table of Contents</a></h3><ul><li><a class="reference internal" href="#">{title}</a></li></ul>
<h4>Previous topic</h4><p class="topless"><a href="garrison.html" title="previous chapter">The garrison</a></p>
<div role="search"><h3 id="searchlabel">Quick search</h3><form class="search" action="search.html" method="get">
<input type="text" name="q" aria-labelledby="searchlabel" /><input type="submit" value="Go" /></form></div>
</div></div></div>
<div class="footer" role="contentinfo">&#169; Copyright 2026, the Salmor Gazette. Created using Sphinx 7.2.6.</div>
</body></html>
"""

#: What a page's markup artefacts would leave in its text if extraction kept them.
ARTEFACTS = ["¶", "Permalink", "Permanent link", "Quick search", "Navigation", "Previous topic", "Made with Material"]


def markdown_page(text: str) -> str:
    """``text`` (Markdown) rendered as MkDocs does: Python-Markdown with ``toc`` permalinks, in a page with nav."""
    import markdown  # type: ignore[import-untyped]

    body = markdown.markdown(text, extensions=["toc"], extension_configs={"toc": {"permalink": True}})
    title = text.splitlines()[0].lstrip("# ").strip()
    return MKDOCS_PAGE.format(title=html.escape(title), body=body)


def to_rst(text: str) -> str:
    """The seed article's Markdown as reStructuredText (a title, an emphasised line, paragraphs, sections)."""
    out = []
    for block in text.split("\n\n"):
        block = block.strip()
        heading = re.match(r"^(#+) (.*)$", block)
        if heading:
            title = heading.group(2)
            mark = "=" if len(heading.group(1)) == 1 else "-"
            out.append(f"{title}\n{mark * len(title)}")
        else:
            out.append(block)
    return "\n\n".join(out) + "\n"


def rst_page(source: str) -> str:
    """reStructuredText rendered by docutils into a Sphinx-like page: ``headerlink`` anchors, a sidebar, a footer."""
    from docutils.core import publish_parts

    parts = publish_parts(source, writer="html5", settings_overrides={"report_level": 5})
    body = parts["html_title"] + parts["body"]

    def anchored(match: re.Match[str]) -> str:
        level, attrs, inner = match.group(1), match.group(2), match.group(3)
        anchor = '<a class="headerlink" href="#section" title="Link to this heading">¶</a>'
        return f"<h{level}{attrs}>{inner}{anchor}</h{level}>"

    body = re.sub(r"<h([1-6])([^>]*)>(.*?)</h\1>", anchored, body, flags=re.DOTALL)
    return SPHINX_PAGE.format(title=html.escape(parts["title"]), body=body)


#: The known shared quotes between seed articles (they quote the same people): the only merges across articles.
QUOTING = [
    {"defections-at-the-river-garrison", "a-mothers-letters-and-a-broken-front"},
    {"the-night-the-salmor-levee-gave-way", "salmor-counts-the-cost-of-a-levee-it-was-told-would-fail"},
]


def write_copies(root: Path) -> dict[str, str]:
    """Every seed article as itself (Markdown), a syndicated copy (text), an MkDocs page, an .rst source and its
    Sphinx-like page, each under its own folder of ``root``. Returns each written file's family (the seed's stem)."""
    family: dict[str, str] = {}
    for number, (stem, text) in enumerate(seed_articles().items()):
        source = to_rst(text)
        files = {
            root / "wire" / f"{stem}.md": text,
            root / "paper" / f"{stem}.txt": syndicated(text, seed=number),
            root / "site" / f"{stem}.html": markdown_page(text),
            root / "rst" / f"{stem}.rst": source,
            root / "rst-site" / f"{stem}.html": rst_page(source),
        }
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            family[str(path.relative_to(root))] = stem
    return family


def same_family(a: str, b: str) -> bool:
    """May passages of families ``a`` and ``b`` be one result: the same article, or two that share a quote."""
    return a == b or any({a, b} <= pair for pair in QUOTING)
