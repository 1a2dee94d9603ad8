"""Chunkers that keep exact character offsets: ``make_chunker(cfg)`` builds one from its config.

Chunkers are ``_target_`` components: ``cfg["_target_"]`` names a registered :class:`Chunker`
subclass (the shipped ones below, or a user's own registered one, :mod:`ragexp.config.targets`);
without a ``_target_`` (a config saved by an older ragexp, a test) ``cfg["name"]`` picks a shipped
one (``none``, ``fixed``, ``sentence``, ``recursive``, ``markdown``). The other keys are its
options (see each class). Every chunk satisfies ``chunk.text == doc.text[chunk.start:chunk.end]``
(see :mod:`ragexp.chunking.base`).
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
    target = options.pop("_target_", None)
    name = options.pop("name", None)
    if target is None:
        if not isinstance(name, str) or name not in CHUNKERS:
            raise RagexpInputError(
                f"unknown chunker {name!r}; valid names: {', '.join(CHUNKERS)}", field="chunking.name"
            )
        return CHUNKERS[name].from_options(options)
    from ragexp.config.targets import component_class

    chunker = component_class(target, "chunking._target_")
    if not (isinstance(chunker, type) and issubclass(chunker, Chunker)):
        raise RagexpInputError(f"{target!r} is not a chunker (a subclass of ragexp.chunking.base.Chunker)",
                               field="chunking._target_")
    return chunker.from_options(options)


def _plain(value: Any) -> Any:
    """Config lists (e.g. OmegaConf ``ListConfig``) as plain lists; other values unchanged."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        return value
    return [_plain(item) for item in value]
