"""The search page of ``citeline serve`` in a real headless browser: Debian's chromium, driven by Playwright.

Skips when chromium is not installed (``.ci/run`` installs it as root). The browser is offline: every request to
an address other than the server is aborted and counted, so the page must work with nothing but the server. A
screenshot of the results is saved under ``tests/artifacts/`` (git-ignored) and its path printed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from conftest import REPO, HashEmbedder
from test_server import running

from citeline import Index
from citeline.server import create_app
from citeline.web import marked

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "tests" / "artifacts"
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
    for name in ("copy-one.md", "copy-two.md"):
        (docs / name).write_text(f"# {name}\n\n{quote}\n", encoding="utf-8")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    with running(create_app(index.path, HashEmbedder())) as url:
        yield url


def test_search_page_in_a_headless_browser(page_url: str) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    elsewhere: list[str] = []
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

            page.route("**/*", offline)
            page.goto(page_url + "/")
            assert page.title() == "citeline"
            page.fill("input[name=q]", "quartermaster ledger pay stopped")
            page.select_option("select[name=mode]", "lexical")
            page.click("details summary")
            page.fill("input[name=path]", "copy-*.md")
            page.click("button[type=submit]")
            page.wait_for_selector("li.result")
            assert "mode=lexical" in page.url and "path=copy-*.md" in page.url
            results = page.locator("li.result")
            assert results.count() == 1  # the two copies collapsed into one result
            first = results.first
            assert "quartermaster" in first.locator("mark.sentence").inner_text().lower()
            assert "copy-" in first.locator(".provenance code").first.inner_text()
            sources = first.locator("details.sources")
            assert sources.locator("summary").inner_text() == "also in 1 other document"
            assert not sources.locator("li").first.is_visible()  # collapsed until opened
            sources.locator("summary").click()
            assert sources.locator("li").first.is_visible()
            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "search_page_results.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
            # The document view: the passage marked in its context.
            first.locator("h2 a").click()
            page.wait_for_selector("mark#passage")
            assert "/view/" in page.url
            assert "quartermaster" in page.locator("mark.sentence").inner_text().lower()
            assert "Content hash" in page.locator("table.provenance").inner_text()
            page.screenshot(path=str(ARTIFACTS / "search_page_document.png"), full_page=True)
            page.click("text=back to the results")
            page.wait_for_selector("input[name=q]")
            # A bad filter is a message in the page, not a server error.
            page.goto(page_url + "/?q=pay&ingested_after=soon")
            assert "is not an ISO 8601 date" in page.locator("p.error").inner_text()
            # Nothing matches: said so.
            page.goto(page_url + "/?q=zzyzx&mode=lexical")
            assert page.locator("p.empty").inner_text() == "No passages match."
        finally:
            browser.close()
    assert elsewhere == []


def test_search_page_without_a_browser(page_url: str) -> None:
    """The HTML itself: no script, nothing loaded from elsewhere, user text escaped."""
    import httpx

    html = httpx.get(page_url + "/", params={"q": "<script>alert(1)</script> ledger", "mode": "lexical"}).text
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html.replace(page_url, "") and "https://" not in html
    paged = httpx.get(
        page_url + "/", params={"q": "pay garrison soldiers", "mode": "lexical", "k": 1, "offset": 2}
    ).text
    assert '<ol class="results" start="3">' in paged and 'rel="prev"' in paged
