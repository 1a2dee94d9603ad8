"""Chunkers that keep exact character offsets: ``make_chunker(cfg)`` builds one from its config.

``cfg["name"]`` picks the chunker (``none``, ``fixed``, ``sentence``, ``recursive``,
``markdown``); the other keys are its options (see each class). Every chunk satisfies
``chunk.text == doc.text[chunk.start:chunk.end]`` (see :mod:`ragexp.chunking.base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragexp.chunking.base import Chunker
from ragexp.chunking.fixed import FixedSizeChunker
from ragexp.chunking.markdown import MarkdownChunker
from ragexp.chunking.recursive import RecursiveChunker
from ragexp.chunking.sentence import SentenceChunker
from ragexp.chunking.whole import WholeDocumentChunker
from ragexp.errors import RagexpInputError

CHUNKERS: dict[str, type[Chunker]] = {
    chunker.name: chunker
    for chunker in (WholeDocumentChunker, FixedSizeChunker, SentenceChunker, RecursiveChunker, MarkdownChunker)
}

__all__ = [
    "CHUNKERS",
    "Chunker",
    "FixedSizeChunker",
    "MarkdownChunker",
    "RecursiveChunker",
    "SentenceChunker",
    "WholeDocumentChunker",
    "make_chunker",
]


def make_chunker(cfg: Mapping[str, Any]) -> Chunker:
    """The chunker ``cfg`` describes; bad names or options raise ``RagexpInputError`` naming the field."""
    options = {str(key): _plain(value) for key, value in cfg.items()}
    name = options.pop("name", None)
    if not isinstance(name, str) or name not in CHUNKERS:
        raise RagexpInputError(
            f"unknown chunker {name!r}; valid names: {', '.join(CHUNKERS)}", field="chunking.name"
        )
    return CHUNKERS[name].from_options(options)


def _plain(value: Any) -> Any:
    """Config lists (e.g. OmegaConf ``ListConfig``) as plain lists; other values unchanged."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        return value
    return [_plain(item) for item in value]
