"""The components one configuration names, built from its ``_target_`` entries.

A wrong parameter name or type fails here, at start-up, naming the config key, before any
chunking, caching or tracking work.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from ragexp.config.schema import component_config
from ragexp.config.targets import check_component
from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import JobSpec
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.text_vectors import with_text_vectors
from ragexp.systems.build import build_system, is_black_box


def build_component(node: DictConfig | None, group: str, cache: StageCache) -> Any | None:
    """Instantiate a pipeline group's ``_target_``; pass the stage cache when it takes one.

    Every ``_target_`` in the node, at any depth, must name a registered class and the block fit its
    constructor (:mod:`ragexp.config.targets`).
    A wrong parameter name or type fails here, at start-up, naming the config group.
    """
    spec = component_config(node)
    if spec is None:
        return None
    check_component(spec, group)  # before any import: registered classes only (ragexp.config.targets)
    target = spec["_target_"]
    factory = get_object(target)
    kwargs: dict[str, Any] = {"_convert_": "all"}
    if "cache" in inspect.signature(factory).parameters:
        kwargs["cache"] = cache
    try:
        return instantiate(spec, **kwargs)
    except Exception as err:
        # Hydra wraps the constructor's exception in InstantiationException; the cause names the field.
        cause = err if isinstance(err, RagexpInputError) else (err.__cause__ or err)
        if not isinstance(cause, RagexpInputError):
            raise RagexpInputError(f"cannot build {target}: {cause}", field=group) from None
        field = cause.field or group
        if not field.startswith(f"{group}.") and field != group:
            field = f"{group}.{field}"
        raise RagexpInputError(cause.message, file=cause.file, line=cause.line, field=field) from None


class _RetrieveAdapter:
    """Wraps a user's pipeline exposing only the method article's ``retrieve(query) -> [ids]``."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    def index(self, chunks: Sequence[Chunk]) -> None:
        if hasattr(self.pipeline, "index"):
            self.pipeline.index(chunks)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        out = []
        for query in queries:
            ids = list(self.pipeline.retrieve(query))[:k]
            out.append([(chunk_id, float(len(ids) - rank)) for rank, chunk_id in enumerate(ids)])
        return out


@dataclass
class Pipeline:
    """The built components of one configuration; models load lazily, on first use."""

    retriever: Any
    reranker: Any | None
    generator: Any | None
    judge: Any | None = None
    encoder: Any | None = None  # the embedding group, built when used: answer relevance compares questions with it
    system: Any | None = None  # a black-box system (ragexp.systems) replacing retriever, reranker and generator


def build_pipeline(spec: JobSpec, cache: StageCache) -> Pipeline:
    """Build retriever, reranker, generator and, with a generator, the judge and the embedding
    model of answer relevance; for a black-box ``system``, the system, the judge and the
    embedding model instead. A bad parameter fails here, before chunking or caching.

    The embedding model is built first when a component uses it (``encoder: ${embedding}``) or a
    generator will need it, so a bad ``embedding.model`` is reported as ``embedding.model``, not
    as a parameter of the retriever that interpolates it.
    """
    cfg = spec.config
    groups = ("retrieval", "reranker", "generator", "judge")
    system_node = spec.block("system")
    if is_black_box({"system": system_node}):
        # the system's own answers are judged: the judge here, the answer-relevance encoder once
        # answers came back (:func:`build_encoder`)
        return Pipeline(None, None, None, build_component(cfg.get("judge"), "judge", cache), None, build_system(system_node))
    embedding = None
    if component_config(cfg.get("generator")) is not None or any(_interpolates(cfg.get(g), "embedding") for g in groups):
        embedding = build_encoder(cfg, cache)
    retriever = build_component(cfg.retrieval, "retrieval", cache)
    if retriever is None:
        raise RagexpInputError("needs a _target_ (e.g. retrieval=bm25)", field="retrieval")
    if not hasattr(retriever, "search") and hasattr(retriever, "retrieve"):
        retriever = _RetrieveAdapter(retriever)
    generator = build_component(cfg.get("generator"), "generator", cache)
    if getattr(generator, "context_k", None) not in (None, spec.eval.context_k):
        raise RagexpInputError(
            f"how many chunks reach the generator has one setting, eval.context_k (now {spec.eval.context_k}); "
            f"set eval.context_k={generator.context_k} instead", field="generator.context_k",
        )
    reranker = build_component(cfg.get("reranker"), "reranker", cache)
    if generator is None:
        return Pipeline(retriever, reranker, None, encoder=embedding)
    judge = build_component(cfg.get("judge"), "judge", cache)
    return Pipeline(retriever, reranker, generator, judge, embedding)


def build_encoder(cfg: DictConfig, cache: StageCache) -> Any | None:
    """The embedding group's model, each distinct text encoded once (:mod:`ragexp.runtime.text_vectors`)."""
    embedding = build_component(cfg.get("embedding"), "embedding", cache)
    if hasattr(embedding, "identity") and hasattr(embedding, "encode_queries"):
        embedding = with_text_vectors(embedding, cache)
    return embedding


def _interpolates(node: DictConfig | None, key: str) -> bool:
    """Whether ``node`` refers to the top-level ``key`` (``${key}`` or ``${key.x}``) anywhere."""
    if node is None:
        return False
    raw = OmegaConf.to_container(node, resolve=False)
    pattern = re.compile(r"\$\{" + re.escape(key) + r"[.}]")
    return bool(pattern.search(json.dumps(raw)))
