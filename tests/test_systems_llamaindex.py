"""Must show (issue #48): a real LlamaIndex pipeline (``SentenceSplitter`` + ``BM25Retriever``) served
over HTTP on 127.0.0.1 and run through ``ragexp run`` in metadata modes NONE, LLM and ALL (a
``key: value`` header of three or five keys and a blank line before each passage's text): every
passage is placed exactly at its node's ``start_char_idx``/``end_char_idx``, each query's relevant
units are those an independent computation from the node offsets gives, and every per-query metric
is equal across the three modes to 1e-9."""

from __future__ import annotations

import pytest

from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.evaluation.results import RunResults
from ragexp.metrics.relevance import OverlapRule
from tests.helpers.cli import job_runs, ragexp
from tests.helpers.system_server import serve
from tests.test_systems_langchain import trimmed

pytest.importorskip("llama_index.retrievers.bm25")
from tests.helpers.llamaindex_system import LlamaIndexPipeline  # noqa: E402


@pytest.mark.slow
def test_a_llamaindex_pipeline_is_placed_by_its_node_offsets_in_every_metadata_mode(tmp_path):
    pipeline = LlamaIndexPipeline()
    results = {}
    with serve(pipeline.answer) as server:
        for mode in ("none", "llm", "all"):
            db = tmp_path / f"{mode}.db"
            (tmp_path / mode).mkdir()
            ragexp(tmp_path / mode, "run", "system=http", f"system.url={server.url}", "--allow-endpoint", server.url,
                   f"+system.request.extra.mode={mode}", f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny",
                   f"cache_dir={tmp_path / 'cache'}", "progress=false")
            (results_file,) = (tmp_path / mode).glob("outputs/*/*/ragexp_results.json")
            results[mode] = RunResults.load(results_file)
            _, _, (run,) = job_runs(db)
            assert run.info.status == "FINISHED" and run.data.metrics["black_box/located_rate"] == 1.0
            assert run.data.metrics["black_box/located_exact_rate"] == 1.0, mode
    header = pipeline.answer({"query": "webhook retries", "mode": "all"})["passages"][0]["text"]
    assert header.startswith("title: ") and "\nfile_name: " in header and "\n\n" in header  # five keys, then the text

    corpus = load_corpus(demo_paths()[0])
    evalset = load_evalset(demo_paths()[1], corpus)
    rule = OverlapRule()
    placed = {item.id: [(h.node.ref_doc_id, h.node.start_char_idx, h.node.end_char_idx) for h in pipeline.search(item.query)]
              for item in evalset.items}
    assert all(corpus[d].text[s:e] == h.node.text for item in evalset.items[:20]
               for (d, s, e), h in zip(placed[item.id], pipeline.search(item.query)))
    pool = {span for spans in placed.values() for span in spans}
    for mode, result in results.items():
        for row, item in zip(result.per_query, evalset.items):
            spans = placed[item.id]
            assert [cid for cid, _ in row.ranking] == [f"{d}#chunk_{s}-{e}" for d, s, e in spans], (mode, item.id)
            expected = {}
            for evidence in item.evidence:
                start, end = trimmed(corpus[evidence.doc_id].text, evidence.start, evidence.end)
                for doc, s, e in pool:
                    if doc == evidence.doc_id and rule.matches(min(end, e) - max(start, s), end - start, e - s):
                        expected[f"{doc}#chunk_{s}-{e}"] = max(expected.get(f"{doc}#chunk_{s}-{e}", -1), evidence.grade)
            assert {u: g for u, g in row.relevant.items() if not u.startswith("unreturned:")} == expected, (mode, item.id)
    base = results["none"]
    for mode in ("llm", "all"):
        for a, b in zip(base.per_query, results[mode].per_query):
            assert a.metrics.keys() == b.metrics.keys()
            for key, value in a.metrics.items():
                assert value == pytest.approx(b.metrics[key], abs=1e-9, nan_ok=True), (mode, a.query_id, key)
    assert base.aggregates["hit_rate_at_5"] > 0.3  # a working pipeline, not an empty one
