"""Must show (issue #39): a real third-party pipeline (LangChain's splitter and BM25Retriever over
the demo corpus) served over HTTP on 127.0.0.1 and run through ``ragexp run`` from the shell; its
per-query relevance is checked against an independent placement of its chunks: the splitter's own
start indices (``add_start_index=True``), scored by the documented rule (pool, trimmed span size);
the same with each passage carrying its metadata as ``format_document`` writes it (#48): a
``key: value`` header and a blank line, and ``Source: ... Content: ...``, with equal metrics."""

from __future__ import annotations

import warnings

import pytest

from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.metrics.relevance import OverlapRule
from ragexp.evaluation.results import RunResults
from tests.helpers.cli import job_runs, ragexp
from tests.helpers.system_server import serve

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its sunset on import
    from tests.helpers.langchain_system import LangChainPipeline


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    piece = text[start:end]
    return start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())


@pytest.mark.slow
@pytest.mark.parametrize("passage_format", ["none", "metadata", "source_content"])
def test_a_langchain_pipeline_over_http_is_scored_by_its_own_start_indices(tmp_path, passage_format):
    pipeline = LangChainPipeline()
    db = tmp_path / "mlflow.db"
    with serve(pipeline.answer) as server:
        sample = pipeline.answer({"query": "webhook retries", "format": passage_format})["passages"][0]["text"]
        assert sample.startswith({"none": "", "metadata": "source: ", "source_content": "Source: "}[passage_format])
        ragexp(tmp_path, "run", "system=http", f"system.url={server.url}", "--allow-endpoint", server.url,
               f"+system.request.extra.format={passage_format}",
               f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny", f"cache_dir={tmp_path / 'cache'}", "progress=false")
    (results_file,) = tmp_path.glob("outputs/*/*/ragexp_results.json")
    results = RunResults.load(results_file)
    _, _, (run,) = job_runs(db)
    assert run.info.status == "FINISHED" and run.data.metrics["black_box/located_rate"] > 0.99
    assert run.data.metrics["black_box/located_exact_rate"] == run.data.metrics["black_box/located_rate"]

    corpus = load_corpus(demo_paths()[0])
    evalset = load_evalset(demo_paths()[1], corpus)
    rule = OverlapRule()
    # the independent placement: every passage at (doc_id, start_index, start_index + len(text))
    placed = {}
    for item in evalset.items:
        placed[item.id] = [(d.metadata["doc_id"], d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content))
                           for d in pipeline.search(item.query)]
    pool = {span for spans in placed.values() for span in spans}
    checked = 0
    for row, item in zip(results.per_query, evalset.items):
        spans = placed[item.id]
        units = [cid for cid, _ in row.ranking]
        assert units == [f"{doc}#chunk_{start}-{end}" for doc, start, end in spans]  # ragexp found every place
        expected = {}
        for evidence in item.evidence:
            start, end = trimmed(corpus[evidence.doc_id].text, evidence.start, evidence.end)
            for doc, s, e in pool:
                if doc == evidence.doc_id and rule.matches(min(end, e) - max(start, s), end - start, e - s):
                    key = f"{doc}#chunk_{s}-{e}"
                    expected[key] = max(expected.get(key, -1), evidence.grade)
        assert {u: g for u, g in row.relevant.items() if not u.startswith("unreturned:")} == expected, item.id
        first = next((rank for rank, unit in enumerate(units, 1) if expected.get(unit, 0) >= 1), None)
        assert row.first_relevant_rank == first, item.id
        checked += bool(item.evidence)
    assert checked == 131
    assert results.aggregates["hit_rate_at_5"] == pytest.approx(0.46564885496183206, abs=1e-9)  # 0.466 in docs/systems.md, every format
