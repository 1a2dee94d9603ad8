"""Language-model access: the :class:`ChatModel` contract, an OpenAI-compatible HTTP client
(:mod:`ragexp.llm.openai_compat`), a local transformers model incl. GGUF
(:mod:`ragexp.llm.local_hf`, imports torch), a per-call disk cache (:mod:`ragexp.llm.call_cache`)
and models from config (:func:`ragexp.llm.chat_models.build_chat_model`).

This package exports only the light contracts.
"""

from ragexp.llm.base import (
    FAILURE_KINDS,
    ChatModel,
    LLMCallError,
    LLMResponse,
    Prompt,
    ScoringModel,
    as_messages,
)

__all__ = ["FAILURE_KINDS", "ChatModel", "LLMCallError", "LLMResponse", "Prompt", "ScoringModel", "as_messages"]
