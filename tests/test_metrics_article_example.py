"""The method article's worked example: five queries through Recall@5, MRR and context precision@5.

The article's table (gold chunk rank; its "Recall@5", which is ragexp's hit rate; reciprocal
rank; context precision@5):

    1 | 1 | 1.00 | 0.8        3 | 1 | 0.33 | 0.6        not in top 5 | 0 | 0.00 | 0.4
    2 | 1 | 0.50 | 0.8        1 | 1 | 1.00 | 1.0

    mean: recall@5 = 0.80, MRR = 0.57 (exactly 17/30 = 0.5667), context precision@5 = 0.72

Its code scores recall and MRR against ``gold_chunk_ids`` but context precision against a wider
``relevant_ids``; the third query (gold not retrieved, yet 2 of 5 chunks relevant) only makes
sense that way. The test therefore builds each ranking once and judges it with both qrels.
"""

from __future__ import annotations

import pytest

from ragexp.metrics import Qrels, evaluate_run

# Per query: rank of the gold chunk in the top 5 (None: not retrieved) and how many of the top 5
# are relevant, the gold chunk included.
ARTICLE_TABLE = {
    "webhook-retry": (1, 4),
    "search-rate-limit": (3, 3),
    "rotate-api-key": (None, 2),
    "webhook-timeout": (2, 4),
    "annual-refunds": (1, 5),
}


def build_example():
    """Rankings of five chunks, gold-only qrels, and qrels of every relevant chunk."""
    run, gold_qrels, relevant_qrels = {}, {}, {}
    for query, (gold_rank, n_relevant) in ARTICLE_TABLE.items():
        chunks = [f"{query}/doc{rank}#chunk_0" for rank in range(1, 6)]
        gold = chunks[gold_rank - 1] if gold_rank else f"{query}/gold#chunk_0"
        others = [chunk for chunk in chunks if chunk != gold][: n_relevant - (gold in chunks)]
        run[query] = [(chunk, 1.0 - rank / 10) for rank, chunk in enumerate(chunks)]
        gold_qrels[query] = {gold: 1}
        relevant_qrels[query] = {gold: 1, **dict.fromkeys(others, 1)}
    return run, Qrels(gold_qrels), Qrels(relevant_qrels)


def article_recall_at_k(retrieved_ids, gold_ids, k=5):
    return int(bool(set(retrieved_ids[:k]) & gold_ids))


def article_reciprocal_rank(retrieved_ids, gold_ids):
    for rank, doc_id in enumerate(retrieved_ids, start=1):
        if doc_id in gold_ids:
            return 1.0 / rank
    return 0.0


def article_context_precision_at_k(retrieved_ids, relevant_ids, k=5):
    return sum(1 for doc_id in retrieved_ids[:k] if doc_id in relevant_ids) / k


def test_hit_rate_and_mrr_against_the_gold_chunks_match_the_article():
    run, gold_qrels, _ = build_example()
    evaluation = evaluate_run(run, gold_qrels, [5])
    reciprocal_ranks = [evaluation.per_query[query]["mrr"] for query in ARTICLE_TABLE]
    assert reciprocal_ranks == pytest.approx([1.0, 1 / 3, 0.0, 0.5, 1.0])
    assert [round(value, 2) for value in reciprocal_ranks] == [1.0, 0.33, 0.0, 0.5, 1.0]
    assert [evaluation.per_query[query]["hit_rate_at_5"] for query in ARTICLE_TABLE] == [1, 1, 0, 1, 1]
    assert evaluation.aggregate["hit_rate_at_5"] == pytest.approx(0.80)
    assert evaluation.aggregate["mrr"] == pytest.approx(17 / 30)
    assert round(evaluation.aggregate["mrr"], 2) == 0.57


def test_context_precision_against_all_relevant_chunks_matches_the_article():
    run, _, relevant_qrels = build_example()
    evaluation = evaluate_run(run, relevant_qrels, [5])
    precisions = [evaluation.per_query[query]["context_precision_at_5"] for query in ARTICLE_TABLE]
    assert precisions == pytest.approx([0.8, 0.6, 0.4, 0.8, 1.0])
    assert evaluation.aggregate["context_precision_at_5"] == pytest.approx(0.72)


def test_with_one_relevance_set_the_third_query_counts_as_a_hit():
    """Why the article needs two relevance sets: its 2 relevant chunks in the top 5 are a hit."""
    run, _, relevant_qrels = build_example()
    evaluation = evaluate_run(run, relevant_qrels, [5])
    assert evaluation.per_query["rotate-api-key"]["hit_rate_at_5"] == 1.0
    assert evaluation.aggregate["hit_rate_at_5"] == 1.0


def test_ragexp_agrees_with_the_articles_own_functions():
    run, gold_qrels, relevant_qrels = build_example()
    by_gold = evaluate_run(run, gold_qrels, [5])
    by_relevance = evaluate_run(run, relevant_qrels, [5])
    for query, ranking in run.items():
        retrieved_ids = [chunk for chunk, _ in ranking]
        gold, relevant = set(gold_qrels[query]), set(relevant_qrels[query])
        assert by_gold.per_query[query]["hit_rate_at_5"] == article_recall_at_k(retrieved_ids, gold)
        assert by_gold.per_query[query]["mrr"] == pytest.approx(article_reciprocal_rank(retrieved_ids, gold))
        assert by_relevance.per_query[query]["context_precision_at_5"] == pytest.approx(
            article_context_precision_at_k(retrieved_ids, relevant)
        )
