"""HTML (``.html``, ``.htm``): the main text, as trafilatura extracts it, and the page's meta tags as metadata."""

from __future__ import annotations

import email.utils
import itertools
import json
import re
from datetime import date
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources import MAX_HTML_ELEMENTS
from citeline.sources.document import Document, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import present
from citeline.sources.registry import first_line_title, parser


#: Reader version 2: page furniture (navigation, headers, footers) and heading permalinks (``¶``) are out of the
#: stored text, a date is only one the markup states (version 1 kept both, and guessed dates from the visible text),
#: and an author a meta tag names is kept when trafilatura doubts it (a one-word name).
@parser(".html", ".htm", reader=2)
def parse_html(source: SourceFile, data: bytes) -> list[Document]:
    """HTML: the main text as trafilatura extracts it (boilerplate, menus and scripts dropped).

    The stored text is the extracted text, so chunk offsets index into it, not into the markup. A page where
    trafilatura finds no main content falls back to all of its visible text, as does a page of more markup than
    :data:`MAX_EXTRACTED_MARKUP` (:func:`visible_text`); a page of more than ``MAX_HTML_ELEMENTS`` elements is
    refused before its tree is built. The meta tags become metadata
    (:func:`page_metadata`); the title is ``og:title``, else ``<title>``, else the first line of text.
    """
    import trafilatura

    decoded = decode(source, data)
    markup = decoded.text
    if _more_elements_than(markup, MAX_HTML_ELEMENTS):
        raise SourceError(
            source.path,
            f"HTML page holds more than {MAX_HTML_ELEMENTS:,} elements, the limit for one source (refused; split the "
            "page, or convert it to text)",
        )
    tree = page_tree(markup)
    if tree is not None:
        drop_page_furniture(tree)
    text: str | None
    if tree is not None and len(markup) > MAX_EXTRACTED_MARKUP:
        text = visible_text(tree)
    else:
        cleaned = markup if tree is None else _serialized(tree)
        text = trafilatura.extract(cleaned, include_comments=False, include_tables=True, favor_recall=True)
        if not text or not text.strip():
            text = trafilatura.html2txt(cleaned) or ""
    text = _PILCROWS.sub("", text)
    if not text.strip():
        raise SourceError(source.path, "HTML page has no text")
    metadata = page_metadata(markup)
    title = metadata.get("title") or first_line_title(text, Path(source.path).stem)
    document = Document(source.root, source.source_id, source.path, title[:200], text, "html", metadata)
    document.properties["encoding"] = decoded.encoding
    return [document]


#: Classes of a documentation generator's page furniture: navigation bars, sidebars, tables of contents beside the
#: text, breadcrumbs, headers and footers (Sphinx's basic and Read the Docs themes, Furo, MkDocs and Material for
#: MkDocs, Docusaurus, pydata-sphinx-theme), and the permalink anchors they put in headings.
FURNITURE_CLASSES = frozenset(
    {
        "headerlink", "anchorlink", "anchor-link", "anchorjs-link", "heading-anchor", "hash-link", "permalink",
        "sphinxsidebar", "sphinxsidebarwrapper", "related", "rst-versions", "wy-nav-side", "wy-nav-top",
        "wy-breadcrumbs", "breadcrumbs", "breadcrumb", "sidebar-drawer", "toc-drawer", "md-header", "md-tabs",
        "md-sidebar", "md-footer", "md-nav", "md-search", "md-source", "navbar", "bd-sidebar", "bd-toc", "skip-link",
        "headerlinks", "theme-doc-toc-desktop", "pagination-nav", "table-of-contents",
    }
)  # fmt: skip
#: Landmark roles that are never a page's text.
FURNITURE_ROLES = frozenset({"navigation", "search", "contentinfo", "banner"})
#: What a permalink anchor shows instead of words.
_ANCHOR_MARKS = frozenset({"¶", "§", "#", "🔗", "⚓", "\uf0c1", ""})
#: A pilcrow or section sign left at the end of a line (an anchor the markup did not mark as one).
_PILCROWS = re.compile(r"[ \t]*[¶§]+[ \t]*$", re.MULTILINE)


#: Pages of more markup than this (characters) skip trafilatura's main-text extraction and keep all their visible
#: text, furniture dropped (:func:`visible_text`): the extraction's cost grows with the square of the page
#: (docs/sources.md#metadata), so a page of several MiB held a run for minutes; the visible text is one linear pass.
MAX_EXTRACTED_MARKUP = 1024 * 1024

#: Elements whose content is never a page's text.
_NOT_TEXT = ("script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object")
#: Elements that begin a line of their own: a new line after each keeps paragraphs, headings, items and rows apart.
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "aside", "header", "footer", "h1", "h2", "h3", "h4", "h5", "h6",
        "li", "dt", "dd", "tr", "pre", "blockquote", "table", "ul", "ol", "dl", "figure", "figcaption", "br", "hr",
        "address", "details", "summary", "caption", "form", "fieldset", "legend",
    }
)  # fmt: skip
#: Elements that end with a space: the cells of a table row.
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


#: A start tag (``<p``, ``<div class=...``): closing tags, comments and ``<!DOCTYPE`` do not count.
_START_TAG = re.compile(r"<[A-Za-z]")


def _more_elements_than(markup: str, limit: int) -> bool:
    # Counted without building anything, stopping at the limit (a script's ``a<b`` counts too: an upper bound).
    return any(True for _ in itertools.islice(_START_TAG.finditer(markup), limit, None))


def page_tree(markup: str) -> Any:
    """The page as an lxml tree; None for markup lxml cannot read (it is then given to trafilatura as it is)."""
    from lxml import etree
    from lxml import html as lxml_html

    try:
        return lxml_html.document_fromstring(markup.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return None


def _serialized(tree: Any) -> str:
    from lxml import html as lxml_html

    return str(lxml_html.tostring(tree, encoding="unicode"))


def drop_page_furniture(tree: Any) -> None:
    """Remove from a page's tree (:func:`page_tree`), in place, the furniture documentation generators put around
    and into a page's text: ``<nav>`` and navigation, search, banner and footer landmarks, sidebars, breadcrumbs,
    and the permalink anchors of headings (``<a class="headerlink">¶</a>``), which trafilatura would keep in the
    text ("Installation¶") and which make a rendered page differ from its Markdown or reStructuredText source."""
    doomed = []
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        classes = set((element.get("class") or "").split())
        if (
            element.tag == "nav"
            or (element.get("role") or "").strip() in FURNITURE_ROLES
            or classes & FURNITURE_CLASSES
            or (element.tag == "a" and _is_anchor(element))
        ):
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()  # keeps the element's tail (the text after it), which belongs to the parent


def visible_text(tree: Any) -> str:
    """All the visible text of a page's tree (scripts, styles and the head left out), a line for each block
    (paragraph, heading, list item, table row...), spaces within a line collapsed: the text of a page too large for
    main-text extraction (:data:`MAX_EXTRACTED_MARKUP`), in time linear in the page."""
    from lxml import etree

    for element in list(tree.iter(*_NOT_TEXT)):
        element.text = None
        for child in list(element):
            element.remove(child)
    for node in list(tree.iter(etree.Comment, etree.ProcessingInstruction)):
        if node.getparent() is not None:
            node.drop_tree()  # its tail, the text after it, stays
    lines: list[str] = []
    current: list[str] = []
    for event, element in etree.iterwalk(tree, events=("start", "end")):
        if element.tag in _BLOCKS:
            lines.append("".join(current))
            current = []
        if event == "start":
            if element.text:
                current.append(element.text)
        else:
            if element.tag in _CELLS:
                current.append(" ")
            if element.tail:
                current.append(element.tail)
    lines.append("".join(current))
    stripped = (_SPACES.sub(" ", line).strip() for line in lines)
    return "\n".join(line for line in stripped if line)


def _is_anchor(element: Any) -> bool:
    """Is an ``<a>`` a permalink to a place in its own page that shows a mark, not words (``¶``, ``#``, ``§``)?"""
    href = (element.get("href") or "").strip()
    title = (element.get("title") or "").lower()
    mark = (element.text_content() or "").strip()
    return href.startswith("#") and (mark in _ANCHOR_MARKS or "permalink" in title or "permanent link" in title)


def page_metadata(markup: str) -> dict[str, Any]:
    """A page's meta tags by trafilatura (the dates and a doubted author by :class:`_StatedMarkup`): ``title``
    (``og:title`` first),
    ``author``, ``description``, ``keywords`` (a list), ``date`` (published) and ``modified`` as ISO dates,
    ``sitename``, ``language``; the tags a page does not have are left out.

    A date is only one the page's markup gives as a date (:meth:`_StatedMarkup.dates`): trafilatura's own guess
    also reads the visible text, and made "Copyright 2024" in a footer the ``date`` 2024-01-01 of a page with none.
    """
    import trafilatura

    # trafilatura's own date (htmldate's find_date) is never used, the dates come from _StatedMarkup; its extensive
    # search reads every element's text and grew with the page (docs/performance.md#choices-measured-in-the-code),
    # so it is asked for the cheap search only. No other field depends on it.
    found = trafilatura.extract_metadata(markup, date_config={"extensive_search": False})
    if found is None:
        return {}
    keywords = [word.strip() for tag in found.tags or [] for word in tag.split(",") if word.strip()]
    stated = _StatedMarkup.read(markup)
    published, modified = stated.dates()
    return present(
        {
            "title": found.title,
            # trafilatura drops an author its heuristics doubt (a one-word name: <meta name="author" content="Mara">
            # gave no author); the page's own meta tag is kept then
            "author": found.author or next(iter(stated.authors), None),
            "description": found.description,
            "keywords": keywords,
            "date": published,
            "modified": modified if modified != published else None,
            "sitename": found.sitename,
            "language": found.language,
        }
    )


#: Meta tag names (``name``, ``property`` or ``itemprop``, lower-cased) that state when a page was published.
_PUBLISHED_META = frozenset(
    {
        "article:published_time", "og:published_time", "og:article:published_time", "datepublished", "date",
        "dc.date", "dc.date.issued", "dc.date.created", "dcterms.date", "dcterms.issued", "dcterms.created",
        "citation_publication_date", "citation_date", "citation_online_date", "pubdate", "publishdate",
        "publish-date", "publish_date", "published_time", "article.published", "sailthru.date", "parsely-pub-date",
    }
)  # fmt: skip
#: Meta tag names that name a page's author.
_AUTHOR_META = frozenset({"author", "article:author", "dc.creator", "dcterms.creator", "citation_author"})
#: ... and when it was last modified.
_MODIFIED_META = frozenset(
    {"article:modified_time", "og:updated_time", "datemodified", "dcterms.modified", "dc.date.modified", "lastmod"}
)


class _StatedMarkup(HTMLParser):
    """What a page's markup states: the days of its date meta tags and ``itemprop`` elements, ``<time datetime>``
    days and the text of its JSON-LD scripts (:meth:`dates`), and the authors its meta tags name."""

    @classmethod
    def read(cls, markup: str) -> _StatedMarkup:
        """The statements of ``markup``."""
        found = cls()
        try:
            found.feed(markup)
            found.close()
        except Exception:  # html.parser gives up on some malformed markup: what was found before it is kept
            pass
        return found

    def dates(self) -> tuple[str | None, str | None]:
        """``(published, modified)``: the ISO dates the page's markup states as its dates, else None.

        In this order: meta tags of a publication or modification date (``article:published_time``, ``date``,
        ``dc.date``, ``citation_publication_date``, ``itemprop="datePublished"``, ...), JSON-LD's ``datePublished``
        (or ``dateCreated``) and ``dateModified``, then the first ``<time datetime>`` element. Never a date guessed
        from the visible text (a copyright year in a footer, a date the article mentions, a path in a link):
        htmldate, which trafilatura asks, guesses from all of those, even without its extensive search ("the levee
        failed on 2021-03-04" made that the page's date), and a ``date`` filter would then silently select the page
        by it.
        """
        ld_published, ld_modified = _json_ld_dates(self.json_ld)
        published = next((day for day in self.published if day), None) or ld_published
        modified = next((day for day in self.modified if day), None) or ld_modified
        return published or next((day for day in self.times if day), None), modified

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.published: list[str | None] = []
        self.modified: list[str | None] = []
        self.times: list[str | None] = []
        self.json_ld: list[str] = []
        self.authors: list[str] = []
        self._in_json_ld = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "script":
            self._in_json_ld = values.get("type", "").strip().lower() == "application/ld+json"
            return
        names = {values.get(key, "").strip().lower() for key in ("name", "property", "itemprop", "http-equiv")}
        stated = values.get("content") or values.get("datetime") or ""
        if tag == "meta" and names & _AUTHOR_META and values.get("content", "").strip():
            self.authors.append(" ".join(values["content"].split()))
        elif names & _PUBLISHED_META:
            self.published.append(_iso_day(stated))
        elif names & _MODIFIED_META:
            self.modified.append(_iso_day(stated))
        elif tag == "time" and values.get("datetime"):
            self.times.append(_iso_day(values["datetime"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_json_ld = False

    def handle_data(self, data: str) -> None:
        if self._in_json_ld:
            self.json_ld.append(data)


def _json_ld_dates(blocks: list[str]) -> tuple[str | None, str | None]:
    """The first ``datePublished`` (or ``dateCreated``) and ``dateModified`` of JSON-LD ``blocks`` that read as
    dates."""
    published: str | None = None
    modified: str | None = None
    for block in blocks:
        try:
            data = json.loads(block)
        except ValueError:
            continue
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(reversed(item))
            elif isinstance(item, dict):
                published = published or _iso_day(item.get("datePublished")) or _iso_day(item.get("dateCreated"))
                modified = modified or _iso_day(item.get("dateModified"))
                stack.extend(value for value in item.values() if isinstance(value, dict | list))
    return published, modified


_ISO_DAY = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})(?![\d])")


def _iso_day(value: object) -> str | None:
    """The day a stated date value names, as ``YYYY-MM-DD``: an ISO 8601 date or date-time (``2021-03-04``,
    ``20210304``, ``2021-03-04T10:00:00Z``) or an RFC 2822 one (``Thu, 04 Mar 2021 10:00:00 GMT``); None for
    anything else (a value in some other notation is left out rather than guessed)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    found = _ISO_DAY.match(text)
    try:
        if found:
            return date(*map(int, found.groups())).isoformat()
        return email.utils.parsedate_to_datetime(text).date().isoformat()
    except (ValueError, TypeError, IndexError):
        return None
