"""The ``_target_`` of ``conf/embedding``: the component class :class:`Embedding`. The encoders
themselves live in :mod:`ragexp.models.encoders` (ragexp's own commands use them too); their names
are re-exported here, and :func:`make_cached_encoder` (:func:`ragexp.models.encoders.make_encoder`
plus the stage cache) stays a plain Python function (not a config target: stored configs build
classes only, :mod:`ragexp.config.targets`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragexp.models import encoders
from ragexp.models.device import resolve_device
from ragexp.models.encoders import (  # noqa: F401 - the encoder API of reference_pipelines
    Encoder,
    OnnxEncoder,
    SentenceTransformerEncoder,
    build_encoder,
    onnx_session_options,
    unit_rows,
)


def make_cached_encoder(model: str, backend: str = "onnx", precision: str = "fp32", name: str | None = None,
                        cache: Any = None, **options: Any) -> Encoder:
    """:func:`ragexp.models.encoders.make_encoder`; with a stage cache every text is encoded once per
    encoder identity."""
    return build_encoder(encoders.make_encoder(model, backend=backend, precision=precision, name=name, **options), cache)


class Embedding:
    """The run's sentence encoder, as the ``embedding`` config group describes it: ``model`` on
    ``backend`` (``onnx`` or ``torch``) at ``precision`` (``fp32``, or ``int8`` on ONNX), with the
    encoder options. Built at once by :func:`ragexp.models.encoders.make_encoder`, which picks
    :class:`OnnxEncoder` or :class:`SentenceTransformerEncoder` (a model ONNX cannot export runs on
    torch, said once), and it encodes with that encoder (:attr:`encoder`): :attr:`identity`, the key
    of every cached vector, and :attr:`backend` name the backend that actually encodes.

    ``name`` is the group's label. ``device``: ``auto``, ``cpu``, ``cuda[:N]``
    (:mod:`ragexp.models.device`; ONNX on a GPU as :mod:`ragexp.models.encoders` says). The run's text-vector cache
    is applied by whoever uses it (dense retriever, embedding reranker and judge, answer relevance).
    """

    def __init__(
        self, model: str = "minilm", backend: str = "onnx", precision: str = "fp32", name: str | None = None,
        query_prefix: str = "", passage_prefix: str = "", max_seq_length: int | None = None, normalize: bool = True,
        batch_size: int = encoders.BATCH_SIZE, threads: int | str = "auto", device: str = "auto",
    ) -> None:
        self.device = resolve_device(device)
        options: dict[str, Any] = {"query_prefix": query_prefix, "passage_prefix": passage_prefix,
                                   "max_seq_length": max_seq_length, "normalize": normalize, "batch_size": batch_size,
                                   "threads": threads, "device": self.device}
        self.name = name
        self.encoder: Encoder = encoders.make_encoder(model, backend=backend, precision=precision, **options)
        self.identity = self.encoder.identity
        self.backend: str = self.identity["backend"]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode_queries(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode_passages(texts)
