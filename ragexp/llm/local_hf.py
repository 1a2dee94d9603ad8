"""A local causal language model through transformers, GGUF included.

:class:`LocalHFModel` is both a :class:`~ragexp.llm.base.ChatModel` (chat template applied,
greedy decoding at temperature 0, prompts batched: :mod:`ragexp.llm.decoding`) and a
:class:`~ragexp.llm.base.ScoringModel` (each distinct prefix encoded once:
:mod:`ragexp.llm.prefix_scoring`). Its CPU threads are set by :mod:`ragexp.runtime.threads`.

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
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from ragexp.errors import RagexpInputError
from ragexp.llm.answer_end import RULES_VERSION, final_cut, repetition_start
from ragexp.llm.base import LLMCallError, LLMResponse, Prompt, as_messages
from ragexp.llm.call_cache import CallCache, cached_batch
from ragexp.llm.usage import record
from ragexp.llm.decoding import decode_batch
from ragexp.llm.prefix_scoring import score_pairs
from ragexp.models.device import resolve_device
from ragexp.models.resolve import (
    GGUF,
    HF_FOLDER,
    ResolvedModel,
    resolve_model,
    weights_digest,
)
from ragexp.runtime import progress
from ragexp.runtime.stage_cache import publish_dir
from ragexp.runtime.threads import configure_threads, recheck_threads

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
QUANTIZATIONS = ("none", "dynamic_int8")
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


def converted_folder(source: ResolvedModel, cache_dir: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The plain transformers folder of GGUF ``source`` under ``cache_dir``
    (``<gguf stem>-<sha256[:16]>``), converted now when absent; ``(folder, converted now)``.
    Any transformers tool can load the folder (the real-server tests serve it)."""
    digest = weights_digest(source.path)[:16]
    folder = Path(cache_dir) / f"{source.path.stem}-{digest}"
    if folder.is_dir():
        return folder, False
    folder.parent.mkdir(parents=True, exist_ok=True)
    _convert_gguf(source.path, folder)
    return folder, True


@functools.lru_cache(maxsize=4)
def load_weights(source: ResolvedModel, device: str, dtype: str, cache_dir: str) -> LoadedWeights:
    """Load (once per process) the weights ``source`` names; GGUF goes through the converted cache."""
    started = time.perf_counter()
    progress.apply_to_libraries()  # this module imported transformers
    if source.kind == GGUF:
        folder, converted_now = converted_folder(source, cache_dir)
        loaded_from = "gguf" if converted_now else "converted_cache"
        location, content_id = str(folder), f"gguf-sha256:{folder.name.rsplit('-', 1)[1]}"
    elif source.kind == HF_FOLDER:
        location, content_id, loaded_from = str(source.path), source.name, "pretrained"
    else:
        raise RagexpInputError(f"{source.name!r} is an {source.kind} model; a language model is a model folder or a .gguf file", field="model")
    extra = {"local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(location, **extra)
    model = AutoModelForCausalLM.from_pretrained(location, dtype=DTYPES[dtype], **extra).to(device)
    model.eval()
    return LoadedWeights(model, tokenizer, loaded_from, time.perf_counter() - started, content_id, threading.Lock())


@functools.lru_cache(maxsize=4)
def quantized_weights(source: ResolvedModel, device: str, cache_dir: str) -> LoadedWeights:
    """The float32 weights with every ``nn.Linear`` (the LM head included) replaced by torch's
    dynamic int8 version: int8 weights, activations quantised per batch at run time."""
    base = load_weights(source, device, "float32", cache_dir)
    started = time.perf_counter()
    with warnings.catch_warnings():  # torch marks eager-mode quantisation deprecated in favour of torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*", category=UserWarning)
        model = torch.ao.quantization.quantize_dynamic(base.model, {torch.nn.Linear}, dtype=torch.qint8, inplace=False)
    seconds = base.load_seconds + time.perf_counter() - started
    return LoadedWeights(model, base.tokenizer, base.loaded_from, seconds, base.content_id, threading.Lock())


class LocalHFModel:
    """A transformers causal LM. ``model`` is a short name (see :mod:`ragexp.models.resolve`), a
    Hugging Face id or a local path; ``gguf_file`` picks a GGUF file inside a folder or repo.
    ``device``: ``auto`` (CUDA when torch sees it, else the CPU), ``cpu``, ``cuda[:N]``
    (:mod:`ragexp.models.device`). ``quantization``: ``none`` or ``dynamic_int8`` (see :func:`quantized_weights`; needs
    ``dtype: float32``). ``threads``: torch intra-op threads, an int or ``auto``
    (:func:`ragexp.runtime.threads.configure_threads`). ``batch_size``: prompts decoded together and
    continuations scored together; with ``auto`` threads each batch of work first leaves the cores
    other processes keep busy (:func:`ragexp.runtime.threads.recheck_threads`). ``repeat_ngram``:
    ``None``, or ``n`` to end an answer where it starts repeating itself (``n`` words or a whole
    sentence again: :mod:`ragexp.llm.answer_end`); the text before the repetition is kept and ``finish_reason`` is ``repetition``,
    or ``degenerate`` where the answer turned into markers or one token over and over.

    ``model_id`` is ``<model>`` for folders and hub ids, ``<model>@<gguf sha256[:16]>`` for GGUF.
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        gguf_file: str | None = None,
        device: str = "auto",
        dtype: str = "float32",
        quantization: str = "none",
        threads: int | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        cache: CallCache | None = None,
        batch_size: int = 8,
        repeat_ngram: int | None = None,
    ) -> None:
        if dtype not in DTYPES:
            raise RagexpInputError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}", field="dtype")
        if quantization not in QUANTIZATIONS:
            raise RagexpInputError(f"unknown quantization {quantization!r}; use one of {', '.join(QUANTIZATIONS)}", field="quantization")
        # auto picks the CPU for a quantization that runs there only
        device = "cpu" if quantization != "none" and device == "auto" else resolve_device(device)
        if quantization != "none" and (dtype != "float32" or device != "cpu"):
            raise RagexpInputError(f"{quantization} quantizes float32 weights on the CPU; set dtype: float32, device: cpu", field="quantization")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise RagexpInputError(f"must be a positive integer, got {batch_size!r}", field="batch_size")
        if repeat_ngram is not None and (isinstance(repeat_ngram, bool) or not isinstance(repeat_ngram, int) or repeat_ngram < 2):
            raise RagexpInputError(f"must be null or an integer >= 2, got {repeat_ngram!r}", field="repeat_ngram")
        self.threads_setting = threads
        self.threads = configure_threads(threads, load_aware=True)
        source = resolve_model(model, gguf_file=gguf_file)
        converted = str((Path(cache_dir) if cache_dir is not None else default_converted_dir()).resolve())
        if quantization == "dynamic_int8":
            self.weights = quantized_weights(source, device, converted)
        else:
            self.weights = load_weights(source, device, dtype, converted)
        self.source = source
        self.device = device
        self.dtype = dtype
        self.quantization = quantization
        self.cache = cache
        self.batch_size = batch_size
        self.repeat_ngram = repeat_ngram
        content = self.weights.content_id
        self.model_id = f"{model}@{content.split(':')[-1]}" if content.startswith("gguf-") else model

    def __repr__(self) -> str:
        return (
            f"LocalHFModel(model_id={self.model_id!r}, device={self.device!r}, dtype={self.dtype!r}, "
            f"quantization={self.quantization!r}, threads={self.threads})"
        )

    def params(self) -> dict:
        return {
            "backend": "local", "model_id": self.model_id, "device": self.device, "dtype": self.dtype,
            "quantization": self.quantization, "threads": self.threads, "batch_size": self.batch_size,
            "repeat_ngram": self.repeat_ngram,
        }  # fmt: skip

    @property
    def load_seconds(self) -> float:
        return self.weights.load_seconds

    @property
    def loaded_from(self) -> str:
        return self.weights.loaded_from

    @property
    def max_positions(self) -> int | None:
        return getattr(self.weights.model.config, "max_position_embeddings", None)

    @property
    def _pad_id(self) -> int:
        tokenizer = self.weights.tokenizer
        return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    @property
    def _start_id(self) -> int:
        """The token an empty text is conditioned on: BOS, else EOS."""
        tokenizer = self.weights.tokenizer
        return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id

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
        answer is cut before the first ``stop`` string; the chat template's end token ends it."""
        (result,) = self.complete_batch([prompt], max_tokens=max_tokens, temperature=temperature, stop=stop)
        if isinstance(result, LLMCallError):
            raise result
        return result

    def complete_batch(
        self,
        prompts: Sequence[Prompt],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> list[LLMResponse | LLMCallError]:
        """:meth:`complete` for every prompt, the uncached ones decoded ``batch_size`` at a time
        (sorted by length, so rows pad little); a failure is returned in its prompt's place."""
        conversations = [as_messages(prompt) for prompt in prompts]
        params = {
            "max_tokens": max_tokens, "temperature": temperature, "stop": stop,
            "dtype": self.dtype, "quantization": self.quantization,
        }  # fmt: skip
        if self.repeat_ngram is not None:  # absent when off, so earlier cache entries stay valid
            params["repeat_ngram"] = self.repeat_ngram
            params["answer_end_rules"] = RULES_VERSION
        return cached_batch(
            self.cache, self.model_id, conversations, params,
            lambda todo: self._generate(todo, max_tokens, temperature, stop),
        )  # fmt: skip

    def _generate(
        self, conversations: list[list[dict]], max_tokens: int, temperature: float, stop: list[str] | None
    ) -> list[LLMResponse | LLMCallError]:
        self.threads = recheck_threads(self.threads_setting)
        tokenizer = self.weights.tokenizer
        encoded = [
            tokenizer(self.render(messages), add_special_tokens=False)["input_ids"] or [self._start_id]
            for messages in conversations
        ]
        results: list[LLMResponse | LLMCallError | None] = [None] * len(encoded)
        limit = self.max_positions
        runnable = []
        for index, ids in enumerate(encoded):
            if limit is not None and len(ids) + max_tokens > limit:
                results[index] = LLMCallError(
                    "input_too_long", f"prompt of {len(ids)} tokens + {max_tokens} new exceeds {limit} positions"
                )
            else:
                runnable.append(index)
        markers = [marker for marker in stop or [] if marker]

        repeat_ngram = self.repeat_ngram

        def stop_hit(tokens: list[int]) -> bool:
            text = tokenizer.decode(tokens, skip_special_tokens=True)
            if any(marker in text for marker in markers):
                return True
            return repeat_ngram is not None and repetition_start(text, repeat_ngram) is not None

        eos = self.weights.model.generation_config.eos_token_id
        eos_ids = {tokenizer.eos_token_id} if eos is None else set(eos if isinstance(eos, list) else [eos])
        order = sorted(runnable, key=lambda i: len(encoded[i]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            with self.weights.lock:
                decoded = decode_batch(
                    self.weights.model, [encoded[i] for i in batch], max_new_tokens=max_tokens, eos_ids=eos_ids,
                    pad_id=self._pad_id, temperature=temperature,
                    stop_hit=stop_hit if markers or repeat_ngram is not None else None,
                    device=self.device, row_done=lambda _row: progress.tick(),
                )  # fmt: skip
            prompt_total = sum(len(encoded[i]) for i in batch)
            decode_total = decoded.decode_tokens
            for index, row in zip(batch, decoded.rows):
                text, finish_reason = self._answer_text(row.tokens, row.finish_reason, markers)
                completion_tokens = len(row.tokens) + (row.finish_reason == "eos")
                prefill_s = decoded.prefill_s * len(encoded[index]) / prompt_total
                decode_s = decoded.decode_s * (completion_tokens - 1) / decode_total if decode_total else 0.0
                results[index] = LLMResponse(
                    text=text,
                    prompt_tokens=len(encoded[index]),
                    completion_tokens=completion_tokens,
                    cached=False,
                    model=self.model_id,
                    latency_s=prefill_s + decode_s,
                    finish_reason=finish_reason,
                    prefill_s=prefill_s,
                    decode_s=decode_s,
                )
        return results

    def _answer_text(self, tokens: list[int], finish_reason: str, markers: list[str]) -> tuple[str, str]:
        """The answer of a decoded row and why it ended (:func:`~ragexp.llm.answer_end.final_cut`:
        the stop strings, then a repetition the answer's end makes once it counts as complete)."""
        return final_cut(self.weights.tokenizer.decode(tokens, skip_special_tokens=True), markers, self.repeat_ngram,
                         finish_reason)

    def logprob(self, prefix: str, continuation: str) -> float:
        return self.logprobs([(prefix, continuation)])[0]

    def logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """``sum_t log p(c_t | prefix, c_<t)`` in nats for each pair, on raw text (no chat template).

        The continuation tokens are those of ``tokens(prefix + continuation)`` after the first
        ``len(tokens(prefix))``, so word boundaries tokenize as in running text. An empty prefix
        is conditioned on the BOS (or EOS) token. Prefixes too long for the model keep their end.
        Pairs that share their conditioning tokens share one pass over them
        (:func:`~ragexp.llm.prefix_scoring.score_pairs`).
        """
        self.threads = recheck_threads(self.threads_setting)
        prefix_tokens: dict[str, list[int]] = {}
        encoded = [self._encode_pair(prefix, continuation, prefix_tokens) for prefix, continuation in pairs]
        record(self.model_id, sum(len(whole) for whole, _ in encoded))  # scored, not generated: prompt tokens only
        with self.weights.lock:
            return score_pairs(self.weights.model, encoded, pad_id=self._pad_id, batch_size=self.batch_size, device=self.device)

    def _encode_pair(self, prefix: str, continuation: str, prefix_tokens: dict[str, list[int]]) -> tuple[list[int], int]:
        tokenizer = self.weights.tokenizer
        if prefix not in prefix_tokens:
            prefix_tokens[prefix] = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        context = prefix_tokens[prefix]
        whole = tokenizer(prefix + continuation, add_special_tokens=False)["input_ids"]
        if not context:
            context, whole = [self._start_id], [self._start_id, *whole]
        n_context = len(context)
        limit = self.max_positions
        if limit is not None and len(whole) > limit:
            cut = len(whole) - limit
            if cut >= n_context:
                raise LLMCallError("input_too_long", f"continuation alone exceeds {limit} positions")
            whole, n_context = whole[cut:], n_context - cut
        return whole, n_context
