"""The data model: documents, chunks with character offsets, gold evidence, eval items (what every loader reads into).

Contracts
---------
- ``Chunk.text == corpus[chunk.doc_id].text[chunk.start:chunk.end]`` always; titles and heading
  paths live in ``Chunk.title`` and never shift offsets.
- Chunk ids are ``f"{doc_id}#chunk_{index}"`` with a 0-based ``index`` in document order (the
  method article's ``doc_112#chunk_4``).
- ``Evidence`` is independent of chunking: a whole document (``start is None``) or a half-open
  character span ``[start, end)`` of one document, with a relevance ``grade`` (>= 1 relevant,
  0 judged non-relevant, as in TREC qrels).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ragexp.runtime.fingerprint import stable_hash

if TYPE_CHECKING:
    from ragexp.data.convert.report import ConversionReport

CHUNK_SEPARATOR = "#chunk_"


def chunk_id(doc_id: str, index: int) -> str:
    return f"{doc_id}{CHUNK_SEPARATOR}{index}"


@dataclass(frozen=True, slots=True)
class Document:
    """``page_starts``: the offset in ``text`` where each page begins (``page_starts[0] == 0``),
    for documents converted from paged formats (PDF); empty when the document has no pages."""

    id: str
    text: str
    title: str = ""
    page_starts: tuple[int, ...] = ()

    def page_of(self, offset: int) -> int | None:
        """The 1-based page holding character ``offset``; ``None`` without a page map."""
        if not self.page_starts:
            return None
        return max(1, bisect_right(self.page_starts, offset))


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    doc_id: str
    index: int
    start: int
    end: int
    text: str
    title: str = ""

    def text_with_title(self) -> str:
        """What encoders and BM25 index when titles are included: ``title + " " + text``."""
        return f"{self.title} {self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class Evidence:
    doc_id: str
    start: int | None = None
    end: int | None = None
    grade: int = 1

    @property
    def is_span(self) -> bool:
        return self.start is not None

    def to_dict(self) -> dict:
        return asdict(self)


#: Where an item came from: a user's query log, written by hand, a generated draft a person
#: accepted, or a production failure added to the set.
ITEM_SOURCES = ("log", "hand", "draft", "failure")
PROVENANCE_FIELDS = ("source", "added", "annotator")


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One question. ``source`` is one of :data:`ITEM_SOURCES` (``None``: not recorded); ``added``
    is when it joined the set (ISO 8601, as written); ``annotator`` who judged it (``--annotator``)."""

    id: str
    query: str
    evidence: tuple[Evidence, ...] = ()
    gold_answer: str | None = None
    answers: tuple[str, ...] = ()
    key_facts: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    answerable: bool = True
    source: str | None = None
    added: str | None = None
    annotator: str | None = None

    @property
    def reference_answers(self) -> tuple[str, ...]:
        """Every acceptable gold answer: ``answers`` if given, else ``(gold_answer,)``."""
        if self.answers:
            return self.answers
        return (self.gold_answer,) if self.gold_answer else ()

    def to_dict(self) -> dict:
        """All fields; ``source``, ``added`` and ``annotator`` only when set, so an eval set written
        before they existed keeps its fingerprint."""
        out = asdict(self)
        out["evidence"] = [e.to_dict() for e in self.evidence]
        for key in PROVENANCE_FIELDS:
            if out[key] is None:
                del out[key]
        return out


class Corpus(Mapping[str, Document]):
    """Documents by id, in load order; ``conversion``: what reading a folder converted and skipped
    (``None`` when nothing needed converting)."""

    def __init__(
        self, documents: Iterable[Document], source: str = "", conversion: ConversionReport | None = None
    ) -> None:
        self._docs: dict[str, Document] = {}
        for doc in documents:
            if doc.id in self._docs:
                raise ValueError(f"duplicate document id {doc.id!r}")
            self._docs[doc.id] = doc
        self.source = source
        self.conversion = conversion
        self._fingerprint: str | None = None

    def __getitem__(self, doc_id: str) -> Document:
        return self._docs[doc_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)

    def documents(self) -> list[Document]:
        return list(self._docs.values())

    def fingerprint(self) -> str:
        """SHA-256 over (id, title, text) of every document, in id order; with the identity of
        every converter used (:meth:`ragexp.data.convert.Converter.identity`) when documents were
        converted, so a new converter version is a new corpus even where the text came out equal."""
        if self._fingerprint is None:
            documents = sorted((d.id, d.title, d.text) for d in self._docs.values())
            converters = self.conversion.converters if self.conversion is not None else {}
            self._fingerprint = stable_hash({"documents": documents, "converters": converters} if converters else documents)
        return self._fingerprint


@dataclass
class EvalSet:
    """A fixed list of eval items, plus where it came from."""

    items: list[EvalItem]
    source: str = ""
    name: str = ""
    meta: dict = field(default_factory=dict)
    _fingerprint: tuple[tuple[EvalItem, ...], str] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[EvalItem]:
        return iter(self.items)

    def fingerprint(self) -> str:
        """SHA-256 over the resolved items (evidence as spans), independent of file layout and of
        when each item was ``added`` and by which ``annotator`` (neither changes a number). Kept while ``items`` holds the same
        (frozen) item objects: a run asks for it several times."""
        cached = self._fingerprint
        if cached is None or len(cached[0]) != len(self.items) or any(a is not b for a, b in zip(cached[0], self.items)):
            rows = [{k: v for k, v in item.to_dict().items() if k not in ("added", "annotator")} for item in self.items]
            self._fingerprint = cached = (tuple(self.items), stable_hash(rows))
        return cached[1]
