"""The words the works rule compares (``citeline.store.works.words``): the markup a source holds and its rendered
page does not is left out, and no text costs more than its length (every pattern's scan is bounded)."""

from __future__ import annotations

import time

import pytest

from citeline.store import works


def test_the_work_words_leave_out_myst_and_sphinx_markup() -> None:
    """What a MyST or reST source holds and its page does not (attrs' docs, tests/data/realdocs): role names,
    directive fences and options, toctree bodies (page names), code fences' languages, link targets."""
    source = (
        "See {doc}`the overview <overview>` and {func}`attrs.define`.\n\n"
        "```{include} ../README.md\n:start-after: 'teaser-begin -->'\n```\n\n"
        "```{toctree}\n:maxdepth: 2\n\noverview\nwhy\n```\n\n"
        '```python title="app.py"\nx = 1\n```\n\n'
        ".. toctree::\n   :maxdepth: 1\n\n   names\n   license\n\n"
        '.. _the-end:\n\nThe [end](guide/end.md "End").\n'
    )
    assert works.words(source) == ["see", "the", "overview", "and", "attrs", "define", "x", "1", "the", "end"]


#: Texts of many openings of a markup pattern that never closes: a pattern whose match scans to the text's end (or
#: the next closing) from every opening costs the square of the text (the Markdown link pattern took 222 CPU-s on
#: 200 kB of "](", docs/quality.md#works).
UNCLOSED = {
    "markdown links": "](" * 100_000,
    "markdown links with titles": '](x "' * 100_000,
    "reST link targets without a colon": ".. _a\n" * 100_000,
    "MyST toctrees never closed": "```{toctree}\nname\n" * 20_000,
    "reST toctrees": ".. toctree::\n   a\n \n" * 20_000,
    "MyST roles": "{doc}`" * 100_000,
    "reST roles": ":ref:`x <" * 100_000,
    "reST links": "`a <" * 100_000,
}


@pytest.mark.parametrize("name", sorted(UNCLOSED))
def test_no_markup_makes_the_words_cost_more_than_the_texts_length(name: str) -> None:
    start = time.process_time()
    works.words(UNCLOSED[name])
    assert time.process_time() - start < 5.0  # linear: well under a tenth of a second
