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
a component's ``batch_size``, ``threads``,      per name,       checked in every registered component's
``top_n`` ... (:data:`COMPONENT_COUNTS`)        100 to          block before anything is built: a zero
                                                1,000,000       batch size failed only after the
                                                                encoder's model export
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

#: The integer parameters of pipeline components (any registered class: embedding, retrieval,
#: reranker, generator, judge blocks and the blocks nested in them), by parameter name: the range
#: ``(low, high)`` a value must fall in. Checked by :func:`ragexp.config.targets.check_component`
#: at the job-spec gate, for every config of a sweep before its first job.
COMPONENT_COUNTS: dict[str, tuple[int, int]] = {
    "batch_size": (1, 4_096),  # texts, pairs or prompts per model call
    "threads": (1, 1_024),  # an integer; "auto" is resolved per job (ragexp.runtime.threads)
    "max_seq_length": (1, 32_768),  # tokens a model reads per text
    "max_length": (1, 32_768),
    "max_new_tokens": (1, 32_768),  # tokens a generator or judge writes
    "max_tokens": (1, 32_768),
    "top_n": (1, MAX_CUTOFF),  # candidates a reranker scores
    "top_sentences": (1, MAX_CUTOFF),
    "context_k": (1, MAX_CUTOFF),  # chunks a generator reads
    "hnsw_m": (2, 1_024),  # FAISS index shape and search breadth
    "hnsw_ef_construction": (1, 100_000),
    "ef_search": (1, 100_000),
    "ivf_nlist": (1, 1_000_000),
    "nprobe": (1, 1_000_000),
    "max_retries": (0, 100),  # an endpoint's retries per call
}


def check_count(value: object, field: str, *, low: int = 1, high: int) -> int:
    """``value`` when it is an integer in ``[low, high]``; else one line naming ``field`` and the bound."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RagexpInputError(f"must be an integer from {low:,} to {high:,} (the bound keeps the work it sizes "
                               f"finite; docs/bad-input.md), got {value!r}", field=field)
    return value
