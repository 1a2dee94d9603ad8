"""Corpora that used to shift numbers silently: a title-only document, a document with nothing
to index, exact-duplicate documents (fusion order), and chunk rankings that collapse to fewer
documents than the doc-level cutoff. Checked against independent computations: rank_bm25,
sentence-transformers, RRF by hand, pytrec_eval on the exported doc-level run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from hydra import compose, initialize_config_dir

from ragexp.config.compose import CONFIG_DIR
from ragexp.config.schema import register_schema
from ragexp.evaluation.results import RunResults
from ragexp.jobs.job import run_job

WEBHOOK_TEXT = "Failed webhook deliveries are retried with exponential backoff for 24 hours."
DOCS = [  # (id, title, text); corpus order matters: the gold copy comes before its duplicate
    ("m-retries", "Webhook retries", WEBHOOK_TEXT),
    ("z-retries-copy", "Webhook retries", WEBHOOK_TEXT),  # sorts after m-: id descending would favour it
    ("keys", "Rotating API keys", ""),  # title only
    ("blank", "", "   \n"),  # neither text nor title
    ("limits", "Rate limits", "The search endpoint allows 30 requests per minute per key."),
    ("refunds", "Refunds", "Annual plans are refunded pro rata within 30 days of renewal."),
]
ITEMS = [
    {"id": "q-retry", "query": "how long are webhook deliveries retried", "evidence": [{"doc_id": "m-retries"}]},
    {"id": "q-keys", "query": "rotating api keys", "evidence": [{"doc_id": "keys"}]},
    {"id": "q-blank", "query": "what does the blank page say", "evidence": [{"doc_id": "blank"}]},
]


def write_dataset(root: Path) -> tuple[Path, Path]:
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCS), "utf-8")
    evalset = root / "evalset.jsonl"
    evalset.write_text("".join(json.dumps(item) + "\n" for item in ITEMS), "utf-8")
    return corpus, evalset


def compose_config(root: Path, *overrides: str):
    corpus, evalset = write_dataset(root)
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=[
            "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "chunking=none",
            f"cache_dir={root / 'cache'}", "progress=false", "eval.ks=[1,3]", *overrides,
        ])  # fmt: skip


def plain_tokens(text: str) -> list[str]:
    import re

    return re.findall(r"\b\w+\b", text.lower())


@pytest.mark.slow
def test_title_only_documents_are_indexed_and_fusion_ties_follow_corpus_order(tmp_path: Path) -> None:
    from rank_bm25 import BM25Okapi
    from sentence_transformers import SentenceTransformer

    from ragexp.models.resolve import resolve_model

    cfg = compose_config(tmp_path, "retrieval=hybrid_rrf", "retrieval/tokenizer=plain", "eval.retrieve_k=5")
    result = run_job(cfg, output_dir=tmp_path / "out", overrides=[], log_to_store=False)
    results = result.output.results
    rows = {row["query_id"]: row for row in results.per_query}

    # indexing: the title-only document is a chunk; the blank one is reported, not silently gone
    assert results.aggregates["n_chunks"] == 5 and results.aggregates["n_docs_not_indexed"] == 1
    assert results.meta["docs_not_indexed"] == ["blank"]
    assert rows["q-keys"]["ranking"][0][0] == "keys#chunk_0" and rows["q-keys"]["metrics"]["hit_rate_at_1"] == 1.0
    # the item whose only gold cannot be indexed has no gold at chunk AND document level
    assert rows["q-blank"]["relevant"] == {} and rows["q-blank"]["doc_relevant"] == {}
    assert "hit_rate_at_1" not in rows["q-blank"]["metrics"] and "doc_hit_rate_at_1" not in rows["q-blank"]["metrics"]

    # fusion: an independent RRF over rank_bm25 and sentence-transformers, ties in corpus order
    indexed = [(i, f"{t} {x}" if t else x) for i, t, x in DOCS if (t or x).strip()]
    bm25 = BM25Okapi([plain_tokens(text) for _, text in indexed])
    encoder = SentenceTransformer(str(resolve_model("minilm").path), device="cpu")
    doc_vectors = encoder.encode([text for _, text in indexed], normalize_embeddings=True)
    for item in ITEMS[:2]:
        bm25_scores = bm25.get_scores(plain_tokens(item["query"]))
        dense_scores = doc_vectors @ encoder.encode([item["query"]], normalize_embeddings=True)[0]
        fused = np.zeros(len(indexed))
        for scores, candidates in ((bm25_scores, np.flatnonzero(bm25_scores)), (dense_scores, range(len(indexed)))):
            # BM25 returns only documents sharing a query term; ties in corpus order
            order = sorted(candidates, key=lambda row: (-scores[row], row))
            for rank, row in enumerate(order, start=1):
                fused[row] += 1.0 / (60 + rank)
        # the run is scored in trec_eval's order: fused score descending, ties by id descending
        expected = sorted(sorted(range(len(indexed)), key=lambda row: indexed[row][0], reverse=True), key=lambda row: -fused[row])
        got = [cid for cid, _ in rows[item["id"]]["ranking"]]
        assert got == [f"{indexed[row][0]}#chunk_0" for row in expected]
    retry = [cid for cid, _ in rows["q-retry"]["ranking"]]
    assert retry.index("m-retries#chunk_0") < retry.index("z-retries-copy#chunk_0")  # the earlier copy wins the tie


def test_doc_level_cutoffs_count_distinct_documents_and_export_reproduces_them(tmp_path: Path) -> None:
    """Small chunks, a shallow retrieval depth: 10 chunks hold only 2-3 documents, so the run
    retrieves deeper until each query has 6 documents; pytrec_eval on the exported doc-level run
    gives the run's own doc metrics."""
    from ragexp.cli import main

    root = tmp_path / "data"
    root.mkdir()
    corpus = root / "corpus.jsonl"
    topics = ["retries", "timeouts", "signatures", "ordering", "duplicates", "ips", "versions", "replays"]
    sentences = "Each webhook delivery about {t} is logged. The {t} webhook settings live in the dashboard. " * 4
    corpus.write_text("".join(json.dumps({"_id": t, "title": "", "text": sentences.format(t=t)}) + "\n" for t in topics), "utf-8")
    evalset = root / "evalset.jsonl"
    items = [{"id": f"q-{t}", "query": f"webhook {t} settings", "evidence": [{"doc_id": t}]} for t in topics[:4]]
    evalset.write_text("".join(json.dumps(item) + "\n" for item in items), "utf-8")
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[
            "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "retrieval=bm25",
            "chunking=fixed", "chunking.size=48", "chunking.overlap=0", "eval.ks=[1,6]", "eval.retrieve_k=10",
            "eval.context_k=1", f"cache_dir={tmp_path / 'cache'}", "progress=false",
        ])  # fmt: skip
    output = run_job(cfg, output_dir=tmp_path / "out", overrides=[], log_to_store=False).output
    results = output.results
    assert results.aggregates["doc_rankings_extended"] == len(items)
    assert results.aggregates["doc_retrieval_depth_max"] > 10
    for row in results.per_query:
        assert len({doc for doc, _ in row["doc_ranking"]}) >= 6
        assert len({cid.split("#")[0] for cid, _ in row["ranking"]}) < 6  # the chunk ranking alone had fewer

    saved = results.save(tmp_path / "results.json")
    run_file, qrels_file = tmp_path / "run.trec", tmp_path / "qrels.trec"
    assert main(["export", str(saved), "--run", str(run_file), "--qrels", str(qrels_file), "--level", "doc"]) == 0
    run: dict[str, dict[str, float]] = {}
    for line in run_file.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_file.read_text().splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    scored = pytrec_eval.RelevanceEvaluator(qrels, {"recall.6", "ndcg_cut.6", "recip_rank"}).evaluate(run)
    n = len(scored)
    assert results.aggregates["doc_recall_at_6"] == pytest.approx(sum(q["recall_6"] for q in scored.values()) / n, abs=1e-12)
    assert results.aggregates["doc_ndcg_at_6"] == pytest.approx(sum(q["ndcg_cut_6"] for q in scored.values()) / n, abs=1e-12)
    assert results.aggregates["doc_mrr"] == pytest.approx(sum(q["recip_rank"] for q in scored.values()) / n, abs=1e-12)
    assert RunResults.load(saved).per_query[0]["doc_ranking"] == results.per_query[0]["doc_ranking"]
