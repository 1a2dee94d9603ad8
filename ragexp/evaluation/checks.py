"""Everything a job checks before any work, the same for one job and for a whole sweep's config
before its first job (the sweep callback, :mod:`ragexp.tracking.sweep`).

:func:`validate_job`: the config and its overrides screened for secrets, its values
(:func:`~ragexp.config.schema.validate`), the chunker and the dataset loader built without reading
anything (:func:`check_data_components`), every pipeline component block against the registry and
its class's schema (:mod:`ragexp.config.targets`), every ``device`` in them
(:func:`~ragexp.models.device.resolved_devices`: ``cuda`` without CUDA fails here), and, for a config not typed on this machine,
its endpoints (:mod:`ragexp.config.endpoints`).
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from ragexp.chunking import make_chunker
from ragexp.config.endpoints import check_endpoints
from ragexp.config.schema import chunker_options, validate
from ragexp.config.secrets import screen_overrides
from ragexp.config.targets import check_component
from ragexp.data.dataset import dataset_loader
from ragexp.errors import RagexpInputError
from ragexp.models.device import resolved_devices

PIPELINE_GROUPS = ("embedding", "retrieval", "reranker", "generator", "judge")


def validate_job(cfg: DictConfig, overrides: Sequence[str], *, untrusted: bool = False,
                 allowed_endpoints: Sequence[str] = (), skip: frozenset[str] = frozenset()) -> None:
    """Raise :class:`RagexpInputError` for the first thing wrong with ``cfg`` (module docstring).
    ``skip``: top-level groups checked for secrets only (a sweep's swept groups, checked per job)."""
    screen_overrides(overrides)
    validate(cfg, skip)
    check_data_components(cfg, skip)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for group in PIPELINE_GROUPS:
        if group in skip or resolved.get(group) is None:
            continue
        resolved_devices(resolved[group], group)
        if not isinstance(resolved[group], dict):  # `retrieval=bm25` on a hand-given config that has no defaults list
            raise RagexpInputError(f"must be a component block (a mapping with _target_), got {resolved[group]!r}; a "
                                   f"choice such as {group}=NAME picks from this machine's conf/ and does not apply to "
                                   f"a hand-given config: set the block's keys ({group}._target_=..., {group}.k=...)",
                                   field=group)
        check_component({k: v for k, v in resolved[group].items()}, group)
    if untrusted:
        check_endpoints({key: value for key, value in resolved.items() if key not in skip}, allowed_endpoints)


def check_data_components(cfg: DictConfig, skip: frozenset[str] = frozenset()) -> None:
    """Build the chunker and the dataset loader (checks only: nothing is read or chunked), so
    their bad options fail before any work, also for a whole sweep before its first job."""
    if "dataset" not in skip:
        dataset_loader(cfg.dataset)
    if "chunking" not in skip:
        make_chunker(chunker_options(cfg.chunking))
