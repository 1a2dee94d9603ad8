"""The BM25 text pipeline: lowercase -> regex tokens -> stopword removal -> stemming.

Documents and queries go through the same :class:`Tokenizer`. The defaults are the ones of
bm25s (and so of MTEB's ``bm25s`` baseline): scikit-learn's token pattern ``(?u)\\b\\w\\w+\\b``
(words of two or more characters), Lucene's 33 English stopwords, Snowball English stemming
via PyStemmer. Stopwords are removed before stemming, as in bm25s and Lucene.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import Stemmer

from ragexp.annotation.words import (
    ENGLISH_STOPWORDS,  # Lucene's English list, one copy for ragexp and the pipeline
)
from ragexp.errors import RagexpInputError

DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"

STEMMER_PREFIX = "snowball-"


def _stopword_set(stopwords: str | Sequence[str] | None) -> frozenset[str]:
    if stopwords is None:
        return frozenset()
    if isinstance(stopwords, str):
        if stopwords in ("english", "en"):
            return ENGLISH_STOPWORDS
        raise RagexpInputError(
            f"unknown stopword list {stopwords!r}; use 'english', null, or a list of words", field="stopwords"
        )
    return frozenset(stopwords)


def _stemmer(name: str | None) -> Stemmer.Stemmer | None:
    if name is None:
        return None
    algorithms = sorted(Stemmer.algorithms())
    algorithm = name.removeprefix(STEMMER_PREFIX)
    if algorithm not in algorithms:
        known = ", ".join(f"{STEMMER_PREFIX}{a}" for a in algorithms)
        raise RagexpInputError(f"unknown stemmer {name!r}; use null or one of: {known}", field="stemmer")
    return Stemmer.Stemmer(algorithm)


class Tokenizer:
    """Callable ``text -> list[str]``; :attr:`config` is its identity for cache keys. ``name`` is
    the label of a ``conf/retrieval/tokenizer`` option (``english``, ``plain``), not part of it."""

    def __init__(
        self,
        lowercase: bool = True,
        stopwords: str | Sequence[str] | None = "english",
        stemmer: str | None = "snowball-english",
        token_pattern: str = DEFAULT_TOKEN_PATTERN,
        name: str | None = None,
    ) -> None:
        try:
            self._split = re.compile(token_pattern).findall
        except re.error as err:
            raise RagexpInputError(f"invalid regular expression {token_pattern!r}: {err}", field="token_pattern")
        self.lowercase = lowercase
        self._stopwords = _stopword_set(stopwords)
        self._stemmer = _stemmer(stemmer)
        self._stems: dict[str, str] = {}  # surface form -> stem, so each distinct word is stemmed once
        self.config = {
            "lowercase": lowercase,
            "stopwords": sorted(self._stopwords),
            "stemmer": stemmer,
            "token_pattern": token_pattern,
        }

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        tokens = [token for token in self._split(text) if token not in self._stopwords]
        if self._stemmer is None:
            return tokens
        stems = self._stems
        try:
            return [stems[token] for token in tokens]
        except KeyError:
            unseen = list(set(tokens).difference(stems))
            stems.update(zip(unseen, self._stemmer.stemWords(unseen)))
            return [stems[token] for token in tokens]
