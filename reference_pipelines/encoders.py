"""The ``_target_`` of ``conf/embedding``: :func:`make_encoder`. The encoders themselves live in
:mod:`ragexp.models.encoders` (ragexp's own commands use them too); their names are re-exported here."""

from __future__ import annotations

from typing import Any

from ragexp.models import encoders
from ragexp.models.encoders import (  # noqa: F401 - the encoder API of reference_pipelines
    Encoder,
    OnnxEncoder,
    SentenceTransformerEncoder,
    build_encoder,
    onnx_session_options,
    unit_rows,
)


def make_encoder(model: str, backend: str = "onnx", precision: str = "fp32", name: str | None = None, cache: Any = None,
                 **options: Any) -> Encoder:
    """:func:`ragexp.models.encoders.make_encoder`; with the run's stage cache (handed over by
    ``build_component``) every text is encoded once per encoder identity."""
    return build_encoder(encoders.make_encoder(model, backend=backend, precision=precision, name=name, **options), cache)
