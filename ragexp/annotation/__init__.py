"""``ragexp evalset annotate``: building an eval set in the browser from pooled candidates.

:mod:`~ragexp.annotation.session` (the eval set and its sidecar queue, saved whole at every change,
each change a compare-and-set on the fields' content), :mod:`~ragexp.annotation.live_corpus` (the
corpus re-read when its files change; spans re-checked), :mod:`~ragexp.annotation.pool`
(TREC-style pooling of several pipelines), :mod:`~ragexp.annotation.search` (ranked full-text
search), :mod:`ragexp.text.tokenize` (words as BM25 reads them), :mod:`~ragexp.annotation.hints`
(category hints), :mod:`~ragexp.annotation.coverage`, :mod:`~ragexp.annotation.from_run` (pool
extension and failures from a logged run), :mod:`~ragexp.annotation.server` (the page's API).
"""
