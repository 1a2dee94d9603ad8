"""Category hints from the data, shown next to the tags (a person decides):

- ``synonym``: no content word of the question occurs in the evidence. Words are lowercased
  ``\\w+`` tokens of two or more characters, Lucene's English stopwords dropped, Snowball-stemmed
  (PyStemmer), as the BM25 pipeline reads them: a question BM25 cannot match by its words.
- ``boundary``: an evidence span crosses a chunk boundary of the default chunker (it overlaps two
  or more chunks), so a run with that chunking sees it split.
- ``multi-chunk``: the positive evidence lies in two or more chunks (or documents), counting spans
  with the same text (whitespace aside) once: a section the corpus repeats word for word, marked
  in both places, is one answer found twice, not an answer spread over chunks.

Only positive evidence (grade >= 1) counts; judged negatives say nothing about the answer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from operator import attrgetter

from ragexp.datamodel import Chunk, Corpus, is_relevant
from ragexp.text.tokenize import content_stems


class ChunkMap:
    """The default chunker's chunks of one corpus, by document (for hints and coverage)."""

    def __init__(self, corpus: Corpus, chunks: list[Chunk]) -> None:
        self.corpus = corpus
        self.by_doc: dict[str, list[Chunk]] = defaultdict(list)
        for chunk in chunks:
            self.by_doc[chunk.doc_id].append(chunk)

    def overlapping(self, doc_id: str, start: int, end: int) -> list[Chunk]:
        chunks = self.by_doc.get(doc_id, [])
        first = bisect_right(chunks, start, key=attrgetter("end"))
        last = bisect_left(chunks, end, lo=first, key=attrgetter("start"))
        return chunks[first:last]


def category_hints(query: str, evidence: list[dict], chunk_map: ChunkMap) -> list[str]:
    """The hints (see the module docstring) for a question and its evidence entries."""
    positive = [e for e in evidence if is_relevant(e.get("grade", 1)) and e.get("start") is not None]
    if not positive:
        return []
    hints = []
    span_text = " ".join(str(e.get("quote") or "") for e in positive)
    query_stems = content_stems(query)
    if query_stems and not query_stems & content_stems(span_text):
        hints.append("synonym")
    crosses = any(len(chunk_map.overlapping(e["doc_id"], e["start"], e["end"])) > 1 for e in positive)
    if crosses:
        hints.append("boundary")
    distinct = {" ".join(str(e.get("quote") or "").split()) or (e["doc_id"], e["start"], e["end"]): e for e in positive}
    spread: set[str] = set()
    for e in distinct.values():
        spread.update(chunk.id for chunk in chunk_map.overlapping(e["doc_id"], e["start"], e["end"]))
    if len(spread) > 1 or len({e["doc_id"] for e in distinct.values()}) > 1:
        hints.append("multi-chunk")
    return hints
