"""Answer correctness against the gold answer: SQuAD v1.1 EM/F1, key-fact recall, refusals.

Formulas (identical to the official SQuAD v1.1 ``evaluate-v1.1.py``)
---------------------------------------------------------------------
- ``normalize_answer(s)``: lowercase, drop every ``string.punctuation`` character, drop the
  articles ``a|an|the`` (whole words), collapse whitespace.
- ``exact_match(p, g) = 1 if normalize_answer(p) == normalize_answer(g) else 0``.
- ``f1(p, g)``: over normalised tokens, ``common = |tokens(p) ∩ tokens(g)|`` (multiset),
  ``precision = common / |tokens(p)|``, ``recall = common / |tokens(g)|``,
  ``f1 = 2 * precision * recall / (precision + recall)``; 0 when ``common == 0``.
- With several acceptable answers the score is the maximum over them
  (``metric_max_over_ground_truths``). A corpus score is the mean over questions, x100 in SQuAD's
  reporting.

Beyond SQuAD
------------
- ``key_fact_recall(answer, facts) = |{f : normalize(f) occurs in normalize(answer)}| / |facts|``,
  containment on whole normalised tokens (``"24 hours"`` is found in ``"for 24 hours"``, not in
  ``"124 hours"``); ``None`` when there are no key facts.
- ``is_refusal(answer)``: the answer matches one of :data:`REFUSAL_PATTERNS` (or the caller's
  own patterns), or is empty. An empty answer asserts nothing, so it counts as a refusal.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

_REMOVE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")

REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bi (?:do not|don't|cannot|can't|could not|couldn't) (?:know|find|say|tell|answer|determine)\b",
    r"\bi(?:'m| am) (?:not sure|unable|not able)\b",
    r"\b(?:not|isn't|is not|no information) (?:\w+ ){0,3}(?:mentioned|stated|specified|provided|covered|given|available)"
    r" in the (?:context|documentation|docs|provided|passages?|documents?|sources?)\b",
    r"\b(?:the )?(?:context|documentation|docs|passages?|documents?|sources?) (?:provided )?"
    r"(?:does not|doesn't|do not|don't) (?:contain|mention|say|specify|state|provide|include|cover)\b",
    r"\bno (?:relevant )?information (?:about|on|regarding)\b",
    r"\b(?:cannot|can't|unable to) (?:be )?(?:answer|answered|determine|determined|find|found)\b",
    r"\bnot enough information\b",
    r"\binsufficient (?:information|context)\b",
)
"""Default refusal patterns, matched case-insensitively anywhere in the answer."""


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lowercase, remove punctuation, articles and extra whitespace."""
    text = text.lower().translate(_REMOVE_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Token F1 between normalised prediction and gold (multiset overlap)."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_gold(metric: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    """``max(metric(prediction, g) for g in golds)``; a question needs at least one gold answer."""
    if not golds:
        raise ValueError("max_over_gold needs at least one gold answer")
    return max(metric(prediction, gold) for gold in golds)


def exact_match_max(prediction: str, golds: Sequence[str]) -> float:
    return max_over_gold(exact_match, prediction, golds)


def f1_max(prediction: str, golds: Sequence[str]) -> float:
    return max_over_gold(f1, prediction, golds)


def key_fact_recall(answer: str, key_facts: Sequence[str]) -> float | None:
    """Share of key facts whose normalised text occurs, on token boundaries, in the answer."""
    if not key_facts:
        return None
    haystack = f" {normalize_answer(answer)} "
    found = sum(1 for fact in key_facts if f" {normalize_answer(fact)} " in haystack)
    return found / len(key_facts)


def compile_refusal_patterns(patterns: Iterable[str] | None = None) -> list[re.Pattern[str]]:
    """Compile ``patterns`` (default :data:`REFUSAL_PATTERNS`) case-insensitively."""
    return [re.compile(p, re.IGNORECASE) for p in (REFUSAL_PATTERNS if patterns is None else patterns)]


_DEFAULT_REFUSALS = compile_refusal_patterns()


def is_refusal(answer: str, patterns: Sequence[re.Pattern[str]] | None = None) -> bool:
    """True when the answer is empty or matches a refusal pattern (curly quotes read as ``'``)."""
    text = answer.replace("\u2019", "'").strip()
    if not text:
        return True
    return any(p.search(text) for p in (_DEFAULT_REFUSALS if patterns is None else patterns))


def correctness_metrics(
    answer: str,
    reference_answers: Sequence[str],
    key_facts: Sequence[str],
    refusal_patterns: Sequence[re.Pattern[str]] | None = None,
) -> dict[str, float]:
    """Per-query correctness metrics; a metric without gold to compare against is absent.

    Returns ``exact_match`` and ``f1`` (max over ``reference_answers``), ``key_fact_recall`` and
    ``refused`` (1.0 / 0.0).
    """
    metrics: dict[str, float] = {"refused": float(is_refusal(answer, refusal_patterns))}
    if reference_answers:
        metrics["exact_match"] = exact_match_max(answer, reference_answers)
        metrics["f1"] = f1_max(answer, reference_answers)
    recall = key_fact_recall(answer, key_facts)
    if recall is not None:
        metrics["key_fact_recall"] = recall
    return metrics
