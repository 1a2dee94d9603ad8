"""ragexp_results.json: the line-per-query layout round-trips, and a second save that copies the
rows block of the first (logging adds only the run id) writes what a full serialization writes."""

from __future__ import annotations

import json

from ragexp.evaluation.results import RunResults


def results() -> RunResults:
    tricky = 'a value with "\n "per_query": [' + "\n" + '} and ünïcode'  # the rows key's text inside a value
    return RunResults(
        meta={"run_name": "x · y", "note": tricky, "ks": [1, 5]},
        aggregates={"hit_rate_at_5": 0.5, '\n "per_query": ': 1.0},
        per_query=[{"query_id": f"q{i}", "ranking": [["d#0", 0.1 * i], ["d#1", float("nan")]], "query": tricky}
                   for i in range(3)],
    )


def test_save_round_trips_one_query_per_line(tmp_path):
    original = results()
    path = original.save(tmp_path / "r.json")
    loaded = RunResults.load(path)
    assert loaded.meta == original.meta and loaded.aggregates == original.aggregates
    assert json.dumps(loaded.per_query) == json.dumps(original.per_query)  # NaN survives as NaN
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sum(line.startswith('  {"query_id"') for line in lines) == 3


def test_an_empty_run_saves_and_loads(tmp_path):
    empty = RunResults(meta={}, aggregates={})
    saved = empty.save(tmp_path / "a.json")
    assert json.loads(saved.read_text()) == empty.to_dict()
    assert RunResults.load(saved).per_query == []
