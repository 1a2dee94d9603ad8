"""Corpora that used to shift numbers silently: a title-only document, a document with nothing
to index, exact-duplicate documents (fusion order), and chunk rankings that collapse to fewer
documents than the doc-level cutoff, a query whose only gold is a blank document. Checked against
independent computations: rank_bm25, sentence-transformers, RRF by hand, pytrec_eval."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from hydra import compose, initialize_config_dir

from ragexp.config.compose import CONFIG_DIR
from ragexp.config.schema import register_schema
from ragexp.evaluation.job_spec import job_spec
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
    result = run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None)
    results = result.output.results
    rows = {row.query_id: row.to_dict() for row in results.per_query}

    # indexing: the title-only document is a chunk; the blank one is reported, not silently gone
    assert results.aggregates["n_chunks"] == 5 and results.aggregates["n_docs_not_indexed"] == 1
    assert results.meta["docs_not_indexed"] == ["blank"]
    assert rows["q-keys"]["ranking"][0][0] == "keys#chunk_0" and rows["q-keys"]["metrics"]["hit_rate_at_1"] == 1.0
    # the item whose only gold cannot be indexed keeps it as gold and scores as a miss
    assert rows["q-blank"]["relevant"] == {"blank": 1} and rows["q-blank"]["doc_relevant"] == {"blank": 1}
    assert rows["q-blank"]["metrics"]["hit_rate_at_1"] == 0.0 and rows["q-blank"]["metrics"]["doc_hit_rate_at_1"] == 0.0

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


def _trec_file(path: Path, columns: tuple[int, int, int], cast) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        table.setdefault(fields[columns[0]], {})[fields[columns[1]]] = cast(fields[columns[2]])
    return table


def test_blank_gold_query_counts_as_a_failure_like_trec_eval(tmp_path: Path) -> None:
    """q-blank's only gold is a document with neither text nor title: trec_eval over the eval
    set's own qrels scores it 0, so the run's means are over all 3 queries, the exported qrels
    hold it, and the run's warnings name it."""
    from ragexp.cli import main

    cfg = compose_config(tmp_path, "retrieval=bm25", "retrieval/tokenizer=plain", "eval.retrieve_k=5")
    results = run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None).output.results
    qrels = {item["id"]: {e["doc_id"]: 1 for e in item["evidence"]} for item in ITEMS}  # chunking=none: unit = doc#chunk_0
    run = {row.query_id: {cid.split("#")[0]: score for cid, score in row.ranking} for row in results.per_query}
    truth = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut.3", "recall.1"}).evaluate(run)
    assert len(truth) == 3 and truth["q-blank"]["recip_rank"] == 0.0
    for ours, theirs in (("mrr", "recip_rank"), ("ndcg_at_3", "ndcg_cut_3"), ("recall_at_1", "recall_1")):
        expected = sum(q[theirs] for q in truth.values()) / 3
        assert results.aggregates[ours] == pytest.approx(expected, abs=1e-12)
        assert results.aggregates[f"doc_{ours}"] == pytest.approx(expected, abs=1e-12)
    assert results.aggregates["n_queries"] == 3 and results.aggregates["n_queries_no_gold"] == 0
    assert any("q-blank (blank)" in warning and "retrieval failure" in warning for warning in results.meta["warnings"])

    saved = results.save(tmp_path / "results.json")
    for level in ("chunk", "doc"):
        run_file, qrels_file = tmp_path / f"{level}.run", tmp_path / f"{level}.qrels"
        assert main(["export", str(saved), "--run", str(run_file), "--qrels", str(qrels_file), "--level", level]) == 0
        assert _trec_file(qrels_file, (0, 2, 3), int)["q-blank"] == {"blank": 1}


def test_doc_metrics_score_the_runs_own_ranking_collapsed_to_documents(tmp_path: Path) -> None:
    """Small chunks, a shallow retrieval depth: 10 chunks hold only 2-3 documents. The doc-level
    metrics are pytrec_eval's on that chunk ranking collapsed to documents (each document at its
    first chunk), computed here by hand, and ``ragexp export --level doc`` writes that ranking."""
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
    results = run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None).output.results
    collapsed: dict[str, dict[str, float]] = {}
    for row in (r.to_dict() for r in results.per_query):
        assert len(row["ranking"]) == 10 and "doc_ranking" not in row
        documents: list[str] = []
        for chunk_id, _score in row["ranking"]:  # already in trec order
            if chunk_id.split("#")[0] not in documents:
                documents.append(chunk_id.split("#")[0])
        assert len(documents) < 6  # fewer documents than the cut-off: no deeper retrieval fills them up
        collapsed[row["query_id"]] = {doc: float(len(documents) - rank) for rank, doc in enumerate(documents)}
    qrels = {item["id"]: {item["evidence"][0]["doc_id"]: 1} for item in items}
    truth = pytrec_eval.RelevanceEvaluator(qrels, {"recall.6", "ndcg_cut.6", "recip_rank", "P.1"}).evaluate(collapsed)
    n = len(truth)
    for ours, theirs in (("doc_recall_at_6", "recall_6"), ("doc_ndcg_at_6", "ndcg_cut_6"), ("doc_mrr", "recip_rank"),
                         ("doc_context_precision_at_1", "P_1")):
        assert results.aggregates[ours] == pytest.approx(sum(q[theirs] for q in truth.values()) / n, abs=1e-12)
    assert "doc_rankings_extended" not in results.aggregates

    saved = results.save(tmp_path / "results.json")
    run_file, qrels_file = tmp_path / "run.trec", tmp_path / "qrels.trec"
    assert main(["export", str(saved), "--run", str(run_file), "--qrels", str(qrels_file), "--level", "doc"]) == 0
    exported = _trec_file(run_file, (0, 2, 4), float)
    assert {qid: sorted(docs, key=docs.get, reverse=True) for qid, docs in exported.items()} == {
        qid: sorted(docs, key=docs.get, reverse=True) for qid, docs in collapsed.items()}
