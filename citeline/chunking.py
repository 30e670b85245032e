"""Token-budgeted, sentence-aware chunking with exact character offsets.

Splitting is done by ``semantic-text-splitter`` (Rust, well kept) with the embedding model's own tokenizer, so a
chunk's size is measured in the tokens the model will actually see and no chunk is silently truncated at
embedding time. It prefers to break at paragraph, then sentence, then word boundaries, and reports each chunk's
character offset, so ``document.text[chunk.char_start:chunk.char_end] == chunk.text`` always holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

from semantic_text_splitter import MarkdownSplitter, TextSplitter
from tokenizers import Tokenizer

from citeline.embedding import cpu_count

#: Tokens the model adds around every input ([CLS] and [SEP] for BERT-style encoders).
SPECIAL_TOKENS = 2


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk of a document: ``text == document_text[char_start:char_end]``."""

    ordinal: int
    char_start: int
    char_end: int
    text: str


class Chunker:
    """Split text into chunks of at most ``max_tokens`` model tokens with ``overlap_tokens`` of overlap."""

    def __init__(self, tokenizer_file: str, *, max_tokens: int, overlap_tokens: int, model_max_tokens: int):
        budget = model_max_tokens - SPECIAL_TOKENS
        if not 8 <= max_tokens <= budget:
            raise ValueError(
                f"max_tokens must be between 8 and {budget} (the model reads {model_max_tokens} tokens, "
                f"{SPECIAL_TOKENS} of them special); got {max_tokens}"
            )
        if not 0 <= overlap_tokens < max_tokens // 2:
            raise ValueError(f"overlap_tokens must be between 0 and {max_tokens // 2 - 1}; got {overlap_tokens}")
        self.tokenizer_file = tokenizer_file
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer with truncation and padding off, so it counts every token."""
        tokenizer = Tokenizer.from_file(self.tokenizer_file)
        # The bundled tokenizer.json truncates at 128 tokens; counting through it would under-measure long
        # pieces and let oversized chunks through.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    @cached_property
    def _text_splitter(self) -> TextSplitter:
        return TextSplitter.from_huggingface_tokenizer(
            self.tokenizer, capacity=self.max_tokens, overlap=self.overlap_tokens
        )

    @cached_property
    def _markdown_splitter(self) -> MarkdownSplitter:
        return MarkdownSplitter.from_huggingface_tokenizer(
            self.tokenizer, capacity=self.max_tokens, overlap=self.overlap_tokens
        )

    def split(self, text: str, *, markdown: bool = False) -> list[ChunkSpan]:
        """Chunks of ``text`` in document order; Markdown-aware splitting when ``markdown`` is true."""
        splitter = self._markdown_splitter if markdown else self._text_splitter
        spans = []
        for ordinal, (start, chunk) in enumerate(splitter.chunk_indices(text)):
            spans.append(ChunkSpan(ordinal, start, start + len(chunk), chunk))
        return spans

    def split_many(self, texts: Sequence[tuple[str, bool]]) -> list[list[ChunkSpan]]:
        """``split`` for many ``(text, markdown)`` pairs, in order, spread over the CPUs.

        semantic-text-splitter releases the GIL while it splits, so threads scale: on SciFact, chunking with
        two threads on two cores took 0.39 s per 300 abstracts against 0.76 s with one.
        """
        if len(texts) < 2:
            return [self.split(text, markdown=markdown) for text, markdown in texts]
        with ThreadPoolExecutor(cpu_count()) as pool:
            return list(pool.map(lambda pair: self.split(pair[0], markdown=pair[1]), texts))

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text``, without the special tokens."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    @property
    def settings(self) -> dict[str, int]:
        """What must match between the chunker that built an index and one that extends it."""
        return {"max_tokens": self.max_tokens, "overlap_tokens": self.overlap_tokens}
