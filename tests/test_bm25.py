"""BM25: scores identical to rank_bm25 / bm25s, top-k order, tokenisation, caching, bad config."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import tracemalloc
import weakref

import numpy as np
import pytest
from rank_bm25 import BM25L, BM25Okapi, BM25Plus

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache
from ragexp.text.bm25 import build_index
from ragexp.text.tokenize import Tokenizer
from reference_pipelines import bm25 as bm25_module
from reference_pipelines.bm25 import BM25Retriever

RANK_BM25 = {"okapi": BM25Okapi, "bm25l": BM25L, "bm25plus": BM25Plus}


def make_chunks(texts: list[str], titles: list[str] | None = None) -> list[Chunk]:
    titles = titles or [""] * len(texts)
    return [
        Chunk(id=f"d{i:03d}#chunk_0", doc_id=f"d{i:03d}", index=0, start=0, end=len(t), text=t, title=title)
        for i, (t, title) in enumerate(zip(texts, titles))
    ]


def zen_of_python() -> list[str]:
    """Real English text from the standard library; every line also names "Python", so one term
    occurs in every document (Okapi idf < 0, floored by epsilon)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    lines = [line for line in codecs.decode(this.s, "rot13").splitlines()[2:] if line.strip()]
    return [f"{line} -- Python" for line in lines]


def assert_same_scores(ours: np.ndarray, theirs: np.ndarray) -> None:
    scale = float(np.abs(theirs).max())
    assert scale > 0
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9 * scale)


@pytest.mark.parametrize("variant", sorted(RANK_BM25))
@pytest.mark.parametrize("tokenizer", [{"stopwords": None, "stemmer": None}, {}], ids=["plain", "stop+stem"])
def test_scores_equal_rank_bm25_on_zen(variant: str, tokenizer: dict) -> None:
    docs = zen_of_python()
    retriever = BM25Retriever(variant=variant, tokenizer=tokenizer)
    retriever.index(make_chunks(docs))
    queries = ["Python is better than ugly", "is is is", "special cases aren't special enough", "nothing matches xyzzy"]
    reference = RANK_BM25[variant]([retriever.tokenizer(d) for d in docs])
    expected = np.array([reference.get_scores(retriever.tokenizer(q)) for q in queries])
    assert_same_scores(retriever.score_all(queries), expected)
    if variant == "okapi":
        python = retriever.tokenizer("Python")[0]
        assert reference.idf[python] == pytest.approx(0.25 * reference.average_idf)  # the epsilon floor was used


def test_okapi_negative_average_idf_is_reproduced() -> None:
    """A corpus where most terms occur in most documents: the mean idf, and so the floor, is negative."""
    docs = ["alpha beta gamma", "alpha beta delta", "alpha beta gamma delta", "alpha epsilon"]
    retriever = BM25Retriever(variant="okapi", tokenizer={"stopwords": None, "stemmer": None})
    retriever.index(make_chunks(docs))
    reference = BM25Okapi([d.split() for d in docs])
    assert reference.average_idf < 0
    queries = ["alpha", "beta gamma", "epsilon alpha alpha"]
    assert_same_scores(retriever.score_all(queries), np.array([reference.get_scores(q.split()) for q in queries]))


@pytest.mark.parametrize("variant", sorted(RANK_BM25))
def test_scores_equal_rank_bm25_on_scifact(variant: str, shared_data) -> None:
    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as handle:
        docs = [json.loads(line) for _, line in zip(range(250), handle)]
    with open(shared_data / "scifact" / "queries.jsonl", encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for _, line in zip(range(30), handle)]
    chunks = make_chunks([d["text"] for d in docs], [d["title"] for d in docs])
    retriever = BM25Retriever(variant=variant)
    retriever.index(chunks)
    reference = RANK_BM25[variant]([retriever.tokenizer(c.text_with_title()) for c in chunks])
    expected = np.array([reference.get_scores(retriever.tokenizer(q)) for q in queries])
    assert_same_scores(retriever.score_all(queries), expected)


def test_lucene_variant_equals_bm25s() -> None:
    bm25s = pytest.importorskip("bm25s")
    docs = zen_of_python()
    retriever = BM25Retriever(variant="lucene", k1=1.2, b=0.75, tokenizer={"stopwords": None, "stemmer": None})
    retriever.index(make_chunks(docs))
    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    reference.index([retriever.tokenizer(d) for d in docs], show_progress=False)
    queries = ["better than ugly", "python namespaces idea"]
    expected = np.array([reference.get_scores(retriever.tokenizer(q)) for q in queries])
    np.testing.assert_allclose(retriever.score_all(queries), expected, rtol=1e-5)  # bm25s stores float32


def test_search_is_top_k_of_scores_with_ties_by_id_descending() -> None:
    docs = ["apple pie", "apple pie", "apple", "banana split", "apple apple pie", "cherry", "apple pie"]
    retriever = BM25Retriever(variant="bm25plus", tokenizer={"stopwords": None, "stemmer": None})
    retriever.index(make_chunks(docs))
    scores = retriever.score_all(["apple pie"])[0]
    assert scores[0] == scores[1] == scores[6] > scores[4]  # a three-way tie at the top
    matching = [i for i, doc in enumerate(docs) if "apple" in doc]
    expected = [(f"d{i:03d}#chunk_0", scores[i]) for i in sorted(matching, key=lambda i: (-scores[i], -i))]
    for k in (2, 4, 100):  # the cut at 2 splits the tie: the higher ids win
        (ranking,) = retriever.search(["apple pie"], k=k)
        assert [cid for cid, _ in ranking] == [cid for cid, _ in expected[:k]]
        assert [s for _, s in ranking] == pytest.approx([s for _, s in expected[:k]], rel=1e-12)
    assert retriever.search(["durian"], k=5) == [[]]  # documents sharing no query term are not returned


def test_search_memory_follows_the_batch_budget_and_rankings_do_not_depend_on_it(monkeypatch) -> None:
    """A query batch's sparse scores hold up to ``batch x chunks`` entries; a large corpus scores
    fewer queries at once (``BATCH_ENTRIES``), with the same rankings."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(500)]
    docs = [f"common {' '.join(rng.choice(words, 8))}" for _ in range(20_000)]  # every chunk matches "common"
    queries = [f"common {' '.join(rng.choice(words, 3))}" for _ in range(600)]
    retriever = BM25Retriever(tokenizer={"stopwords": None, "stemmer": None})
    retriever.index(make_chunks(docs))
    assert bm25_module.query_batch(len(docs)) == bm25_module.QUERY_BATCH  # 512 x 20,000 fits the default budget
    assert bm25_module.query_batch(10**6) * 10**6 <= bm25_module.BATCH_ENTRIES < 2 * 10**6 * bm25_module.query_batch(10**6)
    assert bm25_module.query_batch(10**9) == 1
    whole = retriever.search(queries, 10)
    monkeypatch.setattr(bm25_module, "BATCH_ENTRIES", 1 << 16)  # 3 queries per product
    tracemalloc.start()
    try:
        small = retriever.search(queries, 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert small == whole
    assert peak < 16 * (1 << 16) * 12  # 512 queries at once held ~123 MB of scores here


def test_index_build_reads_the_documents_one_at_a_time() -> None:
    """``build_index`` of a generator never holds more than the current document's tokens, and
    builds the same index as from a list."""

    class Tokens(list):  # a list that can be watched with a weak reference
        pass

    docs = zen_of_python()
    tokenizer = Tokenizer()
    alive = most_alive = 0

    def freed() -> None:
        nonlocal alive
        alive -= 1

    def stream():
        nonlocal alive, most_alive
        for doc in docs:
            tokens = Tokens(tokenizer(doc))
            weakref.finalize(tokens, freed)
            alive += 1
            most_alive = max(most_alive, alive)
            yield tokens
            del tokens

    streamed, listed = build_index(stream()), build_index([tokenizer(doc) for doc in docs])
    assert most_alive <= 2  # the one being read and the one before it (a list would hold all of them)
    assert streamed.vocabulary == listed.vocabulary
    assert (streamed.weights != listed.weights).nnz == 0
    np.testing.assert_array_equal(streamed.match_bonus, listed.match_bonus)
    assert build_index([[], []]).weights.shape == (0, 2)  # documents without tokens: an empty index over them


def test_queries_go_through_the_document_pipeline() -> None:
    retriever = BM25Retriever()  # lowercase, Lucene stopwords, Snowball English
    retriever.index(make_chunks(["The runner runs every morning.", "A quiet library.", "Some cheese."]))
    (ranking,) = retriever.search(["RUNNING"], k=2)
    assert [cid for cid, _ in ranking] == ["d000#chunk_0"]
    assert Tokenizer()("The Runners are running into the libraries") == ["runner", "run", "librari"]


def test_index_is_cached_and_identical(tmp_path) -> None:
    docs = zen_of_python() + ["naïve façade — ünïcode tokens"]
    cache = StageCache(tmp_path)
    first = BM25Retriever(cache=cache)
    first.index(make_chunks(docs))
    second = BM25Retriever(cache=cache)
    second.index(make_chunks(docs))
    assert (cache.misses["bm25-index"], cache.hits["bm25-index"]) == (1, 1)
    queries = ["naïve façade", "Python namespaces"]
    np.testing.assert_array_equal(first.score_all(queries), second.score_all(queries))
    assert first.search(queries, 5) == second.search(queries, 5)


def test_include_title_false_indexes_text_only() -> None:
    chunks = make_chunks(["body words here"], titles=["unique heading"])
    with_title, without_title = BM25Retriever(), BM25Retriever(include_title=False)
    with_title.index(chunks)
    without_title.index(chunks)
    assert with_title.search(["heading"], 1)[0] and without_title.search(["heading"], 1) == [[]]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"variant": "bm42"}, "variant"),
        ({"b": 1.5}, "b"),
        ({"tokenizer": {"stopwords": "klingon"}}, "stopwords"),
        ({"tokenizer": {"stemmer": "snowball-klingon"}}, "stemmer"),
        ({"tokenizer": {"token_pattern": "(unclosed"}}, "token_pattern"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(RagexpInputError) as err:
        BM25Retriever(**kwargs)
    assert err.value.field == field


TWO_DOCS = ["Webhooks are retried for a day.", "Invoices are sent monthly."]  # every term in 1 of 2 docs: okapi idf 0


@pytest.mark.parametrize(("texts", "variant", "warns"), [
    (TWO_DOCS, "okapi", True),
    (TWO_DOCS, "lucene", False),  # ln(1 + (N - df + 0.5) / (df + 0.5)) > 0 always
    ([*TWO_DOCS, "Keys rotate without downtime."], "okapi", False),  # df 1 of 3: idf > 0
], ids=["okapi-2-docs", "lucene-2-docs", "okapi-3-docs"])
def test_an_index_where_no_term_scores_is_warned_about(texts, variant, warns, tmp_path) -> None:
    chunks = make_chunks(texts)
    rank = BM25Okapi([Tokenizer()(t) for t in texts]) if variant == "okapi" else None
    for cache in (None, StageCache(tmp_path), StageCache(tmp_path)):  # uncached, built, loaded from the cache
        retriever = BM25Retriever(variant=variant, cache=cache)
        retriever.index(chunks)
        scores = retriever.score_all(["how long are webhooks retried"])
        assert bool(retriever.warnings) == warns
        assert (scores.max() <= 0) == warns
        if rank is not None:  # the independent implementation agrees that nothing scores
            assert (max(rank.get_scores(Tokenizer()("how long are webhooks retried"))) <= 0) == warns
    if warns:
        assert retriever.search(["how long are webhooks retried"], 5) == [[]]  # the silent all-zero run of #13
        assert "no term has a positive weight over these 2 chunks" in retriever.warnings[0]


def test_the_warning_is_recorded_with_the_run_and_survives_the_cache(tmp_path, capsys, monkeypatch) -> None:
    from hydra import compose, initialize_config_dir
    from mlflow.tracking import MlflowClient

    from ragexp.config.compose import CONFIG_DIR
    from ragexp.config.schema import register_schema
    from ragexp.jobs.console import print_run_summary
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.jobs.job import run_job
    from ragexp.tracking.run_logger import TAG_WARNINGS

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, text in enumerate(TWO_DOCS):
        (corpus / f"d{i}.md").write_text(text + "\n", encoding="utf-8")
    evalset = tmp_path / "evalset.jsonl"
    evalset.write_text(json.dumps({"id": "q", "query": "How long are webhooks retried?",
                                   "evidence": [{"doc_id": "d0"}]}) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a sqlite store's default artifact root is ./mlruns: not in the repo
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[
            "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "retrieval=bm25", "chunking=none",
            f"cache_dir={tmp_path / 'cache'}", "progress=false", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        ])  # fmt: skip
    runs = [run_job(job_spec(cfg), output_dir=tmp_path / f"out{i}") for i in range(2)]
    assert not runs[0].output.results.meta["retrieval_from_cache"] and runs[1].output.results.meta["retrieval_from_cache"]
    for result in runs:
        (warning,) = result.output.results.meta["warnings"]
        assert warning.startswith("bm25 (okapi): no term has a positive weight")
        assert result.output.results.aggregates["hit_rate_at_10"] == 0.0
        assert MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(result.run_id).data.tags[TAG_WARNINGS] == warning
    saved = json.loads((tmp_path / "out1" / "ragexp_results.json").read_text(encoding="utf-8"))
    assert saved["meta"]["warnings"] == [warning]
    print_run_summary(runs[1].output, runs[1].run_id, "sqlite:///x")
    assert f"WARNING: {warning}" in capsys.readouterr().out
