"""What a metric key names: the one measure identity that compare, reproduce, gate and the MLflow
logger read instead of parsing key strings each on its own.

A results key is parsed once by :func:`measure` into a :class:`Measure`::

    hit_rate_at_5          name hit_rate, k 5,    level chunk,      higher is better
    doc_ndcg_at_10         name ndcg,     k 10,   level doc,        higher
    context_hit_rate       name context_hit_rate, k None (the run's context_k), level chunk, higher
    tag.synonym.mrr        name mrr,      k None, level chunk, group tag.synonym
    recall_at_5_ci_low     name recall,   k 5,    level chunk, bound ci_low
    retrieval_failure_rate name retrieval_failure_rate, level generation, lower is better
    ppi.faithfulness       name ppi.faithfulness, level generation (a judge metric corrected by human labels)
    time.retrieval_s       level run (timings, counts, depths), lower is better
    cost.latency_p95_ms    level cost (:mod:`ragexp.cost`), lower is better (``*_qps``: higher)

``level`` is ``chunk`` | ``doc`` (retrieval metrics over chunks, or over documents each scored by
its best chunk), ``generation`` (what a generator and judge produce), ``cost`` (what the run
costs: latency, size, memory, tokens, money) or ``run`` (anything else: setup constants, timings). A key ragexp does not know is a ``run`` measure, higher is better.

Keys are built here too, by :func:`metric_key` (and its shorthands :func:`at`, :func:`ci_bounds`,
:func:`grouped`), the inverse of :func:`measure`; no other module spells ``_at_``, ``doc_`` or the
CI suffixes (``tests/test_measure.py`` checks the source). The grammar, outermost first::

    key   = [group "."] ["doc_"] name ["_at_" k] ["_" bound]
    group = ("tag" | "source") "." value        value: an eval-set tag or item source, no "."
    bound = "ci_low" | "ci_high"                 the bootstrap 95% CI of the mean
    k     = a cutoff, decimal without leading zeros

``measure(metric_key(name, k, doc=doc, group=group, bound=bound))`` gives back exactly those parts
(``level == DOC`` iff ``doc``) whenever ``name`` is one the grammar can carry: no ``_at_<n>`` or
CI suffix of its own, no ``doc_`` prefix, no ``.`` under a group, and a ``k`` only on a retrieval
name (:data:`RETRIEVAL_KEY`) or under ``doc``; and ``metric_key`` of a parsed key's parts gives
back the key. ``cost.<name>`` keys are whole names (:mod:`ragexp.cost.keys`), outside this grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHUNK, DOC, GENERATION, COST, RUN = "chunk", "doc", "generation", "cost", "run"
HIGHER, LOWER = "higher", "lower"
#: The :attr:`Measure.bound` of a CI's lower and upper end.
CI_LOW, CI_HIGH = "ci_low", "ci_high"
#: The kinds of :attr:`Measure.group`: per eval-set tag, per item source (:mod:`ragexp.metrics.per_tag`).
TAG, SOURCE = "tag", "source"
DOC_PREFIX = "doc_"

#: A chunk-level retrieval key (with its ``doc_`` prefix removed: a document-level one).
RETRIEVAL_KEY = re.compile(r"(hit_rate|recall|mrr|context_precision|ndcg)(_at_\d+)?|context_(hit_rate|recall)|judged_at_\d+")
GENERATION_KEY = re.compile(r"faithfulness|answer_relevance|exact_match|f1|key_fact_recall|refused|refusal_accuracy"
                            r"|judge_failures|generation_errors|.+_rate|n_.+|.+_judge_failures|gen\..+|judge\..+|ppi\..+")
_CUTOFF = re.compile(r"(?P<name>.+)_at_(?P<k>\d+)")
_GROUP = re.compile(r"(?P<group>(?:tag|source)\..+)\.(?P<metric>[^.]+)")
_CI = re.compile(r"(?P<metric>.+)_(?P<bound>ci_low|ci_high)")
#: Measures where less is better: failures, errors, time, answers at the cap or repeating a sentence.
_LOWER = re.compile(r"(judge_failures|retrieval_failure|generation_failure|generation_error|hallucinated"
                    r"|n_retrieval_failure|n_generation_failure|n_hallucinated).*|time\..+|gen\..+_s"
                    r"|gen\.length_capped|gen\.repeating_answers|gen\.label_copies|gen\.degenerate_answers")


@dataclass(frozen=True)
class Measure:
    """One metric key's identity (module docstring); :attr:`key` is the key it was read from."""

    key: str
    name: str
    k: int | None
    level: str
    direction: str
    group: str = ""
    bound: str = ""

    @property
    def lower_is_better(self) -> bool:
        return self.direction == LOWER

    def is_retrieval(self) -> bool:
        """A retrieval measure (chunk or document level), the part of a run that is deterministic."""
        return self.level in (CHUNK, DOC)


def measure(key: str) -> Measure:
    """The :class:`Measure` a results key names."""
    if key.startswith("cost."):
        return Measure(key=key, name=key[len("cost."):], k=None, level=COST,
                       direction=HIGHER if key.endswith("_qps") else LOWER)
    group, rest = "", key
    if (grouped := _GROUP.fullmatch(key)) is not None:
        group, rest = grouped["group"], grouped["metric"]
    bound = ""
    if (ci := _CI.fullmatch(rest)) is not None:
        bound, rest = ci["bound"], ci["metric"]
    level, base = RUN, rest
    if rest.startswith(DOC_PREFIX):
        level, base = DOC, rest[len(DOC_PREFIX):]
    elif RETRIEVAL_KEY.fullmatch(rest):
        level = CHUNK
    elif GENERATION_KEY.fullmatch(rest):
        level = GENERATION
    name, k = base, None
    if level in (CHUNK, DOC) and (cut := _CUTOFF.fullmatch(base)) is not None:
        name, k = cut["name"], int(cut["k"])
    direction = LOWER if _LOWER.fullmatch(base) else HIGHER
    return Measure(key=key, name=name, k=k, level=level, direction=direction, group=group, bound=bound)


def metric_key(name: str, k: int | None = None, *, doc: bool = False, group: str = "", bound: str = "") -> str:
    """The results key of these parts (module docstring): ``[group.][doc_]name[_at_k][_bound]``.

    ``group`` is a :attr:`Measure.group` (``tag.synonym``), ``bound`` ``""``, :data:`CI_LOW` or
    :data:`CI_HIGH`; ``metric_key("ndcg", 10, doc=True) == "doc_ndcg_at_10"``."""
    key = f"{DOC_PREFIX if doc else ''}{name}"
    if k is not None:
        key = f"{key}_at_{k}"
    if bound:
        key = f"{key}_{bound}"
    return f"{group}.{key}" if group else key


def at(name: str, k: int) -> str:
    """``name`` at cutoff ``k``: ``at("hit_rate", 5) == "hit_rate_at_5"``."""
    return metric_key(name, k)


def ci_bounds(key: str) -> tuple[str, str]:
    """The keys of ``key``'s bootstrap 95% CI, ``(<key>_ci_low, <key>_ci_high)``; ``key`` may carry
    a cutoff (``recall_at_5``) or be a whole name (``ppi.faithfulness``)."""
    return metric_key(key, bound=CI_LOW), metric_key(key, bound=CI_HIGH)


def grouped(kind: str, value: str, key: str) -> str:
    """``key`` over the queries of one group: ``grouped(TAG, "synonym", "mrr") == "tag.synonym.mrr"``
    (``kind`` :data:`TAG` or :data:`SOURCE`)."""
    return metric_key(key, group=f"{kind}.{value}")
