"""Failure classes: where a query went wrong — retrieval or generation — never one blended score.

Truth table (first matching row wins; thresholds in :class:`FailureThresholds`)
--------------------------------------------------------------------------------
Answerable items:

==================  ======================================  ======================
gold in context?    answer                                  class
==================  ======================================  ======================
no                  anything (even a lucky correct one)     ``retrieval_failure``
yes / unknown       refused                                 ``generation_failure``
yes / unknown       incorrect or unfaithful                 ``generation_failure``
yes / unknown       correct and faithful                    ``ok``
==================  ======================================  ======================

- *gold in context*: at least one chunk the generator saw is relevant (its grade in the chunk
  qrels derived from the item's evidence is, :func:`ragexp.datamodel.is_relevant`); *unknown*
  when the item has no evidence.
- *incorrect*: the item's correctness signal is below its threshold. The signal is
  ``key_fact_recall`` when the item has key facts (written for free-form answers), else token
  ``f1`` against the reference answers; with neither, correctness is not checked.
- *unfaithful*: faithfulness is defined and below ``min_faithfulness`` (undefined faithfulness
  does not make an answer unfaithful).

Unanswerable items: ``unanswerable_ok`` when the answer is a refusal, else ``hallucinated``.

Any item whose generator call failed (an error after retries: no answer at all) is a
``generation_error``, first: it is neither a retrieval nor a generation failure, and an empty
answer must not pass as a correct refusal.

Run rates: each answerable class over the answerable items that got an answer, each
unanswerable class over the unanswerable items that got one (absent when there are none),
``generation_error_rate`` over all items, plus a count per class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from ragexp.datamodel import is_relevant


class FailureClass(str, Enum):
    OK = "ok"
    RETRIEVAL_FAILURE = "retrieval_failure"
    GENERATION_FAILURE = "generation_failure"
    UNANSWERABLE_OK = "unanswerable_ok"
    HALLUCINATED = "hallucinated"
    GENERATION_ERROR = "generation_error"


ANSWERABLE_CLASSES = (FailureClass.OK, FailureClass.RETRIEVAL_FAILURE, FailureClass.GENERATION_FAILURE)
UNANSWERABLE_CLASSES = (FailureClass.UNANSWERABLE_OK, FailureClass.HALLUCINATED)


@dataclass(frozen=True)
class FailureThresholds:
    """An answer is correct when its signal reaches ``min_f1`` / ``min_key_fact_recall``, and
    faithful when faithfulness reaches ``min_faithfulness`` (all inclusive)."""

    min_f1: float = 0.5
    min_key_fact_recall: float = 0.5
    min_faithfulness: float = 0.5


def gold_in_context(context_chunk_ids: Iterable[str], relevant: Mapping[str, int]) -> bool | None:
    """Whether any chunk the generator saw has a relevant grade in ``relevant`` (one item's chunk
    qrels, ``{unit id: grade}``); ``None`` when there is no qrel at all."""
    if not relevant:
        return None
    return any(chunk_id in relevant and is_relevant(relevant[chunk_id]) for chunk_id in context_chunk_ids)


def classify(
    *,
    answerable: bool,
    refused: bool,
    gold_in_context: bool | None = None,
    f1: float | None = None,
    key_fact_recall: float | None = None,
    faithfulness: float | None = None,
    thresholds: FailureThresholds = FailureThresholds(),
    generation_failed: bool = False,
) -> FailureClass:
    """The failure class of one query (see the module's truth table)."""
    if generation_failed:
        return FailureClass.GENERATION_ERROR
    if not answerable:
        return FailureClass.UNANSWERABLE_OK if refused else FailureClass.HALLUCINATED
    if gold_in_context is False:
        return FailureClass.RETRIEVAL_FAILURE
    if refused:
        return FailureClass.GENERATION_FAILURE
    if key_fact_recall is not None:
        correct = key_fact_recall >= thresholds.min_key_fact_recall
    elif f1 is not None:
        correct = f1 >= thresholds.min_f1
    else:
        correct = True
    faithful = faithfulness is None or faithfulness >= thresholds.min_faithfulness
    return FailureClass.OK if correct and faithful else FailureClass.GENERATION_FAILURE


def failure_rates(classes: Iterable[FailureClass]) -> dict[str, float]:
    """``n_<class>`` for every class and ``<class>_rate`` over its item kind (answerable or not)."""
    counts = Counter(FailureClass(c) for c in classes)
    out = {f"n_{c.value}": float(counts[c]) for c in FailureClass}
    for group in (ANSWERABLE_CLASSES, UNANSWERABLE_CLASSES):
        total = sum(counts[c] for c in group)
        if total:
            out.update({f"{c.value}_rate": counts[c] / total for c in group})
    total = sum(counts.values())
    if total:
        out["generation_error_rate"] = counts[FailureClass.GENERATION_ERROR] / total
    return out
