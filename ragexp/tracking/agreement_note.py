"""Annotator agreement where the eval set's runs are read: its MLflow experiment.

The experiment's description (tag ``mlflow.note.content``, shown above the runs table on the
experiment's first screen) gets a last section starting with :data:`SECTION_TITLE`; a later
``ragexp evalset agreement`` replaces that section, the rest of the description is kept. The
numbers go to the experiment tag :data:`AGREEMENT_TAG` as well (JSON, disagreements left out), for
scripts. No run is logged: a run without pipeline metrics would join every ``ragexp compare``.
"""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from ragexp.annotation.agreement import Agreement
from ragexp.tracking import store

SECTION_TITLE = "**Annotator agreement**"
AGREEMENT_TAG = "ragexp.agreement"


def section(result: Agreement, names: tuple[str, str], when: str) -> str:
    """The description's agreement section (markdown)."""
    spans = ("no evidence" if result.span_micro_f1 is None
             else f"F1 micro {result.span_micro_f1:.3f}, macro {result.span_macro_f1:.3f} ({result.span_items} items)")
    return (f"{SECTION_TITLE} ({names[0]} vs {names[1]}, {result.items} questions, `ragexp evalset agreement`, {when}): "
            f"answerability {result.answerable.render()} items; document relevance {result.relevance.render()} "
            f"documents both judged; evidence overlap {spans}; {len(result.disagreements)} items disagree.")


def with_section(description: str, text: str) -> str:
    """``description`` with its agreement section (if any) replaced by ``text``."""
    kept = description.split(SECTION_TITLE, 1)[0].rstrip()
    return f"{kept}\n\n{text}" if kept else text


def write_note(client: MlflowClient, experiment_id: str, result: Agreement, names: tuple[str, str], when: str) -> None:
    """Write the section into the experiment's description and the numbers into its tag."""
    description = client.get_experiment(experiment_id).tags.get(store.DESCRIPTION_TAG, "")
    client.set_experiment_tag(experiment_id, store.DESCRIPTION_TAG, with_section(description, section(result, names, when)))
    numbers = {key: value for key, value in result.to_dict().items() if key != "disagreements"}
    client.set_experiment_tag(experiment_id, AGREEMENT_TAG, json.dumps({"annotators": list(names), "at": when, **numbers}))
