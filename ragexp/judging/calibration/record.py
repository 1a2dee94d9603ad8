"""A judge's calibration file: its threshold fitted on human labels, and how well it agrees.

``ragexp judge calibrate`` writes it (:func:`calibrate_threshold` for a judge with a continuous
score and a threshold, :func:`measure_agreement` for a judge that only says yes or no, such as
an LLM judge: nothing is fitted, so its plain agreement is already an honest estimate). A judge
built with ``calibration=PATH`` loads it with :func:`load_calibration`, which refuses a file
fitted for another judge (kind, method, model). JSON layout::

    {"format": "ragexp-judge-calibration/1",
     "judge": {"kind": "lexical", "model_id": "lexical"},
     "threshold": 0.583,                 # null for a judge without one
     "labels": {"set": "calibration", "file": "calibration.csv", "sha256": "..."},
     "n": 72, "label_counts": {"supported": 36, "not_supported": 36}, "n_unscored": 0, "n_unlabelled": 0,
     "estimate": "5-fold cross-validation grouped by context", "folds": 5, "seed": 0,
     "accuracy": 0.61, "kappa": 0.22,    # out-of-fold (or plain agreement when nothing is fitted)
     "per_fold": [{"fold": 0, "n": 15, "threshold": 0.6, "accuracy": 0.6, "kappa": 0.2}, ...],
     "in_sample": {"accuracy": 0.68, "kappa": 0.36},   # the fitted threshold on all n rows: optimistic
     "baselines": {"always_supported_accuracy": 0.5, "majority_label": "supported", "majority_accuracy": 0.5},
     "created": "2026-...Z", "ragexp_version": "0.1.0"}

:func:`judge_run_record` is what a run logs about its judge, with :func:`judge_warning`'s plain
sentence when the judge is uncalibrated or its kappa is below :data:`MIN_KAPPA`, and the judge's
:func:`judge_key`: what a human review of the judge is filed under (model + prompt + threshold).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragexp import __version__
from ragexp.errors import RagexpInputError
from ragexp.judging.calibration.labels import (
    LABELS,
    LabelledClaim,
    agreement,
    cohen_kappa,
)
from ragexp.judging.calibration.threshold import accuracy as accuracy_of
from ragexp.judging.calibration.threshold import (
    baselines,
    cross_validate,
    fit_threshold,
    verdicts_at,
)
from ragexp.runtime.atomic_file import atomic_write
from ragexp.runtime.fingerprint import file_hash
from ragexp.stored.limits import parse_json, read_text

FORMAT = "ragexp-judge-calibration/1"
#: Below this Cohen's kappa a run warns that faithfulness comes from a weakly agreeing judge
#: (0.41 starts "moderate" agreement on the Landis & Koch scale).
MIN_KAPPA = 0.4
#: Fewest scored, labelled rows a calibration accepts (per fold: at least two).
MIN_ROWS_PER_FOLD = 2


@dataclass
class JudgeCalibration:
    judge: dict[str, str]
    threshold: float | None
    labels: dict[str, str]
    n: int
    label_counts: dict[str, int]
    n_unscored: int
    n_unlabelled: int
    estimate: str
    folds: int | None
    seed: int | None
    accuracy: float
    kappa: float | None
    per_fold: list[dict] = field(default_factory=list)
    in_sample: dict[str, float | None] = field(default_factory=dict)
    baselines: dict[str, float | str] = field(default_factory=dict)
    created: str = ""
    ragexp_version: str = __version__

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    def render(self) -> str:
        lines = [
            f"judge: {describe_identity(self.judge)}",
            (f"labels: {self.labels['file']} (set {self.labels['set']!r}, sha256 {self.labels['sha256'][:12]}): "
             f"n={self.n} ({', '.join(f'{k} {v}' for k, v in self.label_counts.items())}), "
             f"unscored {self.n_unscored}, unlabelled {self.n_unlabelled}"),
        ]
        if self.threshold is not None:
            lines.append(f"fitted threshold on all {self.n} rows: {self.threshold:.6g} "
                         "(supported iff score >= threshold; maximises Cohen's kappa)")
        lines.append(f"{self.estimate}: accuracy {self.accuracy:.3f}, Cohen's kappa {_fmt(self.kappa)}")
        if self.per_fold:
            kappas = [f["kappa"] for f in self.per_fold if f["kappa"] is not None]
            accuracies = [f["accuracy"] for f in self.per_fold]
            lines.append(f"  per fold: accuracy {min(accuracies):.3f}..{max(accuracies):.3f}, kappa "
                         + (f"{min(kappas):.3f}..{max(kappas):.3f}" if kappas else "undefined")
                         + "; fold thresholds " + ", ".join(f"{fold['threshold']:.4g}" for fold in self.per_fold))
        if self.in_sample:
            lines.append(f"in-sample (threshold fitted on the rows it is scored on, optimistic): accuracy "
                         f"{self.in_sample['accuracy']:.3f}, kappa {_fmt(self.in_sample['kappa'])}")
        b = self.baselines
        lines.append(f"baselines (kappa 0): always supported {b['always_supported_accuracy']:.3f}, "
                     f"majority ({b['majority_label']}) {b['majority_accuracy']:.3f}")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def describe_identity(identity: dict[str, str]) -> str:
    """``lexical model_id=lexical``, ``local_likelihood method=pmi model_id=smollm2-135m@...``."""
    return " ".join([identity.get("kind", "?"), *(f"{k}={v}" for k, v in identity.items() if k != "kind")])


def _labels_meta(labels_path: str | Path, set_name: str | None) -> dict[str, str]:
    path = Path(labels_path)
    return {"set": set_name or path.stem, "file": path.name, "sha256": file_hash(path)}


def check_calibration_set(rows: Sequence[LabelledClaim], labels_path: str | Path, folds: int | None) -> None:
    """Refuse (one line) a set that cannot be fitted and cross-validated: a single label, fewer
    than :data:`MIN_ROWS_PER_FOLD` rows per fold, fewer distinct contexts than folds. ``rows`` are
    the labelled rows in use; ``folds`` is ``None`` when nothing is fitted."""
    if folds is not None and folds < 2:
        raise RagexpInputError("must be at least 2", field="--folds")
    counts = Counter(row.human_label for row in rows)
    if len(counts) < 2:
        raise RagexpInputError(f"needs both labels ({' and '.join(LABELS)}) among the judged rows, got "
                               f"{dict(counts) or 'none'}", file=labels_path, field="human_label")
    if folds is None:
        return
    if len(rows) < MIN_ROWS_PER_FOLD * folds:
        raise RagexpInputError(f"{len(rows)} labelled, scored rows are too few for {folds} folds "
                               f"(need at least {MIN_ROWS_PER_FOLD * folds})", file=labels_path)
    contexts = len({row.context for row in rows})
    if contexts < folds:
        raise RagexpInputError(f"{contexts} distinct contexts cannot fill {folds} folds grouped by context",
                               file=labels_path, field="--folds")


def _usable(rows: Sequence[LabelledClaim], values: Sequence[Any], labels_path: str | Path, folds: int | None) -> list[int]:
    """Indices of rows with a human label and a value, checked by :func:`check_calibration_set`."""
    usable = [i for i, (row, value) in enumerate(zip(rows, values)) if row.human_label and value not in (None, "")]
    check_calibration_set([rows[i] for i in usable], labels_path, folds)
    return usable


def calibrate_threshold(
    rows: Sequence[LabelledClaim],
    scores: Sequence[float | None],
    identity: dict[str, str],
    labels_path: str | Path,
    *,
    folds: int = 5,
    seed: int = 0,
    set_name: str | None = None,
) -> JudgeCalibration:
    """Fit the threshold on every labelled, scored row and cross-validate that fit, grouping
    folds by context (``threshold_fit``). ``scores[i]`` is ``None`` where the judge could not
    score row ``i`` (counted as ``n_unscored``)."""
    usable = _usable(rows, scores, labels_path, folds)
    groups = [rows[i].context for i in usable]
    labels = [rows[i].human_label for i in usable]
    values = [float(scores[i]) for i in usable]
    if len(set(values)) < 2:
        raise RagexpInputError("the judge gave every row the same score: no threshold separates them", file=labels_path)
    threshold = fit_threshold(values, labels)
    cv = cross_validate(values, labels, groups, folds, seed)
    fitted = verdicts_at(values, threshold)
    return JudgeCalibration(
        judge=dict(identity),
        threshold=threshold,
        labels=_labels_meta(labels_path, set_name),
        n=len(usable),
        label_counts={label: labels.count(label) for label in LABELS},
        n_unscored=sum(1 for row, s in zip(rows, scores) if row.human_label and s is None),
        n_unlabelled=sum(1 for row in rows if not row.human_label),
        estimate=f"{folds}-fold cross-validation grouped by context",
        folds=folds,
        seed=seed,
        accuracy=cv.accuracy,
        kappa=cv.kappa,
        per_fold=[asdict(f) for f in cv.per_fold],
        in_sample={"accuracy": accuracy_of(labels, fitted), "kappa": cohen_kappa(labels, fitted)},
        baselines=baselines(labels),
        created=_now(),
    )


def measure_agreement(
    rows: Sequence[LabelledClaim], identity: dict[str, str], labels_path: str | Path, *, set_name: str | None = None
) -> JudgeCalibration:
    """The calibration of a judge without a threshold: its plain agreement with the human labels
    (rows' ``judge_label`` filled by running it); a failed verdict counts as unscored."""
    usable = _usable(rows, [row.judge_label or None for row in rows], labels_path, None)
    report = agreement([rows[i] for i in usable])
    labels = [rows[i].human_label for i in usable]
    return JudgeCalibration(
        judge=dict(identity),
        threshold=None,
        labels=_labels_meta(labels_path, set_name),
        n=report.n,
        label_counts={label: labels.count(label) for label in LABELS},
        n_unscored=report.n_judge_failures,
        n_unlabelled=report.n_unlabelled,
        estimate="agreement (nothing fitted)",
        folds=None,
        seed=None,
        accuracy=report.accuracy,
        kappa=report.kappa,
        baselines=baselines(labels),
        created=_now(),
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: A calibration record is a few hundred bytes; a larger file is not one (bounded before it is read).
MAX_CALIBRATION_BYTES = 1024 * 1024


def read_calibration(path: str | Path, score_range: tuple[float, float] | None = None) -> JudgeCalibration:
    """A calibration file through the gate (bounded bytes, strict JSON, the record's fields, its
    numbers finite and in range: ``threshold`` within ``score_range`` when given), for any judge.
    Runs check this before any model is built (:func:`ragexp.evaluation.checks.check_job`)."""
    path = Path(path)
    try:
        data = parse_json(read_text(path, max_bytes=MAX_CALIBRATION_BYTES), source=path, allow_nan=True)
    except RagexpInputError as err:
        message = "no such judge calibration file" if err.message == "no such file" else err.message
        raise RagexpInputError(message, file=path, field="calibration") from None
    if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
        raise RagexpInputError(f"not a judge calibration file (expected format {FORMAT!r}; write one with "
                               "ragexp judge calibrate)", file=path, field="calibration")
    try:
        calibration = JudgeCalibration(**data)
    except TypeError as err:
        raise RagexpInputError(f"malformed judge calibration file ({err})", file=path, field="calibration") from None
    check_number(calibration.accuracy, "accuracy", 0.0, 1.0, path)
    if calibration.kappa is not None:  # undefined (null) when the labels are all one class
        check_number(calibration.kappa, "kappa", -1.0, 1.0, path)
    if calibration.threshold is not None:
        low, high = score_range or (None, None)
        check_number(calibration.threshold, "threshold", low, high, path)
    return calibration


def load_calibration(path: str | Path, identity: dict[str, str],
                     score_range: tuple[float, float] | None = None) -> JudgeCalibration:
    """:func:`read_calibration`, and the judge it was fitted for is the judge whose
    :meth:`identity` is ``identity`` (else refused, naming both judges)."""
    calibration = read_calibration(path, score_range)
    if calibration.judge != identity:
        raise RagexpInputError(f"fitted for judge {describe_identity(calibration.judge)}, but the configured judge is "
                               f"{describe_identity(identity)}", file=path, field="calibration")
    return calibration


def judge_warning(record: dict) -> str | None:
    """The plain sentence a run prints and tags when its faithfulness judge is uncalibrated or
    agrees weakly with human labels; ``None`` otherwise."""
    judge = describe_identity(record["identity"])
    calibration = record.get("calibration")
    if calibration is None:
        source = {"default": "its shipped default threshold", "config": "a threshold set by hand"}.get(
            record.get("threshold_source"), "agreement never measured")
        return (f"faithfulness comes from an uncalibrated judge ({judge}, {source}): how well it agrees with "
                "human labels on this data is unknown; measure it with ragexp judge calibrate LABELS.csv and "
                "pass judge.calibration=FILE")
    kappa = calibration["kappa"]
    if kappa is None or kappa < MIN_KAPPA:
        return (f"faithfulness comes from a judge that agrees weakly with human labels: Cohen's kappa "
                f"{_fmt(kappa)} (below {MIN_KAPPA}) by {calibration['estimate']} on set {calibration['set']!r} "
                f"(n={calibration['n']}, accuracy {calibration['accuracy']:.3f}); read faithfulness as a rough signal")
    return None


def judge_key(record: dict) -> str:
    """16 hex digits naming a judge as a human review checks it: its identity (kind, method, model
    id with the weights hash), the SHA-256 of its prompt template (``none`` for a judge without one)
    and the threshold in force, from a run's judge record (``meta["judge"]``). A record written
    before prompts were recorded has prompt ``unknown``: its runs never share a review with newer ones."""
    threshold = record.get("threshold")
    text = json.dumps({"identity": record.get("identity"), "prompt": record.get("prompt_sha256", "unknown"),
                       "threshold": None if threshold is None else float(f"{float(threshold):.6g}")}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def judge_run_record(judge: Any) -> dict:
    """What a run logs about its judge: identity, the threshold in force and where it came from,
    the prompt's SHA-256, the calibration summary (or ``None``), the warning sentence (or ``None``)
    and the :func:`judge_key`."""
    identity = judge.identity() if hasattr(judge, "identity") else {"kind": type(judge).__name__, "model_id": str(judge.model_id)}
    calibration: JudgeCalibration | None = getattr(judge, "calibration", None)
    template = getattr(judge, "template", None)
    record = {
        "identity": identity,
        "prompt_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest() if isinstance(template, str) else "none",
        "threshold": getattr(judge, "threshold", None),
        "threshold_source": getattr(judge, "threshold_source", None),
        "calibration": None if calibration is None else {
            "set": calibration.labels["set"], "file": calibration.labels["file"], "sha256": calibration.labels["sha256"],
            "n": calibration.n, "estimate": calibration.estimate, "accuracy": calibration.accuracy,
            "kappa": calibration.kappa,
        },
    }
    record["warning"] = judge_warning(record)
    record["key"] = judge_key(record)
    return record


@dataclass(frozen=True)
class ThresholdChoice:
    """The threshold a judge uses, where it came from (``calibration``, ``config`` or
    ``default``) and the calibration it was read from."""

    threshold: float
    source: str
    calibration: JudgeCalibration | None


def check_number(value: Any, field: str, low: float | None = None, high: float | None = None,
                 file: str | Path | None = None) -> float:
    """``value`` as a float when it is a finite real number (not a string, not a bool) in
    ``[low, high]``; else an input error naming ``field`` (NaN would compare false with every
    score, infinity or an out-of-range value make every verdict the same)."""
    in_range = f" in [{low:g}, {high:g}]" if low is not None and high is not None else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
            low is not None and value < low) or (high is not None and value > high):
        raise RagexpInputError(f"must be a finite number{in_range}, got {value!r}", file=file, field=field)
    return float(value)


def choose_threshold(
    default: float, threshold: float | None, calibration: str | Path | None, identity: dict[str, str],
    score_range: tuple[float, float] | None = None,
) -> ThresholdChoice:
    """A calibration file's threshold, else the configured one, else the default; both a
    threshold and a calibration is a contradiction and refused. A threshold must be a finite
    number, within ``score_range`` (the judge's possible scores) when the judge has one."""
    low, high = score_range or (None, None)
    if calibration is not None:
        if threshold is not None:
            raise RagexpInputError("set a threshold or a calibration file, not both", field="threshold")
        loaded = load_calibration(calibration, identity, score_range)
        if loaded.threshold is None:
            raise RagexpInputError("this calibration fitted no threshold (it measured a yes/no judge)",
                                   file=calibration, field="calibration")
        return ThresholdChoice(check_number(loaded.threshold, "threshold", low, high, calibration), "calibration", loaded)
    if threshold is not None:
        return ThresholdChoice(check_number(threshold, "threshold", low, high), "config", None)
    return ThresholdChoice(default, "default", None)
