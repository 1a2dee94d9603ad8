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
- Relevance is decided in one place, :func:`is_relevant`: a grade is relevant iff it is >= the
  relevance level, :data:`RELEVANCE_LEVEL` (1) unless a :class:`Qrels` carries another one.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ragexp.errors import RagexpInputError
from ragexp.runtime.fingerprint import stable_hash

if TYPE_CHECKING:
    from ragexp.data.convert.report import ConversionReport

CHUNK_SEPARATOR = "#chunk_"

#: trec_eval's default relevance level (``-l 1``): grade >= 1 is relevant, grade 0 judged non-relevant.
RELEVANCE_LEVEL = 1

_Grades = TypeVar("_Grades")


def is_relevant(grade: _Grades, level: int = RELEVANCE_LEVEL) -> _Grades:
    """Whether ``grade`` is relevant at ``level``: ``grade >= level`` (trec_eval's ``relevance_level``).
    Elementwise on a numpy array of grades (a boolean array back). The only place ragexp decides it."""
    return grade >= level


def text_sha256(text: str) -> str:
    """SHA-256 (hex) of ``text`` as UTF-8: the fingerprint an eval set records of each gold
    document's text, so a run knows with one compare whether the document changed since."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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

    @property
    def relevant(self) -> bool:
        """Positive evidence: its grade is relevant at :data:`RELEVANCE_LEVEL` (grade 0 is a judged negative)."""
        return is_relevant(self.grade)

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


class Qrels(Mapping[str, Mapping[str, int]]):
    """Graded relevance judgments ``{query id: {unit id: grade}}`` and the level that makes a grade relevant.

    - A unit is relevant to a query iff its grade is >= ``relevance_level`` (:meth:`is_relevant`;
      trec_eval's ``-l``, an integer >= 1, default :data:`RELEVANCE_LEVEL`); a judged unit below
      it is judged non-relevant; a unit the qrels do not name is unjudged (grade 0 to every metric).
    - Gains (nDCG) are the grades themselves, whatever the level, as in trec_eval.
    - Read-only: the grades are copied on construction and handed out as read-only mappings.
      Equal to another ``Qrels`` with the same grades and level, and to a plain mapping with the
      same grades when its level is the default.
    """

    __slots__ = ("_grades", "relevance_level")
    _grades: dict[str, dict[str, int]]
    relevance_level: int

    def __init__(self, grades: Mapping[str, Mapping[str, int]] | None = None, relevance_level: int = RELEVANCE_LEVEL) -> None:
        if isinstance(relevance_level, bool) or not isinstance(relevance_level, int) or relevance_level < 1:
            raise RagexpInputError(f"must be an integer >= 1, got {relevance_level!r}", field="relevance_level")
        object.__setattr__(self, "_grades", {qid: dict(units) for qid, units in (grades or {}).items()})
        object.__setattr__(self, "relevance_level", relevance_level)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Qrels is read-only (cannot set {name!r})")

    def __reduce__(self) -> tuple:
        return Qrels, (self._grades, self.relevance_level)

    def __getitem__(self, query_id: str) -> Mapping[str, int]:
        return MappingProxyType(self._grades[query_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._grades)

    def __len__(self) -> int:
        return len(self._grades)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Qrels):
            return self.relevance_level == other.relevance_level and self._grades == other._grades
        if isinstance(other, Mapping):
            return self.relevance_level == RELEVANCE_LEVEL and self._grades == {q: dict(u) for q, u in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Qrels({self._grades!r}, relevance_level={self.relevance_level})"

    def is_relevant(self, grade: _Grades) -> _Grades:
        """Whether ``grade`` is relevant at this level (elementwise on a numpy array): :func:`is_relevant`."""
        return is_relevant(grade, self.relevance_level)

    def grades(self, query_id: str) -> Mapping[str, int]:
        """Every judged unit of ``query_id`` with its grade, relevant or not; empty when it has none."""
        return MappingProxyType(self._grades.get(query_id, {}))

    def relevant(self, query_id: str) -> dict[str, int]:
        """The relevant units of ``query_id`` with their grades; empty when it has none."""
        return {unit: grade for unit, grade in self._grades.get(query_id, {}).items() if self.is_relevant(grade)}
