"""The eval set as an MLflow evaluation dataset (GenAI -> Datasets), one per eval-set version.

The dataset is named ``<eval-set name>@<fingerprint[:12]>`` and tagged with the whole fingerprint
(:data:`TAG_FINGERPRINT`): an eval set whose content changes is a new dataset, the old one stays
with the runs that used it. One record per item: ``inputs`` ``{"query"}``, ``expectations``
(``expected_response``: the gold answer; ``expected_facts``: the key facts;
``expected_retrieved_context``: the relevant evidence, ``{"doc_uri", "content", "grade"}``),
``tags`` (``query_id``, ``tags``, ``source``). Every run of the eval set logs it as its input
(context ``eval``), so the run's page and GenAI -> Evaluation runs link to it.

A store that has no evaluation datasets (an older tracking server) gets the eval set as a plain
dataset input (:func:`ragexp.tracking.run_logger.evalset_dataset`) instead, and the log says so.
"""

from __future__ import annotations

import logging

import mlflow
from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.exceptions import MlflowException
from mlflow.genai.datasets import EvaluationDataset
from mlflow.tracking import MlflowClient

from ragexp.datamodel import EvalSet

log = logging.getLogger(__name__)
TAG_FINGERPRINT = "ragexp.evalset_fingerprint"
CONTEXT = "eval"


def dataset_name(evalset: EvalSet) -> str:
    return f"{evalset.name or 'evalset'}@{evalset.fingerprint()[:12]}"


def records(evalset: EvalSet, documents) -> list[dict]:
    """One record per item (module docstring); evidence text read from ``documents``."""
    out = []
    for item in evalset.items:
        expectations = {}
        if item.gold_answer:
            expectations["expected_response"] = item.gold_answer
        if item.key_facts:
            expectations["expected_facts"] = list(item.key_facts)
        relevant = []
        for evidence in item.evidence:
            if evidence.relevant:
                document = documents.get(evidence.doc_id)
                text = "" if document is None else (
                    document.text[evidence.start:evidence.end] if evidence.is_span else document.text)
                relevant.append({"doc_uri": evidence.doc_id, "content": text, "grade": evidence.grade})
        if relevant:
            expectations["expected_retrieved_context"] = relevant
        out.append({"inputs": {"query": item.query}, "expectations": expectations,
                    "tags": {"query_id": item.id, "tags": ",".join(item.tags), "source": item.source or ""}})
    return out


def ensure_dataset(client: MlflowClient, experiment_id: str, evalset: EvalSet, documents) -> EvaluationDataset:
    """The eval set's evaluation dataset, created with its records when missing (the oldest one
    when two processes created it at once)."""
    name = dataset_name(evalset)
    found = client.search_datasets(experiment_ids=[experiment_id], filter_string=f"name = '{name}'",
                                   order_by=["created_time ASC"], max_results=10)
    if found:
        return EvaluationDataset(found[0])
    created = EvaluationDataset(client.create_dataset(name=name, experiment_id=[experiment_id],
                                                      tags={TAG_FINGERPRINT: evalset.fingerprint()}))
    mlflow.set_tracking_uri(client.tracking_uri)  # merge_records writes through the global store
    created.merge_records(records(evalset, documents))
    return EvaluationDataset(client.get_dataset(created.dataset_id))


def evalset_input(client: MlflowClient, experiment_id: str, evalset: EvalSet, documents) -> DatasetInput | None:
    """The run input naming the eval set's evaluation dataset (module docstring); ``None`` when
    the store keeps no evaluation datasets (the caller logs the plain input)."""
    try:
        dataset = ensure_dataset(client, experiment_id, evalset, documents)
    except (MlflowException, NotImplementedError) as err:
        log.warning("the tracking store keeps no evaluation datasets (%s); the eval set is logged as a plain input",
                    str(err).splitlines()[0][:200] if str(err) else type(err).__name__)
        return None
    entity = Dataset(name=dataset.name, digest=dataset.digest, source_type=dataset.source_type,
                     source=dataset.source.to_json(), schema=dataset.schema, profile=dataset.profile)
    return DatasetInput(entity, [InputTag("mlflow.data.context", CONTEXT)])
