"""A local causal language model through transformers, GGUF included.

:class:`LocalHFModel` is both a :class:`~ragexp.llm.base.ChatModel` (chat template applied,
greedy decoding at temperature 0) and a :class:`~ragexp.llm.base.ScoringModel`.

GGUF files are de-quantized by transformers at load time, which is slow (1-3 minutes for
SmolLM2-135M on two cores, most of it reading the tokenizer and metadata). The converted
float32 weights, config and tokenizer are therefore saved once as safetensors under
``<cache_dir>/<gguf stem>-<sha256[:16]>/`` and later loads read that folder instead (a few
seconds). The folder is written aside and published by one rename.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
)

from ragexp import progress
from ragexp.cache import publish_dir
from ragexp.errors import RagexpInputError
from ragexp.llm.base import LLMCallError, LLMResponse, Prompt, as_messages
from ragexp.llm.call_cache import CallCache, cached_call
from ragexp.models import GGUF, HF_FOLDER, ResolvedModel, resolve_model, weights_digest

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODEL_CACHE_ENV = "RAGEXP_MODEL_CACHE"


def default_converted_dir() -> Path:
    """``$RAGEXP_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragexp/converted`` (``~/.cache/...``)."""
    if os.environ.get(MODEL_CACHE_ENV):
        return Path(os.environ[MODEL_CACHE_ENV])
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "ragexp" / "converted"


@dataclass
class LoadedWeights:
    """A model and tokenizer in memory; ``loaded_from`` is ``gguf``, ``converted_cache`` or ``pretrained``."""

    model: PreTrainedModel
    tokenizer: Any
    loaded_from: str
    load_seconds: float
    content_id: str
    lock: threading.Lock


def _convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize ``gguf`` and save it as a plain transformers folder at ``target``."""
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    )
    # The weights are plain float tensors after de-quantization; only the GGUF marker blocks saving.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config

    def fill(staging: Path) -> None:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)

    publish_dir(target, fill)


@functools.lru_cache(maxsize=4)
def load_weights(source: ResolvedModel, device: str, dtype: str, cache_dir: str) -> LoadedWeights:
    """Load (once per process) the weights ``source`` names; GGUF goes through the converted cache."""
    started = time.perf_counter()
    if source.kind == GGUF:
        digest = weights_digest(source.path)[:16]
        folder = Path(cache_dir) / f"{source.path.stem}-{digest}"
        loaded_from = "converted_cache" if folder.is_dir() else "gguf"
        if loaded_from == "gguf":
            folder.parent.mkdir(parents=True, exist_ok=True)
            _convert_gguf(source.path, folder)
        location, content_id = str(folder), f"gguf-sha256:{digest}"
    elif source.kind == HF_FOLDER:
        location, content_id, loaded_from = str(source.path), source.name, "pretrained"
    else:
        raise RagexpInputError(f"{source.name!r} is an {source.kind} model; a language model is a model folder or a .gguf file", field="model")
    extra = {"local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(location, **extra)
    model = AutoModelForCausalLM.from_pretrained(location, dtype=DTYPES[dtype], **extra).to(device)
    model.eval()
    return LoadedWeights(model, tokenizer, loaded_from, time.perf_counter() - started, content_id, threading.Lock())


class LocalHFModel:
    """A transformers causal LM. ``model`` is a short name (see :mod:`ragexp.models`), a
    Hugging Face id or a local path; ``gguf_file`` picks a GGUF file inside a folder or repo.

    ``model_id`` is ``<model>`` for folders and hub ids, ``<model>@<gguf sha256[:16]>`` for GGUF.
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        gguf_file: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        cache_dir: str | os.PathLike[str] | None = None,
        cache: CallCache | None = None,
        batch_size: int = 8,
    ) -> None:
        if dtype not in DTYPES:
            raise RagexpInputError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}", field="dtype")
        source = resolve_model(model, gguf_file=gguf_file)
        converted = Path(cache_dir) if cache_dir is not None else default_converted_dir()
        self.weights = load_weights(source, device, dtype, str(converted.resolve()))
        self.source = source
        self.device = device
        self.dtype = dtype
        self.cache = cache
        self.batch_size = batch_size
        content = self.weights.content_id
        self.model_id = f"{model}@{content.split(':')[-1]}" if content.startswith("gguf-") else model

    def __repr__(self) -> str:
        return f"LocalHFModel(model_id={self.model_id!r}, device={self.device!r}, dtype={self.dtype!r})"

    def params(self) -> dict:
        return {"backend": "local", "model_id": self.model_id, "device": self.device, "dtype": self.dtype}

    @property
    def load_seconds(self) -> float:
        return self.weights.load_seconds

    @property
    def loaded_from(self) -> str:
        return self.weights.loaded_from

    @property
    def max_positions(self) -> int | None:
        return getattr(self.weights.model.config, "max_position_embeddings", None)

    def render(self, messages: list[dict]) -> str:
        """The prompt text: the tokenizer's chat template with the generation prompt, or the
        message contents joined by blank lines for models without a template."""
        tokenizer = self.weights.tokenizer
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "\n\n".join(str(message["content"]) for message in messages)

    def complete(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> LLMResponse:
        """Greedy decoding at ``temperature == 0`` (deterministic); sampling above it. The
        answer is cut before the first ``stop`` string."""
        messages = as_messages(prompt)
        params = {"max_tokens": max_tokens, "temperature": temperature, "stop": stop}
        return cached_call(
            self.cache, self.model_id, messages, params, lambda: self._generate(messages, max_tokens, temperature, stop)
        )

    def _generate(self, messages: list[dict], max_tokens: int, temperature: float, stop: list[str] | None) -> LLMResponse:
        model, tokenizer = self.weights.model, self.weights.tokenizer
        started = time.perf_counter()
        input_ids = tokenizer(self.render(messages), add_special_tokens=False, return_tensors="pt")["input_ids"]
        limit = self.max_positions
        if limit is not None and input_ids.shape[1] + max_tokens > limit:
            raise LLMCallError(
                "input_too_long", f"prompt of {input_ids.shape[1]} tokens + {max_tokens} new exceeds {limit} positions"
            )
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=None,
            top_k=None,
            eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            stop_strings=list(stop) if stop else None,
        )
        input_ids = input_ids.to(self.device)
        with self.weights.lock, torch.inference_mode():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                generation_config=config,
                tokenizer=tokenizer,
            )
        new_tokens = output[0, input_ids.shape[1]:]
        text = tokenizer.decode(new_tokens, skip_special_tokens=True)
        for marker in stop or []:
            text = text.split(marker, 1)[0]
        return LLMResponse(
            text=text,
            prompt_tokens=int(input_ids.shape[1]),
            completion_tokens=int(new_tokens.shape[0]),
            cached=False,
            model=self.model_id,
            latency_s=time.perf_counter() - started,
        )

    def logprob(self, prefix: str, continuation: str) -> float:
        return self.logprobs([(prefix, continuation)])[0]

    def logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """``sum_t log p(c_t | prefix, c_<t)`` in nats for each pair, on raw text (no chat template).

        The continuation tokens are those of ``tokens(prefix + continuation)`` after the first
        ``len(tokens(prefix))``, so word boundaries tokenize as in running text. An empty prefix
        is conditioned on the BOS (or EOS) token. Prefixes too long for the model keep their end.
        """
        encoded = [self._encode_pair(prefix, continuation) for prefix, continuation in pairs]
        scores: list[float] = []
        batches = range(0, len(encoded), self.batch_size)
        for start in progress.bar(batches, desc="logprobs", disable=len(batches) < 4, leave=False):
            scores.extend(self._score_batch(encoded[start : start + self.batch_size]))
        return scores

    def _encode_pair(self, prefix: str, continuation: str) -> tuple[list[int], int]:
        tokenizer = self.weights.tokenizer
        context = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        whole = tokenizer(prefix + continuation, add_special_tokens=False)["input_ids"]
        if not context:
            start_token = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
            context, whole = [start_token], [start_token, *whole]
        n_context = len(context)
        limit = self.max_positions
        if limit is not None and len(whole) > limit:
            cut = len(whole) - limit
            if cut >= n_context:
                raise LLMCallError("input_too_long", f"continuation alone exceeds {limit} positions")
            whole, n_context = whole[cut:], n_context - cut
        return whole, n_context

    def _score_batch(self, batch: list[tuple[list[int], int]]) -> list[float]:
        model, tokenizer = self.weights.model, self.weights.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, _) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        with self.weights.lock, torch.inference_mode():
            logits = model(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)).logits
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        scores = []
        for row, (ids, n_context) in enumerate(batch):
            targets = torch.tensor(ids[n_context:], device=log_probs.device)
            positions = torch.arange(n_context - 1, len(ids) - 1, device=log_probs.device)
            scores.append(float(log_probs[row, positions, targets].sum()))
        return scores
