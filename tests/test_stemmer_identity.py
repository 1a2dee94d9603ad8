"""A BM25 value is the same however it is reached: a stage cache filled under another stemming
library (PyStemmer 3 stems "added" as "add", 2.2 as "ad") is not handed to a run under this one.

The demo's markdown BM25 MRR read 0.5454 under PyStemmer 3.1.0 and 0.5452 under 2.2.0.3, and the
cache keys named only ``stemmer: snowball-english``. Here the "other library" is a stand-in stemmer
(no stemming at all) under another library name; the truth each run is checked against is the same
retriever over a fresh cache, under the library this process imports.
"""

from __future__ import annotations

from ragexp.datamodel import Chunk
from ragexp.runtime.stage_cache import StageCache
from ragexp.text import tokenize
from reference_pipelines.bm25 import BM25Retriever

CHUNKS = [
    Chunk(id=f"doc_{i}#chunk_0", doc_id=f"doc_{i}", index=0, start=0, end=len(text), text=text)
    for i, text in enumerate([
        "Keys added to the account appear at once.",
        "Adding a webhook endpoint takes a minute.",
        "Refunds are paid within thirty days.",
        "Rate limits apply per key and per minute.",
    ])
]
QUERIES = ["when do added keys appear", "adding a key", "refunds"]


class _NoStemming:
    """A stemmer that returns every word as it is: stems apart from Snowball's on "added"/"adding"."""

    def stemWords(self, words):  # noqa: N802 - PyStemmer's spelling
        return list(words)


def _rankings(cache_dir) -> list:
    retriever = BM25Retriever(cache=StageCache(cache_dir))
    retriever.index(CHUNKS)
    return retriever.search(QUERIES, k=len(CHUNKS))


def test_bm25_after_another_stemming_library_equals_a_fresh_run(tmp_path, monkeypatch):
    fresh = _rankings(tmp_path / "fresh")
    with monkeypatch.context() as other_library:  # as if another PyStemmer (one that does not stem) were imported
        other_library.setattr(tokenize, "stemmer_library", lambda: "PyStemmer 0.0-stand-in")
        other_library.setattr(tokenize, "_stemmer", lambda name: None if name is None else _NoStemming())
        under_other = _rankings(tmp_path / "shared")
    assert under_other != fresh  # the stand-in really stems apart, so a reused index would show
    after_other = _rankings(tmp_path / "shared")
    assert after_other == fresh


def test_a_stemming_tokenizer_names_its_library_and_a_plain_one_does_not():
    assert tokenize.Tokenizer().config["stemmer_library"] == tokenize.stemmer_library()
    assert tokenize.stemmer_library().startswith("PyStemmer ")
    assert tokenize.Tokenizer(stemmer=None).config["stemmer_library"] is None
