"""Must show (issue #39): ragexp's own BM25 over fixed-512 chunks, served as a black box (passage
text and document id only: no chunk id, no offset), gives every logged retrieval metric of the
native ``retrieval=bm25 chunking=fixed`` run on the demo, to 1e-9: over HTTP (a real uvicorn
server on 127.0.0.1), as a registered Python callable, and from a recorded file. The independent
truth is the native run itself, scored by ragexp's chunker offsets and chunk qrels."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.config import targets
from ragexp.config.compose import compose_config
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import LogTo, run_job
from ragexp.metrics.measure import measure
from ragexp.runtime.stage_cache import StageCache
from ragexp.systems.locate import Locator
from ragexp.systems.scoring import trimmed_span
from ragexp.tracking.metric_names import results_view
from tests.helpers import native_bm25
from tests.helpers.system_server import serve


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("equality")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # MLflow's artifacts (./mlruns) beside the store
        yield folder


@pytest.fixture(scope="module")
def native(work):
    cfg = compose_config([*native_bm25.NATIVE, f"cache_dir={work / 'cache'}", f"tracking.uri=sqlite:///{work / 'mlflow.db'}"])
    return run_job(job_spec(cfg), output_dir=work / "native", log_to=LogTo())


@pytest.fixture(scope="module")
def system(work, native):
    return native_bm25.NativeBM25(str(work / "cache"))


def logged_retrieval_metrics(work: Path, run_id: str) -> dict[str, float]:
    run = MlflowClient(f"sqlite:///{work / 'mlflow.db'}").get_run(run_id)
    assert run.info.status == "FINISHED"
    return {k: v for k, v in results_view(run.data.metrics, run.data.params).items() if measure(k).is_retrieval()}


def assert_equal_metrics(native: dict, black_box: dict) -> None:
    assert set(native) == set(black_box), set(native) ^ set(black_box)
    differ = {k: (native[k], black_box[k]) for k in native
              if not (abs(native[k] - black_box[k]) <= 1e-9 or (math.isnan(native[k]) and math.isnan(black_box[k])))}
    assert differ == {}
    assert len(native) > 150  # chunk and doc level, every k, per tag, CIs: all of them


def black_box_run(work: Path, name: str, *overrides: str):
    cfg = compose_config([f"cache_dir={work / 'cache'}", f"tracking.uri=sqlite:///{work / 'mlflow.db'}", "progress=false",
                          *overrides])
    allowed = [value.partition("=")[2] for value in overrides if value.startswith("system.url=")]
    return run_job(job_spec(cfg, overrides, allowed_endpoints=allowed), output_dir=work / name, log_to=LogTo())


@pytest.mark.slow
def test_http_black_box_equals_the_native_run(work, native, system):
    with serve(lambda body: system(body["query"])) as server:
        result = black_box_run(work, "http", "system=http", f"system.url={server.url}")
        assert server.hits == len(native.output.results.per_query) - _repeated_queries(native)
    assert_equal_metrics(logged_retrieval_metrics(work, native.run_id), logged_retrieval_metrics(work, result.run_id))
    aggregates = result.output.results.aggregates
    assert aggregates["black_box.located_rate"] == 1.0 and aggregates["black_box.located_exact_rate"] == 1.0
    assert aggregates["n_chunks"] == native.output.results.aggregates["n_chunks"]  # the pool is the whole tiling
    assert {"cost.endpoint_latency_p50_ms", "cost.endpoint_latency_p95_ms", "cost.endpoint_latency_mean_ms"} <= set(aggregates)
    run = MlflowClient(f"sqlite:///{work / 'mlflow.db'}").get_run(result.run_id)
    assert {"cost/endpoint_latency_p50_ms", "cost/endpoint_latency_p95_ms", "cost/endpoint_latency_mean_ms",
            "black_box/located_rate"} <= set(run.data.metrics)
    assert run.info.run_name == f"system=http: 127.0.0.1:{server.url.split(':')[2]}" or run.info.run_name.startswith("http:")
    # the per-query relevance is the native chunk qrels under other names: same spans, same grades
    native_rows = {r.query_id: r for r in native.output.results.per_query}
    chunks = system.chunks
    for row in result.output.results.per_query:
        expected = {f"{chunks[c].doc_id}#chunk_{chunks[c].start}-{chunks[c].end}": g
                    for c, g in native_rows[row.query_id].relevant.items() if c in chunks}
        assert {u: g for u, g in row.relevant.items() if not u.startswith("unreturned:")} == expected


def _repeated_queries(native) -> int:
    queries = [r.query for r in native.output.results.per_query]
    return len(queries) - len(set(queries))


@pytest.mark.slow
def test_python_callable_equals_the_native_run(work, native, monkeypatch):
    monkeypatch.syspath_prepend(str(native_bm25.register(work / "site")))
    targets.registered_entry_points.cache_clear()
    try:
        result = black_box_run(work, "python", "system=python", f"system.target={native_bm25.TARGET}",
                               f"+system.options.cache_dir={work / 'cache'}")
    finally:
        targets.registered_entry_points.cache_clear()
    assert_equal_metrics(logged_retrieval_metrics(work, native.run_id), logged_retrieval_metrics(work, result.run_id))
    assert result.output.results.meta["system"]["identity"]["distribution"] == "native-bm25-system==0.1"


@pytest.mark.slow
def test_recorded_file_equals_the_native_run(work, native, system):
    recorded = work / "recorded.jsonl"
    recorded.write_text("".join(json.dumps({"query_id": r.query_id, **system(r.query)}) + "\n"
                                for r in native.output.results.per_query), encoding="utf-8")
    result = black_box_run(work, "recorded", "system=recorded", f"system.path={recorded}")
    assert_equal_metrics(logged_retrieval_metrics(work, native.run_id), logged_retrieval_metrics(work, result.run_id))


def test_a_span_counts_the_same_for_a_black_box_on_the_demo(work, native):
    """The overlap rule's denominator: native = the span's characters inside some fixed-512 chunk of
    its document; black box = the span without whitespace at its ends. Equal for every demo span."""
    corpus = load_corpus(demo_paths()[0])
    by_doc = {}
    from ragexp.evaluation.prepared import prepare_data

    cfg = compose_config([*native_bm25.NATIVE, f"cache_dir={work / 'cache'}"])
    data = prepare_data(job_spec(cfg), StageCache(work / "cache"), progress=False)
    for chunk in data.chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    spans = [e for item in data.evalset.items for e in item.evidence if e.start is not None]
    assert len(spans) == 173
    for e in spans:
        covered = set()
        for chunk in by_doc[e.doc_id]:
            covered |= set(range(max(e.start, chunk.start), min(e.end, chunk.end)))
        start, end = trimmed_span(corpus[e.doc_id].text, e.start, e.end)
        assert len(covered) == end - start, e


def test_near_duplicate_text_only_passages_are_ambiguous_never_guessed():
    """Sentences the demo has verbatim in two documents (found here by brute force): text only,
    the locator names both documents as ambiguous; with a document id, it places it there."""
    corpus = load_corpus(demo_paths()[0])
    sentences = {s.strip() for doc in corpus.values() for s in re.split(r"(?<=[.!?])\s+", doc.text) if len(s.strip()) > 50}
    shared = {s: [d for d, doc in corpus.items() if s in doc.text] for s in sentences}
    shared = {s: docs for s, docs in shared.items() if len(docs) == 2}
    assert len(shared) >= 3
    locator = Locator(corpus)
    for sentence, docs in shared.items():
        placed = locator.locate(sentence)
        assert placed.how == "ambiguous" and set(placed.candidates) >= set(docs), (sentence, placed)  # + normalised twins
        for doc_id in docs:
            there = locator.locate(sentence, doc_id=doc_id)
            assert there.how == "exact" and corpus[doc_id].text[there.start:there.end] == sentence
