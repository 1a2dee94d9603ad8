"""Queries -> unit-length embedding rows, with a sentence-transformers model resolved by ragexp.

The model is resolved like every model ragexp loads (:func:`ragexp.models.resolve.resolve_model`:
a short name such as ``minilm``, a local folder or a Hugging Face id) and loaded from local files
only. torch's threads are set to the cores this process owns before the first batch
(:func:`ragexp.runtime.threads.configure_threads`); texts are encoded ``batch_size`` at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragexp.models.resolve import HF_FOLDER, resolve_model, unloadable_model_error
from ragexp.runtime import progress
from ragexp.runtime.threads import configure_threads

DEFAULT_MODEL = "minilm"


class QueryEncoder:
    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 128, threads: int | str = "auto") -> None:
        self.name = model
        self.resolved = resolve_model(model)
        if self.resolved.kind != HF_FOLDER:
            raise unloadable_model_error(model, "query import needs a sentence-transformers model folder", field="--model")
        self.batch_size = batch_size
        self.threads = threads
        self._model = None

    def _load(self):
        from sentence_transformers import SentenceTransformer

        configure_threads(self.threads)
        progress.apply_to_libraries()
        try:
            return SentenceTransformer(str(self.resolved.path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as err:
            raise unloadable_model_error(self.name, f"{self.resolved.path} is not a sentence-transformers model ({err})", field="--model") from None

    def __call__(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """Unit rows, one per text, float32."""
        if self._model is None:
            self._model = self._load()
        vectors = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=show_progress and progress.enabled() and len(texts) > self.batch_size)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
