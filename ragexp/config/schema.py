"""Structured-config schema: Hydra checks types and key paths against it at start-up.

The schema is registered as ``ragexp_schema`` and is the first entry of ``conf/config.yaml``'s
defaults list, so ``eval.ks=[a]`` or ``tracking.urii=...`` fails before any work with the key
path named. Pipeline groups (``retrieval``, ``reranker``, ``generator``, ``judge``) stay open
mappings: their parameters are checked by the component's constructor at start-up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from ragexp.config.bounds import MAX_CUTOFF, MAX_RESAMPLES, MAX_SAMPLE, check_count
from ragexp.config.secrets import screen_config
from ragexp.errors import RagexpInputError


@dataclass
class ChunkingConfig:
    """Every chunker's options in one typed node, so ``chunking=fixed,recursive chunking.size=256``
    sweeps compose whatever the primary option is; unset (``None``) options are not passed on and
    an option the chosen chunker does not take is rejected by it, naming ``chunking.<option>``.
    ``_target_`` names the chunker class (a registered component, :mod:`ragexp.config.targets`); a
    user's chunker takes options of its own with ``+chunking.<option>=VALUE``."""

    name: str = "markdown"
    _target_: Optional[str] = None
    unit: Optional[str] = None
    size: Optional[int] = None
    overlap: Optional[int] = None
    tokenizer: Optional[str] = None
    overlap_sentences: Optional[int] = None
    separators: Optional[list[str]] = None
    max_size: Optional[int] = None
    min_size: Optional[int] = None


def chunker_options(node: DictConfig) -> dict:
    """The chunking node as ``make_chunker`` options: set keys only."""
    return {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if v is not None}


@dataclass
class RelevanceConfig:
    mode: str = "either"
    min_fraction: float = 0.5


@dataclass
class FailureConfig:
    """When a generated answer counts as correct and faithful (failure classes)."""

    min_f1: float = 0.5
    min_key_fact_recall: float = 0.5
    min_faithfulness: float = 0.5


@dataclass
class EvalConfig:
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10])
    retrieve_k: int = 100
    context_k: int = 5
    relevance: RelevanceConfig = field(default_factory=RelevanceConfig)
    bootstrap_resamples: int = 2000
    sample: Optional[int] = None
    sample_seed: int = 0
    failure: FailureConfig = field(default_factory=FailureConfig)


class TraceMode(str, enum.Enum):
    """``tracking.traces``: which runs log one MLflow trace per query (:mod:`ragexp.tracking.traces`):
    ``all``, ``best`` (a single run; in a sweep the runs best or tied on hit rate@5), ``none``."""

    all = "all"
    best = "best"
    none = "none"


def check_trace_mode(tracking: Any) -> None:
    """``tracking.traces`` is one of :class:`TraceMode`'s values, or a one-line error listing them."""
    value = tracking.get("traces") if tracking is not None else None
    if value is not None and value not in {mode.value for mode in TraceMode}:
        raise RagexpInputError(f"must be one of {', '.join(mode.value for mode in TraceMode)}, not {value!r}",
                               field="tracking.traces")


@dataclass
class CostConfig:
    """What a run measures of its cost (:mod:`ragexp.cost`, docs/cost.md). ``latency_queries``
    eval queries (0: off) are served one at a time on the warm index, each ``latency_repeats``
    times (its latency: the median); ``index_rebuild`` times a cold index build (re-embeds the
    corpus); ``prices``: ``{model: {input_per_1m: X, output_per_1m: Y}}`` in ``currency``;
    ``budgets``: a sweep's ``"<cost metric> <= X"`` limits, configs over one leave "best"."""

    enabled: bool = True
    latency_queries: int = 0
    latency_repeats: int = 3
    index_rebuild: bool = False
    prices: dict[str, Any] = field(default_factory=dict)
    currency: str = "USD"
    budgets: list[str] = field(default_factory=list)


@dataclass
class JudgeReviewConfig:
    """When a judge metric counts as verified in a sweep's summary (kappa of the judge's last human
    review >= ``min_kappa``), and whether an unverified one only warns or also fails the sweep."""

    min_kappa: float = 0.4
    unverified: str = "warn"  # warn | fail (checked when the sweep starts)


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlflow.db"
    experiment: Optional[str] = None
    connect_timeout_s: float = 10.0
    judge_review: JudgeReviewConfig = field(default_factory=JudgeReviewConfig)
    traces: str = TraceMode.best.value  # a TraceMode value, checked by check_trace_mode (a plain string stays YAML)


@dataclass
class RagexpConfig:
    dataset: Any = None
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    embedding: Any = None
    retrieval: Any = None
    reranker: Any = None
    generator: Any = None
    judge: Any = None
    system: Any = None  # checked by ragexp.systems.build.check_system (closed keys per kind)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    cache_dir: str = ".ragexp_cache"
    progress: bool = True
    resume: bool = True


def register_schema() -> None:
    ConfigStore.instance().store(name="ragexp_schema", node=RagexpConfig)


RELEVANCE_MODES = ("either", "span", "chunk", "any")


def validate(cfg: DictConfig, skip: frozenset[str] = frozenset()) -> None:
    """Checks the schema cannot express; raises :class:`RagexpInputError` naming the key path.
    ``skip``: top-level groups not checked beyond the secret screen (a sweep's swept groups, whose
    values here are not the ones any job runs with).

    The resolved config is screened for secrets first (:func:`ragexp.config.secrets.screen_config`):
    a key can come from a config file or an ``${oc.env:...}`` interpolation, and the config is
    written to MLflow and the job's output folder.
    """
    screen_config(OmegaConf.to_container(cfg, resolve=True))
    if "eval" not in skip:
        _validate_eval(cfg)
    for group in ("dataset", "retrieval"):
        if cfg.get(group) is None:
            raise RagexpInputError(f"config group '{group}' is not set", field=group)


def _validate_eval(cfg: DictConfig) -> None:
    ks = list(cfg.eval.ks)
    if not ks:
        raise RagexpInputError("needs at least one cutoff, e.g. eval.ks=[1,3,5,10]", field="eval.ks")
    if any(k <= 0 for k in ks):
        raise RagexpInputError(f"every k must be a positive integer, got {ks}", field="eval.ks")
    if cfg.eval.context_k <= 0:
        raise RagexpInputError("must be a positive integer", field="eval.context_k")
    if cfg.eval.sample is not None and cfg.eval.sample <= 0:
        raise RagexpInputError("must be a positive integer or null (the whole eval set)", field="eval.sample")
    if cfg.eval.retrieve_k < 0:
        raise RagexpInputError("must be >= 0 (0 = max(eval.ks))", field="eval.retrieve_k")
    if cfg.eval.relevance.mode not in RELEVANCE_MODES:
        raise RagexpInputError(f"must be one of {', '.join(RELEVANCE_MODES)}", field="eval.relevance.mode")
    if not 0.0 < cfg.eval.relevance.min_fraction <= 1.0:
        raise RagexpInputError("must be in (0, 1]", field="eval.relevance.min_fraction")
    if cfg.eval.bootstrap_resamples < 1:
        raise RagexpInputError("must be a positive integer (resamples of the confidence intervals)",
                               field="eval.bootstrap_resamples")
    for name, value in cfg.eval.failure.items():  # NaN fails the comparison: a threshold no score reaches or all do
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise RagexpInputError(f"must be a number in [0, 1] (the score an answer must reach), got {value!r}",
                                   field=f"eval.failure.{name}")
    seed = cfg.eval.get("sample_seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise RagexpInputError(f"must be an integer >= 0 (the sample's seed), got {seed!r}", field="eval.sample_seed")
    _validate_eval_bounds(cfg)


def _validate_eval_bounds(cfg: DictConfig) -> None:
    """The upper bounds of :mod:`ragexp.config.bounds`, before any work."""
    for i, k in enumerate(cfg.eval.ks):
        check_count(k, f"eval.ks[{i}]", high=MAX_CUTOFF)
    check_count(cfg.eval.retrieve_k, "eval.retrieve_k", low=0, high=MAX_CUTOFF)
    deepest = max([*cfg.eval.ks, cfg.eval.retrieve_k])
    if cfg.eval.context_k > deepest:
        raise RagexpInputError(f"the generator's chunks come from the ranking, which goes {deepest} deep (the largest of "
                               f"eval.ks and eval.retrieve_k); got {cfg.eval.context_k}", field="eval.context_k")
    check_count(cfg.eval.bootstrap_resamples, "eval.bootstrap_resamples", high=MAX_RESAMPLES)
    if cfg.eval.sample is not None:
        check_count(cfg.eval.sample, "eval.sample", high=MAX_SAMPLE)


def component_config(node: DictConfig | None) -> dict | None:
    """A pipeline group as a plain dict ready for ``hydra.utils.instantiate``, without the
    ``name`` label; ``None`` when the group is switched off (no ``_target_``)."""
    if node is None:
        return None
    data = OmegaConf.to_container(node, resolve=True)
    data.pop("name", None)
    return data if "_target_" in data else None
