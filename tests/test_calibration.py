"""Judge calibration: kappa against sklearn, the labels CSV, the shipped calibration set."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from sklearn.metrics import cohen_kappa_score

from ragexp.cli import main
from ragexp.data.datasets import DEMO_DIR
from ragexp.data.loaders.corpus import load_corpus
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults
from ragexp.judging.calibration.labels import (
    LABELS,
    NOT_SUPPORTED,
    SUPPORTED,
    LabelledClaim,
    agreement,
    cohen_kappa,
    label_of,
    read_labels,
    write_labels,
)
from ragexp.judging.judges import LexicalJudge

DEMO = DEMO_DIR


@pytest.mark.parametrize("seed", range(20))
def test_kappa_matches_sklearn(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 80)
    agree = rng.random()
    first = [rng.choice(LABELS) for _ in range(n)]
    second = [a if rng.random() < agree else rng.choice(LABELS) for a in first]
    if len(set(first) | set(second)) == 1:
        second[0] = NOT_SUPPORTED if first[0] == SUPPORTED else SUPPORTED
    assert cohen_kappa(first, second) == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)


def test_kappa_with_more_than_two_labels_matches_sklearn():
    first = list("aabbccabcabcaaab")
    second = list("abbbccaacabcbaab")
    assert cohen_kappa(first, second) == pytest.approx(cohen_kappa_score(first, second))


def test_kappa_is_undefined_when_chance_agreement_is_certain():
    assert cohen_kappa([SUPPORTED] * 3, [SUPPORTED] * 3) is None
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa([SUPPORTED], [])


def _row(i, human, judge):
    return LabelledClaim(id=f"r{i}", context="ctx", claim=f"claim {i}", human_label=human, judge_label=judge)


def test_agreement_reports_accuracy_kappa_confusion_and_skipped_rows():
    rows = [
        _row(1, SUPPORTED, SUPPORTED), _row(2, SUPPORTED, NOT_SUPPORTED), _row(3, NOT_SUPPORTED, NOT_SUPPORTED),
        _row(4, NOT_SUPPORTED, NOT_SUPPORTED), _row(5, NOT_SUPPORTED, SUPPORTED), _row(6, SUPPORTED, SUPPORTED),
        _row(7, "", SUPPORTED), _row(8, SUPPORTED, ""),
    ]
    report = agreement(rows)
    compared = rows[:6]
    assert report.n == 6 and report.n_unlabelled == 1 and report.n_judge_failures == 1
    assert report.accuracy == pytest.approx(4 / 6)
    assert report.kappa == pytest.approx(cohen_kappa_score([r.human_label for r in compared], [r.judge_label for r in compared]))
    assert report.confusion == {SUPPORTED: {SUPPORTED: 2, NOT_SUPPORTED: 1}, NOT_SUPPORTED: {SUPPORTED: 1, NOT_SUPPORTED: 2}}
    assert report.metrics()["judge_confusion_human_supported_judge_not_supported"] == 1.0
    assert "Cohen's kappa: 0.333" in report.render()


def test_labels_round_trip_and_bad_input_names_line_and_field(tmp_path):
    rows = [_row(1, SUPPORTED, NOT_SUPPORTED), LabelledClaim(id="r2", context='has "quotes",\ncommas', claim="c", note="n")]
    path = write_labels(tmp_path / "labels.csv", rows)
    assert read_labels(path) == rows
    text = path.read_text(encoding="utf-8").replace("not_supported", "maybe")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RagexpInputError, match=r"labels\.csv:2: field 'judge_label': 'maybe' is not a label"):
        read_labels(path)
    (tmp_path / "nohuman.csv").write_text("id,context,claim\nx,c,c\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="field 'human_label': missing column"):
        read_labels(tmp_path / "nohuman.csv")
    with pytest.raises(RagexpInputError, match="no such labels file"):
        read_labels(tmp_path / "absent.csv")


def test_shipped_calibration_set_is_balanced_and_quotes_the_demo_corpus():
    rows = read_labels(DEMO / "calibration.csv")
    assert len(rows) >= 60
    assert len({r.id for r in rows}) == len(rows)
    counts = Counter(r.human_label for r in rows)
    assert set(counts) == set(LABELS) and abs(counts[SUPPORTED] - counts[NOT_SUPPORTED]) <= len(rows) // 10
    corpus = load_corpus(DEMO / "corpus")
    for row in rows:
        assert row.context in corpus[row.context_doc_id].text, row.id
        assert row.note, row.id


def _results_with_claims() -> RunResults:
    context = "Webhooks are retried with exponential backoff for 24 hours."
    per_query = [
        {"query_id": "q1", "metrics": {}, "judge_context": context, "claims": [
            {"claim": "Webhooks retry for 24 hours.", "supported": True, "score": 1.0, "raw": "yes", "error": None},
            {"claim": "Webhooks retry 50 times.", "supported": False, "score": 0.0, "raw": "no", "error": None},
        ]},
        {"query_id": "q2", "metrics": {}, "judge_context": context, "claims": [
            {"claim": "Retries use backoff.", "supported": None, "score": None, "raw": "maybe", "error": "verdict is neither yes nor no"},
        ]},
        {"query_id": "q3", "metrics": {}},  # no generation for this query
    ]
    return RunResults(meta={"run_id": "r"}, aggregates={}, per_query=[QueryResult.from_dict(row) for row in per_query])


@pytest.mark.slow  # a fresh MLflow sqlite store migrates its schema: tens of seconds on two cores
def test_judge_sample_then_agreement_logged_to_the_run(tmp_path, capsys):
    import mlflow

    try:
        _sample_then_agreement(tmp_path, capsys)
    finally:
        mlflow.set_tracking_uri(None)


def _sample_then_agreement(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("judge-test", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.log_artifact(run_id, str(_results_with_claims().save(tmp_path / ARTIFACT_NAME)))

    out = tmp_path / "verdicts.csv"
    assert main(["judge", "sample", run_id, "-n", "2", "--out", str(out), "--tracking-uri", uri]) == 0
    assert "wrote 2 of 3 judged claims" in capsys.readouterr().out
    sampled = read_labels(out)
    assert len(sampled) == 2 and all(not r.human_label for r in sampled)
    assert {r.id for r in sampled} <= {"q1#claim_0", "q1#claim_1", "q2#claim_0"}
    assert all(r.context.startswith("Webhooks are retried") for r in sampled)

    everything = tmp_path / "all.csv"
    assert main(["judge", "sample", run_id, "-n", "10", "--out", str(everything), "--tracking-uri", uri]) == 0
    rows = read_labels(everything)
    assert [r.judge_label for r in rows] == [SUPPORTED, NOT_SUPPORTED, ""]
    for row, human in zip(rows, [SUPPORTED, SUPPORTED, SUPPORTED]):
        row.human_label = human
    write_labels(everything, rows)
    capsys.readouterr()
    assert main(["judge", "agreement", str(everything), "--run", run_id, "--tracking-uri", uri]) == 0
    printed = capsys.readouterr().out
    assert "claims compared: 2" in printed and "judge failures: 1" in printed and "accuracy: 0.500" in printed
    metrics = client.get_run(run_id).data.metrics
    assert metrics["judge_agreement_accuracy"] == 0.5 and metrics["judge_agreement_judge_failures"] == 1.0
    assert "judge_agreement_kappa" in metrics


def test_judge_agreement_runs_the_lexical_judge_on_the_calibration_set(tmp_path, capsys):
    out = tmp_path / "judged.csv"
    assert main(["judge", "agreement", str(DEMO / "calibration.csv"), "--judge", "lexical", "--out", str(out),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    printed = capsys.readouterr().out
    rows = read_labels(out)
    report = agreement(rows)
    assert report.n == len(rows) and f"accuracy: {report.accuracy:.3f}" in printed
    judge = LexicalJudge()
    for row in rows:
        verdict = judge.judge_claims([row.claim], row.context)[0]
        assert row.judge_label == label_of(verdict.supported) and float(row.judge_score) == pytest.approx(verdict.score)


def test_judge_commands_reject_bad_input(tmp_path, capsys):
    assert main(["judge", "agreement", str(DEMO / "calibration.csv")]) == 2
    assert "pass --judge" in capsys.readouterr().err
    empty = replace(_results_with_claims(), per_query=[QueryResult(query_id="q")])
    path = empty.save(tmp_path / "results.json")
    assert main(["judge", "sample", str(path), "--out", str(tmp_path / "x.csv")]) == 2
    assert "no judged claims" in capsys.readouterr().err
