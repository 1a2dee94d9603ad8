"""BEIR datasets: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` in one folder.

- Documents: ``{"_id", "title", "text"}`` per line; ``Document.title`` and ``Document.text`` are
  taken verbatim (see :func:`ragexp.data.loaders.corpus.read_jsonl_corpus`).
- Queries: ``{"_id", "text"}`` per line; only queries that appear in the split's qrels are kept, in
  ``queries.jsonl`` order (as BEIR's ``GenericDataLoader`` does). The others are named, not dropped
  silently: the eval set's ``meta["warnings"]`` says how many there are and which (the first
  :data:`NAMED`), and a run reports it with its warnings (usually another split's queries).
- Qrels: a header line, then ``query-id <TAB> corpus-id <TAB> score``. Every judgement becomes
  document-level :class:`~ragexp.datamodel.Evidence` with ``grade = score`` — grades are kept as given,
  0 (judged non-relevant) included, so graded metrics (nDCG) match trec_eval on the same qrels. A
  repeated (query, document) pair keeps its last score, as BEIR does.
"""

from __future__ import annotations

import csv
from os import PathLike
from pathlib import Path

from ragexp.data.loaders.corpus import read_jsonl_corpus
from ragexp.data.loaders.jsonl import iter_jsonl_objects, read_text
from ragexp.datamodel import Corpus, EvalItem, EvalSet, Evidence
from ragexp.errors import RagexpInputError

NAMED = 10
"""Queries without a judgement named by id in the warning (the rest counted)."""


def load_beir(path: str | PathLike[str], split: str = "test") -> tuple[Corpus, EvalSet]:
    """Load a BEIR dataset folder; the eval set holds the queries judged in ``qrels/<split>.tsv``."""
    root = Path(path)
    corpus_file, queries_file, qrels_file = (
        root / "corpus.jsonl",
        root / "queries.jsonl",
        root / "qrels" / f"{split}.tsv",
    )
    for required in (corpus_file, queries_file, qrels_file):
        if not required.is_file():
            raise RagexpInputError(
                "missing; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv", file=required
            )
    documents = read_jsonl_corpus(corpus_file)
    if not documents:
        raise RagexpInputError("empty corpus: the file holds no documents", file=corpus_file)
    corpus = Corpus(documents, source=str(root))
    queries = _read_queries(queries_file)
    judgements = _read_qrels(qrels_file, queries, corpus)
    items = [
        EvalItem(
            id=query_id,
            query=text,
            evidence=tuple(Evidence(doc_id=doc_id, grade=grade) for doc_id, grade in judgements[query_id].items()),
        )
        for query_id, text in queries.items()
        if query_id in judgements
    ]
    meta: dict = {"format": "beir", "split": split}
    unjudged = [query_id for query_id in queries if query_id not in judgements]
    if unjudged:
        named = ", ".join(unjudged[:NAMED]) + (f" and {len(unjudged) - NAMED} more" if len(unjudged) > NAMED else "")
        meta["warnings"] = [f"{len(unjudged)} of {len(queries)} queries in {queries_file.name} have no judgement in "
                            f"qrels/{split}.tsv and are not in the eval set: {named}"]
    evalset = EvalSet(items=items, source=str(qrels_file), name=f"{root.name}-{split}", meta=meta)
    return corpus, evalset


def _read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for line, obj in iter_jsonl_objects(path):
        query_id, text = obj.get("_id"), obj.get("text")
        for field, value in (("_id", query_id), ("text", text)):
            if not isinstance(value, str):
                raise RagexpInputError(f"must be a string, got {value!r}", file=path, line=line, field=field)
        if query_id in queries:
            raise RagexpInputError(f"duplicate query id {query_id!r}", file=path, line=line, field="_id")
        queries[query_id] = text
    return queries


def _read_qrels(path: Path, queries: dict[str, str], corpus: Corpus) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: score}}`` from a BEIR qrels TSV (first line is the header)."""
    judgements: dict[str, dict[str, int]] = {}
    rows = csv.reader(read_text(path).splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
    for line, row in enumerate(rows, start=1):
        if line == 1 or not row:
            continue
        if len(row) != 3:
            raise RagexpInputError(
                f"expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}", file=path, line=line
            )
        query_id, doc_id, score = row
        if query_id not in queries:
            raise RagexpInputError(
                f"query id {query_id!r} is not in queries.jsonl", file=path, line=line, field="query-id"
            )
        if doc_id not in corpus:
            raise RagexpInputError(
                f"document id {doc_id!r} is not in corpus.jsonl", file=path, line=line, field="corpus-id"
            )
        try:
            grade = int(score)
        except ValueError:
            raise RagexpInputError(
                f"must be an integer relevance grade, got {score!r}", file=path, line=line, field="score"
            ) from None
        judgements.setdefault(query_id, {})[doc_id] = grade
    return judgements
