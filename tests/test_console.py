"""Terminal summary: failed generator calls and judge verdicts are reported, not hidden in a metric."""

from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.jobs.console import call_failure_warnings, index_warnings


def results(aggregates: dict, rows: list[dict]) -> RunResults:
    return RunResults(meta={}, aggregates=aggregates, per_query=[QueryResult.from_dict(row) for row in rows])


def test_failed_generator_calls_are_reported_with_the_first_error():
    rows = [{"query_id": "q1"}, {"query_id": "q2", "generation_error": "http_401: Bearer <redacted>"}, {"query_id": "q3"}]
    lines = call_failure_warnings(results({"generation_errors": 1.0, "judge_failures": 2.0}, rows))
    assert lines[0].startswith("WARNING: 1 of 3 generator calls failed (first: http_401: Bearer <redacted>)")
    assert lines[1].startswith("WARNING: 2 claim verdicts failed")


def test_a_clean_run_prints_no_warning():
    assert call_failure_warnings(results({"generation_errors": 0.0, "judge_failures": 0.0}, [{"query_id": "q1"}])) == []
    assert call_failure_warnings(results({"mrr": 0.5}, [{"query_id": "q1"}])) == []


def test_documents_that_were_not_indexed_are_reported_with_their_count():
    run = RunResults(meta={"docs_not_indexed": ["blank1", "blank2"]}, aggregates={"n_docs_not_indexed": 2.0})
    (line,) = index_warnings(run)
    assert line.startswith("WARNING: 2 documents") and "blank1, blank2" in line
    # what the run does with gold there (ragexp.evaluation.prepared.blank_gold; tests/test_corpus_edge_cases.py)
    assert "evidence in them stays gold, which no run can retrieve: a query whose gold lies only there scores 0" in line
    assert index_warnings(RunResults(meta={}, aggregates={"n_docs_not_indexed": 0.0})) == []
