"""Every eval query of a run as an MLflow trace: read back through MLflow's public API, equal to
the run's ``ragexp_results.json`` query by query, on a sqlite store and on a real tracking server.

The truth each trace is checked against is independent of the trace builder: the results file
(rankings, relevance grades, per-query metrics, judge verdicts), the eval-set file as written here
(gold answer, key facts, annotator, graded evidence) and the corpus files (every passage's text
is a piece of its document). Also: a sweep logs traces only for the runs best or tied on hit
rate@5 (``tracking.traces=best``), ``ragexp traces RUN_ID`` adds them to another run,
``reproduce``/``upload``/``compare``/``gate`` work on runs with and without traces, and a
person's judge-review verdicts land as HUMAN feedback beside the judge's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mlflow.entities import AssessmentSourceType
from mlflow.tracking import MlflowClient

from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults
from ragexp.judging.calibration.labels import NOT_SUPPORTED, SUPPORTED
from ragexp.judging.faithfulness import Verdict
from ragexp.tracking import store
from ragexp.tracking.trace_content import (
    NOT_RELEVANT,
    RELEVANT,
    UNJUDGED,
    Passages,
    gold_status,
    headline_k,
    shown_depth,
    query_trace,
)
from ragexp.tracking.traces import TAG_TRACES, trace_ids
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.tiny_dataset import TINY_DOCS, TINY_ITEMS

KEY_FACTS = {"t1": ["24 hours", "exponential backoff"], "t4": ["30 requests per minute"]}
ANNOTATOR = "alice"


def write_dataset(root: Path) -> tuple[Path, Path]:
    """The tiny corpus, and an eval set with key facts, an annotator and a judged-not-relevant span."""
    corpus = root / "corpus"
    corpus.mkdir()
    for doc_id, text in TINY_DOCS.items():
        (corpus / f"{doc_id}.md").write_text(text, encoding="utf-8")
    lines = [json.dumps({"ragexp_evalset": 1, "name": "tiny"})]
    for qid, query, doc_id, quote, tags in TINY_ITEMS:
        evidence = [{"doc_id": doc_id, "quote": quote}]
        if qid == "t4":  # a passage the annotator read and judged not relevant
            evidence.append({"doc_id": "limits", "quote": "Every response carries X-RateLimit-Remaining.", "grade": 0})
        lines.append(json.dumps({"id": qid, "query": query, "evidence": evidence, "gold_answer": quote, "tags": tags,
                                 "annotator": ANNOTATOR, **({"key_facts": KEY_FACTS[qid]} if qid in KEY_FACTS else {})}))
    lines.append(json.dumps({"id": "t7", "query": "What is the CEO's favourite colour?", "answerable": False,
                             "evidence": [], "gold_answer": "The documents do not say.", "tags": ["unanswerable"]}))
    evalset = root / "evalset.jsonl"
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, evalset


def run_args(corpus: Path, evalset: Path, uri: str, *extra: str) -> list[str]:
    return ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", f"tracking.uri={uri}",
            "tracking.experiment=tiny", "progress=false", "chunking=fixed", "chunking.size=120", "chunking.overlap=20",
            "eval.ks=[1,3,5]", *extra]


# ---- the trace content, without a store -------------------------------------------------------


def test_gold_status_names_relevant_judged_and_unjudged():
    assert [gold_status(g) for g in (2, 1, 0, None)] == [RELEVANT, RELEVANT, NOT_RELEVANT, UNJUDGED]


def _row(**fields) -> QueryResult:
    base = dict(query_id="q1", query="How long?", tags=("verbatim",), ranking=(("d#chunk_0", 3.0), ("d#chunk_1", 2.0), ("e#chunk_0", 1.0)),
                relevant={"d#chunk_1": 1, "e#chunk_0": 0}, first_relevant_rank=2,
                metrics={"hit_rate_at_5": 1.0, "recall_at_5": 1.0, "ndcg_at_5": 0.63, "context_precision_at_5": 0.2, "mrr": 0.5})
    return QueryResult(**{**base, **fields})


def _passages():
    from ragexp.datamodel import Chunk

    chunks = {cid: Chunk(cid, cid.split("#")[0], 0, 0, 5, f"text of {cid}") for cid in ("d#chunk_0", "d#chunk_1", "e#chunk_0")}
    return Passages(chunks, {})


def test_retrieval_only_trace_has_passages_gold_marked_and_code_feedback():
    meta = {"ks": [1, 3, 5], "context_k": 5}
    trace = query_trace(_row(), None, _passages(), meta, "run", reranked=False)
    [retrieve] = trace.children
    assert retrieve.span_type == "RETRIEVER"
    assert [(d["id"], d["metadata"]["gold"], d["metadata"]["rank"], d["page_content"]) for d in retrieve.outputs] == [
        ("d#chunk_0", UNJUDGED, 1, "text of d#chunk_0"), ("d#chunk_1", RELEVANT, 2, "text of d#chunk_1"),
        ("e#chunk_0", NOT_RELEVANT, 3, "text of e#chunk_0")]
    assert retrieve.outputs[0]["metadata"]["doc_uri"] == "d"
    feedback = {a.name: a for a in trace.assessments}
    assert {name: feedback[name].value for name in ("hit_rate_at_5", "ndcg_at_5", "mrr")} == {
        "hit_rate_at_5": 1.0, "ndcg_at_5": 0.63, "mrr": 0.5}
    assert feedback["failure_class"].value == "ok" and "rank 2" in feedback["failure_class"].rationale
    assert all(a.source.source_type == AssessmentSourceType.CODE for a in trace.assessments)
    assert trace.root.outputs == {"top_5": ["d#chunk_0", "d#chunk_1", "e#chunk_0"]}


def test_reranked_run_keeps_the_final_order_in_the_rerank_span_only():
    trace = query_trace(_row(), None, _passages(), {"ks": [1, 3, 5]}, "run", reranked=True)
    retrieve, rerank = trace.children
    assert (retrieve.span_type, rerank.span_type) == ("RETRIEVER", "RERANKER")
    assert "page_content" not in json.dumps(retrieve.outputs)  # the first-stage order was not kept
    assert [d["id"] for d in rerank.outputs] == ["d#chunk_0", "d#chunk_1", "e#chunk_0"]


def test_judged_answer_gets_llm_judge_feedback_per_claim_with_its_evidence():
    context = "[1] Doc\nRetries last 24 hours. Timeouts are 10 seconds."
    start = context.index("Retries")
    claims = (Verdict("Retries last 24 hours.", True, 0.9, "", None, [start, start + 22]),
              Verdict("It costs 5 dollars.", False, 0.1, "", None, None),
              Verdict("Broken.", None, None, "", "judge timed out", None))
    row = _row(answer="Retries last 24 hours. It costs 5 dollars.", claims=claims, judge_context=context, n_claims=3,
               metrics={**_row().metrics, "faithfulness": 0.5, "answer_relevance": 0.8, "f1": 0.4, "exact_match": 0.0},
               generated_question="How long are retries?", failure_class="generation_failure")
    meta = {"ks": [5], "context_k": 5, "judge": {"identity": {"kind": "llm", "model_id": "gpt-4o"}}}
    trace = query_trace(row, None, _passages(), meta, "run", reranked=False)
    assert [c.name for c in trace.children] == ["retrieve", "generate", "judge_faithfulness", "judge_answer_relevance"]
    feedback = {a.name: a for a in trace.assessments}
    assert feedback["faithfulness"].value == 0.5
    assert feedback["faithfulness"].source.source_type == AssessmentSourceType.LLM_JUDGE
    assert feedback["faithfulness"].source.source_id == "llm:gpt-4o"
    assert "evidence: 'Retries last 24 hours.'" in feedback["faithfulness"].rationale
    assert "How long are retries?" in feedback["answer_relevance"].rationale
    assert feedback["correctness"].value == 0.4 and feedback["failure_class"].value == "generation_failure"
    per_claim = trace.span_assessments["judge_faithfulness"]
    assert [a.name for a in per_claim] == ["claim_0", "claim_1", "claim_2"]
    assert [a.value for a in per_claim[:2]] == [True, False]
    assert per_claim[2].error.error_message == "judge timed out"
    generate = next(c for c in trace.children if c.name == "generate")
    assert "mlflow.chat.tokenUsage" not in generate.attributes  # the model reported no tokens


def test_the_generate_span_carries_the_tokens_the_model_reported():
    row = _row(answer="Retries last 24 hours.", prompt_tokens=412, completion_tokens=9)
    trace = query_trace(row, None, _passages(), {"ks": [5], "context_k": 5}, "run", reranked=False)
    generate = next(c for c in trace.children if c.name == "generate")
    assert generate.attributes["mlflow.chat.tokenUsage"] == {"input_tokens": 412, "output_tokens": 9, "total_tokens": 421}
    assert QueryResult.from_dict(row.to_dict()) == row  # the results file keeps them


def test_lexical_judge_is_a_code_source():
    row = _row(answer="x", claims=(Verdict("x", True, 1.0, ""),), judge_context="x", metrics={"faithfulness": 1.0})
    trace = query_trace(row, None, _passages(), {"ks": [5], "judge": {"identity": {"kind": "lexical", "model_id": "lexical"}}},
                        "run", reranked=False)
    faithfulness = next(a for a in trace.assessments if a.name == "faithfulness")
    assert faithfulness.source.source_type == AssessmentSourceType.CODE


# ---- traces read back through MLflow's public API ----------------------------------------------


def check_traces_equal_results(client: MlflowClient, run_id: str, corpus: Path, evalset: Path) -> None:
    """Every query of the run: its trace, read back with ``search_traces``, against the results
    file, the eval-set file and the corpus files."""
    run = client.get_run(run_id)
    results = RunResults.load(client.download_artifacts(run_id, ARTIFACT_NAME, str(corpus.parent / run_id[:8])))
    items = {json.loads(line)["id"]: json.loads(line) for line in evalset.read_text().splitlines()[1:]}
    documents = {p.stem: p.read_text(encoding="utf-8") for p in corpus.glob("*.md")}
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=run_id, max_results=500)
    by_query = {t.info.tags["ragexp.query_id"]: t for t in traces}
    assert sorted(by_query) == sorted(row.query_id for row in results.per_query)
    assert run.data.tags[TAG_TRACES] == f"{len(results.per_query)} of {len(results.per_query)}"
    ks, context_k = results.meta["ks"], results.meta["context_k"]
    k = headline_k(ks)
    for row in results.per_query:
        trace = by_query[row.query_id]
        assert trace.info.request_metadata["mlflow.sourceRun"] == run_id
        root = next(s for s in trace.data.spans if s.parent_id is None)
        assert root.inputs == {"query": row.query} == {"query": items[row.query_id]["query"]}
        assert root.attributes["ragexp.metrics"] == row.metrics
        assert root.outputs == (row.answer if row.answer is not None else {f"top_{context_k}": row.top_ids(context_k)})
        [retrieve] = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
        shown = retrieve.outputs
        assert [(d["id"], d["metadata"]["score"]) for d in shown] == list(row.ranking[:shown_depth(ks, context_k)])
        for document in shown:
            grade = row.relevant.get(document["id"])
            assert document["metadata"]["gold"] == (UNJUDGED if grade is None else RELEVANT if grade > 0 else NOT_RELEVANT)
            assert document["page_content"] and document["page_content"] in documents[document["metadata"]["doc_uri"]]
        assessments = {}
        for assessment in trace.info.assessments:
            assessments.setdefault(assessment.name, []).append(assessment)
        for name in (f"hit_rate_at_{k}", f"recall_at_{k}", f"ndcg_at_{k}", f"context_precision_at_{k}", "mrr"):
            assert (name in assessments) == (name in row.metrics)
            if name in row.metrics:
                [feedback] = assessments[name]
                assert feedback.value == row.metrics[name] and feedback.source.source_type == "CODE"
        assert [a.value for a in assessments["failure_class"]] == [row.outcome_class(context_k)]
        item = items[row.query_id]
        [gold] = assessments["expected_response"]
        assert gold.value == item["gold_answer"]
        assert gold.source.source_type == "HUMAN" and gold.source.source_id == item.get("annotator", "eval set tiny")
        if "key_facts" in item:
            assert assessments["expected_facts"][0].value == item["key_facts"]
        relevant = [e for e in item["evidence"] if e.get("grade", 1) > 0]
        if relevant:
            context = assessments["expected_retrieved_context"][0].value
            assert [(c["doc_uri"], c["content"]) for c in context] == [(e["doc_id"], e["quote"]) for e in relevant]
        negatives = [e for e in item["evidence"] if e.get("grade", 1) == 0]
        assert ("judged_not_relevant" in assessments) == bool(negatives)
        if row.claims is not None:
            assert "faithfulness" in assessments
            if "faithfulness" in row.metrics:
                assert assessments["faithfulness"][0].value == row.metrics["faithfulness"]
            judge_span = next(s for s in trace.data.spans if s.name == "judge_faithfulness")
            for index, verdict in enumerate(row.claims):
                [claim] = assessments[f"claim_{index}"]
                assert claim.span_id == judge_span.span_id and claim.rationale.startswith(verdict.claim)
                assert (claim.value if verdict.supported is not None else None) == verdict.supported
        if "f1" in row.metrics:
            assert assessments["correctness"][0].value == row.metrics["f1"]
        if row.prompt_tokens is not None:
            generate = next(s for s in trace.data.spans if s.name == "generate")
            assert generate.attributes["mlflow.chat.tokenUsage"]["input_tokens"] == row.prompt_tokens


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    """One run with a generator and a judge, logged with its traces to a sqlite store."""
    root = tmp_path_factory.mktemp("traced")
    corpus, evalset = write_dataset(root)
    db = root / "mlflow.db"
    ragexp(root, "run", *run_args(corpus, evalset, f"sqlite:///{db}", "retrieval=bm25", "generator=extractive",
                                  "judge=lexical"))
    client = MlflowClient(f"sqlite:///{db}")
    [run] = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    return root, corpus, evalset, db, client, run


@pytest.mark.slow
def test_a_run_logs_one_trace_per_query_equal_to_its_results(traced_run):
    _, corpus, evalset, _, client, run = traced_run
    check_traces_equal_results(client, run.info.run_id, corpus, evalset)
    results = RunResults.load(client.download_artifacts(run.info.run_id, ARTIFACT_NAME, str(corpus.parent / "again")))
    assert any(row.claims for row in results.per_query), "the run judged no claim: the claim checks checked nothing"
    dataset = run.inputs.dataset_inputs[0].dataset  # the eval set as an evaluation dataset, by content hash
    evalset_fp = run.data.tags[store.TAG_EVALSET_FP]
    assert dataset.name == f"tiny@{evalset_fp[:12]}" and dataset.source_type == "mlflow_evaluation_dataset"
    [found] = client.search_datasets(experiment_ids=[run.info.experiment_id])
    assert found.tags["ragexp.evalset_fingerprint"] == evalset_fp
    assert json.loads(found.profile)["num_records"] == len(results.per_query)


@pytest.mark.slow
def test_review_verdicts_land_beside_the_judges_as_human_feedback(traced_run):
    from ragexp.judge_review.sample import review_claims
    from ragexp.tracking.review_assessments import log_review_labels

    _, corpus, _, _, client, run = traced_run
    run_id = run.info.run_id
    results = RunResults.load(client.download_artifacts(run_id, ARTIFACT_NAME, str(corpus.parent / "review")))
    claims = [c for c in review_claims(results.per_query, prefix=f"{run_id}/") if c.row.judge_label][:2]
    assert claims, "no judged claim to review"
    rows = [c.row for c in claims]
    for row, label in zip(rows, (SUPPORTED, NOT_SUPPORTED)):
        row.human_label = label
    assert log_review_labels(client, run_id, rows) == len(rows)
    ids = trace_ids(client, run.info.experiment_id, run_id)

    def human(row):
        query, index = row.id.split("/", 1)[1].rsplit("#claim_", 1)
        trace = client.get_trace(ids[query], display=False)
        mine = [a for a in trace.info.assessments if a.name == f"claim_{index}"]
        judge = [a for a in mine if a.source.source_type != "HUMAN"]
        people = [a for a in mine if a.source.source_type == "HUMAN"]
        return judge, people

    judge, people = human(rows[0])
    assert len(judge) == 1 and [(p.value, p.valid) for p in people] == [(True, True)]
    assert people[0].span_id == judge[0].span_id  # on the same faithfulness span
    assert log_review_labels(client, run_id, rows) == len(rows)  # unchanged: nothing new
    assert len(human(rows[0])[1]) == 1
    rows[0].human_label = NOT_SUPPORTED  # the person changes their mind: the earlier verdict is overridden
    log_review_labels(client, run_id, rows)
    people = human(rows[0])[1]
    assert sorted((p.value, p.valid) for p in people) == [(False, True), (True, False)]


@pytest.mark.slow
def test_traces_through_a_real_tracking_server(tmp_path):
    corpus, evalset = write_dataset(tmp_path)
    db = tmp_path / "server.db"
    MlflowClient(f"sqlite:///{db}").search_experiments(max_results=1)  # migrated once, before the server starts
    log = tmp_path / "server.log"
    with mlflow_server(tmp_path, ["--backend-store-uri", f"sqlite:///{db}", "--default-artifact-root",
                                  str(tmp_path / "artifacts")], log, env=ENV) as (server, base):
        wait_until_healthy(server, base, log)
        ragexp(tmp_path, "run", *run_args(corpus, evalset, base, "retrieval=bm25", "generator=extractive", "judge=lexical"))
        client = MlflowClient(base)
        [run] = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
        check_traces_equal_results(client, run.info.run_id, corpus, evalset)


@pytest.mark.slow
def test_sweep_traces_best_and_tied_only_and_every_command_works_with_and_without(tmp_path):
    corpus, evalset = write_dataset(tmp_path)
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    ragexp(tmp_path, "run", "-m", *run_args(corpus, evalset, uri, "retrieval=bm25", "chunking=fixed,recursive",
                                            "retrieval.k1=0.9,1.5"))
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
    assert len(children) == 4
    chosen = {r.info.run_id for r in children if r.data.tags["ragexp.vs_best.hit_rate_at_5"] in ("best", "tied")}
    traced = {r.info.run_id for r in children if TAG_TRACES in r.data.tags}
    assert traced == chosen and chosen
    for run_id in traced:
        check_traces_equal_results(client, run_id, corpus, evalset)
    others = [r for r in children if r.info.run_id not in traced]
    if others:  # the others get theirs on demand
        out = ragexp(tmp_path, "traces", others[0].info.run_id, "--tracking-uri", uri).stdout
        assert f"{len(TINY_ITEMS) + 1} traces logged" in out
        check_traces_equal_results(client, others[0].info.run_id, corpus, evalset)
        assert "already has traces" in ragexp(tmp_path, "traces", others[0].info.run_id, "--tracking-uri", uri).stdout
    # compare and gate read results, traces or not; reproduce and upload log a single run, with its traces
    ragexp(tmp_path, "run", *run_args(corpus, evalset, uri, "retrieval=bm25", "chunking.size=100", "tracking.traces=none"))
    [without] = client.search_runs([children[0].info.experiment_id], order_by=["start_time DESC"], max_results=1)
    assert TAG_TRACES not in without.data.tags
    with_traces = next(iter(traced))
    ragexp(tmp_path, "compare", with_traces, without.info.run_id, "--tracking-uri", uri)
    gate = ragexp(tmp_path, "gate", "--baseline", with_traces, "--candidate", without.info.run_id, "--tracking-uri", uri,
                  check=False)
    # both runs' results were read and compared (7 queries are too few for the gate to decide on)
    assert "mrr" in gate.stdout and (gate.returncode in (0, 1) or "too few paired queries" in gate.stderr), gate.stderr
    repro = ragexp(tmp_path, "reproduce", with_traces, "--tracking-uri", uri, "--use-cache").stdout
    check_traces_equal_results(client, repro.split("logged reproduction as run ")[1].split()[0], corpus, evalset)
    outputs = sorted((tmp_path / "multirun").rglob("ragexp_results.json"))[0].parent
    shutil.copytree(outputs, tmp_path / "saved")
    upload = ragexp(tmp_path, "upload", str(tmp_path / "saved"), "--tracking-uri", uri).stdout
    check_traces_equal_results(client, upload.split(" as run ")[1].split()[0], corpus, evalset)


@pytest.mark.slow
def test_an_unknown_trace_mode_fails_at_start_naming_the_choices(tmp_path):
    corpus, evalset = write_dataset(tmp_path)
    proc = ragexp(tmp_path, "run", *run_args(corpus, evalset, f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.traces=some"),
                  check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "ragexp run: error: field 'tracking.traces': must be one of all, best, none, not 'some'")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_a_black_box_runs_traces_show_the_passages_it_returned(tmp_path):
    """A recorded system's run: every trace's passages are the text the system returned, placed
    in the corpus (not the empty text of a chunking the black box never used)."""
    corpus, evalset = write_dataset(tmp_path)
    items = [json.loads(line) for line in evalset.read_text().splitlines()[1:]]
    recorded = tmp_path / "outputs.jsonl"
    with recorded.open("w", encoding="utf-8") as out:
        for item in items:
            passages = [{"text": paragraph, "doc_id": doc_id} for doc_id, text in TINY_DOCS.items()
                        for paragraph in text.split("\n\n") if not paragraph.startswith("#")]
            out.write(json.dumps({"query_id": item["id"], "passages": passages[:5]}) + "\n")
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", *run_args(corpus, evalset, f"sqlite:///{db}", "system=recorded", f"system.path={recorded}"))
    client = MlflowClient(f"sqlite:///{db}")
    [run] = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    check_traces_equal_results(client, run.info.run_id, corpus, evalset)
    returned = {p["text"].strip() for p in passages}  # a placed span leaves out whitespace at its ends
    for trace in client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=50):
        [retrieve] = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
        assert retrieve.outputs and {d["page_content"] for d in retrieve.outputs} <= returned
