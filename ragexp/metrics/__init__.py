"""Retrieval metrics that equal trec_eval's, one metric per module over a vectorised gain matrix.

:func:`evaluate_run` scores a run against qrels (made from the eval set's evidence by
:mod:`~ragexp.metrics.relevance`); :func:`trec_order` and :func:`doc_level` put rankings in
trec_eval's order and collapse chunk rankings into document rankings. Qrels are a
:class:`~ragexp.datamodel.Qrels`: a unit is relevant iff its grade is >= their relevance level
(:data:`~ragexp.datamodel.RELEVANCE_LEVEL`, 1, unless they carry another).
:mod:`~ragexp.metrics.stats` holds the small-sample statistics of per-query metric values
(confidence intervals of a run's means, paired tests between runs).
"""

from ragexp.datamodel import Qrels
from ragexp.metrics.evaluate import RetrievalEvaluation, evaluate_run, metric_names
from ragexp.metrics.ranking import Ranking, doc_level, document_id, trec_order

__all__ = [
    "Qrels",
    "Ranking",
    "RetrievalEvaluation",
    "doc_level",
    "document_id",
    "evaluate_run",
    "metric_names",
    "trec_order",
]
