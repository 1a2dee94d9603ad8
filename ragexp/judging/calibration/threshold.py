"""Fit a judge's verdict threshold to human labels, and cross-validate the fit.

A judge with a continuous support score ``s`` calls a claim supported iff ``s >= t``.

Fit rule (:func:`fit_threshold`): the candidates are the midpoints between consecutive distinct
scores of the fitting rows (every other threshold gives the same verdicts as one of them); the
chosen candidates are those with the highest Cohen's kappa against the human labels (undefined
kappa ranks lowest). Adjacent chosen candidates form a run, the span from the lowest score
below the run to the highest score above it; the widest run wins (a threshold far from every
fitting score moves least on new data), the lower one on equal width, and the threshold is the
middle of its span.

Cross-validation (:func:`cross_validate`): rows are assigned to ``folds`` folds grouped by
``groups`` (all claims about one passage land in one fold, so no passage is both fitted and
scored) and stratified by label where the groups allow (scikit-learn's ``StratifiedGroupKFold``,
shuffled with ``seed``). Each fold is scored with the threshold fitted on the other folds; the
reported accuracy and kappa are pooled over all out-of-fold verdicts, with each fold's numbers
for the spread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ragexp.judging.calibration.labels import (
    LABELS,
    NOT_SUPPORTED,
    SUPPORTED,
    cohen_kappa,
)

_TIE = 1e-12


def verdicts_at(scores: Sequence[float], threshold: float) -> list[str]:
    """The labels a judge with this threshold gives: ``supported`` iff ``score >= threshold``."""
    return [SUPPORTED if s >= threshold else NOT_SUPPORTED for s in scores]


def accuracy(human: Sequence[str], judge: Sequence[str]) -> float:
    return sum(h == j for h, j in zip(human, judge)) / len(human)


def fit_threshold(scores: Sequence[float], labels: Sequence[str]) -> float:
    """The threshold the fit rule (module docstring) picks; needs two distinct scores."""
    distinct = sorted(set(scores))
    if len(distinct) < 2:
        raise ValueError("all scores are equal: no threshold separates them")
    candidates = [(lo + hi) / 2 for lo, hi in pairwise(distinct)]
    kappas = [_rank_value(cohen_kappa(labels, verdicts_at(scores, t))) for t in candidates]
    best = max(kappas)
    runs: list[tuple[int, int]] = []  # (first, last) candidate index of each run of best candidates
    for index, kappa in enumerate(kappas):
        if kappa < best - _TIE:
            continue
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    first, last = max(runs, key=lambda run: (distinct[run[1] + 1] - distinct[run[0]], -run[0]))
    return (distinct[first] + distinct[last + 1]) / 2


def _rank_value(kappa: float | None) -> float:
    return float("-inf") if kappa is None else kappa


def assign_folds(labels: Sequence[str], groups: Sequence[str], folds: int, seed: int) -> list[int]:
    """Fold index (0..folds-1) of every row: grouped by ``groups``, stratified by ``labels``."""
    from sklearn.model_selection import StratifiedGroupKFold

    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    assignment = [-1] * len(labels)
    for fold, (_, test) in enumerate(splitter.split(list(range(len(labels))), list(labels), list(groups))):
        for row in test:
            assignment[row] = fold
    return assignment


@dataclass(frozen=True)
class FoldResult:
    fold: int
    n: int
    threshold: float
    accuracy: float
    kappa: float | None


@dataclass(frozen=True)
class CrossValidation:
    """Pooled out-of-fold agreement of the fitting procedure, and each fold's."""

    folds: int
    seed: int
    accuracy: float
    kappa: float | None
    per_fold: list[FoldResult]
    fold_of_row: list[int]


def cross_validate(
    scores: Sequence[float], labels: Sequence[str], groups: Sequence[str], folds: int, seed: int
) -> CrossValidation:
    """Out-of-fold verdicts of :func:`fit_threshold` (module docstring)."""
    fold_of_row = assign_folds(labels, groups, folds, seed)
    predicted = [""] * len(scores)
    per_fold = []
    for fold in range(folds):
        train = [i for i, f in enumerate(fold_of_row) if f != fold]
        test = [i for i, f in enumerate(fold_of_row) if f == fold]
        threshold = fit_threshold([scores[i] for i in train], [labels[i] for i in train])
        fold_verdicts = verdicts_at([scores[i] for i in test], threshold)
        fold_labels = [labels[i] for i in test]
        for i, verdict in zip(test, fold_verdicts):
            predicted[i] = verdict
        per_fold.append(
            FoldResult(fold, len(test), threshold, accuracy(fold_labels, fold_verdicts), cohen_kappa(fold_labels, fold_verdicts))
        )
    return CrossValidation(folds, seed, accuracy(labels, predicted), cohen_kappa(labels, predicted), per_fold, fold_of_row)


def baselines(labels: Sequence[str]) -> dict[str, float | str]:
    """Accuracy of the trivial judges (kappa 0 by definition): always ``supported``, and always
    the majority label (``supported`` on a tie)."""
    counts = Counter(labels)
    majority = max(LABELS, key=lambda label: (counts[label], label == SUPPORTED))
    return {
        "always_supported_accuracy": counts[SUPPORTED] / len(labels),
        "majority_label": majority,
        "majority_accuracy": counts[majority] / len(labels),
    }
