"""The annotation page's corpus search: BM25 over paragraphs, phrase matches first, scores equal to
a hand computation on a tiny corpus."""

from __future__ import annotations

import math

import pytest

from ragexp.annotation.search import MAX_UNIT_CHARS, CorpusSearch, units_of
from ragexp.data.loaders.corpus import load_corpus

# Units (paragraphs) and their content words (stems): lengths 2, 3 | 2 | 4 | 5 | 1, 2, 1 -> N = 8, avgdl = 2.5.
DOCS = {
    "one": "cat dog\n\nfish cat cat\n",
    "two": "dog bird\n",
    "three": "fish bird, the mat mat\n",
    "four": "Dog cat owl owl owl\n",
    "five": "owl\n\nowl eel\n\neel\n",
}


@pytest.fixture
def corpus(tmp_path):
    for doc_id, text in DOCS.items():
        (tmp_path / f"{doc_id}.txt").write_text(text, encoding="utf-8")
    return load_corpus(tmp_path)


def hand_score(tf_and_length: list[tuple[int, int]], df: int, n: int = 8, avgdl: float = 2.5) -> float:
    """Okapi BM25 (k1 = 1.5, b = 0.75) summed over the query terms' (tf, unit length), all of document frequency ``df``."""
    idf = math.log(n - df + 0.5) - math.log(df + 0.5)
    return sum(idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / avgdl)) for tf, length in tf_and_length)


def test_phrase_matches_rank_first_then_bm25_as_computed_by_hand(corpus):
    hits = CorpusSearch().search(corpus, "dog  cat")
    assert [(h["doc_id"], h["text"]) for h in hits] == [
        ("four", "Dog cat owl owl owl"),  # the phrase (any case, any whitespace): first despite a lower score
        ("one", "cat dog"), ("one", "fish cat cat"), ("two", "dog bird")]
    # cat and dog both occur in 3 of the 8 units: idf = ln(5.5 / 3.5) > 0 (no flooring).
    expected = [hand_score([(1, 5), (1, 5)], 3), hand_score([(1, 2), (1, 2)], 3), hand_score([(2, 3)], 3),
                hand_score([(1, 2)], 3)]
    assert [h["score"] for h in hits] == pytest.approx(expected, abs=1e-4)
    assert expected[0] < expected[1]  # without the phrase boost "four" would be second
    assert [h["exact"] for h in hits] == [True, False, False, False]
    text = corpus["four"].text
    assert [text[s:e] for s, e in hits[0]["matches"]] == ["Dog cat"]
    one = corpus["one"].text
    assert [one[s:e] for s, e in hits[2]["matches"]] == ["cat", "cat"]  # the query's words highlighted


def test_an_exact_quote_with_punctuation_and_stopwords_is_found(corpus):
    hits = CorpusSearch().search(corpus, "bird, the mat")
    assert hits[0]["doc_id"] == "three" and hits[0]["exact"]
    assert corpus["three"].text[slice(*hits[0]["matches"][0])] == "bird, the mat"
    only_stopwords = CorpusSearch().search(corpus, "the")  # no BM25 term: the substring still matches
    assert [(h["doc_id"], h["score"]) for h in only_stopwords] == [("three", 0.0)]
    assert CorpusSearch().search(corpus, "zebra") == [] and CorpusSearch().search(corpus, "  ") == []


def test_at_most_twenty_hits_and_long_paragraphs_cut_at_whitespace(tmp_path):
    (tmp_path / "many.txt").write_text("\n\n".join(f"refund rule {i}" for i in range(30)) + "\n", encoding="utf-8")
    assert len(CorpusSearch().search(load_corpus(tmp_path), "refund")) == 20
    text = " ".join(["word"] * 700)
    units = units_of("long", text)
    assert all(u.end - u.start <= MAX_UNIT_CHARS for u in units) and len(units) == 3
    assert " ".join(text[u.start:u.end] for u in units) == text


def test_a_changed_corpus_is_indexed_again(corpus, tmp_path):
    search = CorpusSearch()
    assert search.search(corpus, "zebra") == []
    (tmp_path / "six.txt").write_text("a zebra\n", encoding="utf-8")
    assert [h["doc_id"] for h in search.search(load_corpus(tmp_path), "zebra")] == ["six"]
