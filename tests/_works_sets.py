"""Works' test collections, built by the project itself (tests/index/test_works.py, bench/collapse.py precision).

- **MkDocs pairs**: a few pages of this repository's docs/ rendered by a real ``mkdocs build`` (the project's theme
  and Markdown extensions, a temporary mkdocs.yml naming only those pages) beside their Markdown sources: each page
  and its source are one work; pages share the theme's navigation, header and footer, and the 404 page holds
  nothing else.
- **Sphinx pairs**: a small generated Sphinx project (the seed articles as reStructuredText, with roles,
  directives, a toctree and link targets) built by ``sphinx-build``: each rendered page beside its source as Sphinx
  ships it, ``_sources/NAME.rst.txt`` (read as plain text, markup included).
- **Four formats**: each seed article written as .md, .html (an MkDocs-like page), .docx and .pdf.
- **Policy versions**: two versions of one policy whose sections differ (same preamble, other sections): not
  one work.
- **Boilerplate pages**: short pages of different content in one heavy site frame: not one work.

Each builder returns ``{relative path: family}``: files of one family are one work, files of different families
are not (a family of one file is a work of its own).
"""

from __future__ import annotations

import html
import io
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from _collapse_sets import markdown_page, seed_articles

REPO = Path(__file__).resolve().parents[1]

#: The docs pages the MkDocs set renders: small ones (a real render of each takes a fraction of a second), no
#: mkdocstrings page (api.md loads the package's sources).
MKDOCS_PAGES = ("index.md", "managing.md", "development.md", "dependencies.md", "runs.md")


def mkdocs_pairs(root: Path) -> dict[str, str]:
    """Render :data:`MKDOCS_PAGES` with ``mkdocs build`` into ``root/site`` beside their sources in ``root/docs``."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    for page in MKDOCS_PAGES:
        shutil.copyfile(REPO / "docs" / page, docs / page)
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    config = re.sub(r"(?ms)^plugins:.*?(?=^\S)", "plugins:\n  - search\n", config)  # no mkdocstrings
    config = re.sub(r"(?ms)^nav:.*?(?=^\S|\Z)", "", config)
    config = re.sub(r"(?m)^strict: true$", "strict: false", config)
    config = re.sub(r"(?m)^docs_dir: .*$", f"docs_dir: {docs}", config)
    config = re.sub(r"(?m)^site_dir: .*$", f"site_dir: {root / 'site'}", config)
    config += "nav:\n" + "".join(f"  - {page}\n" for page in MKDOCS_PAGES)
    (root / "mkdocs.yml").write_text(config, encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(root / "mkdocs.yml")],
        check=True,
        capture_output=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    # The theme's assets and the search index are not documents a user would index beside the pages.
    shutil.rmtree(root / "site" / "assets", ignore_errors=True)
    shutil.rmtree(root / "site" / "search", ignore_errors=True)
    for extra in ("sitemap.xml", "sitemap.xml.gz"):
        (root / "site" / extra).unlink(missing_ok=True)
    family: dict[str, str] = {}
    for page in MKDOCS_PAGES:
        stem = Path(page).stem
        family[f"docs/{page}"] = stem
        family["site/index.html" if stem == "index" else f"site/{stem}/index.html"] = stem
    family["site/404.html"] = "404"
    return family


# ---------------------------------------------------------------- Sphinx

_SPHINX_CONF = """project = "Salmor Gazette"
author = "the Salmor Gazette"
release = "1.0"
extensions = []
html_theme = "alabaster"
html_copy_source = True
html_show_sourcelink = True
"""


def sphinx_source(stem: str, text: str, others: list[str]) -> str:
    """A seed article (Markdown) as a Sphinx page's reStructuredText: a link target, the title, roles (``:doc:``,
    ``:term:``, ``:ref:``), a ``note`` directive with an option-less body, a ``seealso`` and a code block."""
    blocks = [block.strip() for block in text.split("\n\n") if block.strip()]
    out = [f".. _{stem}:"]
    for number, block in enumerate(blocks):
        heading = re.match(r"^(#+) (.*)$", block)
        if heading:
            title = heading.group(2)
            out.append(f"{title}\n{('=' if len(heading.group(1)) == 1 else '-') * len(title)}")
            continue
        block = re.sub(r"\*([^*\n]+)\*", r"*\1*", block)
        if number == 2 and others:
            block += f" See :doc:`{others[0]}` and :ref:`the other account <{others[-1]}>`."
        if number == 3:
            out.append(".. note::\n   :class: aside\n\n   " + block.replace("\n", "\n   "))
            continue
        out.append(block)
    if others:
        out.append(".. seealso::\n\n   " + ", ".join(f":doc:`{other}`" for other in others))
    out.append(".. code-block:: text\n\n   salmor-gazette --archive 2026")
    return "\n\n".join(out) + "\n"


def sphinx_pairs(root: Path) -> dict[str, str]:
    """A generated Sphinx project (the seed articles) built with ``sphinx-build`` into ``root/build``; the build
    holds each rendered page and its ``_sources/NAME.rst.txt``. Returns the families of the build's pages."""
    source = root / "src"
    source.mkdir(parents=True)
    articles = seed_articles()
    stems = list(articles)
    (source / "conf.py").write_text(_SPHINX_CONF, encoding="utf-8")
    toctree = "\n".join(f"   {stem}" for stem in stems)
    (source / "index.rst").write_text(
        f"Salmor Gazette\n==============\n\nThe archive.\n\n.. toctree::\n   :maxdepth: 2\n\n{toctree}\n",
        encoding="utf-8",
    )
    for stem, text in articles.items():
        others = [other for other in stems if other != stem][:2]
        (source / f"{stem}.rst").write_text(sphinx_source(stem, text, others), encoding="utf-8")
    build = root / "build"
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(source), str(build)], check=True, capture_output=True
    )
    for extra in ("_static", ".doctrees", ".buildinfo", "objects.inv", "searchindex.js"):
        target = build / extra
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    family = {f"build/{stem}.html": stem for stem in stems}
    family.update({f"build/_sources/{stem}.rst.txt": stem for stem in stems})
    family.update({"build/index.html": "index", "build/_sources/index.rst.txt": "index"})
    family.update({"build/genindex.html": "genindex", "build/search.html": "search"})
    return family


# ---------------------------------------------------------------- one text in four formats


def _pdf(paragraphs: list[str]) -> bytes:
    from _common import minimal_pdf

    def escaped(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1", "replace").decode()

    return minimal_pdf([escaped(paragraph) for paragraph in paragraphs])


def _docx(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading(paragraphs[0], level=1)
    for paragraph in paragraphs[1:]:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _plain_paragraphs(markdown: str) -> list[str]:
    out = []
    for block in markdown.split("\n\n"):
        block = re.sub(r"^#+ ", "", block.strip())
        block = re.sub(r"\*([^*\n]+)\*", r"\1", block).replace("\n", " ")
        block = block.replace("“", '"').replace("”", '"').replace("’", "'").replace("—", "-")
        if block:
            out.append(block)
    return out


def four_formats(root: Path) -> dict[str, str]:
    """Each seed article as .md, an MkDocs-like .html page, .docx and .pdf (one folder a format)."""
    family: dict[str, str] = {}
    for stem, text in seed_articles().items():
        paragraphs = _plain_paragraphs(text)
        files: dict[str, bytes] = {
            f"md/{stem}.md": text.encode("utf-8"),
            f"html/{stem}.html": markdown_page(text).encode("utf-8"),
            f"docx/{stem}.docx": _docx(paragraphs),
            f"pdf/{stem}.pdf": _pdf(paragraphs),
        }
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
            family[name] = stem
    return family


# ---------------------------------------------------------------- precision: policy versions, boilerplate pages

_PREAMBLE = (
    "This policy applies to every employee, contractor and volunteer of the Salmor Water Board. It sets out what "
    "the Board expects of the people who work for it and what they may expect of the Board in return. Managers "
    "make sure their teams have read it, and the Board reviews it every two years or sooner when the law changes."
)
_SECTIONS = {
    "Working hours": "Core hours run from ten in the morning to three in the afternoon. Outside them staff arrange "
    "their day with their manager, and overtime is agreed in writing before it is worked, never after.",
    "Leave": "Staff take twenty-eight days of paid leave a year, bank holidays included. Requests go to the line "
    "manager two weeks ahead; up to five unused days carry over into the first quarter of the next year.",
    "Expenses": "Travel is booked through the Board's agent at the lowest fare that fits the trip. Receipts are "
    "submitted within thirty days; meals are repaid up to the daily limit the finance office publishes each April.",
    "Remote work": "Staff may work away from the office up to three days a week when their role allows. The Board "
    "lends a laptop and a headset; home internet and electricity are not repaid.",
    "Conduct": "Staff treat the public, contractors and each other with courtesy. Gifts worth more than twenty "
    "pounds are declared on the register within a week, and offers of hospitality from bidders are refused.",
    "Data protection": "Customer records stay on the Board's systems. Printing them needs a manager's approval, and "
    "a lost device or a letter sent to the wrong address is reported to the data officer the same day.",
    "Safety": "Field crews wear high-visibility clothing and a helmet on every site. Nobody enters a chamber or a "
    "culvert alone, and every incident, injury or near miss is logged before the end of the shift.",
    "Whistleblowing": "Anyone who suspects fraud, danger or a breach of the law may report it to the audit "
    "committee in confidence. The Board protects those who report in good faith from any detriment.",
}


def policy_versions(root: Path) -> dict[str, str]:
    """Two versions of one policy: the same preamble and two shared sections, then different ones (2021: leave,
    expenses; 2024: remote work, data protection, whistleblowing). Different works: each its own family."""
    names = list(_SECTIONS)
    versions = {
        "policy-2021.md": [*names[:3], "Conduct", "Safety"],
        "policy-2024.md": [*names[:1], "Conduct", "Remote work", "Data protection", "Whistleblowing"],
    }
    root.mkdir(parents=True, exist_ok=True)
    family = {}
    for name, sections in versions.items():
        year = name[7:11]
        body = "\n\n".join(f"## {section}\n\n{_SECTIONS[section]}" for section in sections)
        (root / name).write_text(f"# Staff policy ({year})\n\n{_PREAMBLE}\n\n{body}\n", encoding="utf-8")
        family[name] = name
    return family


_FRAME = """<!doctype html><html><head><title>{title} | Salmor Water Board</title></head><body>
<header><nav><a href="/">Home</a> <a href="/services">Services</a> <a href="/news">News</a>
<a href="/about">About us</a>
<a href="/contact">Contact</a></nav><p>Salmor Water Board: clean water for the valley since 1921. Report a burst main
day or night on 0800 555 0199. Our offices are open Monday to Friday from nine to five.</p></header>
<nav class="sidebar"><ul><li><a href="/bills">Pay your bill</a></li><li><a href="/move">Moving home</a></li>
<li><a href="/outages">Planned outages</a></li><li><a href="/quality">Water quality reports</a></li>
<li><a href="/careers">Careers at the Board</a></li><li><a href="/accessibility">Accessibility</a></li></ul></nav>
<main><h1>{title}</h1><p>{body}</p></main>
<footer><p>Salmor Water Board, 4 Quay Street, Salmor. Registered in the valley under number 0192834. Privacy
notice. Cookie settings. Terms of use. Follow us for outage alerts and news from the treatment works.</p></footer>
</body></html>
"""
_NOTICES = {
    "outage-north": (
        "Outage in the north district",
        "Water is off in the north district on Tuesday while crews replace a valve under the market square.",
    ),
    "outage-east": (
        "Outage in the east district",
        "Water pressure is low on the east bank on Thursday while the pumping station is serviced.",
    ),
    "bill-change": ("New bill layout", "From March your bill shows the standing charge on its own line."),
    "hosepipe": ("Hosepipe ban lifted", "After the wet spring the hosepipe ban is lifted from Monday."),
}


def boilerplate_pages(root: Path) -> dict[str, str]:
    """Short notices in one heavy site frame (navigation, header and footer longer than the notice): each its own
    family."""
    root.mkdir(parents=True, exist_ok=True)
    family = {}
    for stem, (title, body) in _NOTICES.items():
        (root / f"{stem}.html").write_text(_FRAME.format(title=html.escape(title), body=body), encoding="utf-8")
        family[f"{stem}.html"] = stem
    return family


# ---------------------------------------------------------------- a real documentation tree


def tree_families(root: Path, page_roots: Sequence[str], same: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ground truth of a documentation tree as a user's folder holds it (sources beside their build): a
    rendered page and its sources are one work. Each file's family is its page name: its path relative to the
    deepest of ``page_roots`` (folders relative to ``root``: the sources' folder, the build's, Sphinx's
    ``_sources/`` inside the build) that holds it, with ``.txt`` (Sphinx's ``NAME.rst.txt``), then ``.html``,
    ``.rst`` or ``.md`` dropped, and a trailing ``/index`` (MkDocs' ``NAME/index.html``). So ``advanced.rst``,
    ``_build/html/advanced.html`` and ``_build/html/_sources/advanced.rst.txt`` are one family; a page with no
    source (Sphinx's ``genindex.html``, ``search.html``, a 404 page) and every other file is a family of its own.
    ``same`` puts more files in a page's family (path -> page name): a copy the names do not tell (a README that is
    the index page's text), each found by reading the two."""
    folders = sorted((Path(folder) for folder in page_roots), key=lambda folder: len(folder.parts), reverse=True)
    family = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(root)
        page = next((relative.relative_to(f) for f in folders if relative.is_relative_to(f)), relative).as_posix()
        page = page.removesuffix(".txt") if re.search(r"\.(rst|md)\.txt$", page) else page
        page = re.sub(r"\.(html|rst|md)$", "", page)
        page = page.removesuffix("/index") or page
        family[relative.as_posix()] = page
    return family | dict(same or {})
