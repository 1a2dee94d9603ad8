"""ragexp_results.json: the line-per-query layout round-trips; the one reader types every field and
refuses an unknown key or a wrong type in one line naming the file and the field, in every command
that reads results."""

from __future__ import annotations

import json

import pytest

from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import QueryResult, RunResults


def results() -> RunResults:
    tricky = 'a value with "\n "per_query": [' + "\n" + '} and ünïcode'  # the rows key's text inside a value
    return RunResults(
        meta={"run_name": "x · y", "note": tricky, "ks": [1, 5]},
        aggregates={"hit_rate_at_5": 0.5, '\n "per_query": ': 1.0},
        per_query=[QueryResult(f"q{i}", ranking=(("d#0", 0.1 * i), ("d#1", float("nan"))), query=tricky)
                   for i in range(3)],
    )


def test_save_round_trips_one_query_per_line(tmp_path):
    original = results()
    path = original.save(tmp_path / "r.json")
    loaded = RunResults.load(path)
    assert loaded.meta == original.meta and loaded.aggregates == original.aggregates
    assert json.dumps(loaded.to_dict()) == json.dumps(original.to_dict())  # NaN survives as NaN
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sum(line.startswith('  {"query_id"') for line in lines) == 3


def test_an_empty_run_saves_and_loads(tmp_path):
    empty = RunResults(meta={}, aggregates={})
    saved = empty.save(tmp_path / "a.json")
    assert json.loads(saved.read_text()) == empty.to_dict()
    assert RunResults.load(saved).per_query == []


def write(tmp_path, per_query, **top) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "ragexp-results/1", "meta": {}, "aggregates": {}, "per_query": per_query, **top}))
    return str(path)


@pytest.mark.parametrize(("rows", "top", "field", "message"), [
    ([{"query_id": "q1", "ranking": "notalist"}], {}, "per_query[0].ranking", "must be a list of [unit id, score] pairs, not a string"),
    ([{"query_id": "q1"}, {"query_id": "q2", "ranking": [["d#0", "high"]]}], {}, "per_query[1].ranking[0]", "must be a number"),
    ([{"query_id": "q1", "rankings": []}], {}, "per_query[0].rankings", "is not a field of a query result"),
    ([{"query": "no id"}], {}, "per_query[0].query_id", "is required"),
    ([{"query_id": 7}], {}, "per_query[0].query_id", "must be a string, not a number"),
    ([{"query_id": "q1", "metrics": {"mrr": "1"}}], {}, "per_query[0].metrics.mrr", "must be a number, not a string"),
    ([{"query_id": "q1", "relevant": {"d#0": 1.5}}], {}, "per_query[0].relevant.d#0", "must be a whole number, not 1.5"),
    ([{"query_id": "q1", "claims": [{"claim": "x", "supported": "yes"}]}], {}, "per_query[0].claims[0].supported",
     "must be true, false or null"),
    ([], {"meta": {"context_k": "5"}}, "meta.context_k", "must be a whole number, not a string"),
    ([], {"extra": 1}, "extra", "is not a part of a results file"),
    ("rows", {}, "per_query", "must be a list of query results, not a string"),
])
def test_the_reader_refuses_a_wrong_key_or_type_in_one_line_naming_file_and_field(tmp_path, rows, top, field, message):
    path = write(tmp_path, rows, **top)
    with pytest.raises(RagexpInputError) as refused:
        RunResults.load(path)
    assert str(refused.value).startswith(f"{path}: field '{field}': {message}") and "\n" not in str(refused.value)


def test_a_row_written_by_an_older_run_reads_back_as_the_same_record(tmp_path):
    """Every field the runner writes, as JSON: typed on read, written back unchanged."""
    row = {"query_id": "q1", "query": "how?", "tags": ["t"], "source": "log", "answerable": True,
           "ranking": [["d#0", 2.5], ["d#1", 1.0]], "relevant": {"d#1": 2}, "doc_relevant": {"d": 2},
           "first_relevant_rank": 2, "metrics": {"mrr": 0.5}, "pages": {"d#0": "p. 1"}, "gold_pages": ["d p. 2"],
           "answer": "x", "claims": [{"claim": "x", "supported": None, "score": None, "raw": "", "error": "timeout",
                                      "evidence": None}],
           "judge_context": "ctx", "n_claims": 1, "n_supported": 0, "judge_failures": 1,
           "faithfulness_undefined": "all_failed", "generated_question": "how?", "failure_class": "generation_failure"}
    loaded = RunResults.load(write(tmp_path, [row])).per_query[0]
    assert loaded.claims[0].error == "timeout" and loaded.ranking[1] == ("d#1", 1.0) and loaded.tags == ("t",)
    assert loaded.to_dict() == row


@pytest.mark.parametrize("command", ["export", "gate", "annotate"])
def test_commands_that_read_results_refuse_a_bad_ranking_with_one_line(tmp_path, capsys, command):
    from ragexp.cli import main

    path = write(tmp_path, [{"query_id": "q1", "ranking": "notalist"}])
    argv = {"export": ["export", path, "--run", str(tmp_path / "r"), "--qrels", str(tmp_path / "q")],
            "gate": ["gate", "--baseline", path, "--candidate", path],
            "annotate": ["evalset", "annotate", str(tmp_path / "e.jsonl"), "--corpus", str(tmp_path / "c.jsonl"),
                         "--from-run", path, "--queue-only"]}[command]
    if command == "annotate":
        (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "d", "text": "words"}) + "\n")
        (tmp_path / "e.jsonl").write_text(json.dumps({"id": "q1", "query": "q", "evidence": [{"doc_id": "d"}]}) + "\n")
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and f"{path}: field 'per_query[0].ranking': must be a list" in err[0], err
