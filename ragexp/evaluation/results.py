"""The portable result of one run: what the gate, compare and export read.

A :class:`RunResults` is written by the runner as the MLflow artifact ``ragexp_results.json`` and
can be saved to any file, so CI can gate without a tracking server. It holds one
:class:`QueryResult` per eval-set item. :meth:`RunResults.save` is the one writer and
:meth:`RunResults.load` the one reader; every command and page reads a query's fields as
attributes of the record, never a dict by key.

Layout (JSON)::

    {"format": "ragexp-results/1",
     "meta": {"run_id": ..., "run_name": ..., "config_hash": ..., "evalset_fingerprint": ...,
              "corpus_fingerprint": ..., "n_queries": ..., "ks": [...], "context_k": ...},
     "aggregates": {"recall_at_5": 0.8, ...},
     "per_query": [{"query_id": "q1", "tags": ["paraphrase"], "metrics": {"recall_at_5": 1.0, ...},
                    "ranking": [["doc#chunk_0", 12.3], ...], "relevant": {"doc#chunk_0": 1}}, ...]}

Per-query metric values are floats; a metric that does not apply to a query (e.g. retrieval
metrics on an unanswerable item) is absent from that query's ``metrics``, never NaN. An aggregate
with no query to average over (``mrr`` of a run without gold) is NaN, so the file admits NaN.

The reader is strict (the file may come from another machine, an upload or CI): bytes through
:mod:`ragexp.stored.limits` (at most :data:`MAX_BYTES` and :data:`MAX_VALUES` JSON values, both
checked before anything is parsed), then a closed schema: a key it does not
know, or a value of the wrong type, is refused with one line naming the file and the field
(``per_query[3].ranking``). ``meta`` is the run's provenance record and stays an open object,
but the keys a number depends on (``ks``, ``context_k``, the fingerprints) are type-checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragexp.datamodel import is_relevant
from ragexp.errors import RagexpInputError
from ragexp.judging.failure import FailureClass, gold_in_context
from ragexp.judging.faithfulness import Verdict
from ragexp.runtime.atomic_file import atomic_write
from ragexp.stored.limits import parse_json, read_text

FORMAT = "ragexp-results/1"
ARTIFACT_NAME = "ragexp_results.json"
#: The largest results file read (10,000 queries with 100 ranked units and judged contexts fit).
MAX_BYTES = 512 * 1024 * 1024
#: The most JSON values it may hold, counted before parsing (a query of 100 ranked units and ~40
#: metrics is ~350 values, so 10,000 such queries fit; a file of 4M empty objects peaks at ~0.6 GB).
MAX_VALUES = 4_000_000


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class _Check:
    """Type checks that refuse with one line naming the file and the field."""

    file: str | Path | None

    def error(self, path: str, message: str) -> RagexpInputError:
        return RagexpInputError(message, file=self.file, field=path)

    def obj(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise self.error(path, f"must be an object, not {_kind(value)}")
        return value

    def array(self, value: Any, path: str, what: str = "a list") -> list:
        if not isinstance(value, list):
            raise self.error(path, f"must be {what}, not {_kind(value)}")
        return value

    def text(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, not {_kind(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, not {_kind(value)}")
        return value

    def integer(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be a whole number, not {_kind(value) if not isinstance(value, float) else value}")
        return value

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(path, f"must be a number, not {_kind(value)}")
        return float(value)


@dataclass(frozen=True)
class QueryResult:
    """One eval-set item's outcome. Retrieval fields are always set by the runner; the
    generation fields (``answer`` onwards) only in a run with a generator, the judge fields
    (``claims`` to ``faithfulness_undefined``) only with a judge, ``pages``/``gold_pages`` only
    for a corpus with paged documents. ``None`` means "not part of this run" and is not written.

    - ``ranking``: ``(unit id, score)`` pairs, best first, as retrieved (to the run's depth);
    - ``relevant`` / ``doc_relevant``: graded qrels at chunk and document level;
    - ``first_relevant_rank``: 1-based rank of the first relevant unit, ``None`` if none retrieved;
    - ``metrics``: the per-query metric values by flat name (``hit_rate_at_5``, ``doc_mrr``, ``f1``);
    - ``answer``: the generated answer without the lines that copied a context label line, and
      ``label_lines_removed`` how many there were (:func:`ragexp.data.context.strip_label_copies`);
    - ``failure_class``: the generation run's class (:mod:`ragexp.judging.failure`).
    """

    query_id: str
    query: str = ""
    tags: tuple[str, ...] = ()
    source: str | None = None
    answerable: bool = True
    ranking: tuple[tuple[str, float], ...] = ()
    relevant: dict[str, int] = field(default_factory=dict)
    doc_relevant: dict[str, int] = field(default_factory=dict)
    first_relevant_rank: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    pages: dict[str, str] | None = None
    gold_pages: tuple[str, ...] | None = None
    answer: str | None = None
    generation_error: str | None = None
    prompt_tokens: int | None = None  # the generation call's, as the model reported them
    completion_tokens: int | None = None
    label_lines_removed: int | None = None
    claims: tuple[Verdict, ...] | None = None
    judge_context: str | None = None
    n_claims: int | None = None
    n_supported: int | None = None
    judge_failures: int | None = None
    faithfulness_undefined: str | None = None
    generated_question: str | None = None
    failure_class: str | None = None

    def top_ids(self, k: int) -> list[str]:
        """The ids of the first ``k`` ranked units."""
        return [unit for unit, _ in self.ranking[:k]]

    def has_gold(self) -> bool:
        """Whether any unit is relevant (:func:`~ragexp.datamodel.is_relevant`: an item with gold evidence)."""
        return any(map(is_relevant, self.relevant.values()))

    def outcome_class(self, context_k: int) -> str:
        """The query's failure class: a generation run's own (:attr:`failure_class`), else the
        retrieval-only one: ``retrieval_failure`` when no relevant unit is among the ``context_k``
        a generator would be shown (:func:`~ragexp.judging.failure.gold_in_context`, as in
        generation runs), ``ok`` when one is, ``no_gold`` for items without gold evidence."""
        if self.failure_class:
            return self.failure_class
        if not self.has_gold():
            return "no_gold"
        found = gold_in_context(self.top_ids(context_k), self.relevant)
        return FailureClass.OK.value if found else FailureClass.RETRIEVAL_FAILURE.value

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, fields in declaration order; ``None`` fields left out, except
        ``first_relevant_rank`` (``null``: nothing relevant retrieved)."""
        out: dict[str, Any] = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.name != "first_relevant_rank":
                continue
            if spec.name == "ranking":
                value = [[unit, score] for unit, score in value]
            elif spec.name == "claims":
                value = [verdict.to_dict() for verdict in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[spec.name] = value
        return out

    @classmethod
    def from_dict(cls, row: Any, where: str = "per_query[0]", file: str | Path | None = None) -> QueryResult:
        """``row`` (one parsed JSON object) checked against the closed schema; a wrong key or
        type is a :class:`~ragexp.errors.RagexpInputError` naming ``file`` and ``where.<field>``."""
        check = _Check(file)
        row = check.obj(row, where)
        unknown = sorted(set(row) - _ROW_FIELDS)
        if unknown:
            raise check.error(f"{where}.{unknown[0]}", f"is not a field of a query result (known: {', '.join(sorted(_ROW_FIELDS))})")
        if "query_id" not in row:
            raise check.error(f"{where}.query_id", "is required")
        values: dict[str, Any] = {}
        for name, value in row.items():
            path = f"{where}.{name}"
            if value is None and name in _NULLABLE:
                continue
            values[name] = _ROW_READERS[name](check, value, path)
        return cls(**values)


def _verdict(check: _Check, value: Any, path: str) -> Verdict:
    obj = check.obj(value, path)
    known = {spec.name for spec in fields(Verdict)}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise check.error(f"{path}.{unknown[0]}", f"is not a field of a claim verdict (known: {', '.join(sorted(known))})")
    if "claim" not in obj:
        raise check.error(f"{path}.claim", "is required")
    supported = obj.get("supported")
    if supported is not None and not isinstance(supported, bool):
        raise check.error(f"{path}.supported", f"must be true, false or null, not {_kind(supported)}")
    evidence = obj.get("evidence")
    return Verdict(
        claim=check.text(obj["claim"], f"{path}.claim"),
        supported=supported,
        score=None if obj.get("score") is None else check.number(obj["score"], f"{path}.score"),
        raw=check.text(obj.get("raw", ""), f"{path}.raw"),
        error=None if obj.get("error") is None else check.text(obj["error"], f"{path}.error"),
        evidence=None if evidence is None else [check.integer(v, f"{path}.evidence") for v in check.array(evidence, f"{path}.evidence")],
    )


def _ranking(check: _Check, value: Any, path: str) -> tuple[tuple[str, float], ...]:
    pairs = []
    for index, pair in enumerate(check.array(value, path, "a list of [unit id, score] pairs")):
        at = f"{path}[{index}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise check.error(at, f"must be a [unit id, score] pair, not {_kind(pair)}")
        pairs.append((check.text(pair[0], at), check.number(pair[1], at)))
    return tuple(pairs)


def _grades(check: _Check, value: Any, path: str) -> dict[str, int]:
    return {unit: check.integer(grade, f"{path}.{unit}") for unit, grade in check.obj(value, path).items()}


def _texts(check: _Check, value: Any, path: str) -> tuple[str, ...]:
    return tuple(check.text(v, f"{path}[{i}]") for i, v in enumerate(check.array(value, path, "a list of strings")))


_ROW_READERS = {
    "query_id": _Check.text,
    "query": _Check.text,
    "tags": _texts,
    "source": _Check.text,
    "answerable": _Check.boolean,
    "ranking": _ranking,
    "relevant": _grades,
    "doc_relevant": _grades,
    "first_relevant_rank": _Check.integer,
    "metrics": lambda check, v, path: {name: check.number(x, f"{path}.{name}") for name, x in check.obj(v, path).items()},
    "pages": lambda check, v, path: {unit: check.text(x, f"{path}.{unit}") for unit, x in check.obj(v, path).items()},
    "gold_pages": _texts,
    "answer": _Check.text,
    "prompt_tokens": _Check.integer,
    "completion_tokens": _Check.integer,
    "generation_error": _Check.text,
    "label_lines_removed": _Check.integer,
    "claims": lambda check, v, path: tuple(_verdict(check, x, f"{path}[{i}]")
                                           for i, x in enumerate(check.array(v, path, "a list of claim verdicts"))),
    "judge_context": _Check.text,
    "n_claims": _Check.integer,
    "n_supported": _Check.integer,
    "judge_failures": _Check.integer,
    "faithfulness_undefined": _Check.text,
    "generated_question": _Check.text,
    "failure_class": _Check.text,
}
_ROW_FIELDS = frozenset(_ROW_READERS)
_NULLABLE = frozenset(spec.name for spec in fields(QueryResult) if spec.default is None)
#: ``meta`` keys the comparison reads into a number, and their checks.
_META_READERS = {
    "ks": lambda check, v, path: [check.integer(x, f"{path}[{i}]") for i, x in enumerate(check.array(v, path, "a list of integers"))],
    "context_k": _Check.integer,
    "n_queries": _Check.integer,
    "run_id": _Check.text,
    "run_name": _Check.text,
    "config_hash": _Check.text,
    "evalset_fingerprint": _Check.text,
    "corpus_fingerprint": _Check.text,
    "warnings": _texts,
    # the gold check (ragexp.data.loaders.evalset.gold_check_meta): the gate reads the counts
    "gold": lambda check, v, path: {
        "moved": check.integer(check.obj(v, path).get("moved", 0), f"{path}.moved"),
        "unverifiable": check.integer(v.get("unverifiable", 0), f"{path}.unverifiable"),
        "moves": [check.obj(m, f"{path}.moves[{i}]") for i, m in enumerate(check.array(v.get("moves", []), f"{path}.moves"))]},
}


@dataclass(frozen=True)
class RunResults:
    """One run's results: ``meta`` (provenance: names, fingerprints, ``ks``, ``context_k``,
    timings, warnings), ``aggregates`` (flat metric name -> value) and one :class:`QueryResult`
    per item, in eval-set order."""

    meta: dict[str, Any]
    aggregates: dict[str, float]
    per_query: list[QueryResult] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "meta": self.meta, "aggregates": self.aggregates,
                "per_query": [row.to_dict() for row in self.per_query]}

    def to_json(self) -> str:
        """The file's text: ``meta`` and ``aggregates`` one key per line, ``per_query`` one query
        per line, so the file reads and diffs line by line (MLflow's artifact viewer, git)."""
        def dumps(value) -> str:
            return json.dumps(value, ensure_ascii=False)

        def block(opening: str, entries: list[str], closing: str) -> str:
            return f"{opening}\n" + ",\n".join(entries) + f"\n {closing}" if entries else opening + closing

        meta = block("{", [f"  {dumps(k)}: {dumps(v)}" for k, v in self.meta.items()], "}")
        aggregates = block("{", [f"  {dumps(k)}: {dumps(v)}" for k, v in self.aggregates.items()], "}")
        rows = block("[", [f"  {dumps(row.to_dict())}" for row in self.per_query], "]")
        return f'{{"format": {dumps(FORMAT)},\n "meta": {meta},\n "aggregates": {aggregates},\n "per_query": {rows}}}\n'

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` whole or not at all (:mod:`ragexp.runtime.atomic_file`)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> RunResults:
        """The one reader: ``path`` within :data:`MAX_BYTES`, as strict JSON, against the schema."""
        data = parse_json(read_text(path, max_bytes=MAX_BYTES), source=path, allow_nan=True, max_values=MAX_VALUES)
        check = _Check(path)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RagexpInputError(f"not a ragexp results file (expected format {FORMAT!r})", file=path, field="format")
        unknown = sorted(set(data) - {"format", "meta", "aggregates", "per_query"})
        if unknown:
            raise check.error(unknown[0], "is not a part of a results file (format, meta, aggregates, per_query)")
        meta = check.obj(data.get("meta", {}), "meta")
        for name, read in _META_READERS.items():
            if meta.get(name) is not None:
                read(check, meta[name], f"meta.{name}")
        aggregates = {name: check.number(v, f"aggregates.{name}") for name, v in check.obj(data.get("aggregates", {}), "aggregates").items()}
        rows = check.array(data.get("per_query", []), "per_query", "a list of query results")
        per_query = [QueryResult.from_dict(row, f"per_query[{i}]", path) for i, row in enumerate(rows)]
        return cls(meta=meta, aggregates=aggregates, per_query=per_query)

    def metric_values(self, metric: str) -> dict[str, float]:
        """``{query id: value}`` of one per-query metric, for the queries that have it."""
        return {row.query_id: row.metrics[metric] for row in self.per_query if metric in row.metrics}

    def metric_names(self) -> set[str]:
        """Every per-query metric name some query has."""
        return {name for row in self.per_query for name in row.metrics}
