"""The regression gate: is the candidate run worse than the baseline, beyond eval-set noise?

Both runs must have been scored on the same eval set (equal ``evalset_fingerprint``; ``force``
overrides), and runs on different corpora must have gold that was verified against each
(``meta.gold.unverifiable`` 0: no bare offsets nobody could check; ``force`` overrides); they are
paired by ``query_id``; queries present in only one run are counted, not used.
For each metric of the :class:`GateSpec`, over the queries where both runs have a value:

- ``delta = mean(candidate) - mean(baseline)``; ``worse = -delta`` for higher-is-better metrics,
  ``+delta`` for lower-is-better ones.
- ``tolerance``: absolute, relative (``r * |mean(baseline)|``) or auto
  (:func:`ragexp.metrics.stats.auto_tolerance` of the per-query differences).
- CI of ``delta`` by paired bootstrap; p-value by the sign-flip test (exact for few changes).
- family-wise error over the gated metrics (:func:`holm`): the ``m`` metrics with a p-value are
  one family; Holm's step-down adjusted p-value of the ``i``-th smallest raw p (1-based) is
  ``p_holm(i) = max_{j <= i} min(1, (m - j + 1) p(j))``, so "some metric regressed" is a false
  alarm with probability at most ``alpha`` however many metrics the spec names.
- verdict ``regression`` when ``worse > tolerance`` and, if the rule asks for significance (the
  default), ``p_holm < alpha``; ``insufficient`` when fewer than ``min_n`` pairs; else ``pass``.

A metric absent from both runs is skipped with a note; present in only one run is an error.
The per-query diff lists the queries that got worse, the list a developer reads first.

Cost (:mod:`ragexp.comparison.cost_gate`): a ``cost.*`` metric in the spec (or ``cost/*``, its
MLflow name) is one number per run, compared against the baseline with a relative or absolute
tolerance widened to the latency repeats' spread; ``budgets`` (the spec's list, or ``--budget``)
are limits the candidate alone must keep (:mod:`ragexp.cost.budgets`). Either failing makes the
gate's status ``regression``; a budget on a metric the candidate lacks is an error.

Judge metrics (:func:`ragexp.judging.review_status.is_judge_metric`):

- **corrected by human labels** where both runs have a PPI estimate of the metric
  (:mod:`ragexp.evaluation.corrected`): baseline and candidate are the PPI estimates, ``delta`` their
  difference; its CI adds the eval-set noise (the paired bootstrap CI of the judge's own per-query
  delta, as above) and each run's label noise (its PPI interval) by MOVER::

      low  = delta - sqrt((d_judge - ci_low)^2  + (ppi_c - low_c)^2  + (high_b - ppi_b)^2)
      high = delta + sqrt((ci_high - d_judge)^2 + (high_c - ppi_c)^2 + (ppi_b - low_b)^2)

  and the p-value is the two-sided normal one of ``delta`` with the standard error
  ``(high - low) / (2 z)``; the tolerance is resolved as for the judge's values. ``source`` says
  ``PPI``; with labels for one run only both are compared on the judge's values, with a note.
- **unverified** (:attr:`GateReport.unverified`): the review status of each judge metric (given
  by the caller: the last human review of each run's judge) below ``judge_review.min_kappa`` or
  absent. The rule ``judge_review.unverified: warn`` (default) reports it; ``fail`` makes the
  gate's status ``unverified`` (exit code 1) unless a metric regressed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist

import numpy as np
import yaml

from ragexp.comparison.cost_gate import CostVerdict, compare_cost
from ragexp.config.bounds import MAX_RESAMPLES
from ragexp.cost import budgets as cost_budgets
from ragexp.cost.keys import is_cost, results_key
from ragexp.datamodel import is_relevant
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.judging.calibration.record import MIN_KAPPA
from ragexp.judging.ppi import PPIEstimate, z_of
from ragexp.judging.review_status import FAIL, WARN, is_judge_metric
from ragexp.metrics import stats
from ragexp.metrics.measure import LOWER, measure
from ragexp.metrics.ranking import trec_order
from ragexp.stored.limits import parse_yaml, read_text

DEFAULT_SPEC_PATH = Path(__file__).resolve().parents[1] / "resources" / "gate_default.yaml"
#: A gate spec is a few dozen lines; anything larger is not one.
MAX_SPEC_BYTES = 1024 * 1024
_SLACK = 1e-12
"""Rounding slack: a drop exactly equal to the tolerance is not a regression."""

PASS, REGRESSION, INSUFFICIENT, UNVERIFIED = "pass", "regression", "insufficient", "unverified"
EXIT_CODES = {PASS: 0, REGRESSION: 1, INSUFFICIENT: 2, UNVERIFIED: 1}
#: ``MetricVerdict.source``: what baseline and candidate are for a judge metric.
FROM_JUDGE, FROM_PPI = "judge", "PPI"


@dataclass(frozen=True)
class Tolerance:
    """How large a drop is still noise: ``absolute`` amount, ``relative`` fraction, or ``auto``."""

    kind: str
    value: float = 0.0
    z: float = stats.DEFAULT_Z
    floor_queries: float = 1.0

    def resolve(self, baseline_mean: float, diffs: np.ndarray) -> float:
        if self.kind == "absolute":
            return self.value
        if self.kind == "relative":
            return self.value * abs(baseline_mean)
        return stats.auto_tolerance(diffs, z=self.z, floor_queries=self.floor_queries)

    def describe(self) -> str:
        if self.kind == "absolute":
            return f"abs {self.value:g}"
        if self.kind == "relative":
            return f"rel {self.value:.1%}"
        return "auto" if self.z == stats.DEFAULT_Z else f"auto z={self.z:g}"


def default_direction(metric: str, defaults: MetricRule) -> str:
    """A rule's direction when the spec does not give one: ``lower`` for a measure where less is
    better (:mod:`ragexp.metrics.measure`: failure rates, errors, time), else the spec's default."""
    return LOWER if measure(metric).lower_is_better else defaults.direction


@dataclass(frozen=True)
class MetricRule:
    metric: str
    direction: str = "higher"
    tolerance: Tolerance = Tolerance("auto")
    min_n: int = 20
    require_significance: bool = True
    alpha: float = 0.05


DEFAULT_GOLD_K = 5


@dataclass(frozen=True)
class JudgeReviewRule:
    """When a judge metric counts as verified (kappa of the judge's last human review at least
    ``min_kappa``), and what an unverified one does: ``warn`` or ``fail``."""

    min_kappa: float = MIN_KAPPA
    unverified: str = WARN


@dataclass(frozen=True)
class GateSpec:
    """The gate's rules, usually read from YAML (see ``ragexp/resources/gate_default.yaml`` and docs/gate.md)."""

    rules: tuple[MetricRule, ...]
    defaults: MetricRule = MetricRule("*")
    gold_k: int | None = None  # None: each run's own context_k (what reached the generator), else 5
    show_top: int = 20
    n_resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = 0
    budgets: tuple[cost_budgets.Budget, ...] = ()
    judge_review: JudgeReviewRule = JudgeReviewRule()

    @classmethod
    def load(cls, path: str | Path | None = None) -> "GateSpec":
        """Read a spec file; ``None`` reads the default spec shipped in ``ragexp/resources/gate_default.yaml``."""
        path = Path(path) if path is not None else DEFAULT_SPEC_PATH
        try:  # a regular file of bounded size (stored.limits)
            text = read_text(path, max_bytes=MAX_SPEC_BYTES)
        except RagexpInputError as err:
            raise RagexpInputError("no such gate spec file" if err.message == "no such file" else err.message,
                                   file=path) from None
        try:
            node = yaml.compose(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            raise RagexpInputError(
                f"not valid YAML: {getattr(err, 'problem', err)}", file=path, line=mark.line + 1 if mark else None
            ) from None
        data = parse_yaml(text, source=path)  # no aliases, bounded depth: before the node tree is walked
        return _SpecParser(path, _key_lines(node)).parse(data)

    @classmethod
    def from_mapping(cls, data: Mapping, source: str = "<gate spec>") -> "GateSpec":
        return _SpecParser(source, {}).parse(data)

    def select(self, metrics: Sequence[str]) -> "GateSpec":
        """Only ``metrics``, in that order; a metric the spec does not name gets the spec defaults."""
        by_name = {rule.metric: rule for rule in self.rules}
        metrics = [results_key(name) for name in metrics]
        chosen = tuple(by_name.get(name) or replace(self.defaults, metric=name, direction=default_direction(name, self.defaults))
                       for name in metrics)
        return replace(self, rules=chosen)


def _key_lines(node, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """1-based line of every mapping key in a composed YAML tree, keyed by its path."""
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = prefix + (str(key.value),)
            lines[path] = key.start_mark.line + 1
            lines.update(_key_lines(value, path))
    return lines


class _SpecParser:
    """Validates a spec mapping, raising :class:`RagexpInputError` with file, line and field."""

    TOP_KEYS = {"defaults", "metrics", "per_query", "resampling", "budgets", "judge_review"}
    RULE_KEYS = {"direction", "tolerance", "min_n", "require_significance", "alpha"}

    def __init__(self, source: str | Path, lines: dict[tuple[str, ...], int]) -> None:
        self.source = source
        self.lines = lines

    def error(self, path: tuple[str, ...], message: str) -> RagexpInputError:
        line = next((self.lines[path[:i]] for i in range(len(path), 0, -1) if path[:i] in self.lines), None)
        return RagexpInputError(message, file=self.source, line=line, field=".".join(path) or None)

    def mapping(self, value, path: tuple[str, ...], allowed: set[str] | None = None) -> Mapping:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(path, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.error(path + (str(key),), f"unknown key (expected one of {', '.join(sorted(allowed))})")
        return value

    def number(self, value, path, *, low: float, high: float = float("inf"), integer: bool = False) -> float:
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
            what = "an integer" if integer else "a number"
            raise self.error(path, f"expected {what} in [{low:g}, {high:g}], got {value!r}")
        return value

    def parse(self, data) -> GateSpec:
        data = self.mapping(data, (), self.TOP_KEYS)
        defaults = self.rule("*", data.get("defaults"), ("defaults",), MetricRule("*"))
        metrics = self.mapping(data.get("metrics"), ("metrics",))
        if not metrics:
            raise self.error(("metrics",), "the spec names no metrics")
        rules = tuple(self.rule(results_key(str(name)), body, ("metrics", str(name)), defaults) for name, body in metrics.items())
        budgets = data.get("budgets") or []
        if not isinstance(budgets, list):
            raise self.error(("budgets",), "expected a list of '<metric> <= <number>' strings")
        try:
            limits = tuple(cost_budgets.parse_budget(text, f"budgets[{i}]") for i, text in enumerate(budgets))
        except RagexpInputError as err:
            raise self.error(("budgets",), err.message) from None
        per_query = self.mapping(data.get("per_query"), ("per_query",), {"k", "top"})
        resampling = self.mapping(data.get("resampling"), ("resampling",), {"n_resamples", "seed"})
        review = self.mapping(data.get("judge_review"), ("judge_review",), {"min_kappa", "unverified"})
        on_unverified = review.get("unverified", WARN)
        if on_unverified not in (WARN, FAIL):
            raise self.error(("judge_review", "unverified"), f"expected '{WARN}' or '{FAIL}', got {on_unverified!r}")
        return GateSpec(
            rules=rules,
            defaults=defaults,
            gold_k=self.gold_k(per_query.get("k", "context")),
            show_top=int(self.number(per_query.get("top", GateSpec.show_top), ("per_query", "top"), low=0, integer=True)),
            n_resamples=int(
                self.number(resampling.get("n_resamples", GateSpec.n_resamples), ("resampling", "n_resamples"),
                            low=100, high=MAX_RESAMPLES, integer=True)
            ),
            seed=int(self.number(resampling.get("seed", GateSpec.seed), ("resampling", "seed"), low=0, integer=True)),
            budgets=limits,
            judge_review=JudgeReviewRule(
                float(self.number(review.get("min_kappa", MIN_KAPPA), ("judge_review", "min_kappa"), low=-1, high=1)),
                on_unverified),
        )

    def gold_k(self, value) -> int | None:
        """``per_query.k``: ``context`` (each run's own context_k) or a fixed positive integer."""
        if value == "context":
            return None
        return int(self.number(value, ("per_query", "k"), low=1, integer=True))

    def rule(self, name: str, body, path: tuple[str, ...], base: MetricRule) -> MetricRule:
        body = self.mapping(body, path, self.RULE_KEYS)
        direction = body.get("direction", default_direction(name, base))
        if direction not in ("higher", "lower"):
            raise self.error(path + ("direction",), f"expected 'higher' or 'lower', got {direction!r}")
        significance = body.get("require_significance", base.require_significance)
        if not isinstance(significance, bool):
            raise self.error(path + ("require_significance",), f"expected true or false, got {significance!r}")
        return MetricRule(
            metric=name,
            direction=direction,
            tolerance=self.tolerance(body["tolerance"], path + ("tolerance",)) if "tolerance" in body else base.tolerance,
            min_n=int(self.number(body.get("min_n", base.min_n), path + ("min_n",), low=1, integer=True)),
            require_significance=significance,
            alpha=float(self.number(body.get("alpha", base.alpha), path + ("alpha",), low=1e-9, high=1)),
        )

    def tolerance(self, value, path: tuple[str, ...]) -> Tolerance:
        if value == "auto":
            return Tolerance("auto")
        body = self.mapping(value, path, {"absolute", "relative", "auto"}) if isinstance(value, Mapping) else None
        if not body or len(body) != 1:
            raise self.error(path, "expected 'auto', {absolute: X}, {relative: R} or {auto: {z: Z, floor_queries: F}}")
        [(kind, amount)] = body.items()
        if kind == "auto":
            options = self.mapping(amount, path + ("auto",), {"z", "floor_queries"})
            return Tolerance(
                "auto",
                z=float(self.number(options.get("z", Tolerance.z), path + ("auto", "z"), low=0)),
                floor_queries=float(
                    self.number(options.get("floor_queries", Tolerance.floor_queries), path + ("auto", "floor_queries"), low=0)
                ),
            )
        return Tolerance(kind, value=float(self.number(amount, path + (kind,), low=0)))


@dataclass
class MetricVerdict:
    """One metric's comparison; statistics are ``None`` when there are too few pairs to compute them."""

    metric: str
    direction: str
    n: int
    baseline: float | None
    candidate: float | None
    delta: float | None
    tolerance: float | None
    tolerance_rule: str
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    worse_queries: int
    better_queries: int
    require_significance: bool
    alpha: float
    verdict: str
    p_holm: float | None = None  # Holm-adjusted over the gated metrics (:func:`holm`)
    dropped: bool = False  # worse by more than the tolerance
    source: str = ""  # judge metrics: FROM_JUDGE or FROM_PPI (module docstring)
    review: str = ""  # judge metrics: the review status sentence (``verified: ...`` / ``UNVERIFIED: ...``)

    @property
    def unverified(self) -> bool:
        return self.review.startswith("UNVERIFIED")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (see the module docstring)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * p_values[i]))
        adjusted[i] = running
    return adjusted


def apply_holm(verdicts: Sequence[MetricVerdict]) -> None:
    """Set ``p_holm`` on every verdict with a p-value and decide it (module docstring)."""
    tested = [v for v in verdicts if v.p_value is not None]
    for verdict, adjusted in zip(tested, holm([v.p_value for v in tested])):
        verdict.p_holm = adjusted
        significant = adjusted < verdict.alpha or not verdict.require_significance
        verdict.verdict = REGRESSION if verdict.dropped and significant else PASS


@dataclass
class QueryRegression:
    """A query that got worse: ``drops[metric]`` is how much worse (> 0) in the metric's direction."""

    query_id: str
    tags: list[str]
    gold_lost: bool
    baseline_rank: int | None
    candidate_rank: int | None
    drops: dict[str, float]

    @property
    def rank_dropped(self) -> bool:
        return self.baseline_rank is not None and (self.candidate_rank is None or self.candidate_rank > self.baseline_rank)

    @property
    def severity(self) -> float:
        """Sum of the metric drops; the sort key after ``gold_lost``."""
        return sum(self.drops.values())


@dataclass
class GateReport:
    baseline_label: str
    candidate_label: str
    baseline_fingerprint: str | None
    candidate_fingerprint: str | None
    forced: bool
    n_paired: int
    baseline_only: int
    candidate_only: int
    gold_ks: tuple[int, int]  # the "gold lost" cut-off in the baseline and in the candidate
    show_top: int
    metrics: list[MetricVerdict]
    regressions: list[QueryRegression]
    notes: list[str] = field(default_factory=list)
    costs: list[CostVerdict] = field(default_factory=list)
    budgets: list[cost_budgets.BudgetVerdict] = field(default_factory=list)
    judge_review: JudgeReviewRule = JudgeReviewRule()

    @property
    def unverified(self) -> list[str]:
        """The gated judge metrics whose judge was never reviewed or agreed below the floor."""
        return [m.metric for m in self.metrics if m.unverified]

    @property
    def status(self) -> str:
        """``regression`` if any metric or cost regressed or a budget is broken, else ``unverified``
        if a judge metric is unverified and the rule says ``fail``, else ``insufficient`` if any
        metric lacked pairs, else ``pass``."""
        verdicts = {m.verdict for m in self.metrics} | {c.verdict for c in self.costs}
        if any(b.status == cost_budgets.OVER for b in self.budgets):
            verdicts.add(REGRESSION)
        if self.unverified and self.judge_review.unverified == FAIL:
            verdicts.add(UNVERIFIED)
        return next((status for status in (REGRESSION, UNVERIFIED, INSUFFICIENT) if status in verdicts), PASS)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def _rows_by_id(results: RunResults, label: str) -> dict[str, QueryResult]:
    rows: dict[str, QueryResult] = {}
    for row in results.per_query:
        if row.query_id in rows:
            raise RagexpInputError(f"{label} results list query {row.query_id!r} twice", field="query_id")
        rows[row.query_id] = row
    return rows


def check_fingerprints(baseline: RunResults, candidate: RunResults, force: bool) -> list[str]:
    """Refuse runs scored on different eval sets unless ``force``; return notes for the report."""
    base_fp = baseline.meta.get("evalset_fingerprint")
    cand_fp = candidate.meta.get("evalset_fingerprint")
    notes = []
    if base_fp is None or cand_fp is None or base_fp != cand_fp:
        message = (
            f"eval set fingerprints differ: baseline {base_fp or 'missing'} vs candidate {cand_fp or 'missing'}; "
            "the runs were not scored on the same eval set"
        )
        if not force:
            raise RagexpInputError(message + " (pass --force to compare the common query ids anyway)",
                                   field="evalset_fingerprint")
        notes.append(message + " (compared anyway: --force)")
    if baseline.meta.get("corpus_fingerprint") != candidate.meta.get("corpus_fingerprint"):
        notes.append("corpus fingerprints differ: the runs searched different corpora")
        notes += _check_gold(baseline, candidate, force)
    return notes


def _check_gold(baseline: RunResults, candidate: RunResults, force: bool) -> list[str]:
    """Runs on different corpora: refuse (unless ``force``) when either run's gold held bare spans
    nobody could verify against its corpus (``meta.gold.unverifiable``, docs/living-evalset.md), since
    a difference may then be stale gold rather than the system; note spans a run re-anchored."""
    gold = {label: run.meta.get("gold") or {} for label, run in (("baseline", baseline), ("candidate", candidate))}
    notes = [f"the {label} run re-anchored {record['moved']} gold span(s) that had moved in its corpus "
             "(meta.gold.moves)" for label, record in gold.items() if record.get("moved")]
    unverified = {label: record["unverifiable"] for label, record in gold.items() if record.get("unverifiable")}
    if unverified:
        named = " and ".join(f"the {label}'s {n}" for label, n in unverified.items())
        message = (f"the runs searched different corpora and {named} gold span(s) are bare offsets nobody can verify "
                   "against them: a difference may be stale gold, not the system; give the eval set its text "
                   "(ragexp evalset reanchor EVALSET --corpus NEW --old-corpus OLD) and re-run")
        if not force:
            raise RagexpInputError(message + " (or pass --force to compare anyway)", field="meta.gold")
        notes.append(message + " (compared anyway: --force)")
    return notes


def first_relevant_rank(row: QueryResult) -> int | None:
    """1-based rank of the first relevant unit (:func:`~ragexp.datamodel.is_relevant`) of ``row.ranking``, else ``None``.

    The ranking is read in trec_eval order (score descending, ties by id descending), the order
    the retrieval metrics were computed in.
    """
    relevant = {unit for unit, grade in row.relevant.items() if is_relevant(grade)}
    ranking = trec_order(row.ranking)
    return next((rank for rank, (unit, _score) in enumerate(ranking, 1) if unit in relevant), None)


def _gold_k(results: RunResults, spec: GateSpec) -> int:
    """The spec's fixed cut-off, else the run's context_k (results written before it was recorded: 5)."""
    return spec.gold_k if spec.gold_k is not None else int(results.meta.get("context_k", DEFAULT_GOLD_K))


def compare_metric(rule: MetricRule, base: np.ndarray, cand: np.ndarray, spec: GateSpec) -> MetricVerdict:
    """Compare one metric over paired per-query values ``base[i]``, ``cand[i]``."""
    n = int(base.size)
    sign = 1.0 if rule.direction == "higher" else -1.0
    diffs = cand - base
    verdict = MetricVerdict(
        metric=rule.metric, direction=rule.direction, n=n,
        baseline=float(base.mean()) if n else None, candidate=float(cand.mean()) if n else None,
        delta=float(diffs.mean()) if n else None, tolerance=None, tolerance_rule=rule.tolerance.describe(),
        ci_low=None, ci_high=None, p_value=None,
        worse_queries=int(np.count_nonzero(sign * diffs < 0)), better_queries=int(np.count_nonzero(sign * diffs > 0)),
        require_significance=rule.require_significance, alpha=rule.alpha, verdict=INSUFFICIENT,
    )
    if n < rule.min_n:
        return verdict
    verdict.tolerance = rule.tolerance.resolve(verdict.baseline, diffs)
    verdict.ci_low, verdict.ci_high = stats.paired_bootstrap_ci(
        base, cand, n_resamples=spec.n_resamples, alpha=rule.alpha, seed=spec.seed
    )
    verdict.p_value = stats.sign_flip_p_value(base, cand, n_resamples=spec.n_resamples, seed=spec.seed)
    verdict.dropped = -sign * verdict.delta > verdict.tolerance + _SLACK
    verdict.verdict = PASS  # decided with the other metrics' p-values: :func:`apply_holm`
    return verdict


def compare_corrected(rule: MetricRule, base: np.ndarray, cand: np.ndarray, spec: GateSpec,
                      corrected: tuple[PPIEstimate, PPIEstimate]) -> MetricVerdict:
    """:func:`compare_metric` on the PPI estimates of a judge metric (module docstring); ``base``
    and ``cand`` are the judge's paired per-query values (the eval-set noise)."""
    verdict = compare_metric(rule, base, cand, spec)
    verdict.source = FROM_PPI
    if verdict.verdict == INSUFFICIENT:
        return verdict
    ppi_b, ppi_c = corrected
    d_judge = verdict.delta
    verdict.baseline, verdict.candidate = ppi_b.estimate, ppi_c.estimate
    verdict.delta = ppi_c.estimate - ppi_b.estimate
    verdict.tolerance = rule.tolerance.resolve(ppi_b.estimate, cand - base)
    below = math.sqrt((d_judge - verdict.ci_low) ** 2 + (ppi_c.estimate - ppi_c.low) ** 2 + (ppi_b.high - ppi_b.estimate) ** 2)
    above = math.sqrt((verdict.ci_high - d_judge) ** 2 + (ppi_c.high - ppi_c.estimate) ** 2 + (ppi_b.estimate - ppi_b.low) ** 2)
    verdict.ci_low, verdict.ci_high = verdict.delta - below, verdict.delta + above
    z = z_of(1 - rule.alpha)
    se = (below + above) / (2 * z)
    verdict.p_value = 1.0 if se == 0 and verdict.delta == 0 else (
        0.0 if se == 0 else 2 * (1 - NormalDist().cdf(abs(verdict.delta) / se)))
    sign = 1.0 if rule.direction == "higher" else -1.0
    verdict.dropped = -sign * verdict.delta > verdict.tolerance + _SLACK
    return verdict


def query_regressions(
    base_rows: Mapping[str, QueryResult], cand_rows: Mapping[str, QueryResult], common: Sequence[str],
    rules: Sequence[MetricRule], gold_ks: tuple[int, int],
) -> list[QueryRegression]:
    """Queries that got worse, worst first: gold lost (in the baseline's top ``gold_ks[0]``, not in the
    candidate's top ``gold_ks[1]``), then total metric drop."""
    base_k, cand_k = gold_ks
    found = []
    for query_id in common:
        base, cand = base_rows[query_id], cand_rows[query_id]
        drops = {}
        for rule in rules:
            b, c = base.metrics.get(rule.metric), cand.metrics.get(rule.metric)
            if b is not None and c is not None:
                worse_by = (b - c) if rule.direction == "higher" else (c - b)
                if worse_by > _SLACK:
                    drops[rule.metric] = worse_by
        base_rank, cand_rank = first_relevant_rank(base), first_relevant_rank(cand)
        gold_lost = base_rank is not None and base_rank <= base_k and (cand_rank is None or cand_rank > cand_k)
        regression = QueryRegression(query_id, list(cand.tags or base.tags), gold_lost,
                                     base_rank, cand_rank, drops)
        if drops or regression.rank_dropped:
            found.append(regression)
    found.sort(key=lambda r: (not r.gold_lost, -r.severity, r.query_id))
    return found


def run_gate(
    baseline: RunResults,
    candidate: RunResults,
    spec: GateSpec | None = None,
    *,
    metrics: Sequence[str] | None = None,
    force: bool = False,
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
    budgets: Sequence[str] = (),
    corrected: tuple[Mapping[str, PPIEstimate], Mapping[str, PPIEstimate]] = ({}, {}),
    reviews: Mapping[str, str] | None = None,
) -> GateReport:
    """Gate ``candidate`` against ``baseline``; raises :class:`RagexpInputError` on unusable input.

    ``metrics`` restricts the gate to those names (each must be present in both runs); ``budgets``
    adds limits (``"cost/latency_p95_ms <= 250"``) to the spec's. ``corrected`` holds each run's
    PPI estimates by metric, ``reviews`` the review status sentence of each judge metric
    (``None``: not looked up; module docstring).
    """
    spec = spec or GateSpec.load()
    if metrics:
        spec = spec.select(metrics)
    if budgets:
        spec = replace(spec, budgets=spec.budgets + tuple(cost_budgets.parse_budget(text, "--budget") for text in budgets))
    notes = check_fingerprints(baseline, candidate, force)
    base_rows = _rows_by_id(baseline, baseline_label)
    cand_rows = _rows_by_id(candidate, candidate_label)
    common = sorted(base_rows.keys() & cand_rows.keys())
    if not common:
        raise RagexpInputError(f"{baseline_label} and {candidate_label} share no query ids", field="query_id")

    in_base, in_cand = baseline.metric_names(), candidate.metric_names()
    compared_rules, verdicts = [], []
    costs = _cost_verdicts([rule for rule in spec.rules if is_cost(rule.metric)], baseline, candidate,
                           baseline_label, candidate_label, notes, strict=bool(metrics))
    budgets = []
    for budget in spec.budgets:
        verdict = cost_budgets.check(budget, candidate.aggregates)
        if verdict.status == cost_budgets.UNMEASURED:
            raise RagexpInputError(f"budget {budget}: the {candidate_label} run has no {budget.metric} (measure it, e.g. "
                                   "cost.latency_queries=20 for served latency; docs/cost.md)", field="budgets")
        budgets.append(verdict)
    for rule in spec.rules:
        if is_cost(rule.metric):
            continue
        if rule.metric not in in_base and rule.metric not in in_cand:
            if metrics:
                raise RagexpInputError(f"metric {rule.metric!r} is in neither run", field="metrics")
            notes.append(f"{rule.metric}: in neither run, skipped")
            continue
        if rule.metric not in in_base or rule.metric not in in_cand:
            missing = baseline_label if rule.metric not in in_base else candidate_label
            raise RagexpInputError(
                f"metric {rule.metric!r} is missing from the {missing} run; gate it on both runs or leave it out "
                "(--metrics or the spec)", field="metrics",
            )
        pairs = [
            (base_rows[q].metrics[rule.metric], cand_rows[q].metrics[rule.metric])
            for q in common
            if rule.metric in base_rows[q].metrics and rule.metric in cand_rows[q].metrics
        ]
        values = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
        if not np.all(np.isfinite(values)):
            raise RagexpInputError(f"metric {rule.metric!r} has NaN or infinite per-query values", field="metrics")
        both = [side.get(rule.metric) for side in corrected]
        if all(both):
            verdict = compare_corrected(rule, values[:, 0], values[:, 1], spec, (both[0], both[1]))
        else:
            verdict = compare_metric(rule, values[:, 0], values[:, 1], spec)
            if is_judge_metric(rule.metric):
                verdict.source = FROM_JUDGE
            if any(both):
                notes.append(f"{rule.metric}: human labels for the {baseline_label if both[0] else candidate_label} run only; "
                             "both runs compared on the judge's values (label the other run to compare PPI estimates)")
        if reviews is not None and is_judge_metric(rule.metric):
            verdict.review = reviews.get(rule.metric, "UNVERIFIED: no review status")
        if verdict.verdict == INSUFFICIENT:
            notes.append(f"{rule.metric}: only {verdict.n} paired queries, the spec asks for min_n={rule.min_n}; "
                         f"to decide, evaluate both runs on at least {rule.min_n} shared queries "
                         f"(eval.sample={rule.min_n} or more with the same eval.sample_seed, or the whole eval set)")
        verdicts.append(verdict)
        compared_rules.append(rule)
    if not verdicts and not costs and not budgets:
        raise RagexpInputError("none of the gated metrics is in either run", field="metrics")
    apply_holm(verdicts)

    gold_ks = (_gold_k(baseline, spec), _gold_k(candidate, spec))
    return GateReport(
        baseline_label=baseline_label,
        candidate_label=candidate_label,
        baseline_fingerprint=baseline.meta.get("evalset_fingerprint"),
        candidate_fingerprint=candidate.meta.get("evalset_fingerprint"),
        forced=force,
        n_paired=len(common),
        baseline_only=len(base_rows) - len(common),
        candidate_only=len(cand_rows) - len(common),
        gold_ks=gold_ks,
        show_top=spec.show_top,
        metrics=verdicts,
        regressions=query_regressions(base_rows, cand_rows, common, compared_rules, gold_ks),
        notes=notes,
        costs=costs,
        budgets=budgets,
        judge_review=spec.judge_review,
    )


def _cost_verdicts(rules: Sequence[MetricRule], baseline: RunResults, candidate: RunResults, baseline_label: str,
                   candidate_label: str, notes: list[str], strict: bool) -> list[CostVerdict]:
    """:func:`~ragexp.comparison.cost_gate.compare_cost` for each cost rule on the runs'
    aggregates; absent from both runs: a note (an error when ``strict``: named by ``--metrics``);
    from one run only: an error, as for any metric."""
    out = []
    for rule in rules:
        in_base, in_cand = rule.metric in baseline.aggregates, rule.metric in candidate.aggregates
        if not in_base and not in_cand:
            if strict:
                raise RagexpInputError(f"metric {rule.metric!r} is in neither run", field="metrics")
            notes.append(f"{rule.metric}: in neither run, skipped")
            continue
        if not (in_base and in_cand):
            missing = baseline_label if not in_base else candidate_label
            raise RagexpInputError(f"cost metric {rule.metric!r} is missing from the {missing} run; measure it on both "
                                   "runs or leave it out (docs/cost.md)", field="metrics")
        out.append(compare_cost(rule.metric, rule.tolerance.kind, rule.tolerance.value, baseline.aggregates,
                                candidate.aggregates))
    return out
