"""The portable result of one run: what the gate, compare and export read.

A ``RunResults`` is written by the runner as the MLflow artifact ``ragexp_results.json`` and can
be saved to any file, so CI can gate without a tracking server.

Layout (JSON)::

    {"format": "ragexp-results/1",
     "meta": {"run_id": ..., "run_name": ..., "config_hash": ..., "evalset_fingerprint": ...,
              "corpus_fingerprint": ..., "n_queries": ...},
     "aggregates": {"recall_at_5": 0.8, ...},
     "per_query": [{"query_id": "q1", "tags": ["paraphrase"], "metrics": {"recall_at_5": 1.0, ...},
                    "ranking": [["doc#chunk_0", 12.3], ...], "relevant": {"doc#chunk_0": 1}}, ...]}

Per-query metric values are floats; a metric that does not apply to a query (e.g. retrieval
metrics on an unanswerable item) is absent from that query's ``metrics``, never NaN.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.judging.failure import FailureClass, gold_in_context
from ragexp.runtime.atomic_file import atomic_write

FORMAT = "ragexp-results/1"
ARTIFACT_NAME = "ragexp_results.json"


def failure_class(row: dict, context_k: int) -> str:
    """A query's failure class: a generation run's own (``row["failure_class"]``), else the
    retrieval-only one: ``retrieval_failure`` when no relevant unit is among the ``context_k`` a
    generator would be shown (:func:`~ragexp.judging.failure.gold_in_context`, as in generation
    runs), ``ok`` when one is, ``no_gold`` for items without gold evidence."""
    if row.get("failure_class"):
        return row["failure_class"]
    if not any(g > 0 for g in row["relevant"].values()):
        return "no_gold"
    found = gold_in_context([cid for cid, _ in row["ranking"][:context_k]], row["relevant"])
    return FailureClass.OK.value if found else FailureClass.RETRIEVAL_FAILURE.value


@dataclass
class RunResults:
    meta: dict
    aggregates: dict[str, float]
    per_query: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "meta": self.meta, "aggregates": self.aggregates, "per_query": self.per_query}

    def to_json(self) -> str:
        """The file's text: ``meta`` and ``aggregates`` one key per line, ``per_query`` one query
        per line, so the file reads and diffs line by line (MLflow's artifact viewer, git)."""
        def dumps(value) -> str:
            return json.dumps(value, ensure_ascii=False)

        def block(opening: str, entries: list[str], closing: str) -> str:
            return f"{opening}\n" + ",\n".join(entries) + f"\n {closing}" if entries else opening + closing

        meta = block("{", [f"  {dumps(k)}: {dumps(v)}" for k, v in self.meta.items()], "}")
        aggregates = block("{", [f"  {dumps(k)}: {dumps(v)}" for k, v in self.aggregates.items()], "}")
        rows = block("[", [f"  {dumps(row)}" for row in self.per_query], "]")
        return f'{{"format": {dumps(FORMAT)},\n "meta": {meta},\n "aggregates": {aggregates},\n "per_query": {rows}}}\n'

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` whole or not at all (:mod:`ragexp.runtime.atomic_file`)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> "RunResults":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RagexpInputError("no such results file", file=path) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RagexpInputError(f"not a ragexp results file: {err}", file=path) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RagexpInputError(f"not a ragexp results file (expected format {FORMAT!r})", file=path, field="format")
        return cls(meta=data.get("meta", {}), aggregates=data.get("aggregates", {}), per_query=data.get("per_query", []))
