"""Where eval-set candidates come from: users' query logs (:mod:`~ragexp.candidates.from_logs`) and
drafts a language model writes from the corpus (:mod:`~ragexp.candidates.drafts`). Both end in a
JSONL file a person reviews (docs/evalset-format.md, "Candidates and drafts"); nothing here writes
an eval set."""
