"""Full-text search over the corpus, for evidence no pipeline retrieved.

Case-insensitive substring search (Unicode case folding per character, so offsets stay those of
the document text): every occurrence of the phrase, documents in corpus order, at most ``limit``
hits. When the phrase occurs nowhere and has several words, the documents holding every word are
listed instead, each at its first occurrence of the rarest word. Exact, predictable, and it finds
the wording a pipeline missed (the point of searching by hand).
"""

from __future__ import annotations

import re

from ragexp.annotation.pool import passage
from ragexp.data import Corpus

DEFAULT_LIMIT = 30
MATCH_CONTEXT = 240


def search(corpus: Corpus, phrase: str, limit: int = DEFAULT_LIMIT) -> list[dict]:
    phrase = " ".join(phrase.split())
    if not phrase:
        return []
    pattern = re.compile(r"\s+".join(re.escape(word) for word in phrase.split()), re.IGNORECASE)
    hits: list[dict] = []
    for document in corpus.values():
        for match in pattern.finditer(document.text):
            hits.append(passage(corpus, document.id, match.start(), match.end(), context=MATCH_CONTEXT))
            if len(hits) >= limit:
                return hits
    if hits or len(phrase.split()) < 2:
        return hits
    words = [re.compile(re.escape(word), re.IGNORECASE) for word in phrase.split()]
    for document in corpus.values():
        positions = [list(word.finditer(document.text)) for word in words]
        if all(positions):
            first = min(positions, key=len)[0]
            hits.append(passage(corpus, document.id, first.start(), first.end(), context=MATCH_CONTEXT))
            if len(hits) >= limit:
                break
    return hits
