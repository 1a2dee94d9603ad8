"""A black-box system's responses: cached by (system identity, request), so sweeping judge or
``eval.*`` options asks nothing again; an interrupted run resumes asking only what it lacks; a
logged run is re-scored from its stored responses without calling the system (``ragexp
reproduce``), and ``--live`` calls it again and names the queries that drifted."""

from __future__ import annotations

import math

import pytest

from ragexp.config.compose import compose_config
from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from tests.helpers.cli import dataset_args, job_runs, ragexp
from tests.helpers.system_server import Raw, serve
from tests.helpers.tiny_dataset import TINY_DOCS


def keyword_system(body: dict) -> dict:
    """A small real retriever: documents ranked by shared words, each paragraph a passage."""
    words = set(body["query"].lower().replace("?", "").split())
    ranked = sorted(TINY_DOCS, key=lambda d: -len(words & set(TINY_DOCS[d].lower().split())))
    passages = [{"text": p, "doc_id": d} for d in ranked for p in TINY_DOCS[d].split("\n\n") if not p.startswith("#")]
    return {"passages": passages[: body.get("top_k", 10)], "answer": f"See {ranked[0]}."}


def run(tiny_dataset, tmp_path, url: str, *overrides: str):
    corpus, evalset = tiny_dataset
    cfg = compose_config(["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "progress=false",
                          f"cache_dir={tmp_path / 'cache'}", "system=http", f"system.url={url}", "system.max_retries=0",
                          *overrides])
    return run_job(job_spec(cfg, allowed_endpoints=[url]), output_dir=tmp_path / "out", log_to=None).output


def test_sweeping_eval_and_judge_options_asks_the_system_nothing_again(tiny_dataset, tmp_path):
    with serve(keyword_system) as server:
        first = run(tiny_dataset, tmp_path, server.url)
        assert server.hits == 7 and server.bodies[0] == {"query": server.bodies[0]["query"]}
        second = run(tiny_dataset, tmp_path, server.url, "eval.ks=[1,2,4]", "judge.threshold=0.5",
                     "eval.relevance.min_fraction=0.3")
        assert server.hits == 7  # all from the cache
        assert second.results.meta["system"]["responses_from_cache"] == 7
        # the cached value is what asking gives: the same run without the cache asks again and agrees
        fresh = run(tiny_dataset, tmp_path, server.url, "system.cache=false")
        assert server.hits == 14
        scores = lambda output: {k: v for k, v in output.results.aggregates.items()  # noqa: E731
                                 if not k.startswith(("cost.", "gen."))}  # latency and wall times differ by nature
        assert scores(fresh) == pytest.approx(scores(first), nan_ok=True, abs=0)
        # another request (extra fields) or another deployed version is another key
        run(tiny_dataset, tmp_path, server.url, "+system.request.extra.top_k=3")
        run(tiny_dataset, tmp_path, server.url, "system.version=v2")
        assert server.hits == 28 and server.bodies[-8]["top_k"] == 3


def test_an_interrupted_run_resumes_without_asking_again_what_it_has(tiny_dataset, tmp_path):
    down = {"on": True}

    def flaky(body: dict):
        if down["on"] and "webhook" in body["query"].lower():
            return Raw(b"upstream down", 503)
        return keyword_system(body)

    with serve(flaky) as server:
        with pytest.raises(RagexpInputError) as failed:
            run(tiny_dataset, tmp_path, server.url)
        message = str(failed.value)
        assert "the system failed on 2 of 7 queries, no run logged: http_5xx x2" in message
        assert "the 5 answered are cached, run the same command again to resume" in message
        assert server.hits == 7 and not (tmp_path / "out").exists()
        down["on"] = False
        output = run(tiny_dataset, tmp_path, server.url)
        assert server.hits == 9  # only the two it lacked
        assert output.results.meta["system"]["responses_from_cache"] == 5
        assert not math.isnan(output.results.aggregates["mrr"])


@pytest.mark.slow
def test_reproduce_rescores_stored_responses_and_live_reports_drift(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    args = [*dataset_args(tiny_dataset, db), f"cache_dir={tmp_path / 'cache'}"]
    with serve(keyword_system) as server:
        url = server.url
        ragexp(tmp_path, "run", *args, "system=http", f"system.url={url}", "--allow-endpoint", url)
    _, _, (original,) = job_runs(db)
    # the system is gone: the stored responses are re-scored, nothing is called
    replayed = ragexp(tmp_path, "reproduce", original.info.run_id, "--tracking-uri", f"sqlite:///{db}")
    assert "retrieval metrics identical" in replayed.stdout, replayed.stdout[-2000:]
    # live: the system now answers one query from another document first
    changed = {"q": "How long are webhooks retried?"}

    def drifted(body: dict) -> dict:
        answer = keyword_system(body)
        if body["query"] == changed["q"]:
            answer["passages"] = answer["passages"][::-1]
        return answer

    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with serve(drifted, port=port) as live:  # the system back where it was, answering differently
        refused = ragexp(tmp_path, "reproduce", original.info.run_id, "--live", "--tracking-uri", f"sqlite:///{db}",
                         check=False)
        assert refused.returncode == 2 and "field 'system.url'" in refused.stderr and live.hits == 0  # not allowed here
        proc = ragexp(tmp_path, "reproduce", original.info.run_id, "--live", "--allow-endpoint", url,
                      "--tracking-uri", f"sqlite:///{db}", check=False)
        assert live.hits == 7
    assert proc.returncode == 1, proc.stderr[-2000:]  # its metrics moved
    assert "drift: 1 of 7 queries answered differently live (passages 1, answers 0)" in proc.stdout
    assert "t1: same passages, reordered, top 5 changed" in proc.stdout
