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

FORMAT = "ragexp-results/1"
ARTIFACT_NAME = "ragexp_results.json"
ROWS_KEY = '\n "per_query": '
"""Where :meth:`RunResults.to_json` starts the rows block: a JSON value never holds a raw newline,
so this line start is the top-level key and nothing else."""


def rows_json_of(text: str) -> str:
    """The ``per_query`` block of a text :meth:`RunResults.to_json` wrote."""
    start = text.index(ROWS_KEY) + len(ROWS_KEY)
    return text[start : text.rindex("}")]


@dataclass
class RunResults:
    meta: dict
    aggregates: dict[str, float]
    per_query: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "meta": self.meta, "aggregates": self.aggregates, "per_query": self.per_query}

    def to_json(self, rows_json: str | None = None) -> str:
        """The file's text: ``meta`` and ``aggregates`` one key per line, ``per_query`` one query
        per line, so the file reads and diffs line by line (MLflow's artifact viewer, git).
        ``rows_json``: the ``per_query`` block as written before (:func:`rows_json_of`), reused verbatim."""
        def block(mapping: dict) -> str:
            lines = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in mapping.items()]
            return "{\n" + ",\n".join(lines) + "\n }" if lines else "{}"

        if rows_json is None:
            rows = ",\n".join(f"  {json.dumps(row, ensure_ascii=False)}" for row in self.per_query)
            rows_json = "[\n" + rows + "\n ]" if rows else "[]"
        return (f'{{"format": {json.dumps(FORMAT)},\n "meta": {block(self.meta)},\n'
                f' "aggregates": {block(self.aggregates)},{ROWS_KEY}{rows_json}}}\n')

    def save(self, path: str | Path, rows_from: Path | None = None) -> Path:
        """Write :meth:`to_json` to ``path`` (atomically). ``rows_from``: a file this ``RunResults``
        was saved to before, its ``per_query`` rows unchanged since (only ``meta`` changed: logging
        adds the run id), whose rows block is copied instead of serialized again (~15 ms a job)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows_json = rows_json_of(rows_from.read_text(encoding="utf-8")) if rows_from is not None else None
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json(rows_json), encoding="utf-8")
        tmp.replace(path)
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

    def metric_by_query(self, metric: str) -> dict[str, float]:
        """``{query_id: value}`` for the queries where ``metric`` applies."""
        return {row["query_id"]: row["metrics"][metric] for row in self.per_query if metric in row.get("metrics", {})}
