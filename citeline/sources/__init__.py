"""Sources: finding the files under a root (discovery) and parsing each into Documents through the ``@parser``
registry of source formats."""

#: The source name of texts that are not files (``Index.add_texts``, ``citeline ingest -``).
DEFAULT_SOURCE = "texts"

#: Files larger than this are refused rather than read into memory (override per call).
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024

#: The most text one source may give (a file read whole, or one record of a record file), in characters: a larger
#: one is refused with one line naming this limit, so that no single source can push a run's memory far past what
#: the rest of the run needs. Chunking holds a document's words, tokens and chunks at once, tens of bytes a
#: character of ordinary prose (figures: docs/scale.md#choices-measured-in-the-code, docs/reliability.md), so this
#: is the largest text that stays well inside a source's memory budget of 512 MiB. About 700,000 words: War and Peace
#: (3.2 M characters) fits, a larger file is split into parts to be indexed.
MAX_SOURCE_CHARS = 4 * 1024 * 1024

#: The most a source's compressed parts (a .docx's zip members) may inflate to, all parts together, counted as
#: they inflate (the sizes a zip's headers state are not trusted: a zip bomb lies in them).
MAX_INFLATED_BYTES = 256 * 1024 * 1024

#: The most XML elements a source's XML parts may hold: python-docx builds a tree of them, hundreds of bytes an
#: element with lxml's proxies (docs/scale.md#choices-measured-in-the-code); a Word book of 1,000 pages holds far
#: fewer.
MAX_XML_ELEMENTS = 500_000

#: The most elements an HTML page may hold (counted as its start tags, before its tree is built): lxml's tree of a
#: page costs about a kilobyte an element with its text, and main-text extraction copies parts of it
#: (docs/sources.md#metadata). A long article holds tens of thousands.
MAX_HTML_ELEMENTS = 250_000


#: How deep a document's metadata may nest (a mapping or list inside another counts one level; the fields
#: themselves are level 1). Readers (``citeline documents``, ``search --format json``, the HTTP API, MCP) walk
#: metadata recursively, as Python's ``json`` and pydantic do: a JSONL record nested 500 deep was accepted and then
#: broke every read of the index with a RecursionError. Real metadata (front matter, a JSON export) nests a few.
MAX_METADATA_DEPTH = 32

#: The most top-level fields a document's metadata may hold: each is a facet of ``citeline documents`` and a
#: column a filter may name. A CSV row of 60,000 columns with no text column made a document whose metadata
#: (repeated in each of its chunks' passage rows) passed DuckDB's memory limit at commit.
MAX_METADATA_FIELDS = 1_000

#: The most characters a document's metadata may take as JSON: it is stored with each of the document's chunks'
#: passage rows and returned with every hit, so a large one costs its size again for every chunk and result.
MAX_METADATA_CHARS = 64 * 1024


def mib(size: int) -> str:
    """``size`` bytes as the limits are written in messages: ``256 MiB`` (``1,000 bytes`` below a MiB)."""
    return f"{size / (1024 * 1024):g} MiB" if size >= 1024 * 1024 else f"{size:,} bytes"
