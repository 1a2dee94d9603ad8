"""How ragexp's result keys are named in MLflow, in both directions.

The portable results (``ragexp_results.json``, what the gate reads) keep their flat keys
(``hit_rate_at_5``, ``doc_ndcg_at_10``, ``tag.synonym.mrr``, ``source.draft.mrr``, ``hit_rate_at_5_ci_low``). At the
MLflow boundary every key gets a section prefix, because the MLflow UI groups and orders by it:
the chart view makes one section per prefix (the part before the last ``/``), sorted by name,
and the compare page and column pickers list keys alphabetically. ``1_headline`` sorts before
every other section, so the headline metrics come first everywhere; the rest stays findable
under the name of what it is:

==========================  =====================================================================
MLflow key                  results key
==========================  =====================================================================
``1_headline/<m>``          the headline: :data:`HEADLINE` (retrieval at k=5, MRR, generation)
``retrieval/<m>``           every other chunk-level retrieval metric (every k, ``context_*``,
                            ``judged_at_{k}``: pool coverage, :mod:`ragexp.metrics.judged`)
``doc/<m>``                 ``doc_<m>``: document-level (a document scored by its best chunk)
``generation/<m>``          what a generator and judge produce (scores, failure rates and counts)
``other/<m>``               any other aggregate (none today; a new key lands here until named)
``tag/<tag>/<m>``           ``tag.<tag>.<m>``: the metric over the eval items tagged ``<tag>``
``source/<s>/<m>``          ``source.<s>.<m>``: the metric over the items whose ``source`` is ``<s>``
                            (``log``, ``hand``, ``draft``, ``failure``, ``unrecorded``)
``ci/<m>_low``, ``_high``   ``<m>_ci_low``, ``<m>_ci_high``: bootstrap 95% CI of the mean
``time/<stage>``            ``time.<stage>``: stage timings in seconds (a batch: throughput, not latency)
``black_box/<m>``           ``black_box.<m>``: a black-box system's passages placed in the corpus
                            (``located_rate`` ...: :mod:`ragexp.evaluation.system_step`; not ``system/``,
                            which MLflow shows as its hardware "System metrics")
``cost/<m>``                ``cost.<m>``: what the run costs (served latency, index size, peak RSS,
                            tokens, money: :mod:`ragexp.cost`; a system's endpoint latency)
==========================  =====================================================================

Constants of a run (:data:`CONSTANTS`: query, chunk and unindexed-document counts, retrieval and
context depths) are MLflow params under their results key, not
metrics: they describe the setup, not a result.
:func:`to_mlflow` and :func:`from_mlflow` are inverse; :func:`results_view` rebuilds a run's
results-style aggregates from what MLflow stores, which is how ``compare`` and ``reproduce`` read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ragexp.metrics.measure import CHUNK, GENERATION, SOURCE, TAG, grouped, measure, metric_key

#: The metrics that answer "which pipeline won?", first in every MLflow list.
HEADLINE = (
    "hit_rate_at_5", "mrr", "ndcg_at_5", "recall_at_5", "context_precision_at_5",
    "faithfulness", "answer_relevance", "f1", "retrieval_failure_rate", "generation_failure_rate",
)
#: Result keys logged as params: fixed by the setup, identical for every query of the run.
CONSTANTS = ("n_queries", "n_queries_no_gold", "doc_n_queries", "doc_n_queries_no_gold", "n_chunks",
             "n_docs_not_indexed", "n_files_skipped", "n_files_empty", "retrieval_depth", "context_k",
             "cost.judge_queries_metered")

HEADLINE_SECTION = "1_headline"
RETRIEVAL_SECTION = "retrieval"
DOC_SECTION = "doc"
GENERATION_SECTION = "generation"
TAG_SECTION = "tag"
SOURCE_SECTION = "source"
CI_SECTION = "ci"
TIME_SECTION = "time"
COST_SECTION = "cost"
OTHER_SECTION = "other"
BLACK_BOX_SECTION = "black_box"

_CI = re.compile(r"(?P<metric>.+)_ci_(?P<bound>low|high)")


def to_mlflow(key: str) -> str:
    """The MLflow metric key of results key ``key`` (see the module table)."""
    if key in HEADLINE:
        return f"{HEADLINE_SECTION}/{key}"
    if key.startswith("tag."):
        tag, metric = key[len("tag."):].rsplit(".", 1)
        return f"{TAG_SECTION}/{tag}/{metric}"
    if key.startswith("source."):
        source, metric = key[len("source."):].rsplit(".", 1)
        return f"{SOURCE_SECTION}/{source}/{metric}"
    if (ci := _CI.fullmatch(key)) is not None:
        return f"{CI_SECTION}/{ci['metric']}_{ci['bound']}"
    if key.startswith("time."):
        return f"{TIME_SECTION}/{key[len('time.'):]}"
    for section in (BLACK_BOX_SECTION, COST_SECTION):
        if key.startswith(f"{section}."):
            return f"{section}/{key[len(section) + 1:]}"
    if key.startswith("doc_"):
        return f"{DOC_SECTION}/{key[len('doc_'):]}"
    level = measure(key).level
    if level == CHUNK:
        return f"{RETRIEVAL_SECTION}/{key}"
    if level == GENERATION:
        return f"{GENERATION_SECTION}/{key}"
    return f"{OTHER_SECTION}/{key}"


def from_mlflow(key: str) -> str:
    """The results key of MLflow metric key ``key``; the inverse of :func:`to_mlflow` (keys
    without a ragexp section, e.g. logged by hand or by another tool, are returned unchanged)."""
    section, _, rest = key.partition("/")
    if not rest:
        return key
    if section == TAG_SECTION:
        tag, _, metric = rest.rpartition("/")
        return grouped(TAG, tag, metric)
    if section == SOURCE_SECTION:
        source, _, metric = rest.rpartition("/")
        return grouped(SOURCE, source, metric)
    if section == CI_SECTION:
        metric, _, end = rest.rpartition("_")
        return metric_key(metric, bound=f"ci_{end}")
    if section == TIME_SECTION:
        return f"time.{rest}"
    if section in (BLACK_BOX_SECTION, COST_SECTION):
        return f"{section}.{rest}"
    if section == DOC_SECTION:
        return metric_key(rest, doc=True)
    if section in (HEADLINE_SECTION, RETRIEVAL_SECTION, GENERATION_SECTION, OTHER_SECTION):
        return rest
    return key


def split_for_mlflow(aggregates: Mapping[str, float], timings: Mapping[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """``(metrics, params)``: every aggregate and ``time.<stage>`` timing under its MLflow key,
    headline first (MLflow lists some views in logging order); constants as params."""
    keyed = {**aggregates, **{f"time.{stage}": seconds for stage, seconds in timings.items()}}
    params = {key: _param_text(keyed[key]) for key in CONSTANTS if key in keyed}
    ordered = [key for key in HEADLINE if key in keyed] + [key for key in keyed if key not in HEADLINE and key not in params]
    return {to_mlflow(key): float(keyed[key]) for key in ordered}, params


def results_view(metrics: Mapping[str, float], params: Mapping[str, str]) -> dict[str, float]:
    """A logged run's aggregates under their results keys: metrics mapped back, constants read
    from the params (runs logged before this scheme keep their flat keys and read the same)."""
    out = {from_mlflow(key): value for key, value in metrics.items()}
    for key in CONSTANTS:
        if key in params and key not in out:
            try:
                out[key] = float(params[key])
            except ValueError:
                continue
    return out


def _param_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
