"""Text as ragexp's lexical tools read it: one tokenizer module (:mod:`~ragexp.text.tokenize`) and
one BM25 index (:mod:`~ragexp.text.bm25`), used by the annotation page's search and hints, the
lexical judge, and the reference BM25 pipeline (reference_pipelines may import ragexp, never the
other way)."""
