"""A job as a typed, frozen spec: the one gate every way in passes (:func:`job_spec`).

Every way a job starts ends here, and is checked the same way
(:func:`~ragexp.evaluation.checks.check_job`, once): where a config came from changes nothing
that is checked. It is recorded as the spec's :class:`ConfigSource` (the run's
``ragexp.config_source`` tag):

- ``composed``: ``ragexp run`` from this machine's ``conf/`` (command-line overrides, ``--config-dir``);
- ``config_path``: ``ragexp run --config-path DIR``: a handed saved config, read as data first
  (:mod:`ragexp.config.untrusted`);
- ``stored_run``: a logged run's ``config/resolved.yaml`` (``reproduce``, ``evalset annotate
  --from-run``, ``traces``), read by :func:`ragexp.evaluation.saved_config.read_run_config`;
- ``uploaded``: ``ragexp upload DIR``, read the same way;
- ``library``: a Python caller of :func:`ragexp.jobs.job.run_job`.

Model endpoints (and the key variables sent to them) must be named by this machine's ``conf/``,
``$RAGEXP_ALLOWED_ENDPOINTS`` or the spec's ``allowed_endpoints`` whatever the source
(:mod:`ragexp.config.endpoints`).

A :class:`JobSpec` holds the config, read-only from the moment it passed the checks (nothing a
job does can change what was checked), the overrides, the typed :class:`EvalOptions` and
:class:`~ragexp.cost.settings.CostSettings`, the source
and the endpoint allow-list. Only
:func:`job_spec` makes one; :func:`ragexp.jobs.job.run_job` and
:func:`~ragexp.jobs.job.log_saved_run` take nothing else.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragexp.cost.settings import CostSettings, cost_settings
from ragexp.evaluation.checks import check_job
from ragexp.judging.failure import FailureThresholds
from ragexp.metrics.relevance import OverlapRule


class ConfigSource(str, enum.Enum):
    """Where a job's config came from (module docstring)."""

    composed = "composed"
    config_path = "config_path"
    stored_run = "stored_run"
    uploaded = "uploaded"
    library = "library"


@dataclass(frozen=True)
class EvalOptions:
    """``eval``, checked (:func:`ragexp.config.schema.validate`): the cutoffs ``ks`` (distinct,
    ascending), the ranking depth ``retrieve_k`` (0: the largest k), the ``context_k`` chunks a
    generator sees, the overlap rule that makes a chunk relevant to a span (``relevance``), the
    bootstrap's resamples, the eval-set sample (``None``: all of it) and the failure thresholds."""

    ks: tuple[int, ...]
    retrieve_k: int
    context_k: int
    relevance: OverlapRule
    bootstrap_resamples: int
    sample: int | None
    sample_seed: int
    failure: FailureThresholds

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> EvalOptions:
        return cls(ks=tuple(sorted(set(int(k) for k in node["ks"]))), retrieve_k=int(node["retrieve_k"]),
                   context_k=int(node["context_k"]),
                   relevance=OverlapRule(min_fraction=node["relevance"]["min_fraction"], mode=node["relevance"]["mode"]),
                   bootstrap_resamples=int(node["bootstrap_resamples"]),
                   sample=None if node.get("sample") is None else int(node["sample"]),
                   sample_seed=int(node.get("sample_seed") or 0),
                   failure=FailureThresholds(**{key: float(value) for key, value in node["failure"].items()}))


@dataclass(frozen=True)
class JobSpec:
    """One checked job (module docstring). ``config``: a read-only copy of the checked config
    (interpolations kept: an error names the group a value comes from); :meth:`block`: a group's
    resolved block."""

    config: DictConfig
    overrides: tuple[str, ...]
    eval: EvalOptions
    cost: CostSettings
    source: ConfigSource
    allowed_endpoints: tuple[str, ...]
    _token: object = None

    def __post_init__(self) -> None:
        if self._token is not _GATE:
            raise TypeError("a JobSpec is made by ragexp.evaluation.job_spec.job_spec(cfg, ...), which checks it")

    def block(self, group: str) -> dict[str, Any] | None:
        """The group's block, resolved, as a new plain dict (``None``: the group is not set)."""
        node = self.config.get(group)
        return None if node is None else OmegaConf.to_container(node, resolve=True)


_GATE = object()


def job_spec(cfg: DictConfig, overrides: Sequence[str] = (), *, source: ConfigSource = ConfigSource.library,
             allowed_endpoints: Sequence[str] = ()) -> JobSpec:
    """The one gate (module docstring): every check a job makes before any work
    (:func:`~ragexp.evaluation.checks.check_job`), then the spec, or one :class:`RagexpInputError`.
    The spec holds a read-only copy of ``cfg``: the caller's config stays as it was."""
    check_job(cfg, overrides, allowed_endpoints=allowed_endpoints)
    config = copy.deepcopy(cfg)
    OmegaConf.set_readonly(config, True)
    return JobSpec(config=config, overrides=tuple(overrides),
                   eval=EvalOptions.of(OmegaConf.to_container(config.eval, resolve=True)),
                   cost=cost_settings(config.get("cost")),
                   source=ConfigSource(source), allowed_endpoints=tuple(allowed_endpoints), _token=_GATE)
