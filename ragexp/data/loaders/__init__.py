"""Loaders: files on disk -> :class:`~ragexp.datamodel.Corpus` and :class:`~ragexp.datamodel.EvalSet`.

- :func:`load_corpus` — the ragexp corpus (a folder of Markdown/text files, or a JSONL file).
- :func:`load_evalset` — the ragexp eval set, gold evidence resolved to chunking-independent spans.
- :func:`load_beir` — a BEIR dataset folder (graded, document-level qrels).
- :func:`load_squad` — a SQuAD v1.1-style JSON file (article documents, answer or paragraph spans).
"""

from ragexp.data.loaders.beir import load_beir
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.data.loaders.squad import load_squad

__all__ = ["load_beir", "load_corpus", "load_evalset", "load_squad"]
