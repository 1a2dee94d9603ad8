"""Prompted generation through any :class:`~ragexp.llm.base.ChatModel`.

The prompt is ``prompt_template`` with ``{context}`` replaced by the chunks it is given (the first
``context_k`` of them when set) (see :func:`~ragexp.data.context.format_context`) and ``{query}`` by the
question; it is sent as one user message, greedy (temperature 0), and the answer ends at the
model's end-of-turn token, at ``max_new_tokens``, or before the first ``stop`` string (by
default a blank line or ``Question:``, where a rambling model starts a new question-answer
pair). An answer cut off (at ``max_new_tokens``, or where a local model with ``repeat_ngram``
found it repeating itself) ends after its last whole sentence when ``end_at_sentence`` is on
(the default; :func:`~ragexp.llm.answer_end.end_at_sentence`).
:meth:`LLMGenerator.generate_batch` sends many prompts at once (local models decode them
in batches; HTTP endpoints get one request each). Model calls are cached under
the runner's cache root (``<root>/llm_calls``), keyed by model, prompt version and template
hash, the full prompt and the decoding settings, so a re-run makes no model calls.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ragexp.data.context import format_context
from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.llm.answer_end import end_at_sentence
from ragexp.llm.base import ChatModel, LLMCallError, LLMResponse, complete_all, refused_by_endpoint
from ragexp.llm.call_cache import CallCache
from ragexp.llm.chat_models import build_chat_model
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.generators.base import (
    REFUSAL_ANSWER,
    Generation,
)

GROUNDED_QA_TEMPLATE = (
    "Answer the question using only the context below. Be concise: one or two sentences.\n"
    f'If the context does not contain the answer, reply exactly: "{REFUSAL_ANSWER}"\n\n'
    "Context:\n{context}\n\n"
    "Question: {query}\n"
    "Answer:"
)
PLACEHOLDERS = ("{context}", "{query}")
DEFAULT_STOP = ("\n\n", "Question:")
CUT_OFF = ("length", "repetition", "degenerate")
"""Finish reasons of an answer that did not end by itself."""


class LLMGenerator:
    """``model``: a built :class:`ChatModel` or a config mapping for
    :func:`ragexp.llm.chat_models.build_chat_model`. ``cache``: the runner's stage cache; model calls
    are cached beneath its root (only for models built here from a mapping)."""

    def __init__(
        self,
        model: Mapping[str, Any] | ChatModel,
        prompt_template: str = GROUNDED_QA_TEMPLATE,
        max_new_tokens: int = 128,
        context_k: int | None = None,
        prompt_version: str = "v1",
        stop: Sequence[str] = DEFAULT_STOP,
        end_at_sentence: bool = True,
        cache: StageCache | None = None,
    ) -> None:
        missing = [p for p in PLACEHOLDERS if p not in prompt_template]
        if missing:
            raise RagexpInputError(f"the template lacks {' and '.join(missing)}", field="prompt_template")
        if context_k is not None and context_k < 1:
            raise RagexpInputError(f"must be >= 1, got {context_k}", field="context_k")
        if max_new_tokens < 1:
            raise RagexpInputError(f"must be >= 1, got {max_new_tokens}", field="max_new_tokens")
        self.prompt_template = prompt_template
        self.template_sha256 = hashlib.sha256(prompt_template.encode("utf-8")).hexdigest()
        self.prompt_version = prompt_version
        self.max_new_tokens = int(max_new_tokens)
        self.context_k = None if context_k is None else int(context_k)
        if isinstance(stop, str) or not all(isinstance(marker, str) and marker for marker in stop):
            raise RagexpInputError(f"must be a list of non-empty strings, got {stop!r}", field="stop")
        self.stop = list(stop)
        if not isinstance(end_at_sentence, bool):
            raise RagexpInputError(f"must be true or false, got {end_at_sentence!r}", field="end_at_sentence")
        self.end_at_sentence = end_at_sentence
        if isinstance(model, Mapping):
            call_cache = None
            if cache is not None:
                call_cache = CallCache(cache.root / "llm_calls", template=f"{prompt_version}:{self.template_sha256[:16]}")
            self.model = build_chat_model(model, call_cache)
        elif isinstance(model, ChatModel):
            self.model = model
        else:
            raise RagexpInputError(f"expected a model config mapping or a ChatModel, got {type(model).__name__}", field="model")

    @property
    def params(self) -> dict[str, Any]:
        return {
            "type": "llm",
            "model_id": self.model.model_id,
            "prompt_version": self.prompt_version,
            "prompt_template_sha256": self.template_sha256,
            "max_new_tokens": self.max_new_tokens,
            "context_k": self.context_k,
            "stop": self.stop,
            "end_at_sentence": self.end_at_sentence,
        }

    def _answer(self, response: LLMResponse) -> str:
        """The response's text, stripped; a cut-off one up to its last whole sentence."""
        if self.end_at_sentence and response.finish_reason in CUT_OFF:
            return end_at_sentence(response.text)
        return response.text.strip()

    def build_prompt(self, query: str, contexts: Sequence[Chunk]) -> str:
        # one pass over the template, so braces inside the context or query are never re-read
        context_part, query_part = self.prompt_template.split("{context}", 1)
        return context_part.replace("{query}", query) + format_context(contexts[: self.context_k]) + query_part.replace(
            "{query}", query
        )

    def generate(self, query: str, contexts: Sequence[Chunk]) -> Generation:
        return self.generate_batch([(query, contexts)])[0]

    def generate_batch(self, requests: Sequence[tuple[str, Sequence[Chunk]]]) -> list[Generation]:
        """One :class:`Generation` per ``(query, contexts)``; the prompts go to the model together
        (:func:`~ragexp.llm.base.complete_all`), a failed call is recorded in its generation."""
        shown = [list(contexts[: self.context_k]) for _, contexts in requests]
        prompts = [self.build_prompt(query, chunks) for (query, _), chunks in zip(requests, shown)]
        started = time.perf_counter()
        responses = complete_all(self.model, prompts, max_tokens=self.max_new_tokens, temperature=0.0, stop=self.stop)
        refused = refused_by_endpoint(responses)
        if refused is not None:
            raise RagexpInputError(f"the model endpoint refused all {len(responses)} calls: {refused}", field="generator.model")
        elapsed = time.perf_counter() - started
        generations = []
        for prompt, chunks, response in zip(prompts, shown, responses):
            context_ids = tuple(chunk.id for chunk in chunks)
            if isinstance(response, LLMCallError):
                failed = Generation(
                    answer="", prompt=prompt, model_id=self.model.model_id, latency_s=elapsed / len(prompts),
                    error=f"{response.kind}: {response}", context_ids=context_ids,
                )  # fmt: skip
                generations.append(failed)
                continue
            generations.append(
                Generation(
                    answer=self._answer(response),
                    prompt=prompt,
                    model_id=self.model.model_id,
                    prompt_tokens=response.prompt_tokens,
                    completion_tokens=response.completion_tokens,
                    latency_s=response.latency_s,
                    cached=response.cached,
                    context_ids=context_ids,
                    finish_reason=response.finish_reason,
                    prefill_s=response.prefill_s,
                    decode_s=response.decode_s,
                )
            )
        return generations
