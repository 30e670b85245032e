"""The search page of ``citeline serve`` in a real headless browser: Debian's chromium, driven by Playwright.

Skips when chromium is not installed (``.ci/run`` installs it as root). The browser is offline: every request to
an address other than the server is aborted and counted, so the page must work with nothing but the server, and
every answer of the server to a request the page made by itself (an icon, a stylesheet) must succeed. A screenshot
of each state (the index's facets, results with their metadata and facets, a facet chosen, no results, an error,
the document view) is saved under :data:`ARTIFACTS` (``$CITELINE_ARTIFACTS``, else ``/tmp/citeline-artifacts``),
its path printed and recorded as a property of the test (junit XML).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _collapse_sets import markdown_page
from conftest import REPO, HashEmbedder
from test_server import running

from citeline import Index
from citeline.server import create_app
from citeline.server.page import marked

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("CITELINE_ARTIFACTS") or Path(tempfile.gettempdir()) / "citeline-artifacts")
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_marked_cuts_text_around_marks() -> None:
    assert marked("abcdef", 10, [(11, 15, "passage"), (12, 13, "sentence")]) == [
        ("", "a"),
        ("passage", "b"),
        ("sentence", "c"),
        ("passage", "de"),
        ("", "f"),
    ]
    assert marked("abc", 0, []) == [("", "abc")]
    assert marked("abc", 0, [(5, 9, "x")]) == [("", "abc")]


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("page")
    docs = root / "docs"
    docs.mkdir()
    for seed in (REPO / "seeds").iterdir():
        (docs / seed.name).write_text(seed.read_text(encoding="utf-8"), encoding="utf-8")
    # Two copies of one passage, so that a collapsed result lists the other source.
    quote = (
        "The quartermaster's ledger shows the garrison's pay stopped in the spring, and the sentries left their posts."
    )
    # Two documents of their own titles quoting one passage ("copy-one"/"copy-two" as titles made a template of a
    # number, which collapse rightly keeps apart).
    for name, title in (("copy-one.md", "Notes from the garrison"), ("copy-two.md", "What the sentries told us")):
        (docs / name).write_text(f"# {title}\n\n{quote}\n", encoding="utf-8")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    with running(create_app(index.path, HashEmbedder())) as url:
        yield url


def test_search_page_in_a_headless_browser(page_url: str, record_property: Callable[[str, object], None]) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    elsewhere: list[str] = []
    failed: list[str] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1400})

            def offline(route: object) -> None:  # anything not from the server fails, as it would offline
                request = route.request  # type: ignore[attr-defined]
                if request.url.startswith(page_url):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    elsewhere.append(request.url)
                    route.abort()  # type: ignore[attr-defined]

            def answered(response: object) -> None:  # what the page asks for by itself (an icon, ...) must exist
                request = response.request  # type: ignore[attr-defined]
                if request.resource_type != "document" and response.status >= 400:  # type: ignore[attr-defined]
                    failed.append(f"{response.status} {response.url}")  # type: ignore[attr-defined]

            def shot(state: str) -> None:
                path = ARTIFACTS / f"search_page_{state}.png"
                page.screenshot(path=str(path), full_page=True)
                record_property(f"screenshot_{state}", str(path))
                print(f"screenshot: {path}")

            page.route("**/*", offline)
            page.on("response", answered)
            page.goto(page_url + "/")
            assert page.title() == "citeline"
            # No query: the index's facets, and a filter per metadata field it holds.
            facets = page.locator("section.facets")
            assert facets.locator("h2").inner_text() == "In the index"
            # No facet for date: each document's is its own. Author narrows more than tags (the copies hold neither).
            assert facets.locator("div.facet h3").all_inner_texts() == ["author", "tags"]
            author = facets.locator("div.facet").first
            assert author.locator("li").first.inner_text().split() == ["Mara", "2"]
            shot("facets_of_the_index")
            # Results with their metadata: a field's filter, from the form.
            page.fill("input[name=q]", "soldiers pay letters")
            page.select_option("select[name=mode]", "lexical")
            page.click("details summary")
            assert page.locator("input[name='meta.tags']").count() == 1
            page.fill("input[name='meta.author']", "Mara")
            page.click("button[type=submit]")
            page.wait_for_selector("li.result")
            assert "meta.author=Mara" in page.url
            results = page.locator("li.result")
            assert results.count() >= 2
            for at in range(results.count()):
                metadata = results.nth(at).locator("dl.metadata")
                assert metadata.locator("dt").all_inner_texts() == ["author", "date", "tags"]
                assert metadata.locator("dd").first.inner_text() == "Mara"
            scope = page.locator("section.facets h2").inner_text()
            assert scope == "In the 2 documents of these results"
            chosen = page.locator("section.facets li.selected")
            assert chosen.count() == 1 and chosen.first.inner_text().startswith("Mara")
            shot("results_with_metadata")
            # A facet's value narrows the answer; its link on the chosen value takes the filter off again.
            page.locator("section.facets div.facet", has_text="tags").locator("a", has_text="pay").first.click()
            page.wait_for_selector("li.result")
            assert "meta.tags=pay" in page.url
            found = page.locator("li.result .provenance code:first-child").all_inner_texts()
            assert found and set(found) == {"defections-at-the-river-garrison.md"}  # Mara's, tagged pay
            assert page.locator("section.facets h2").inner_text() == "In the 1 document of these results"
            assert page.locator("section.facets li.selected").count() == 2
            shot("facet_chosen")
            page.locator("section.facets li.selected", has_text="pay").locator("a[aria-label=remove]").click()
            page.wait_for_selector("li.result")
            assert "meta.tags=pay" not in page.url and page.locator("li.result").count() >= 2
            # Two copies of a passage: one result, the other copy listed.
            page.goto(page_url + "/?" + "q=quartermaster+ledger+pay+stopped&mode=lexical&path=copy-*.md")
            results = page.locator("li.result")
            assert results.count() == 1  # the two copies collapsed into one result
            first = results.first
            assert "quartermaster" in first.locator("mark.sentence").inner_text().lower()
            assert "copy-" in first.locator(".provenance code").first.inner_text()
            assert first.locator("dl.metadata").count() == 0  # no metadata: nothing shown
            sources = first.locator("details.sources")
            assert sources.locator("summary").inner_text() == "also in 1 other document"
            assert not sources.locator("li").first.is_visible()  # collapsed until opened
            sources.locator("summary").click()
            assert sources.locator("li").first.is_visible()
            shot("results")
            # The document view: the passage marked in its context.
            first.locator("h2 a").click()
            page.wait_for_selector("mark#passage")
            assert "/view/" in page.url
            assert "quartermaster" in page.locator("mark.sentence").inner_text().lower()
            assert "Content hash" in page.locator("table.provenance").inner_text()
            shot("document")
            page.click("text=back to the results")
            page.wait_for_selector("input[name=q]")
            # A bad filter is a message in the page, not a server error.
            page.goto(page_url + "/?q=pay&ingested_after=soon")
            assert "is not an ISO 8601 date" in page.locator("p.error").inner_text()
            assert page.locator("li.result").count() == 0
            shot("error")
            # Nothing matches: said so.
            page.goto(page_url + "/?q=zzyzx&mode=lexical")
            assert page.locator("p.empty").inner_text() == "No passages match."
            assert page.locator("section.facets").count() == 0
            shot("no_results")
        finally:
            browser.close()
    assert elsewhere == []
    assert failed == []


@pytest.fixture(scope="module")
def work_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server over one work in two copies: a seed report rendered as an MkDocs page beside its Markdown."""
    root = tmp_path_factory.mktemp("work")
    levee = (REPO / "seeds" / "the-night-the-salmor-levee-gave-way.md").read_text(encoding="utf-8")
    (root / "docs" / "site").mkdir(parents=True)
    (root / "docs" / "the-night-the-salmor-levee-gave-way.md").write_text(levee, encoding="utf-8")
    (root / "docs" / "site" / "levee.html").write_text(markdown_page(levee.split("---\n", 2)[2]), encoding="utf-8")
    garrison = (REPO / "seeds" / "defections-at-the-river-garrison.md").read_text(encoding="utf-8")
    (root / "docs" / "defections-at-the-river-garrison.md").write_text(garrison, encoding="utf-8")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([root / "docs"])
    with running(create_app(index.path, HashEmbedder())) as url:
        yield url


def test_a_merged_work_in_a_headless_browser(work_url: str, record_property: Callable[[str, object], None]) -> None:
    """One work in two copies (a rendered page and its Markdown) is one result: the page's passage shown, the
    Markdown listed as its copy with its own passage, in the open."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(work_url + "/?" + "q=embankment+gave+way+water+through+homes&k=3")
            work = page.locator("li.result").first
            assert work.locator(".provenance code").first.inner_text() == "site/levee.html"
            copies = work.locator("details.sources")
            assert copies.locator("summary").inner_text().startswith("one work: 1 other copy of this document")
            assert copies.locator("li").first.is_visible()  # open: the copies are part of the answer
            assert copies.locator("li span.copy").first.inner_text() == "copy"
            assert "the-night-the-salmor-levee-gave-way.md" in copies.locator("li").first.inner_text()
            found = page.locator("li.result .provenance code:first-child").all_inner_texts()
            assert sum(name.endswith(("levee.html", "levee-gave-way.md")) for name in found) == 1  # one result
            path = ARTIFACTS / "search_page_merged_work.png"
            page.screenshot(path=str(path), full_page=True)
            record_property("screenshot_merged_work", str(path))
        finally:
            browser.close()


def test_search_page_without_a_browser(page_url: str) -> None:
    """The HTML itself: no script, nothing loaded from elsewhere, user text escaped."""
    import httpx

    html = httpx.get(page_url + "/", params={"q": "<script>alert(1)</script> ledger", "mode": "lexical"}).text
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<link rel="icon" href="data:,">' in html  # no /favicon.ico request (the server has none)
    assert "http://" not in html.replace(page_url, "") and "https://" not in html
    paged = httpx.get(
        page_url + "/", params={"q": "pay garrison soldiers", "mode": "lexical", "k": 1, "offset": 2}
    ).text
    assert '<ol class="results" start="3">' in paged and 'rel="prev"' in paged
