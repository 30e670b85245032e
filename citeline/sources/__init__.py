"""Sources: finding the files under a root (discovery) and parsing each into Documents through the ``@parser``
registry of source formats."""

#: The source name of texts that are not files (``Index.add_texts``, ``citeline ingest -``).
DEFAULT_SOURCE = "texts"

#: Files larger than this are refused rather than read into memory (override per call).
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
