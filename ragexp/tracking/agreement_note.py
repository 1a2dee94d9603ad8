"""Annotator agreement where the eval set's runs are read: its MLflow experiment.

The experiment's description (tag ``mlflow.note.content``, shown above the runs table) gets a first
paragraph starting with :data:`SECTION_TITLE`, the kappas first: MLflow 3.17 shows a description
folded to its first line, and that line is on the experiment's first screen. A later
``ragexp evalset agreement`` replaces that paragraph; the rest of the description is kept. The
numbers go to the experiment tag :data:`AGREEMENT_TAG` as well (JSON, disagreements left out), for
scripts. No run is logged: a run without pipeline metrics would join every ``ragexp compare``.
"""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from ragexp.annotation.agreement import Agreement
from ragexp.judging.calibration.kappa_interval import KappaInterval
from ragexp.tracking import store

SECTION_TITLE = "**Annotator agreement**"
AGREEMENT_TAG = "ragexp.agreement"


def section(result: Agreement, names: tuple[str, str], when: str) -> str:
    """The description's agreement paragraph (markdown, one line): the numbers, then whose and when."""
    spans = ("no evidence" if result.span_micro_f1 is None
             else f"{result.span_micro_f1:.2f} micro / {result.span_macro_f1:.2f} macro")
    return (f"{SECTION_TITLE}: answerability {short(result.answerable.interval)}, document relevance "
            f"{short(result.relevance.interval)}, evidence overlap F1 {spans}. {names[0]} vs {names[1]} on "
            f"{result.items} questions: agreed on {result.answerable.agreed}/{result.answerable.n} items and "
            f"{result.relevance.agreed}/{result.relevance.n} documents both judged, {len(result.disagreements)} items "
            f"disagree (`ragexp evalset agreement`, {when}).")


def short(interval: KappaInterval) -> str:
    """``kappa 0.52 (95% CI 0.11 to 0.93)``, or what is undefined."""
    if interval.kappa is None:
        return "kappa undefined"
    if interval.low is None:
        return f"kappa {interval.kappa:.2f} (no interval)"
    return f"kappa {interval.kappa:.2f} ({interval.confidence:.0%} CI {interval.low:.2f} to {interval.high:.2f})"


def with_section(description: str, text: str) -> str:
    """``description`` with ``text`` as its first paragraph, in place of an earlier agreement paragraph."""
    if description.startswith(SECTION_TITLE):
        description = description.split("\n\n", 1)[1] if "\n\n" in description else ""
    return f"{text}\n\n{description}" if description else text


def write_note(client: MlflowClient, experiment_id: str, result: Agreement, names: tuple[str, str], when: str) -> None:
    """Write the section into the experiment's description and the numbers into its tag."""
    description = client.get_experiment(experiment_id).tags.get(store.DESCRIPTION_TAG, "")
    client.set_experiment_tag(experiment_id, store.DESCRIPTION_TAG, with_section(description, section(result, names, when)))
    numbers = {key: value for key, value in result.to_dict().items() if key != "disagreements"}
    client.set_experiment_tag(experiment_id, AGREEMENT_TAG, json.dumps({"annotators": list(names), "at": when, **numbers}))
