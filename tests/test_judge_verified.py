""""Verified" means checked well enough, here: the gate's and compare's judge status against a real
MLflow store holding reviews of the same run and of other runs (same or another judge, generator,
eval-set version), with kappa intervals whose lower bound is above or below the floor; and the
gate saying what sample would let it decide."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.cli import main
from ragexp.comparison.gate import GateSpec, run_gate
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.judging.calibration.record import judge_key
from ragexp.judging.review_status import TAG_AT, TAG_JUDGE_KEY, TAG_KEY, last_review
from ragexp.tracking import store

JUDGE = {"identity": {"kind": "lexical", "model_id": "lexical"}, "prompt_sha256": "none", "threshold": 0.8}
OTHER_JUDGE = {**JUDGE, "threshold": 0.5}
KEY = judge_key(JUDGE)


class Store:
    def __init__(self, tmp_path: Path) -> None:
        self.uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        self.experiment = self.client.create_experiment("verified")

    def run(self, *, judge: dict = JUDGE, generator: str = "smol", evalset: str = "e1",
            review: tuple[float, float, float, int] | None = None) -> str:
        """A job run of ``judge`` with generator ``generator`` on eval set ``evalset``; ``review``:
        (kappa, low, high, n) of a review of its own claims filed under its judge key."""
        run = self.client.create_run(self.experiment)
        run_id = run.info.run_id
        self.client.log_param(run_id, "generator.model_id", generator)
        self.client.set_tag(run_id, TAG_JUDGE_KEY, judge_key(judge))
        self.client.set_tag(run_id, store.TAG_EVALSET_FP, evalset)
        if review is not None:
            kappa, low, high, n = review
            for name, value in (("kappa", kappa), ("kappa_ci_low", low), ("kappa_ci_high", high), ("n", n)):
                self.client.log_metric(run_id, f"judge_review/{name}", value)
            self.client.set_tag(run_id, TAG_KEY, judge_key(judge))
            self.client.set_tag(run_id, TAG_AT, "2026-12-01T10:00:00Z")
        return run_id

    def status(self, run_id: str, judge: dict = JUDGE):
        return last_review(self.client, judge_key(judge), run_id, store.TAG_EVALSET_FP)


def test_a_review_speaks_for_its_run_and_for_runs_sharing_judge_generator_and_eval_set(tmp_path: Path) -> None:
    s = Store(tmp_path)
    reviewed = s.run(review=(0.82, 0.55, 0.97, 40))
    sibling = s.run()
    other_generator = s.run(generator="qwen")
    other_evalset = s.run(evalset="e2")
    other_judge = s.run(judge=OTHER_JUDGE)

    own = s.status(reviewed)
    assert own.verified(0.4) and own.same_run
    assert own.describe(0.4).startswith("verified: kappa 0.82 (40 claims, 95% CI 0.55 to 0.97)")
    assert "on this run" in own.describe(0.4)
    shared = s.status(sibling)
    assert shared.verified(0.4) and not shared.same_run
    assert f"on run {reviewed[:8]}, which shares this run's judge, generator and eval-set version" in shared.describe(0.4)
    for run_id in (other_generator, other_evalset):
        status = s.status(run_id)
        assert not status.verified(0.4)
        text = status.describe(0.4)
        assert text.startswith("UNVERIFIED (reviewed only on other runs): judge reviewed on run "), text
        assert "another generator or eval-set version" in text and "never" not in text
    never = s.status(other_judge, OTHER_JUDGE)
    assert never.describe(0.4).startswith("UNVERIFIED (never checked by a person)")


@pytest.mark.parametrize(("low", "verified"), [(0.45, True), (0.40, True), (0.35, False), (0.02, False)])
def test_verified_takes_the_lower_bound_of_kappa_not_kappa(tmp_path: Path, low: float, verified: bool) -> None:
    s = Store(tmp_path)
    run_id = s.run(review=(0.51, low, 0.86, 20))
    status = s.status(run_id)
    assert status.verified(0.4) is verified
    text = status.describe(0.4)
    if verified:
        assert text.startswith("verified: kappa 0.51")
    else:
        assert text.startswith(f"UNVERIFIED (reviewed, not good enough): kappa 0.51 (20 claims, 95% CI {low:.2f} to 0.86)")
        assert f"its lower bound {low:.2f} is below the floor 0.4" in text and "never" not in text


def results(run_id: str, judge: dict = JUDGE, queries: int = 25) -> RunResults:
    rows = [QueryResult(query_id=f"q{q}", metrics={"faithfulness": 0.5 + 0.01 * (q % 3), "hit_rate_at_5": 1.0})
            for q in range(queries)]
    return RunResults(meta={"run_id": run_id, "evalset_fingerprint": "e1", "judge": judge}, aggregates={},
                      per_query=rows)


def gate(tmp_path: Path, capsys, baseline: str, candidate: str, *extra: str, uri: str) -> tuple[int, list[str]]:
    paths = []
    for name, run_id in (("base", baseline), ("cand", candidate)):
        path = tmp_path / f"{name}.json"
        results(run_id).save(path)
        paths.append(str(path))
    capsys.readouterr()
    code = main(["gate", "--baseline", paths[0], "--candidate", paths[1], "--metrics", "faithfulness,hit_rate_at_5",
                 "--tracking-uri", uri, *extra])
    return code, capsys.readouterr().out.splitlines()


def test_the_gate_says_verified_reviewed_not_good_enough_or_never_checked(tmp_path: Path, capsys) -> None:
    s = Store(tmp_path)
    good = s.run(review=(0.82, 0.55, 0.97, 40))
    sibling = s.run()
    weak = s.run(generator="weak", review=(0.35, 0.02, 0.68, 20))
    unreviewed = s.run(judge=OTHER_JUDGE)

    code, lines = gate(tmp_path, capsys, good, sibling, "--unverified", "fail", uri=s.uri)
    assert code == 0 and lines[1].startswith("judge metrics verified: faithfulness: kappa 0.82"), lines[:2]

    code, lines = gate(tmp_path, capsys, good, weak, "--unverified", "fail", uri=s.uri)
    assert code == 1
    assert lines[0] == "ragexp gate: UNVERIFIED (judge metrics unverified, reviewed, not good enough: faithfulness)"
    assert "kappa 0.35 (20 claims, 95% CI 0.02 to 0.68)" in lines[1] and "[the candidate's judge]" in lines[1]
    assert "never checked" not in "\n".join(lines)

    code, lines = gate(tmp_path, capsys, weak, good, uri=s.uri)  # warn: passes, the line still says why
    assert code == 0 and lines[1].startswith("judge metrics UNVERIFIED (a warning") and "not good enough" in lines[1]

    results(unreviewed, OTHER_JUDGE).save(tmp_path / "never.json")
    capsys.readouterr()
    code = main(["gate", "--baseline", str(tmp_path / "never.json"), "--candidate", str(tmp_path / "never.json"),
                 "--metrics", "faithfulness", "--tracking-uri", s.uri, "--unverified", "fail"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1 and out[0] == "ragexp gate: UNVERIFIED (judge metrics unverified, never checked by a person: faithfulness)"


def test_an_insufficient_gate_says_what_sample_would_decide() -> None:
    base, cand = results("a" * 32, queries=15), results("b" * 32, queries=15)
    report = run_gate(base, cand, GateSpec.from_mapping({"metrics": {"hit_rate_at_5": None}}))
    assert report.status == "insufficient"
    assert any("only 15 paired queries" in note and "eval.sample=20 or more" in note for note in report.notes), report.notes


def test_compare_marks_unverified_judge_metrics_and_their_star(tmp_path: Path) -> None:
    from ragexp.commands.compare import judge_review_marks
    from ragexp.comparison.table import format_table

    s = Store(tmp_path)
    good, weak = s.run(review=(0.82, 0.55, 0.97, 40)), s.run(generator="weak", review=(0.35, 0.02, 0.68, 20))
    runs = {"good": s.client.get_run(good), "weak": s.client.get_run(weak)}
    marks, lines = judge_review_marks(s.client, ["good", "weak"], runs, ["mrr", "faithfulness"])
    assert marks == {"faithfulness": {"weak"}}
    assert lines == [f"? faithfulness of weak: {s.status(weak).describe(0.4)}"]
    assert "reviewed, not good enough" in lines[0] and "kappa 0.35 (20 claims, 95% CI 0.02 to 0.68)" in lines[0]
    rows = {"good": {"mrr": 0.5, "faithfulness": 0.6}, "weak": {"mrr": 0.4, "faithfulness": 0.9}}
    table = format_table(["good", "weak"], rows, ["mrr", "faithfulness"], unverified=marks)
    weak_row = next(line for line in table.splitlines() if line.startswith("weak"))
    good_row = next(line for line in table.splitlines() if line.startswith("good"))
    assert weak_row.rstrip().endswith("0.9000*?")  # the best value, and marked as unverified
    assert "?" not in good_row
