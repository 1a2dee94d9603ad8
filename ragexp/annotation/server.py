"""The annotation page's HTTP API (FastAPI routers on :func:`ragexp.web.app.create_app`).

==========================================  ==================================================
``GET /api/state``                          entries (with status, units still to review, hints, stale spans), coverage
``GET /api/entries/{id}/candidates``        the pool for the question (``pending``: pipelines still being built,
                                            ``failed``: those that could not be), or the units queued to judge
                                            (with each annotator's ``verdicts`` when adjudicating)
``GET /api/search?q=``                      ranked full-text search over the corpus (top 20)
``GET /api/documents/{doc_id}``             a whole document
``PUT /api/entries/{id}``                   ``{"changes": {...}, "before": {...}}``: change one entry
``POST /api/entries``                       add a question typed on the page
``DELETE /api/entries/{id}``                delete a queued question the eval set does not hold
==========================================  ==================================================

An entry's status is ``skipped``, ``review`` (a run queued units on it that nobody has gone through:
``Ctrl+Enter`` marks them reviewed; the item may be in the eval set already), ``done`` (in the eval
set) or ``open``; ``pending`` counts the queued units nobody judged yet (:func:`pending_units`).
On a set queued for adjudication ``unsettled`` says why the question cannot be marked reviewed yet
(:func:`ragexp.annotation.adjudication.unsettled`), and a change that marks it reviewed before then
is refused with 422; ``GET /api/state`` names the ``adjudicator``.

Every write re-reads the corpus if a file under it changed, and checks each evidence span the page
sends against it: a span that does not read its quote any more is *stale*. A stale span the eval
set already held is kept as it is (and shown as stale: lint reports it too); a new stale span
means the page shows an outdated document, so the save is refused with 409 and nothing is written.
A change to a field someone else changed since the page showed it is refused with 409 as well;
a change that is already so (a retried save whose reply was lost) is answered 200 and writes nothing
(:mod:`ragexp.annotation.session`). Each request holds the session's lock, shared with other
servers on the same eval set, from reading the files to writing them.
"""

from __future__ import annotations

import threading

from ragexp.annotation.adjudication import decided, unsettled
from ragexp.annotation.coverage import coverage
from ragexp.annotation.hints import ChunkMap, category_hints
from ragexp.annotation.live_corpus import LiveCorpus, span_problem
from ragexp.annotation.pool import Pooler, mark_identical, page_label, passage
from ragexp.annotation.search import CorpusSearch
from ragexp.annotation.session import Session, check_changes, is_complete
from ragexp.candidates.log_reader import MAX_LINE_CHARS
from ragexp.datamodel import is_relevant
from ragexp.web.edit_session import Conflict

MAX_DOCUMENT_CHARS = 400_000
MAX_QUERY_CHARS = MAX_LINE_CHARS  # a longer line of a query log is not a query either


class Annotation:
    """The state behind the page: one session, the live corpus, the pooler."""

    def __init__(self, session: Session, corpus: LiveCorpus, pooler: Pooler) -> None:
        self.session, self.corpus, self.pooler = session, corpus, pooler
        session.corpus = corpus.current  # each save records the text its gold documents hold
        self.searcher = CorpusSearch()
        self.lock = threading.Lock()
        self._chunk_map: tuple[int, ChunkMap] | None = None

    def chunk_map(self, corpus=None) -> ChunkMap:
        """The default chunker's chunks of ``corpus`` (the current one when not given), built once per corpus read."""
        corpus = corpus if corpus is not None else self.corpus.current()
        with self.lock:
            if self._chunk_map is None or self._chunk_map[0] is not corpus:
                self._chunk_map = (corpus, ChunkMap(corpus, self.pooler.chunker().chunk_corpus(corpus)))
            return self._chunk_map[1]

    def view(self, entry: dict, corpus=None) -> dict:
        """The entry as the page shows it, against ``corpus`` (one listing of the corpus folder per
        request: pass the corpus a request read once; not given, the folder is listed again)."""
        corpus = corpus if corpus is not None else self.corpus.current()
        evidence = entry.get("evidence", [])
        stale = {i: problem for i, e in enumerate(evidence) if (problem := span_problem(corpus, e)) is not None}
        fresh = [e for i, e in enumerate(evidence) if i not in stale]
        pages = [passage_page(corpus, e) for e in evidence]
        to_review = bool(entry.get("review")) and not entry.get("reviewed")
        status = ("skipped" if entry.get("skipped") else "review" if to_review else "done" if is_complete(entry)
                  else "open")
        return {**entry, "status": status, "pending": pending_units(entry) if to_review else 0,
                "unsettled": unsettled(entry) if to_review else None, "stale": {str(i): p for i, p in stale.items()}, "pages": pages,
                "hints": category_hints(entry["query"], fresh, self.chunk_map(corpus))}

    def state(self) -> dict:
        corpus = self.corpus.current()
        with self.session.lock:
            self.session.reload_if_changed()
            entries = [self.view(entry, corpus) for entry in self.session.entries]
            adjudication = self.session.header.adjudication
            return {"evalset": str(self.session.evalset),
                    "adjudicator": adjudication.adjudicator if adjudication is not None else None,
                    "corpus_generation": self.corpus.generation, "entries": entries,
                    "coverage": coverage(self.session.items(), self.chunk_map(corpus))}

    def check_evidence(self, item_id: str, evidence: list[dict]) -> None:
        """Raise :class:`Conflict` when a span the entry does not hold yet is stale (see module docstring)."""
        corpus = self.corpus.current()
        stored = self.session.entry(item_id) or {}
        known = [_span_key(e) for e in stored.get("evidence", [])]
        for e in evidence:
            problem = span_problem(corpus, e)
            if problem is not None and _span_key(e) not in known:
                raise Conflict(self.session.evalset, f"the corpus changed under this page: {problem}; reload the page to "
                                                     "see the current documents (nothing was written)")


def pending_units(entry: dict) -> int:
    """How many units a run queued on the entry (``--from-run``, ``--failures``) nobody judged yet:
    no span over the unit, no positive evidence inside it, no whole-document evidence of its document.
    A unit queued for adjudication counts as judged only when it is decided: evidence over exactly it
    (:func:`ragexp.annotation.adjudication.decided`)."""
    evidence = entry.get("evidence", [])
    if entry["review"].get("adjudication") is not None:
        return sum(not decided(unit, evidence) for unit in entry["review"]["units"])

    def judged(unit: dict) -> bool:
        return any(e["doc_id"] == unit["doc_id"] and (
            e.get("start") is None or (e["start"], e["end"]) == (unit["start"], unit["end"])
            or (is_relevant(e.get("grade", 1)) and e["start"] < unit["end"] and e["end"] > unit["start"])) for e in evidence)

    return sum(not judged(unit) for unit in entry["review"]["units"])


def _span_key(evidence: dict) -> tuple:
    return (*(evidence.get(k) for k in ("doc_id", "start", "end", "quote")), evidence.get("grade", 1))


def passage_page(corpus, evidence: dict) -> str | None:
    document = corpus.get(evidence.get("doc_id"))
    if document is None or evidence.get("start") is None or not document.page_starts:
        return None
    return page_label(document, evidence["start"], evidence["end"])


def routers(annotation: Annotation) -> list:
    from fastapi import APIRouter, Body, HTTPException

    api = APIRouter(prefix="/api")

    @api.get("/state")
    def state() -> dict:
        return annotation.state()

    @api.get("/entries/{item_id}/candidates")
    def candidates(item_id: str) -> dict:
        entry = annotation.session.entry(item_id)
        if entry is None:
            raise HTTPException(404, f"no entry {item_id!r}")
        corpus = annotation.corpus.current()
        review = entry.get("review")
        if review and not entry.get("reviewed"):
            units = [passage(corpus, u["doc_id"], u["start"], u["end"], unit_id=u["unit_id"])
                     | ({"verdicts": u["verdicts"]} if "verdicts" in u else {})
                     for u in review["units"] if u["doc_id"] in corpus and u["end"] <= len(corpus[u["doc_id"]].text)]
            mark_identical(units)
            return {"kind": "review", "reason": review.get("reason"), "candidates": units}
        pool = annotation.pooler.pool(corpus, entry["query"])
        return {"kind": "pool", "candidates": pool.candidates, "heading_only": pool.heading_only,
                "pending": pool.pending, "failed": pool.failed}

    @api.get("/search")
    def find(q: str = "") -> dict:
        return {"hits": annotation.searcher.search(annotation.corpus.current(), q)}

    @api.get("/documents/{doc_id:path}")
    def document(doc_id: str) -> dict:
        corpus = annotation.corpus.current()
        if doc_id not in corpus:
            raise HTTPException(404, f"no document {doc_id!r}")
        text = corpus[doc_id].text
        return passage(corpus, doc_id, 0, min(len(text), MAX_DOCUMENT_CHARS), context=0)

    @api.put("/entries/{item_id}")
    def update(item_id: str, body: dict = Body(...)) -> dict:
        changes, before = body.get("changes"), body.get("before")
        if not isinstance(changes, dict) or not isinstance(before, dict):
            raise HTTPException(422, "the body needs changes and before (objects)")
        with annotation.session.lock:
            try:
                annotation.session.reload_if_changed()
                if annotation.session.entry(item_id) is None:
                    raise KeyError(item_id)
                check_changes(changes)
                if changes.get("reviewed") is True and (reason := unsettled({**annotation.session.entry(item_id), **changes})):
                    raise ValueError(f"not reviewed: {reason}")
                if "evidence" in changes:
                    annotation.check_evidence(item_id, changes["evidence"])
                entry = annotation.session.update(item_id, changes, before)
            except Conflict as err:
                raise err.http() from None
            except KeyError:
                raise HTTPException(404, f"no entry {item_id!r}") from None
            except ValueError as err:
                raise HTTPException(422, str(err)) from None
            corpus = annotation.corpus.current()
            return {"entry": annotation.view(entry, corpus),
                    "coverage": coverage(annotation.session.items(), annotation.chunk_map(corpus))}

    @api.delete("/entries/{item_id}")
    def delete(item_id: str) -> dict:
        try:
            deleted = annotation.session.delete(item_id)
        except ValueError as err:
            raise HTTPException(422, str(err)) from None
        return {"deleted": deleted}

    @api.post("/entries")
    def add(body: dict = Body(...)) -> dict:
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise HTTPException(422, "query: the question (a non-empty string)")
        query = query.strip()
        if len(query) > MAX_QUERY_CHARS:
            raise HTTPException(422, f"query: {len(query):,} characters is not a question (at most {MAX_QUERY_CHARS:,})")
        with annotation.session.lock:
            return {"entry": annotation.view(annotation.session.add(query))}

    return [api]
