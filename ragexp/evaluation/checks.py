"""Everything a job checks before any work, the same for one job and for a whole sweep's config
before its first job (the sweep callback, :mod:`ragexp.tracking.sweep`).

:func:`check_job`: the config and its overrides screened for secrets, its values
(:func:`~ragexp.config.schema.validate`), the chunker and the dataset loader built without reading
anything (:func:`check_data_components`), every pipeline component block against the registry and
its class's schema (:mod:`ragexp.config.targets`), every ``device`` in them
(:func:`~ragexp.models.device.resolved_devices`: ``cuda`` without CUDA fails here), every path
field for what it may name (:func:`check_path_fields`), model server URLs
(:func:`check_base_urls`), a judge's threshold within its score range
(:func:`check_judge_threshold`), a black-box ``system`` block (:func:`~ragexp.systems.build.check_system`),
the ``cost`` settings (:func:`ragexp.cost.settings.cost_settings`: prices, budgets), and its
endpoints (a system's ``url`` too): each one this machine's ``conf/`` or allow-list names, whatever
the config's source (:mod:`ragexp.config.endpoints`). A job runs these checks once, in the one
gate that makes its spec (:func:`ragexp.evaluation.job_spec.job_spec`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragexp.chunking import make_chunker
from ragexp.config.endpoints import check_endpoints
from ragexp.config.schema import check_trace_mode, chunker_options, validate
from ragexp.config.secrets import screen_overrides
from ragexp.config.targets import check_component, component_class
from ragexp.cost.settings import cost_settings
from ragexp.data.dataset import dataset_loader
from ragexp.errors import RagexpInputError
from ragexp.judging.calibration.record import MAX_CALIBRATION_BYTES, check_number, read_calibration
from ragexp.models.device import resolved_devices
from ragexp.models.resolve import SHORT_NAMES, resolve_model
from ragexp.stored.limits import check_file
from ragexp.stored.urls import canonical_url
from ragexp.systems.build import check_system

PIPELINE_GROUPS = ("embedding", "retrieval", "reranker", "generator", "judge")


def check_job(cfg: DictConfig, overrides: Sequence[str], *, allowed_endpoints: Sequence[str] = (),
              skip: frozenset[str] = frozenset()) -> None:
    """Raise :class:`RagexpInputError` for the first thing wrong with ``cfg`` (module docstring).
    ``skip``: top-level groups checked for secrets only (a sweep's swept groups, checked per job)."""
    screen_overrides(overrides)
    validate(cfg, skip)
    check_trace_mode(cfg.get("tracking"))
    check_data_components(cfg, skip)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    check_path_fields({key: value for key, value in resolved.items() if key not in skip})
    check_base_urls({key: value for key, value in resolved.items() if key not in skip})
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
        check_model_paths(resolved[group], group)
    if "judge" not in skip:
        check_judge_threshold(resolved.get("judge"))
    if "system" not in skip:
        check_system(resolved)
    if "cost" not in skip:
        cost_settings(resolved.get("cost"))  # prices, budgets, counts: refused here, before any work
    check_endpoints({key: value for key, value in resolved.items() if key not in skip}, allowed_endpoints)


def check_base_urls(node: Any, prefix: str = "") -> None:
    """Every ``base_url`` (a model server) is an ``http(s)`` URL in the one canonical form every
    HTTP client reads alike (:mod:`ragexp.stored.urls`): ``https://[::ffff:evil]/v1`` or
    ``http://good\\@evil/v1`` is refused here, not deep inside a run."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            field = f"{prefix}{key}"
            if key == "base_url" and value not in (None, ""):
                canonical_url(value, field=field)
            check_base_urls(value, f"{field}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            check_base_urls(value, f"{prefix.rstrip('.')}[{i}].")


def check_model_paths(node: Any, prefix: str) -> None:
    """Every ``model`` that names a short name or a local file or folder resolves
    (:func:`ragexp.models.resolve.resolve_model`: a folder without ``config.json``, an ``.onnx``
    without its tokenizer, a missing path), before the first model of the run is built; a Hugging
    Face id and an endpoint's model name (beside a ``base_url``) are resolved when built."""
    if isinstance(node, Mapping):
        model = node.get("model")
        if isinstance(model, str) and "base_url" not in node and _names_local_model(model):
            try:
                resolve_model(model, node.get("gguf_file"))
            except RagexpInputError as err:
                raise RagexpInputError(err.message, file=err.file, field=f"{prefix}.model") from None
        for key, value in node.items():
            check_model_paths(value, f"{prefix}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            check_model_paths(value, f"{prefix}[{i}]")


def _names_local_model(name: str) -> bool:
    return name in SHORT_NAMES or os.path.lexists(os.path.expanduser(name)) or name.startswith((".", "/", "~")) or \
        name.endswith((".gguf", ".onnx"))


def check_judge_threshold(block: Any) -> None:
    """A judge's ``threshold`` within the range of its scores (the class's ``SCORE_RANGE``), and
    its ``calibration`` file read through the gate (format, numbers, its threshold in that range),
    checked before the judge, its encoder or any other model is built (``judge.threshold=-5`` or
    a NaN threshold in a calibration file is refused before the retriever's encoder loads and
    exports; which judge the file was fitted for is checked when the judge is built)."""
    if not isinstance(block, Mapping) or "_target_" not in block:
        return
    score_range = getattr(component_class(block["_target_"], "judge._target_"), "SCORE_RANGE", None)
    low, high = score_range or (None, None)
    if block.get("threshold") is not None:
        check_number(block["threshold"], "judge.threshold", low, high)
    if isinstance(block.get("calibration"), str) and os.path.lexists(block["calibration"]):
        try:
            read_calibration(block["calibration"], score_range)
        except RagexpInputError as err:
            raise RagexpInputError(err.message, file=err.file, field=f"judge.{err.field}") from None


def check_data_components(cfg: DictConfig, skip: frozenset[str] = frozenset()) -> None:
    """Build the chunker and the dataset loader (checks only: nothing is read or chunked), so
    their bad options fail before any work, also for a whole sweep before its first job."""
    if "dataset" not in skip:
        dataset_loader(cfg.dataset)
    if "chunking" not in skip:
        make_chunker(chunker_options(cfg.chunking))


#: The dataset fields that name a corpus or eval-set file or folder; of them, those that name a file.
DATASET_PATH_FIELDS = ("path", "corpus", "evalset")
DATASET_FILE_FIELDS = ("evalset",)


def check_path_fields(config: Mapping[str, Any]) -> None:
    """What a config's path fields may name, checked before anything is read: every
    ``calibration`` a regular file of at most :data:`MAX_CALIBRATION_BYTES` (``/dev/zero`` would
    read until memory runs out, a FIFO would block); the dataset's corpus and path, where they
    exist, a regular file or a folder (no device, FIFO or socket), its eval set a regular file. A model path is
    checked where it is resolved (:func:`ragexp.models.resolve.resolve_model`)."""
    for field, value in _calibrations(config, ""):
        try:
            if os.path.lexists(value):  # missing: the judge names it with its own advice
                check_file(value, max_bytes=MAX_CALIBRATION_BYTES)
        except RagexpInputError as err:
            raise RagexpInputError(err.message, file=err.file, field=field) from None
    dataset = config.get("dataset")
    for key in DATASET_PATH_FIELDS if isinstance(dataset, Mapping) else ():
        value = dataset.get(key)
        if isinstance(value, str) and value != "???":
            try:
                mode = os.stat(value).st_mode
            except OSError:
                continue  # missing: the loader names it with its own advice
            if key in DATASET_FILE_FIELDS and not stat.S_ISREG(mode):
                raise RagexpInputError("is not a regular file (a folder, device, FIFO or socket)", file=value,
                                       field=f"dataset.{key}")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RagexpInputError("is not a regular file or folder (a device, FIFO or socket)", file=value,
                                       field=f"dataset.{key}")


def _calibrations(node: Any, prefix: str) -> list[tuple[str, str]]:
    if isinstance(node, Mapping):
        found = [(f"{prefix}calibration", node["calibration"])] if isinstance(node.get("calibration"), str) else []
        return found + [hit for key, value in node.items() for hit in _calibrations(value, f"{prefix}{key}.")]
    if isinstance(node, list):
        return [hit for i, value in enumerate(node) for hit in _calibrations(value, f"{prefix.rstrip('.')}[{i}].")]
    return []
