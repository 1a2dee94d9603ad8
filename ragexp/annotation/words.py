"""Words as the BM25 pipeline reads them, for the page's hints and its corpus search: lowercased
``\\w\\w+`` tokens (two or more characters), Lucene's English stopwords dropped, Snowball English
stems (PyStemmer) — the defaults of ``conf/retrieval/bm25.yaml``, kept here because ``ragexp``
does not import the reference pipelines."""

from __future__ import annotations

import re
from functools import lru_cache

#: Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (also bm25s' "english" list): the one copy,
#: which the BM25 pipeline's ``english`` stopwords (``reference_pipelines.tokenize``) use too.
ENGLISH_STOPWORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their "
                              "then there these they this to was will with".split())
WORD = re.compile(r"\w\w+")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def word_stems(text: str) -> list[tuple[str, int, int]]:
    """``(stem, start, end)`` of every content word of ``text``, in order (offsets into ``text``)."""
    matches = [m for m in WORD.finditer(text) if m.group().lower() not in ENGLISH_STOPWORDS]
    stems = _stemmer().stemWords([m.group().lower() for m in matches])
    return [(stem, m.start(), m.end()) for stem, m in zip(stems, matches)]


def content_stems(text: str) -> set[str]:
    return {stem for stem, _, _ in word_stems(text)}
