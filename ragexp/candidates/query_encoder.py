"""Queries -> unit-length embedding rows, with a sentence encoder resolved by ragexp.

The model is resolved like every model ragexp loads (:func:`ragexp.models.resolve.resolve_model`:
a short name such as ``minilm``, a local folder, an ``.onnx`` graph or a Hugging Face id) and
built by :func:`ragexp.models.encoders.make_encoder`: ONNX Runtime where the model exports with
torch's vectors (else torch, said once), length-sorted batches, ``threads`` intra-op threads
(``"auto"``: the cores this process owns). Texts are encoded ``batch_size`` at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragexp.errors import RagexpInputError
from ragexp.models.encoders import make_encoder, unit_rows
from ragexp.models.resolve import GGUF, resolve_model, unloadable_model_error
from ragexp.runtime import progress

DEFAULT_MODEL = "minilm"


class QueryEncoder:
    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 128, threads: int | str = "auto") -> None:
        self.name = model
        if resolve_model(model).kind == GGUF:
            raise unloadable_model_error(model, "query import needs a sentence encoder, not a GGUF language model", field="--model")
        self.batch_size = batch_size
        self.threads = threads
        self._encoder = None

    def __call__(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """Unit rows, one per text, float32."""
        if self._encoder is None:
            try:
                self._encoder = make_encoder(self.name, batch_size=self.batch_size, threads=self.threads)
            except RagexpInputError as err:
                raise RagexpInputError(err.message, field="--model") from None
        shown = progress.enabled()
        progress.set_enabled(shown and show_progress)  # a bar only where the caller wants one
        try:
            vectors = self._encoder.encode_queries(list(texts))
        finally:
            progress.set_enabled(shown)
        return unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))
