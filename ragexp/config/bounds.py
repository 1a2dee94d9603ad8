"""Upper bounds for the numbers that size work or memory, checked before any work.

A number a config, spec or flag hands ragexp (``eval.bootstrap_resamples=10**9``, ``eval.ks=[10**12]``)
sizes an allocation or a loop; ``>= 1`` alone let one run to 8 GB and growing and another to a
2 TiB allocation. Each is bounded here, in the unit of the work it sizes:

=============================================  ==============  ==========================================
number                                          bound           why
=============================================  ==============  ==========================================
``eval.ks``, ``eval.retrieve_k`` (cut-offs)     1,000           TREC's own depth; the ideal-gain matrix is
                                                                queries x this; the depth retrieved is also
                                                                cut to the chunks the corpus has
``eval.context_k``                              the deepest     the chunks a generator sees come from the
                                                cut-off         ranking: at most ``max(eval.ks)`` or
                                                                ``eval.retrieve_k``
``eval.bootstrap_resamples``, a gate spec's     100,000         each resample is a pass over the queries;
``resampling.n_resamples``                                      the CI's Monte-Carlo error is ~0.001 at
                                                                10,000
``eval.sample``, ``evalset queries --sample``   1,000,000       items or candidates drawn
``--max-distinct`` (queries embedded)           1,000,000       one embedding row each (1.5 KB at 384 dims)
``judge sample/review -n`` (claims drawn)       100,000         a page or file row each
``evalset draft --per-category``                10,000          one model call each
``--pool-depth``, ``annotate --depth``          1,000           candidates a person reads per question
=============================================  ==============  ==========================================

Bounds derived from the data are checked as soon as the data is known: the retrieval depth is at
most the number of chunks (:func:`ragexp.evaluation.retrieval_step.retrieval_depth`), a sample at
most the eval set (:func:`ragexp.evaluation.prepared.sample_evalset`), ``judge calibrate --folds``
at most the labelled contexts (:func:`ragexp.judging.calibration.record.check_calibration_set`).
"""

from __future__ import annotations

from ragexp.errors import RagexpInputError

MAX_CUTOFF = 1_000
MAX_RESAMPLES = 100_000
MAX_SAMPLE = 1_000_000
MAX_EMBEDDED_QUERIES = 1_000_000
MAX_CLAIMS_DRAWN = 100_000
MAX_DRAFTS_PER_CATEGORY = 10_000
MAX_POOL_DEPTH = 1_000


def check_count(value: object, field: str, *, low: int = 1, high: int) -> int:
    """``value`` when it is an integer in ``[low, high]``; else one line naming ``field`` and the bound."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RagexpInputError(f"must be an integer from {low:,} to {high:,} (the bound keeps the work it sizes "
                               f"finite; docs/bad-input.md), got {value!r}", field=field)
    return value
