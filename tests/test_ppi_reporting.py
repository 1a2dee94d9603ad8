"""Where a run's human-corrected judge metrics are read: the run adapter (:mod:`ragexp.evaluation.corrected`),
``compare``'s table, the sweep summary's first lines and the gate's comparison of PPI estimates."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ragexp.commands.compare import use_corrected
from ragexp.comparison.gate import FROM_PPI, GateSpec, run_gate
from ragexp.evaluation import corrected
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.judging.calibration.labels import LabelledClaim
from ragexp.judging.faithfulness import Verdict
from ragexp.judging.ppi import ppi_estimate
from ragexp.judging.review_status import ReviewStatus, is_judge_metric
from ragexp.tracking.sweep_summary import ChildRun, best_by_metric, describe, judge_lines

CONTEXT = "Deliveries are retried for 24 hours."


def results(verdicts: list[list[bool]], run_id: str = "RUN", empty: tuple[int, ...] = ()) -> RunResults:
    rows = []
    for q, claims in enumerate(verdicts):
        judged = tuple(Verdict(f"claim {q}.{i}", supported, 1.0 if supported else 0.0, "") for i, supported in enumerate(claims))
        decided = [v for v in claims]
        rows.append(QueryResult(query_id=f"q{q}", claims=judged, judge_context="" if q in empty else CONTEXT,
                                metrics={"faithfulness": sum(decided) / len(decided)} if decided else {}))
    return RunResults(meta={"run_id": run_id, "evalset_fingerprint": "e"}, aggregates={}, per_query=rows)


def test_units_weigh_claims_so_the_judge_mean_is_the_query_mean_and_the_claim_share() -> None:
    run = results([[True, True, False], [False], [True, True]])
    units = corrected.units_of(run.per_query)
    macro = ppi_estimate(units["faithfulness"], {})
    micro = ppi_estimate(units["claim_faithfulness"], {})
    assert macro.judge_mean == pytest.approx(np.mean([2 / 3, 0, 1]))
    assert micro.judge_mean == pytest.approx(4 / 6)


def test_labels_are_matched_by_id_claim_and_context_and_every_label_counted() -> None:
    run = results([[True, False], [True]])
    rows = [LabelledClaim("RUN/q0#claim_0", CONTEXT, "claim 0.0", "not_supported"),
            LabelledClaim("q0#claim_1", CONTEXT, "claim 0.1", "not_supported"),
            LabelledClaim("RUN/q1#claim_0", CONTEXT, "another claim", "supported"),  # same id, other claim
            LabelledClaim("OTHER/q1#claim_0", CONTEXT, "claim 1.0", "supported"),
            LabelledClaim("RUN/q1#claim_0", "other context", "claim 1.0", "supported")]
    found = corrected.labels_for(run, rows)
    assert found.labels == {"q0#claim_0": 0.0, "q0#claim_1": 0.0}
    assert (found.mismatched, found.other_runs) == (2, 1)
    estimates = corrected.corrected(run, found.labels)
    # claims: q0 (judge S, human N), (judge N, human N); q1 judge S unlabelled -> supported stratum share 0/1 labelled
    assert estimates["claim_faithfulness"].estimate == pytest.approx(2 / 3 * 0.0 + 1 / 3 * 0.0)
    assert estimates["claim_faithfulness"].n_labels == 2


def test_claims_against_an_empty_context_are_unsupported_by_construction() -> None:
    run = results([[True, True], [True]], empty=(1,))
    estimates = corrected.corrected(run, {"q0#claim_0": 1.0, "q0#claim_1": 1.0})
    assert estimates["claim_faithfulness"].estimate == pytest.approx(2 / 3)
    assert estimates["claim_faithfulness"].n_labels == 2
    assert corrected.corrected(run, {}) == {}


def test_judge_metrics_are_named_by_what_they_measure() -> None:
    assert all(map(is_judge_metric, ["faithfulness", "tag.x.faithfulness", "ppi.faithfulness_ci_low",
                                     "generation_failure_rate", "answer_relevance"]))
    assert not any(map(is_judge_metric, ["hit_rate_at_5", "f1", "mrr", "retrieval_failure_rate"]))


def test_compare_shows_the_ppi_estimate_and_says_which_runs_are_uncorrected() -> None:
    rows = {"a": {"faithfulness": 0.8, "ppi.faithfulness": 0.6, "ppi.faithfulness_ci_low": 0.5,
                  "ppi.faithfulness_ci_high": 0.7, "ppi.n_labels": 20.0, "answer_relevance": 0.5, "mrr": 0.4},
            "b": {"faithfulness": 0.7, "answer_relevance": 0.4, "mrr": 0.5}}
    lines = use_corrected(["a", "b"], rows, ["mrr", "faithfulness", "answer_relevance"])
    assert rows["a"]["faithfulness"] == 0.6 and rows["b"]["faithfulness"] == 0.7
    assert lines[0] == ("faithfulness: PPI estimate (human-corrected) for a 0.6000 [0.5000, 0.7000] from 20 labels "
                        "(judge alone 0.8000); judge only, uncorrected for b")
    assert lines[1].startswith("judge only, uncorrected in every run: answer_relevance")


def test_the_sweep_summary_names_unverified_judge_metrics_first() -> None:
    children = [ChildRun("r1", "bm25", {}, {"faithfulness": 0.6, "mrr": 0.3}, {}, corrected=("faithfulness",),
                         judge_key="aa"),
                ChildRun("r2", "dense", {}, {"faithfulness": 0.7, "mrr": 0.4}, {}, judge_key="aa")]
    never = {"r1": ReviewStatus("aa"), "r2": ReviewStatus("aa")}
    lines, unverified = judge_lines(children, ["mrr", "faithfulness"], never, 0.4)
    assert unverified == ["faithfulness"] and lines[0].startswith("**Judge metrics unverified: faithfulness.**")
    assert "never checked by a person" in lines[0]
    assert lines[1] == "faithfulness: PPI estimate (human-corrected) for bm25; judge only, uncorrected for the other 1 runs."
    good = {run: ReviewStatus("aa", "f" * 32, 0.7, 0.45, 0.95, 20) for run in ("r1", "r2")}
    lines, unverified = judge_lines(children, ["mrr", "faithfulness"], good, 0.4)
    assert unverified == [] and lines[0].startswith("Judge metrics verified (faithfulness): verified: kappa 0.70")
    # the same kappa with an interval reaching below the floor: reviewed, not good enough, with its numbers
    wide = {**good, "r2": ReviewStatus("aa", "f" * 32, 0.7, 0.35, 0.95, 20)}
    lines, unverified = judge_lines(children, ["mrr", "faithfulness"], wide, 0.4)
    assert unverified == ["faithfulness"]
    assert "UNVERIFIED (reviewed, not good enough): kappa 0.70 (20 claims, 95% CI 0.35 to 0.95)" in lines[0]
    assert "never checked" not in lines[0]
    assert judge_lines(children, ["mrr"], never, 0.4) == ([], [])
    lines, _ = judge_lines(children, ["mrr", "faithfulness"], never, 0.4)
    text = describe(children, [], ["mrr", "faithfulness"], best_by_metric(children, ["mrr", "faithfulness"]), "p" * 32,
                    "1", None, judge=lines)
    assert text.splitlines()[0] == lines[0]  # the description's first line


def test_the_gate_compares_ppi_estimates_with_label_and_eval_set_noise() -> None:
    """Both runs' judges say 100 % supported; the humans' labels say 80 % and 40 %: the judge's
    values tie, the PPI estimates show the drop, and its interval is wider than the judge's own."""
    rng = np.random.default_rng(0)
    base, cand = results([[True, True]] * 30), results([[True, True]] * 30)
    labels_b = {f"q{q}#claim_{i}": float(rng.random() < 0.8) for q in range(10) for i in range(2)}
    labels_c = {f"q{q}#claim_{i}": float(v) for q in range(10) for i, v in enumerate([q % 5 < 2, q % 5 < 2])}
    spec = GateSpec.from_mapping({"defaults": {"min_n": 5}, "metrics": {"faithfulness": None}})
    plain = run_gate(base, cand, spec)
    assert plain.metrics[0].delta == 0 and plain.metrics[0].source == "judge"
    fixed = run_gate(base, cand, spec, corrected=(corrected.corrected(base, labels_b), corrected.corrected(cand, labels_c)),
                     reviews={"faithfulness": "UNVERIFIED: never reviewed"})
    verdict = fixed.metrics[0]
    assert verdict.source == FROM_PPI and verdict.unverified and fixed.unverified == ["faithfulness"]
    assert verdict.baseline == pytest.approx(np.mean(list(labels_b.values())))
    assert verdict.candidate == pytest.approx(0.4)
    assert verdict.ci_low < verdict.delta < verdict.ci_high < 0 and verdict.verdict == "regression"
    one_side = run_gate(base, cand, spec, corrected=(corrected.corrected(base, labels_b), {}))
    assert one_side.metrics[0].source == "judge" and any("only" in note for note in one_side.notes)


def test_labels_transfer_only_between_runs_of_the_same_judge(tmp_path, capsys) -> None:
    from ragexp.cli import main
    from ragexp.judging.calibration.labels import write_labels

    judge = {"identity": {"kind": "lexical", "model_id": "lexical"}, "prompt_sha256": "none", "threshold": 0.8}
    source = results([[True, False]] * 5, run_id="a" * 32)
    target = results([[True, True, False]] * 4, run_id="b" * 32)
    source.meta["judge"], target.meta["judge"] = judge, dict(judge)
    labels = write_labels(tmp_path / "labels.csv", [
        LabelledClaim(f"{'a' * 32}/q{q}#claim_{i}", CONTEXT, f"claim {q}.{i}", "supported" if (q + i) % 3 else "not_supported")
        for q in range(5) for i in range(2)])
    paths = [source.save(tmp_path / "a.json"), target.save(tmp_path / "b.json")]
    assert main(["judge", "ppi", str(paths[1]), "--labels", str(labels), "--labels-from", str(paths[0])]) == 0
    out = capsys.readouterr().out
    assert "ASSUMPTION" in out and "faithfulness" in out
    target.meta["judge"] = {**judge, "threshold": 0.5}
    target.save(paths[1])
    assert main(["judge", "ppi", str(paths[1]), "--labels", str(labels), "--labels-from", str(paths[0])]) == 2
    assert "same judge" in capsys.readouterr().err
    assert main(["judge", "ppi", str(paths[1]), "--labels", str(labels)]) == 2  # none of its own claims labelled
    assert "judge only, uncorrected" in capsys.readouterr().err


def answer_run(classes: list[str], run_id: str = "c" * 32) -> RunResults:
    rows = [QueryResult(query_id=f"q{i}", answer=f"answer {i}", failure_class=cls, answerable=cls != "hallucinated")
            for i, cls in enumerate(classes)]
    return RunResults(meta={"run_id": run_id, "evalset_fingerprint": "e"}, aggregates={}, per_query=rows)


def test_a_persons_answer_classes_correct_the_generation_failure_rate(tmp_path, capsys) -> None:
    """20 answered items: the judge's classes 10 ok, 6 generation failures, 4 retrieval failures; a
    person read 4 of its 'ok' answers (2 are generation failures), 3 failures (all right) and 2
    retrieval failures (right): PPI = 10/20 * 2/4 + 6/20 * 3/3 + 4/20 * 0/2."""
    from ragexp.cli import main
    from ragexp.judging.answer_labels import AnswerLabel, read_answer_labels, write_answer_labels

    classes = ["ok"] * 10 + ["generation_failure"] * 6 + ["retrieval_failure"] * 4 + ["hallucinated"]
    run = answer_run(classes)
    path = run.save(tmp_path / "run.json")
    assert main(["judge", "sample", str(path), "--answers", "-n", "9", "--out", str(tmp_path / "a.csv")]) == 0
    drawn = read_answer_labels(tmp_path / "a.csv")
    assert sorted(Counter(row.judge_class for row in drawn).values()) == [3, 3, 3]  # across classes
    human = {"q0": "generation_failure", "q1": "generation_failure", "q2": "ok", "q3": "ok", "q10": "generation_failure",
             "q11": "generation_failure", "q12": "generation_failure", "q16": "retrieval_failure", "q17": "retrieval_failure"}
    labels = [AnswerLabel(q, f"answer {q[1:]}", human_class=cls) for q, cls in human.items()]
    labels.append(AnswerLabel("q4", "another answer", human_class="ok"))  # not the run's answer: no label
    write_answer_labels(tmp_path / "answers.csv", labels)
    answers = corrected.answer_labels_for(run, read_answer_labels(tmp_path / "answers.csv"))
    assert answers == human
    estimates = corrected.corrected(run, {}, answers=answers)
    assert estimates["generation_failure_rate"].judge_mean == pytest.approx(6 / 20)
    assert estimates["generation_failure_rate"].estimate == pytest.approx(10 / 20 * 2 / 4 + 6 / 20 * 1 + 4 / 20 * 0)
    assert estimates["ok_rate"].estimate == pytest.approx(10 / 20 * 2 / 4)
    assert main(["judge", "ppi", str(path), "--answer-labels", str(tmp_path / "answers.csv")]) == 0
    out = capsys.readouterr().out
    assert "generation_failure_rate" in out and "0.5500" in out


def test_the_answer_labels_reader_refuses_a_class_it_does_not_know(tmp_path) -> None:
    from ragexp.errors import RagexpInputError
    from ragexp.judging.answer_labels import read_answer_labels

    bad = tmp_path / "bad.csv"
    bad.write_text("id,answer,human_class\nq1,yes,ok\nq2,no,fine\n", encoding="utf-8")
    with pytest.raises(RagexpInputError) as err:
        read_answer_labels(bad)
    assert (err.value.line, err.value.field) == (3, "human_class")
    (tmp_path / "missing.csv").write_text("id,answer\nq1,x\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="missing column"):
        read_answer_labels(tmp_path / "missing.csv")


def test_judge_ppi_logs_the_runs_own_labels_and_the_gate_recomputes_from_them(tmp_path, monkeypatch, capsys) -> None:
    """``judge ppi RUN_ID`` logs ppi.* metrics and the rows that labelled the run; ``gate`` on two run
    ids then compares faithfulness on PPI estimates recomputed from those artifacts."""
    from mlflow.tracking import MlflowClient

    from ragexp.cli import main
    from ragexp.evaluation.results import ARTIFACT_NAME
    from ragexp.judging.calibration.labels import write_labels
    from ragexp.tracking import store
    from ragexp.tracking.metric_names import results_view

    monkeypatch.chdir(tmp_path)  # a bare sqlite store puts artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = store.ensure_experiment(client, "ppi")
    ids = []
    for name in ("base", "cand"):
        run_id = client.create_run(experiment, run_name=name).info.run_id
        run = results([[True, True]] * 25, run_id=run_id)
        client.log_artifact(run_id, str(run.save(tmp_path / name / ARTIFACT_NAME)))
        human = 0.8 if name == "base" else 0.4
        rows = [LabelledClaim(f"{run_id}/q{q}#claim_0", CONTEXT, f"claim {q}.0",
                              "supported" if q < human * 10 else "not_supported") for q in range(10)]
        rows.append(LabelledClaim("OTHER/q1#claim_0", CONTEXT, "claim 1.0", "supported"))  # not this run's
        labels = write_labels(tmp_path / f"{name}.csv", rows)
        assert main(["judge", "ppi", run_id, "--labels", str(labels), "--tracking-uri", uri]) == 0
        ids.append(run_id)
    logged = client.get_run(ids[1])
    view = results_view(logged.data.metrics, logged.data.params)
    assert view["ppi.claim_faithfulness"] == pytest.approx(0.4) and view["ppi.n_labels"] == 10
    assert logged.data.tags["ragexp.ppi"].startswith("faithfulness 0.400")
    kept = client.download_artifacts(ids[1], corrected.LABELS_ARTIFACT, str(tmp_path / "kept"))
    assert "OTHER/" not in open(kept, encoding="utf-8").read()
    capsys.readouterr()
    spec = tmp_path / "spec.yaml"
    spec.write_text("defaults:\n  min_n: 5\nmetrics:\n  faithfulness:\n")
    code = main(["gate", "--baseline", ids[0], "--candidate", ids[1], "--spec", str(spec), "--tracking-uri", uri])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("faithfulness"))
    assert "PPI (human-corrected)" in row and "0.8000" in row and "0.4000" in row
    assert code == 1 and "REGRESSION" in row  # 0.8 -> 0.4 by the people's labels; the judge saw no change
