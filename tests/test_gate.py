"""The regression gate on constructed runs whose answer is known, and the ``ragexp gate`` CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ragexp.commands.gate import render_json, render_markdown, render_text
from ragexp.comparison.gate import GateSpec, first_relevant_rank, holm, run_gate
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults

REPO_ROOT = Path(__file__).resolve().parent.parent
N = 120
GOLD_TOP_RANK = 1


def query_row(index: int, gold_rank: int | None, extra: dict | None = None) -> QueryResult:
    """One query whose single gold chunk sits at ``gold_rank`` (``None``: not in the top 10)."""
    gold = f"doc_{index}#chunk_0"
    ranking = [[f"other_{index}_{r}#chunk_0", 10.0 - r] for r in range(10)]
    if gold_rank is not None:
        ranking[gold_rank - 1] = [gold, 10.0 - gold_rank + 1]
    hit = float(gold_rank is not None and gold_rank <= 5)
    metrics = {
        "hit_rate_at_5": hit,
        "recall_at_5": hit,
        "mrr": 1.0 / gold_rank if gold_rank else 0.0,
        "ndcg_at_10": 1.0 / math.log2(gold_rank + 1) if gold_rank else 0.0,
        **(extra or {}),
    }
    return QueryResult.from_dict({"query_id": f"q{index:03d}", "tags": ["factoid"], "metrics": metrics, "ranking": ranking,
                                  "relevant": {gold: 1}})


def make_run(gold_ranks: list[int | None], fingerprint: str = "evalset-A", extra: dict[int, dict] | None = None) -> RunResults:
    rows = [query_row(i, rank, (extra or {}).get(i)) for i, rank in enumerate(gold_ranks)]
    metric_names = rows[0].metrics.keys()
    aggregates = {m: sum(r.metrics[m] for r in rows) / len(rows) for m in metric_names}
    meta = {"run_id": None, "run_name": "test", "evalset_fingerprint": fingerprint, "corpus_fingerprint": "corpus-1",
            "n_queries": len(rows)}
    return RunResults(meta=meta, aggregates=aggregates, per_query=rows)


def ranks_with_losses(n: int, lost: int) -> list[int | None]:
    return [None] * lost + [GOLD_TOP_RANK] * (n - lost)


def verdicts(report) -> dict[str, str]:
    return {m.metric: m.verdict for m in report.metrics}


def test_identical_candidate_passes_with_nothing_to_report():
    run = make_run(ranks_with_losses(N, 0))
    report = run_gate(run, run)
    assert report.status == "pass" and report.exit_code == 0
    assert set(verdicts(report).values()) == {"pass"}
    assert report.regressions == []
    assert all(m.delta == 0 and m.p_value == 1.0 for m in report.metrics)
    assert "context_precision_at_5: in neither run, skipped" in report.notes


def test_losing_gold_for_five_percent_of_queries_exceeds_the_tolerance_but_not_holms_family_wise_test():
    """6 of 120 lost hits: beyond the auto tolerance and p = 2/64 for each of the 4 gated metrics
    (the same 6 queries), but Holm over the 4 gives 4 * 2/64 = 0.125: not a regression by
    default; a spec without the significance requirement calls it one."""
    baseline = make_run(ranks_with_losses(N, 0))
    candidate = make_run(ranks_with_losses(N, 6))
    report = run_gate(baseline, candidate)
    hit = next(m for m in report.metrics if m.metric == "hit_rate_at_5")
    assert hit.delta == pytest.approx(-0.05)
    assert hit.tolerance == pytest.approx(0.0392, abs=1e-4)
    assert hit.worse_queries == 6 and hit.better_queries == 0
    assert hit.p_value == pytest.approx(2 / 64) and hit.ci_high < 0
    assert len(report.metrics) == 4 and all(m.p_holm == pytest.approx(4 * 2 / 64) for m in report.metrics)
    assert report.status == "pass"
    assert [r.query_id for r in report.regressions] == [f"q{i:03d}" for i in range(6)]
    assert all(r.gold_lost and r.baseline_rank == 1 and r.candidate_rank is None for r in report.regressions)
    lenient = GateSpec.load().select([m.metric for m in report.metrics])
    lenient = GateSpec(rules=tuple(replace(r, require_significance=False) for r in lenient.rules))
    assert run_gate(baseline, candidate, lenient).status == "regression"


def test_losing_gold_for_ten_of_120_queries_is_a_family_wise_significant_regression():
    report = run_gate(make_run(ranks_with_losses(N, 0)), make_run(ranks_with_losses(N, 10)))
    assert all(m.p_value == pytest.approx(2 / 1024) and m.p_holm == pytest.approx(4 * 2 / 1024) for m in report.metrics)
    assert report.status == "regression" and report.exit_code == 1


def test_holm_adjusted_p_values_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.2 -> 4*0.01, 3*0.03, max(2*0.04, 0.09), max(0.2, 0.09); input order kept
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_one_query_flipping_each_way_passes():
    ranks = ranks_with_losses(N, 0)
    baseline_ranks = [None] + ranks[1:]
    candidate_ranks = ranks[:1] + [None] + ranks[2:]
    report = run_gate(make_run(baseline_ranks), make_run(candidate_ranks))
    assert report.status == "pass"
    assert [r.query_id for r in report.regressions] == ["q001"]


@pytest.mark.parametrize(("lost", "status"), [(3, "pass"), (4, "regression")])
def test_auto_tolerance_threshold_on_120_queries(lost, status):
    """With nothing else moving, ``k`` lost hits fail once ``k/n > 1.96 * sd/sqrt(n)``, i.e. ``k >= 4``."""
    spec = spec_for("hit_rate_at_5")
    report = run_gate(make_run(ranks_with_losses(N, 0)), make_run(ranks_with_losses(N, lost)), spec)
    assert report.status == status


def test_same_drop_in_points_is_noise_on_50_questions_and_a_regression_on_500():
    """The method article: a 50-question set is noisier than a 500-question set."""
    small = run_gate(make_run(ranks_with_losses(50, 0)), make_run(ranks_with_losses(50, 2)), metrics=["hit_rate_at_5"])
    large = run_gate(make_run(ranks_with_losses(500, 0)), make_run(ranks_with_losses(500, 20)), metrics=["hit_rate_at_5"])
    assert small.metrics[0].delta == pytest.approx(large.metrics[0].delta) == pytest.approx(-0.04)
    assert (small.status, large.status) == ("pass", "regression")


def test_churn_widens_the_auto_tolerance():
    """Six net losses among many moves in both directions are within noise."""
    baseline_ranks = [None] * 20 + [1] * 20 + [1] * 80
    candidate_ranks = [1] * 20 + [None] * 26 + [1] * 74
    report = run_gate(make_run(baseline_ranks), make_run(candidate_ranks), metrics=["hit_rate_at_5"])
    hit = report.metrics[0]
    assert hit.delta == pytest.approx(-0.05)
    assert hit.tolerance > 0.05 and report.status == "pass"


def spec_for(metric: str, **rule) -> GateSpec:
    """One metric's rule; significance is not required unless the rule says so (these tests are about tolerances)."""
    return GateSpec.from_mapping({"metrics": {metric: {"require_significance": False, **rule}}, "defaults": {"min_n": 5}})


def test_absolute_and_relative_tolerances():
    baseline, candidate = make_run(ranks_with_losses(N, 0)), make_run(ranks_with_losses(N, 2))
    assert run_gate(baseline, candidate, spec_for("hit_rate_at_5", tolerance={"absolute": 0.02})).status == "pass"
    assert run_gate(baseline, candidate, spec_for("hit_rate_at_5", tolerance={"absolute": 0.01})).status == "regression"
    assert run_gate(baseline, candidate, spec_for("hit_rate_at_5", tolerance={"relative": 0.01})).status == "regression"
    assert run_gate(baseline, candidate, spec_for("hit_rate_at_5", tolerance={"relative": 0.02})).status == "pass"
    half = [1] * 60 + [None] * 60
    relative = spec_for("hit_rate_at_5", tolerance={"relative": 0.02})
    report = run_gate(make_run(half), make_run([None, None] + half[2:]), relative)
    assert report.metrics[0].tolerance == pytest.approx(0.01) and report.status == "regression"


def test_lower_is_better_metric_regresses_when_it_rises():
    extra = {i: {"latency_s": 1.0} for i in range(N)}
    slower = {i: {"latency_s": 1.5} for i in range(N)}
    ranks = ranks_with_losses(N, 0)
    spec = spec_for("latency_s", direction="lower", tolerance={"absolute": 0.1})
    assert run_gate(make_run(ranks, extra=extra), make_run(ranks, extra=slower), spec).status == "regression"
    assert run_gate(make_run(ranks, extra=slower), make_run(ranks, extra=extra), spec).status == "pass"


def test_required_significance_spares_a_single_lost_query():
    baseline, candidate = make_run(ranks_with_losses(N, 0)), make_run(ranks_with_losses(N, 1))
    strict = {"tolerance": {"absolute": 0.0}}
    assert run_gate(baseline, candidate, spec_for("hit_rate_at_5", **strict)).status == "regression"
    significant = spec_for("hit_rate_at_5", **strict, require_significance=True)
    report = run_gate(baseline, candidate, significant)
    assert report.metrics[0].p_value == 1.0 and report.status == "pass"


def test_fingerprint_mismatch_is_refused_naming_both_unless_forced():
    baseline = make_run(ranks_with_losses(N, 0), fingerprint="aaa111")
    candidate = make_run(ranks_with_losses(N, 0), fingerprint="bbb222")
    with pytest.raises(RagexpInputError, match="aaa111.*bbb222.*--force"):
        run_gate(baseline, candidate)
    report = run_gate(baseline, candidate, force=True)
    assert report.status == "pass"
    assert any("aaa111" in note and "--force" in note for note in report.notes)


def test_pairs_by_query_id_and_counts_unpaired():
    baseline = make_run(ranks_with_losses(N, 0))
    candidate = make_run(ranks_with_losses(N, 0))
    candidate = replace(candidate, per_query=list(reversed(candidate.per_query[10:])) + [query_row(900, 1), query_row(901, 1)])
    report = run_gate(baseline, candidate)
    assert (report.n_paired, report.baseline_only, report.candidate_only) == (110, 10, 2)
    assert report.status == "pass" and report.metrics[0].n == 110


def test_metric_in_one_run_only_is_an_error_and_in_neither_is_skipped():
    ranks = ranks_with_losses(N, 0)
    judged = make_run(ranks, extra={i: {"faithfulness": 1.0} for i in range(N)})
    with pytest.raises(RagexpInputError, match="'faithfulness' is missing from the candidate run"):
        run_gate(judged, make_run(ranks))
    report = run_gate(judged, judged)
    assert "faithfulness" in verdicts(report)
    assert "f1: in neither run, skipped" in report.notes
    with pytest.raises(RagexpInputError, match="'f1' is in neither run"):
        run_gate(judged, judged, metrics=["mrr", "f1"])


def test_nan_per_query_value_is_a_data_error():
    run = make_run(ranks_with_losses(N, 0))
    broken = make_run(ranks_with_losses(N, 0))
    broken.per_query[3].metrics["mrr"] = float("nan")
    with pytest.raises(RagexpInputError, match="'mrr' has NaN"):
        run_gate(run, broken)


def test_metrics_option_selects_and_orders_metrics():
    run = make_run(ranks_with_losses(N, 0))
    assert list(verdicts(run_gate(run, run, metrics=["mrr", "hit_rate_at_5"]))) == ["mrr", "hit_rate_at_5"]


def test_too_few_pairs_is_insufficient_with_exit_code_two():
    run = make_run(ranks_with_losses(10, 0))
    report = run_gate(run, run)
    assert report.status == "insufficient" and report.exit_code == 2
    assert any("min_n=20" in note for note in report.notes)


def test_per_query_diff_lists_gold_lost_first_then_larger_drops():
    ranks = [1] * 5 + [7] + [1] * (N - 6)
    baseline = make_run(ranks, extra={i: {"faithfulness": 1.0} for i in range(N)})
    candidate_ranks = [1, 3, None, 1, 1, 8] + [1] * (N - 6)
    candidate_extra = {i: {"faithfulness": 1.0} for i in range(N)} | {3: {"faithfulness": 0.25}}
    candidate = make_run(candidate_ranks, extra=candidate_extra)
    report = run_gate(baseline, candidate)
    by_id = {r.query_id: r for r in report.regressions}
    assert [r.query_id for r in report.regressions] == ["q002", "q001", "q003", "q005"]
    assert not by_id["q005"].gold_lost and (by_id["q005"].baseline_rank, by_id["q005"].candidate_rank) == (7, 8)
    assert by_id["q002"].gold_lost and by_id["q002"].drops["hit_rate_at_5"] == 1.0
    assert not by_id["q001"].gold_lost and by_id["q001"].rank_dropped
    assert (by_id["q001"].baseline_rank, by_id["q001"].candidate_rank) == (1, 3)
    assert by_id["q001"].drops["mrr"] == pytest.approx(2 / 3)
    assert by_id["q003"].drops == {"faithfulness": 0.75} and not by_id["q003"].rank_dropped


def test_gold_lost_uses_each_runs_context_k_unless_the_spec_fixes_k():
    """Same ranking, fewer chunks to the generator: gold at rank 4 reached it at context_k=5, not at 3."""
    ranks = [4] * 10 + [1] * (N - 10)
    baseline, candidate = make_run(ranks), make_run(ranks)
    for row in candidate.per_query[:10]:
        row.metrics["context_hit_rate"] = 0.0
    for row in baseline.per_query:
        row.metrics["context_hit_rate"] = 1.0
    for row in candidate.per_query[10:]:
        row.metrics["context_hit_rate"] = 1.0
    baseline.meta["context_k"], candidate.meta["context_k"] = 5, 3
    report = run_gate(baseline, candidate, metrics=["context_hit_rate"])
    assert report.gold_ks == (5, 3)
    assert [r.query_id for r in report.regressions if r.gold_lost] == [f"q{i:03d}" for i in range(10)]
    assert "yes @5->3" in render_text(report)
    fixed = GateSpec.from_mapping({"metrics": {"context_hit_rate": {}}, "per_query": {"k": 5}})
    report = run_gate(baseline, candidate, fixed)
    assert report.gold_ks == (5, 5) and not any(r.gold_lost for r in report.regressions)
    with pytest.raises(RagexpInputError):
        GateSpec.from_mapping({"metrics": {"mrr": {}}, "per_query": {"k": "ctx"}})


def test_first_relevant_rank_reads_trec_order_and_ignores_zero_grades():
    row = QueryResult("q", ranking=(("a", 3.0), ("b", 2.0), ("c", 1.0)), relevant={"a": 0, "c": 2})
    assert first_relevant_rank(row) == 3
    assert first_relevant_rank(QueryResult("q", ranking=(("a", 1.0),), relevant={})) is None
    unsorted_with_tie = QueryResult("q", ranking=(("x", 1.0), ("a", 2.0), ("b", 2.0)), relevant={"a": 1})
    assert first_relevant_rank(unsorted_with_tie) == 2


def test_renderings_show_the_verdict_and_parse():
    baseline, candidate = make_run(ranks_with_losses(N, 0)), make_run(ranks_with_losses(N, 30))
    report = run_gate(baseline, candidate)
    text = render_text(report)
    assert text.startswith("ragexp gate: REGRESSION (hit_rate_at_5")
    assert "queries that got worse (20 of 30, worst first)" in text
    data = json.loads(render_json(report))
    assert data["status"] == "regression" and data["exit_code"] == 1
    assert len(data["regressions"]) == 30 and data["regressions"][0]["gold_lost"] is True
    markdown = render_markdown(report).splitlines()
    table = [line for line in markdown if line.startswith("|")]
    assert table[0].startswith("| metric | baseline | candidate | delta |")
    assert all(line.count("|") == table[0].count("|") for line in table[:2 + len(report.metrics)])


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("metrics:\n  mrr:\n    direction: sideways\n", "spec.yaml:3: field 'metrics.mrr.direction'"),
        ("metrics:\n  mrr:\n    tolerence: auto\n", "spec.yaml:3: field 'metrics.mrr.tolerence': unknown key"),
        ("metrics:\n  mrr:\n    tolerance: {absolute: -1}\n", "spec.yaml:3: field 'metrics.mrr.tolerance.absolute'"),
        ("metrics:\n  mrr:\n    tolerance: loose\n", "spec.yaml:3: field 'metrics.mrr.tolerance'"),
        ("defaults:\n  min_n: 0\nmetrics:\n  mrr:\n", "spec.yaml:2: field 'defaults.min_n'"),
        ("metrics: {}\n", "field 'metrics': the spec names no metrics"),
        ("metrics: [mrr\n", "spec.yaml:2: not valid YAML"),
    ],
)
def test_bad_spec_names_file_line_and_field(tmp_path, body, where):
    spec = tmp_path / "spec.yaml"
    spec.write_text(body, encoding="utf-8")
    with pytest.raises(RagexpInputError) as caught:
        GateSpec.load(spec)
    assert where in str(caught.value)


def test_spec_defaults_apply_to_every_metric(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "defaults:\n  tolerance: {auto: {z: 1.645}}\n  require_significance: true\n"
        "metrics:\n  mrr:\n  latency_s: {direction: lower, tolerance: {absolute: 0.2}}\n",
        encoding="utf-8",
    )
    mrr, latency = GateSpec.load(spec).rules
    assert (mrr.tolerance.kind, mrr.tolerance.z, mrr.require_significance) == ("auto", 1.645, True)
    assert (latency.direction, latency.tolerance.kind, latency.tolerance.value) == ("lower", "absolute", 0.2)


def test_default_spec_covers_the_main_metrics():
    names = [rule.metric for rule in GateSpec.load().rules]
    for metric in ("hit_rate_at_5", "recall_at_5", "mrr", "ndcg_at_10", "context_precision_at_5", "faithfulness"):
        assert metric in names


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragexp.cli", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture()
def results_files(tmp_path) -> dict[str, str]:
    runs = {
        "base": make_run(ranks_with_losses(N, 0)),
        "same": make_run(ranks_with_losses(N, 0)),
        "worse": make_run(ranks_with_losses(N, 10)),
        "other_evalset": make_run(ranks_with_losses(N, 0), fingerprint="evalset-B"),
    }
    return {name: str(run.save(tmp_path / f"{name}.json")) for name, run in runs.items()}


def test_cli_exit_codes_and_formats_in_process(results_files, capsys):
    from ragexp.cli import main

    def gate(*args: str) -> tuple[int, str, str]:
        code = main(["gate", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, out, _ = gate("--baseline", results_files["base"], "--candidate", results_files["same"])
    assert code == 0 and out.startswith("ragexp gate: PASS")
    code, out, _ = gate("--baseline", results_files["base"], "--candidate", results_files["worse"], "--format", "json")
    assert code == 1 and json.loads(out)["status"] == "regression"
    code, out, _ = gate("--baseline", results_files["base"], "--candidate", results_files["worse"],
                        "--format", "markdown", "--metrics", "mrr")
    assert code == 1 and "| mrr ↑ |" in out
    code, out, err = gate("--baseline", results_files["base"], "--candidate", results_files["other_evalset"])
    assert code == 2 and out == "" and "evalset-A" in err and "evalset-B" in err
    code, _, err = gate("--baseline", results_files["base"], "--candidate", results_files["same"], "--metrics", "f1")
    assert code == 2 and "'f1' is in neither run" in err


@pytest.mark.slow
def test_cli_subprocess_exit_codes(results_files, tmp_path):
    passed = run_cli("--baseline", results_files["base"], "--candidate", results_files["same"], cwd=tmp_path)
    assert passed.returncode == 0, passed.stderr
    failed = run_cli("--baseline", results_files["base"], "--candidate", results_files["worse"], "--format", "json",
                     cwd=tmp_path)
    assert failed.returncode == 1 and json.loads(failed.stdout)["exit_code"] == 1
    refused = run_cli("--baseline", results_files["base"], "--candidate", results_files["other_evalset"], cwd=tmp_path)
    assert refused.returncode == 2 and "evalset-B" in refused.stderr
    forced = run_cli("--baseline", results_files["base"], "--candidate", results_files["other_evalset"], "--force",
                     "--format", "markdown", cwd=tmp_path)
    assert forced.returncode == 0 and forced.stdout.startswith("### ✅ ragexp gate: PASS")


@pytest.mark.slow
def test_cli_reads_a_run_id_from_the_tracking_store(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # the Default experiment's artifacts go to ./mlruns

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(experiment_id="0", run_name="baseline").info.run_id
    client.log_dict(run_id, make_run(ranks_with_losses(N, 0)).to_dict(), ARTIFACT_NAME)
    client.set_terminated(run_id)
    worse = make_run(ranks_with_losses(N, 10)).save(tmp_path / "worse.json")

    gated = run_cli("--baseline", run_id, "--candidate", str(worse), "--tracking-uri", uri, cwd=tmp_path)
    assert gated.returncode == 1, gated.stderr
    assert f"baseline:  {run_id}" in gated.stdout
    unknown = run_cli("--baseline", "0" * 32, "--candidate", str(worse), "--tracking-uri", uri, cwd=tmp_path)
    assert unknown.returncode == 2 and "0" * 32 in unknown.stderr


def test_ci_example_calls_the_gate_with_existing_options():
    import argparse
    import shlex

    import yaml

    from ragexp.commands.gate import add_arguments

    workflow = yaml.safe_load((REPO_ROOT / "docs" / "ci-example.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["eval"]["steps"]
    script = next(step["run"] for step in steps if "ragexp gate" in step.get("run", ""))
    command = script[script.index("ragexp gate") :].split(">")[0].replace("\\\n", " ").replace("$FORCE", "--force")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(shlex.split(command)[2:])
    assert (args.baseline, args.candidate, args.format, args.force) == (
        "baseline/ragexp_results.json", "eval_out/ragexp_results.json", "markdown", True
    )
