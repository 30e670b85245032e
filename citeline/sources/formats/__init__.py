"""The source formats: one module each, registered with ``@parser`` (see :mod:`citeline.sources.registry`).

Importing this package fills the registry; adding a format is one module here and its name in the import below.
"""

from citeline.sources.formats import html, jsonl, markdown, pdf, text  # noqa: F401  (each registers its @parser)
