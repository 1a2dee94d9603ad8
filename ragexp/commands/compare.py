"""``ragexp compare``: runs side by side in the terminal, best value per metric marked ``*``.

Metrics are read from MLflow under their results keys (``hit_rate_at_5``, ``doc_ndcg_at_10``,
``tag.synonym.mrr``, ``source.draft.mrr``; :mod:`ragexp.tracking.metric_names`). Runs scored on different eval sets
(different ``ragexp.evalset_fingerprint`` tags) are not ranked against each other: the command
refuses, naming the eval sets, unless ``--force`` (then no best value is marked). When the gold is
whole documents and the runs chunk differently, chunk-level metrics count different numbers of
relevant chunks per chunking: their columns are marked ``†`` and get no best mark (compare the
``doc_`` columns instead). A reproduction is labelled with the run it reproduces. ``--by-tag`` and
``--by-source`` show one metric per eval-set tag or per item source (``log``, ``hand``, ``draft``,
``failure``); the default table notes when the eval set mixes drafted and other questions.

Beside the best ``*``, values indistinguishable from it are marked ``≈``
(:mod:`ragexp.comparison.vs_best`: paired sign-flip test on each run's per-query values from its
``ragexp_results.json``, Bonferroni over the other runs), and a noise line states the smallest
hit-rate difference this eval set detects. ``--per-query`` with two runs lists the queries they
split on (:mod:`ragexp.comparison.per_query_diff`) and logs the list to both runs as
``per_query_diff/<other run id>.html`` and ``.json``.

Cost columns (:func:`ragexp.comparison.table.cost_metrics`): when runs measured their cost, the
default table adds each p95 latency (``p95 ms``: served, one query at a time; ``endpoint p95 ms``:
a black-box system's), index size, peak RSS, generation tokens per query and money per 1,000
queries, lower is better (``*``), with a line saying how latency was measured. A run whose
encoder runs at a precision other than fp32 is labelled with it (``· int8``) when its name does
not say so (runs named before names carried it).

A judge metric with a human-corrected estimate (``ppi.<metric>``, logged by ``ragexp judge
review`` or ``ragexp judge ppi``: :mod:`ragexp.evaluation.corrected`) shows that estimate in place of
the judge's value for that run, and a line under the table says, per judge metric, which runs
show the PPI estimate (with its interval and label count) and which the judge's value alone
("judge only, uncorrected"); tie marks of such a column still come from the judge's per-query values.
A judge metric whose run no good-enough review backs (never reviewed, reviewed only on runs of another
generator or eval set, or a kappa interval reaching below the floor 0.4:
:mod:`ragexp.judging.review_status`) is marked ``?`` after its value, best ``*`` included, and a
line under the table gives the reason with the review's kappa, interval and n.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from collections import Counter
from pathlib import Path

from ragexp.commands._runs import add_tracking_argument, client_for, get_run, run_ref
from ragexp.comparison import vs_best
from ragexp.comparison.per_query_diff import format_html, format_text, per_query_diff
from ragexp.comparison.table import UNVERIFIED_MARK, cost_metrics, format_table, headline_metrics
from ragexp.cost import keys as cost_keys
from ragexp.errors import RagexpInputError
from ragexp.evaluation import corrected
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.judging.calibration.record import MIN_KAPPA
from ragexp.judging.review_status import TAG_JUDGE_KEY, ReviewStatus, is_judge_metric, last_review
from ragexp.metrics import stats
from ragexp.metrics.measure import CHUNK, Measure, at, measure
from ragexp.tracking import experiments, run_names, store
from ragexp.tracking.metric_names import results_view

NOT_COMPARABLE_MARK = "†"
PER_QUERY_DIR = "per_query_diff"
CHUNKING_NOTE = (f"{NOT_COMPARABLE_MARK} not comparable across chunkings: the gold is whole documents, so each chunking has "
                 "its own number of relevant chunks (no best value marked); compare the doc_ metrics")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", type=run_ref,
                        help="runs to compare, by id or a unique prefix as printed here (default: all job runs of --experiment)")
    parser.add_argument("--experiment", help="experiment name (default: the newest experiment with ragexp runs)")
    parser.add_argument("--metrics", help="comma-separated metric keys (default: headline metrics at k=5)")
    parser.add_argument("--by-tag", metavar="METRIC", help="instead: METRIC per eval-set tag (category) for each run")
    parser.add_argument("--by-source", metavar="METRIC", help="instead: METRIC per item source (log, hand, draft, failure)")
    parser.add_argument("--sort", metavar="METRIC", help="sort runs by METRIC, best first")
    parser.add_argument("--force", action="store_true",
                        help="show runs of different eval sets together (no best value is marked then)")
    parser.add_argument("--per-query", action="store_true",
                        help="with two runs: the queries they split on (A hits/B misses, the reverse, rank moves), "
                             "also logged to both runs as per_query_diff/<other run id>.html and .json")
    add_tracking_argument(parser)


def _job_runs(client, args):
    if args.run_ids:
        return [get_run(client, run_id) for run_id in args.run_ids]
    if args.experiment:
        experiment = client.get_experiment_by_name(args.experiment)
        if experiment is None:
            names = [e.name for e in client.search_experiments()]
            raise RagexpInputError(f"no experiment {args.experiment!r}; known: {', '.join(names) or 'none'}", field="--experiment")
        experiments = [experiment]
    else:
        experiments = sorted(client.search_experiments(), key=lambda e: e.last_update_time or 0, reverse=True)
    for experiment in experiments:
        runs = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`{store.TAG_KIND}` = 'job'", order_by=["attributes.start_time ASC"],
            max_results=5000,
        )
        if runs:
            return runs
    raise RagexpInputError("no ragexp runs found; run `ragexp run` first", field="--experiment")


def _is_hit_rate_at_k(identity: Measure) -> bool:
    """``hit_rate_at_<k>`` itself: chunk level, over all queries, not a CI bound."""
    return identity.name == "hit_rate" and identity.k is not None and identity.level == CHUNK and not identity.group and not identity.bound


def run_label(run) -> str:
    """``<name> [<id8>]``; a reproduction adds ``repro of <original id8>``; an encoder precision
    other than fp32 that the name does not carry is added (``· int8``)."""
    reproduces = run.data.tags.get(store.TAG_REPRODUCES)
    suffix = f" repro of {reproduces[:8]}" if reproduces else ""
    name = run.info.run_name or ""
    precisions = {value for key, value in run.data.params.items() if key.endswith(".precision")}
    if precisions - {"fp32"} and not any(p in name for p in precisions - {"fp32"}):
        name += run_names.SEPARATOR + "+".join(sorted(precisions))
    return f"{name} [{run.info.run_id[:8]}{suffix}]"


def check_one_evalset(runs, force: bool) -> bool:
    """True when every run has the same eval-set fingerprint; else refuse (``RagexpInputError``
    naming each eval set and its run count), or with ``force`` warn and return False."""
    counts = Counter((r.data.tags.get(store.TAG_EVALSET_FP, "?"), r.data.tags.get(store.TAG_EVALSET_NAME, "?")) for r in runs)
    if len(counts) < 2:
        return True
    listing = "; ".join(f"{name} {fp[:8]}: {n} runs" for (fp, name), n in counts.most_common())
    if not force:
        raise RagexpInputError(f"these runs were scored on {len(counts)} different eval sets ({listing}); their metrics "
                               "are not comparable: pick runs of one eval set (or pass --force to list them anyway)",
                               field="RUN_ID")
    print(f"WARNING: runs of {len(counts)} different eval sets ({listing}); no best value is marked", file=sys.stderr)
    return False


def _known(name: str, option: str, available: set[str]) -> str:
    if name in available:
        return name
    close = difflib.get_close_matches(name, sorted(available), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(available)[:20])}, ..."
    raise RagexpInputError(f"no metric {name!r} in these runs; {hint}", field=option)


def _results(client, run) -> RunResults | None:
    """A run's ``ragexp_results.json``, or ``None`` when it has none (a run logged by hand)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return RunResults.load(store.download_artifact(run.info.run_id, ARTIFACT_NAME, client.tracking_uri,
                                                           dst_dir=Path(tmp)))  # artifact location checked
        except RagexpInputError as err:
            if err.field == "artifact_location":
                raise  # a refused location is said, not taken for a run without results
            return None
        except Exception:  # noqa: BLE001 - any store or file error: the run just gets no tie mark
            return None


def tie_marks(names: list[str], results: dict[str, RunResults], metrics: list[str], unranked: set[str]
              ) -> tuple[dict[str, set[str]], str | None]:
    """``({metric: runs tied with the best}, noise line)`` over the runs with results files; the
    noise line is for the first hit-rate metric (``None`` without one)."""
    tied: dict[str, set[str]] = {}
    noise = None
    for metric in metrics:
        if metric in unranked:
            continue
        per_query = {name: values for name in names if name in results
                     and (values := results[name].metric_values(metric))}
        if len(per_query) < 2:
            continue
        standing = vs_best.classify(per_query, lower_is_better=measure(metric).lower_is_better)
        tied[metric] = {name for name, s in standing.items() if s.status == vs_best.TIED}
        if noise is None and _is_hit_rate_at_k(measure(metric)) and standing:
            top = next(s for s in standing.values() if s.status == vs_best.BEST)
            noise = vs_best.noise_line(top.n, top.mean, metric.replace("_at_", "@").replace("_", " "))
    return tied, noise


def run(args: argparse.Namespace) -> int:
    if args.per_query and len(args.run_ids) != 2:
        raise RagexpInputError(f"--per-query compares exactly two runs, got {len(args.run_ids)} run ids", field="RUN_ID")
    if args.per_query and args.run_ids[0] == args.run_ids[1]:
        raise RagexpInputError(f"--per-query got run {args.run_ids[0]} twice; give two different runs", field="RUN_ID")
    client, _ = client_for(args)
    if args.per_query:
        return _per_query(client, args)
    runs = _job_runs(client, args)
    comparable = check_one_evalset(runs, args.force)
    names = []
    rows: dict[str, dict[str, float]] = {}
    for r in runs:
        label = run_label(r)
        names.append(label)
        rows[label] = results_view(r.data.metrics, r.data.params)
    available = {key for row in rows.values() for key in row}
    for prefix, metric in (("tag", args.by_tag), ("source", args.by_source)):
        if metric:
            _print_by_group(prefix, metric, names, rows, runs, comparable)
            return 0
    if args.metrics:
        metrics = [_known(m.strip(), "--metrics", available) for m in args.metrics.split(",") if m.strip()]
    else:
        ks = sorted({m.k for row in rows.values() for m in map(measure, row) if _is_hit_rate_at_k(m)})
        metrics = headline_metrics(ks or [5], {k: 0.0 for k in available}) + cost_metrics(available)
    if args.sort:
        sort_key = _known(args.sort, "--sort", available)
        names.sort(key=lambda n: rows[n].get(sort_key, float("-inf")), reverse=True)
    across_chunkings = experiments.not_comparable_across_chunkings(runs, metrics)
    unranked = set(metrics) if not comparable else across_chunkings
    by_label = dict(zip([run_label(r) for r in runs], runs))
    results = {name: r for name in names if comparable and (r := _results(client, by_label[name])) is not None}
    tied, noise = tie_marks(names, results, metrics, unranked)
    corrections = use_corrected(names, rows, metrics)
    unverified, review_lines = judge_review_marks(client, names, by_label, metrics)
    print(format_table(names, rows, metrics, unranked=unranked, flag=NOT_COMPARABLE_MARK if across_chunkings else "",
                       tied=tied, unverified=unverified))
    if across_chunkings:
        print(CHUNKING_NOTE)
    if tied:
        print(f"{vs_best.TIE_MARK} indistinguishable from the best * (paired sign-flip test on the same queries, "
              f"Bonferroni over the other {len(results) - 1} runs, family-wise alpha {vs_best.DEFAULT_ALPHA})")
    if noise:
        print(noise)
    latency = cost_keys.latency_p95_key(metrics)
    if latency is not None:
        print(f"cost: lower is better; {cost_keys.MLFLOW_PREFIX}{latency[len(cost_keys.PREFIX):]} is served latency "
              "(one query at a time on the warm index, each query's median over repeats; docs/cost.md), not batch "
              "throughput; '-' not measured")
    for line in [*corrections, *review_lines]:
        print(line)
    sources = _groups("source", metrics[0], rows) if metrics else []
    if "draft" in sources and len(sources) > 1:
        print(f"note: the eval set mixes drafted and other questions ({', '.join(sources)}); these means average them: "
              f"ragexp compare --by-source {metrics[0]}")
    return 0


def judge_review_marks(client, names: list[str], runs: dict, metrics: list[str]) -> tuple[dict[str, set[str]], list[str]]:
    """``({judge metric: runs whose value is unverified}, lines)``: each run's judge metrics are
    verified only by a review of the run or of a run sharing its judge, generator and eval-set
    version whose kappa interval clears the floor (:func:`ragexp.judging.review_status.last_review`);
    the others are marked :data:`~ragexp.comparison.table.UNVERIFIED_MARK` and a line says why, with
    the review's numbers."""
    judged = [m for m in metrics if is_judge_metric(m)]
    if not judged:
        return {}, []
    doubtful: dict[str, str] = {}
    for name in names:
        run = runs[name]
        key = run.data.tags.get(TAG_JUDGE_KEY)
        status = (last_review(client, key, run.info.run_id, store.TAG_EVALSET_FP) if key
                  else ReviewStatus("", why=" (the run records no judge key)"))
        if not status.verified(MIN_KAPPA):
            doubtful[name] = status.describe(MIN_KAPPA)
    lines = [f"{UNVERIFIED_MARK} {', '.join(judged)} of {name}: {why}" for name, why in doubtful.items()]
    return {metric: set(doubtful) for metric in judged}, lines


def use_corrected(names: list[str], rows: dict[str, dict[str, float]], metrics: list[str]) -> list[str]:
    """Put each run's PPI estimate in place of the judge's value of ``metrics`` (in ``rows``);
    return the lines that say, per judge metric shown, which runs' values are which."""
    lines, uncorrected = [], []
    for metric in metrics:
        if not is_judge_metric(metric):
            continue
        fixed, plain = [], []
        for name in names:
            found = corrected.from_aggregates(rows[name], metric)
            if found is None:
                plain.append(name)
                continue
            estimate, low, high, labels = found
            judge = rows[name].get(metric)
            rows[name][metric] = estimate
            fixed.append(f"{name} {estimate:.4f} [{low:.4f}, {high:.4f}] from {labels} labels"
                         + ("" if judge is None else f" (judge alone {judge:.4f})"))
        if fixed:
            lines.append(f"{metric}: PPI estimate (human-corrected) for " + "; ".join(fixed)
                         + (f"; {corrected.UNCORRECTED} for {', '.join(plain)}" if plain else ""))
        else:
            uncorrected.append(metric)
    if uncorrected:
        lines.append(f"{corrected.UNCORRECTED} in every run: {', '.join(uncorrected)} (a person's labels correct them: "
                     "ragexp judge review RUN_ID, ragexp judge ppi; docs/ppi.md)")
    return lines


def _groups(prefix: str, metric: str, rows: dict[str, dict[str, float]]) -> list[str]:
    """The tags or sources (``prefix``) with a ``<prefix>.<group>.<metric>`` value in any run."""
    return sorted({key[len(prefix) + 1 : -len(metric) - 1] for row in rows.values() for key in row
                   if key.startswith(f"{prefix}.") and key.endswith(f".{metric}")})


def _print_by_group(prefix: str, metric: str, names: list[str], rows: dict[str, dict[str, float]], runs, comparable: bool) -> None:
    """``metric`` per tag or per source: one column per group."""
    groups = _groups(prefix, metric, rows)
    if not groups:
        raise RagexpInputError(f"no per-{prefix} values of {metric!r} in these runs", field=f"--by-{prefix}")
    table_rows = {n: {g: rows[n].get(f"{prefix}.{g}.{metric}") for g in groups} for n in names}
    across_chunkings = bool(experiments.not_comparable_across_chunkings(runs, [metric]))
    unranked = set(groups) if not comparable or across_chunkings else set()
    print(f"{metric} per {prefix}")
    print(format_table(names, table_rows, groups, unranked=unranked, flag=NOT_COMPARABLE_MARK if across_chunkings else ""))
    if across_chunkings:
        print(CHUNKING_NOTE)


def _per_query(client, args) -> int:
    """``--per-query``: the two runs' split queries, printed and logged to both runs."""
    runs = [get_run(client, run_id) for run_id in args.run_ids]
    check_one_evalset(runs, args.force)
    loaded = [_results(client, r) for r in runs]
    for r, results in zip(runs, loaded):
        if results is None:
            raise RagexpInputError(f"run {r.info.run_id} has no {ARTIFACT_NAME} to compare query by query", field="RUN_ID")
    a, b = loaded
    common = sorted(set(a.meta.get("ks", [])) & set(b.meta.get("ks", [])))
    if not common:
        raise RagexpInputError("the two runs share no cut-off k (eval.ks)", field="RUN_ID")
    k = 5 if 5 in common else common[-1]
    labels = [run_label(r) for r in runs]
    diff = per_query_diff(a, b, k, a_label=labels[0], b_label=labels[1])
    print(format_text(diff))
    metric = at("hit_rate", k)
    values = [x.metric_values(metric) for x in (a, b)]
    queries = sorted(values[0].keys() & values[1].keys())
    if queries:
        base = [values[0][q] for q in queries]
        cand = [values[1][q] for q in queries]
        p = stats.sign_flip_p_value(base, cand)
        delta = sum(cand) / len(cand) - sum(base) / len(base)
        mdd = vs_best.minimum_detectable_difference(len(queries), max(sum(base), sum(cand)) / len(queries))
        verdict = "within the noise" if abs(delta) <= mdd or p >= vs_best.DEFAULT_ALPHA else "beyond the noise"
        print(f"\nhit rate@{k}: A {sum(base) / len(base):.4f}, B {sum(cand) / len(cand):.4f}, B - A {delta:+.4f}, "
              f"paired sign-flip p = {p:.3g}: {verdict}")
        print(vs_best.noise_line(len(queries), max(sum(base), sum(cand)) / len(queries), f"hit-rate@{k}"))
    for run, other in ((runs[0], runs[1]), (runs[1], runs[0])):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / f"{other.info.run_id}.html").write_text(format_html(diff), encoding="utf-8")
            (Path(tmp) / f"{other.info.run_id}.json").write_text(diff.to_json(), encoding="utf-8")
            store.run_artifacts(client, run.info.run_id).log_artifacts(tmp, artifact_path=PER_QUERY_DIR)
    print(f"\nlogged to both runs: {PER_QUERY_DIR}/<other run id>.html and .json")
    return 0
