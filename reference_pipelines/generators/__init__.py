"""Generators: a query and the retrieved chunks in, one answer out.

- :class:`~reference_pipelines.generators.llm.LLMGenerator`: prompted generation via any chat model.
- :class:`~reference_pipelines.generators.extractive.ExtractiveGenerator`: no model; the best
  matching context sentences, or a refusal.
"""

from reference_pipelines.generators.base import (
    REFUSAL_ANSWER,
    Generation,
    Generator,
)

__all__ = ["REFUSAL_ANSWER", "Generation", "Generator"]
