"""One MLflow experiment per eval set, and what the MLflow UI opens on.

Runs are only comparable on the same eval set, so by default (``tracking.experiment=null``) the
experiment is named after the eval set and its fingerprint: ``<name>-<fingerprint[:8]>`` (a
seeded sample, ``eval.sample=N``, is another eval set: ``<name>-sample<N>-<fingerprint[:8]>``).
An explicit ``tracking.experiment`` is used as given; ``ragexp compare`` then refuses to rank runs
of different eval sets against each other.

A new experiment gets a description (tag ``mlflow.note.content``, shown above its runs table)
saying which eval set it holds and how to read it, and a saved view named ``ragexp`` (tag
``mlflow.sharedViewState.ragexp``, listed under the page's "Views" button and linked from the
description): headline metric columns, each followed by its bootstrap 95% CI bounds
(``ci/<m>_low``, ``ci/<m>_high``) and, after a sweep, its ``ragexp.vs_best.<m>`` tag (best / tied
/ worse, :mod:`ragexp.tracking.sweep_summary`), sorted by hit rate@5 best first, component labels
as columns, every run shown in the charts, a parallel-coordinates chart of the components against
the headline metrics. Column widths follow the header text, so no header is cut off. MLflow 3.17 has no per-experiment default view (a fresh browser opens on
its own defaults), so the view is one click away, and ``ragexp ui`` prints its URL.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from mlflow.tracking import MlflowClient

from ragexp.datamodel import Corpus, EvalSet
from ragexp.metrics.measure import CHUNK, ci_bounds, measure
from ragexp.tracking import store
from ragexp.tracking.metric_names import HEADLINE_SECTION, to_mlflow
from ragexp.tracking.run_names import AXIS_TAG_PREFIX
from ragexp.tracking.trace_content import inert_markdown

VS_BEST_TAG_PREFIX = "ragexp.vs_best."
#: A sweep child's standing on the sort metric in one short cell, the view's first column:
#: ``best · 0.855 ± 0.057`` / ``tied · ...`` / ``worse · ...``; on the parent ``sweep · 5/18 best or
#: tied · heatmaps`` (:mod:`~ragexp.tracking.sweep_summary`).
DECISION_TAG = "ragexp.decision"

log = logging.getLogger(__name__)
VIEW_ID = "ragexp"
VIEW_NAME = "ragexp: headline metrics"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"
#: The view's metric columns: retrieval always, generation when the runs have it.
RETRIEVAL_HEADLINE = ("hit_rate_at_5", "mrr", "ndcg_at_5", "recall_at_5")
GENERATION_HEADLINE = ("faithfulness", "answer_relevance", "f1")
LABEL_PARAMS = ("chunking", "retrieval", "reranker")
SORT_METRIC = "hit_rate_at_5"
RUN_NAME_COLUMN = "attributes.`Run Name`"
DURATION_COLUMN = "duration"
CREATED_COLUMN = "runDateAndNestInfo"


def gold_level(evalset: EvalSet) -> str:
    """``document`` when every gold evidence is a whole document (e.g. BEIR qrels), ``span`` when
    every one is a character span, ``mixed`` otherwise, ``none`` without evidence."""
    kinds = {evidence.is_span for item in evalset.items for evidence in item.evidence}
    if not kinds:
        return "none"
    return "mixed" if len(kinds) == 2 else ("span" if kinds == {True} else "document")


def not_comparable_across_chunkings(runs, metrics: Iterable[str]) -> set[str]:
    """The chunk-level metrics among ``metrics`` (``tag.<t>.<m>`` included) when every run's gold
    is whole documents and the runs use more than one chunking: each chunking then has its own
    number of relevant chunks per query, so their chunk-level values do not rank the pipelines."""
    document_gold = all(r.data.tags.get(store.TAG_GOLD_LEVEL) == "document" for r in runs)
    chunkings = {r.data.params.get("chunking", r.data.params.get("chunking.name")) for r in runs}
    if not document_gold or len(chunkings) < 2:
        return set()
    return {m for m in metrics if (identity := measure(m)).level == CHUNK and not identity.bound}


def experiment_name(configured: str | None, evalset: EvalSet) -> str:
    """``configured`` when set, else ``<eval-set name>[-sample<N>]-<fingerprint[:8]>``."""
    if configured:
        return configured
    sampled = evalset.meta.get("sampled")
    sample = f"-sample{sampled['size']}" if sampled else ""
    return f"{evalset.name or 'evalset'}{sample}-{evalset.fingerprint()[:8]}"


def runs_link(experiment_id: str) -> str:
    """The UI route of the ragexp view (relative: works in descriptions and after the host)."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_ID}"


def run_link(experiment_id: str, run_id: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}"


def describe(corpus: Corpus, evalset: EvalSet, experiment_id: str) -> str:
    """The experiment description (markdown); the eval set's name is its file's, made inert
    (:func:`~ragexp.tracking.trace_content.inert_markdown`)."""
    items = evalset.items
    no_gold = sum(1 for item in items if not item.evidence)
    level = gold_level(evalset)
    caveat = (" Gold is whole documents: chunk-level metrics are not comparable across chunkings; compare `doc/...`."
              if level == "document" else "")
    return (
        f"**ragexp** runs on eval set **{inert_markdown(evalset.name or 'evalset')}**: {len(items)} queries ({no_gold} without gold "
        f"evidence), gold as {level} evidence, corpus of {len(corpus)} documents. Eval-set fingerprint "
        f"`{evalset.fingerprint()[:16]}`, corpus `{corpus.fingerprint()[:16]}`: every run here is scored on exactly "
        f"this eval set.{caveat}\n\n"
        f"[Open the ragexp view]({runs_link(experiment_id)}) (also under *Views*): headline metrics as columns, "
        "best hit rate@5 first. Metrics: `1_headline/...` first, then `retrieval/`, `doc/`, `generation/`, "
        "`tag/<tag>/`, `ci/`, `time/`. Queries: each run's `per_query.json`; runs query by query in the table "
        "icon's evaluation view (group by `query_id`, compare `outcome`). A sweep's parent run holds its summary."
    )


def _header_width(label: str, least: int = 120) -> int:
    """A column width (px) that shows ``label`` whole in the runs table's header font (about 7 px a
    character, plus room for the sort icon)."""
    return max(least, 7 * len(label) + 40)


def view_state(axes: Sequence[str] = (), axis_params: Iterable[str] = (), headline: Iterable[str] = RETRIEVAL_HEADLINE,
               tie_metrics: Iterable[str] = ()) -> dict:
    """The saved view's state: MLflow's search facets and runs-page UI state (column ids are
    ``metrics.`key```, ``params.`key```, ``tags.`key```). ``axis_params`` are the params behind
    the sweep's axes; the parallel-coordinates chart spans them (else the component labels) and
    the first three headline metrics. Each headline metric with a CI (the retrieval ones) is
    followed by its CI bounds, each of ``tie_metrics`` by its ``ragexp.vs_best.<m>`` tag. After a
    sweep (``tie_metrics``) the first column is :data:`DECISION_TAG`, so what decides (best / tied /
    worse, the value and its CI, three decimals) fits beside the run name even when MLflow's
    Assistant panel takes the right third of the screen (the sweep's parent says there how many runs
    are tied and that its page holds the heatmaps)."""
    headline = list(headline)
    ties = set(tie_metrics)
    metrics = [to_mlflow(key) for key in headline]
    params = [*LABEL_PARAMS, *(p for p in axis_params if p not in LABEL_PARAMS)]
    axis_columns = [f"tags.`{AXIS_TAG_PREFIX}{axis}`" for axis in axes if axis not in LABEL_PARAMS]
    swept = [p for p in LABEL_PARAMS if p in axes] + [p for p in axis_params if p not in LABEL_PARAMS]
    section = f"{VIEW_ID}-headline"
    charts = [{"uuid": f"{VIEW_ID}-parallel", "type": "PARALLEL", "metricSectionId": section, "isGenerated": False,
               "deleted": False, "runsCountToCompare": 100, "selectedParams": swept or list(LABEL_PARAMS),
               "selectedMetrics": metrics[:3], "showAllRuns": True}]
    charts += [{"uuid": f"{VIEW_ID}-bar-{i}", "type": "BAR", "metricSectionId": section, "isGenerated": True,
                "deleted": False, "runsCountToCompare": 100, "metricKey": key, "displayName": key.rsplit("/", 1)[-1]}
               for i, key in enumerate(metrics)]
    widths: dict[str, int] = {RUN_NAME_COLUMN: 330}
    metric_columns = []
    if ties:
        metric_columns.append(f"tags.`{DECISION_TAG}`")
        widths[metric_columns[-1]] = 260
    for key in headline:
        labels = [to_mlflow(key)]
        if key in RETRIEVAL_HEADLINE:
            labels += [to_mlflow(bound) for bound in ci_bounds(key)]
        for label in labels:
            metric_columns.append(f"metrics.`{label}`")
            widths[metric_columns[-1]] = _header_width(label)
        if key in ties:
            metric_columns.append(f"tags.`{VS_BEST_TAG_PREFIX}{key}`")
            widths[metric_columns[-1]] = _header_width(f"{VS_BEST_TAG_PREFIX}{key}")
    param_columns = [f"params.`{p}`" for p in params]
    widths.update({c: _header_width(c.split("`")[1], least=135) for c in param_columns + axis_columns})
    columns = [*metric_columns, *param_columns, *axis_columns]
    return {
        "orderByKey": f"metrics.`{to_mlflow(SORT_METRIC)}`",
        "orderByAsc": False,
        "selectedColumns": columns,
        # MLflow applies widths only to the columns listed in columnOrder, in that order.
        "columnOrder": [RUN_NAME_COLUMN, *columns, DURATION_COLUMN, CREATED_COLUMN],
        "columnWidths": widths,
        "runsHiddenMode": "SHOW_ALL",
        "compareRunCharts": charts,
        "compareRunSections": [{"uuid": section, "name": HEADLINE_SECTION, "display": True,
                                "isReordered": False, "deleted": False, "isGenerated": True}],
    }


def set_view(client: MlflowClient, experiment_id: str, state: Mapping) -> None:
    """Write the saved view (MLflow's envelope: name, timestamps, the state as a JSON string)."""
    now = int(time.time() * 1000)
    envelope = {"name": VIEW_NAME, "createdAt": now, "updatedAt": now, "state": json.dumps(state)}
    client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps(envelope))


def ensure_for_config(connect: Callable[[], MlflowClient], cfg) -> tuple[str, MlflowClient]:
    """The experiment of a config's eval set (loaded, and sampled as ``eval.sample`` says), for
    the sweep's parent run, before any job has loaded it (``tracking.experiment`` when set), and
    the client ``connect()`` made once the eval set loaded: a missing one creates no store."""
    from ragexp.data.dataset import load_dataset
    from ragexp.data.loaders.corpus import persist_conversions
    from ragexp.evaluation.prepared import sample_evalset
    from ragexp.runtime.stage_cache import StageCache

    cache = StageCache(cfg.cache_dir)
    corpus, evalset = load_dataset(cfg.dataset, cache)
    persist_conversions(corpus, cache)  # the jobs find the documents converted
    if cfg.eval.get("sample") is not None:
        evalset = sample_evalset(evalset, cfg.eval.sample, cfg.eval.get("sample_seed", 0))
    client = connect()
    experiment_id = ensure_for_evalset(client, cfg.tracking.experiment, evalset)
    describe_once(client, experiment_id, corpus, evalset)
    return experiment_id, client


def ensure_for_evalset(client: MlflowClient, configured: str | None, evalset: EvalSet) -> str:
    """The id of the eval set's experiment (:func:`experiment_name`), created if missing."""
    return store.ensure_experiment(client, experiment_name(configured, evalset))


def describe_once(client: MlflowClient, experiment_id: str, corpus: Corpus, evalset: EvalSet) -> None:
    """Give an experiment without them its description and ragexp view (a user's edits are
    kept). Presentation only: a store error here is reported and the run is logged regardless."""
    try:
        tags = client.get_experiment(experiment_id).tags
        if store.DESCRIPTION_TAG not in tags:
            client.set_experiment_tag(experiment_id, store.DESCRIPTION_TAG, describe(corpus, evalset, experiment_id))
        if VIEW_TAG not in tags:
            set_view(client, experiment_id, view_state())
    except Exception as err:  # noqa: BLE001 - any store error; the run's own logging reports outages
        log.warning("could not write the description of experiment %s: %s", experiment_id, str(err).splitlines()[0][:200])
