"""Gold follows the corpus: a family of corpus edits x gold forms, each either re-anchored to the
hand-computed truth, refused naming item, document and what the span reads now, or said to be
unverifiable; never scored silently. Truth is computed here by ``str.index`` on the edited text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import pytrec_eval
from hydra import compose, initialize_config_dir

from ragexp.cli import main
from ragexp.config.compose import CONFIG_DIR
from ragexp.config.schema import register_schema
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import evalset_to_jsonl, load_evalset, read_evalset
from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import job_spec
from tests.helpers.tiny_dataset import TINY_DOCS, TINY_ITEMS

FORMS = ("bare", "bare_recorded", "quoted", "resolved")
QUOTES = {qid: (doc_id, quote) for qid, _, doc_id, quote, _ in TINY_ITEMS}
INTRO = "Release notes moved to the changelog.\n\n"
DUPLICATE = "30 requests per minute per key is the default.\n\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_corpus(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.glob("*.md"):
        path.unlink()
    for doc_id, text in texts.items():
        (folder / f"{doc_id}.md").write_text(text, encoding="utf-8")
    return folder


def items(evidence_of) -> list[dict]:
    rows = [{"id": qid, "query": query, "evidence": [evidence_of(doc_id, quote)], "gold_answer": quote}
            for qid, query, doc_id, quote, _ in TINY_ITEMS]
    return [*rows, {"id": "t7", "query": "What is the CEO's favourite colour?", "answerable": False}]


def write_set(path: Path, form: str, texts: dict[str, str], corpus_dir: Path) -> Path:
    """The tiny eval set in ``form``, marked on ``texts`` (``resolved``: what ``evalset resolve`` writes)."""
    def span(doc_id, quote):
        start = texts[doc_id].index(quote)
        return {"doc_id": doc_id, "start": start, "end": start + len(quote)}

    header = {"ragexp_evalset": 1, "name": "tiny"}
    if form == "quoted" or form == "resolved":
        rows = items(lambda doc_id, quote: {"doc_id": doc_id, "quote": quote})
    else:
        rows = items(span)
    if form == "bare_recorded":
        header["documents"] = {doc_id: sha(texts[doc_id]) for doc_id, _ in QUOTES.values()}
    path.write_text("".join(json.dumps(row) + "\n" for row in [header, *rows]), encoding="utf-8")
    if form == "resolved":
        path.write_text(evalset_to_jsonl(load_evalset(path, load_corpus(corpus_dir)), load_corpus(corpus_dir)),
                        encoding="utf-8")
    return path


def insert_before(texts):
    return {**texts, "webhooks": INTRO + texts["webhooks"]}


def edit_inside(texts):
    return {**texts, "webhooks": texts["webhooks"].replace("backoff for 24 hours", "backoff for 48 hours")}


def delete_document(texts):
    return {doc_id: text for doc_id, text in texts.items() if doc_id != "refunds"}


def duplicate_text(texts):
    return {**texts, "limits": DUPLICATE + texts["limits"]}


EDITS = {"insert_before": insert_before, "edit_inside": edit_inside, "delete_document": delete_document,
         "duplicate_text": duplicate_text}
#: (edit, form) -> what happens: "truth" (every span at its hand-found place), "unverifiable"
#: (loads, and says so), or the items refused with the documents they name.
EXPECTED = {
    ("insert_before", "bare"): "unverifiable",
    ("insert_before", "bare_recorded"): ({"t1", "t2"}, {"webhooks"}),
    ("insert_before", "quoted"): "truth",
    ("insert_before", "resolved"): "truth",
    ("edit_inside", "bare"): "unverifiable",
    ("edit_inside", "bare_recorded"): ({"t1", "t2"}, {"webhooks"}),
    ("edit_inside", "quoted"): (set(), {"webhooks"}),
    ("edit_inside", "resolved"): ({"t1"}, {"webhooks"}),
    ("delete_document", "bare"): (set(), {"refunds"}),
    ("delete_document", "bare_recorded"): ({"t5"}, {"refunds"}),
    ("delete_document", "quoted"): (set(), {"refunds"}),
    ("delete_document", "resolved"): ({"t5"}, {"refunds"}),
    ("duplicate_text", "bare"): "unverifiable",
    ("duplicate_text", "bare_recorded"): ({"t4", "t6"}, {"limits"}),
    ("duplicate_text", "quoted"): (set(), {"limits"}),
    ("duplicate_text", "resolved"): ({"t4"}, {"limits"}),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("edit", EDITS)
def test_every_edit_of_every_gold_form_is_re_anchored_refused_or_said_unverifiable(tmp_path, edit, form):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", form, TINY_DOCS, corpus_dir)
    new = EDITS[edit](TINY_DOCS)
    write_corpus(corpus_dir, new)
    expected = EXPECTED[(edit, form)]
    corpus = load_corpus(corpus_dir)
    if isinstance(expected, tuple):
        items_named, docs_named = expected
        with pytest.raises(RagexpInputError) as err:
            load_evalset(evalset, corpus)
        message = str(err.value)
        assert "\n" not in message and all(doc in message for doc in docs_named)
        if items_named:  # stale gold: one line over all of it, the full list in a file, the fix
            assert message.startswith(f"{evalset}: gold no longer reads what it read: {len(items_named)} evidence")
            assert "fix: ragexp evalset reanchor" in message and all(f"{i}" in message for i in items_named)
            listed = Path(message.split("full list: ")[1].split("; fix")[0])
            rows = [json.loads(line) for line in listed.read_text(encoding="utf-8").splitlines()]
            assert {row["item"] for row in rows} == items_named and {row["doc_id"] for row in rows} == docs_named
            for row in rows:  # what the span reads now, checked against the edited text itself
                text = new.get(row["doc_id"])
                if text is None:
                    assert row["reason"] == "document-gone" and row["reads_now"] is None
                else:
                    assert row["reads_now"] == text[row["start"]:row["end"]]
                    assert row["read"] in (None, QUOTES[row["item"]][1])
        return
    evalset_read = load_evalset(evalset, corpus)
    spans = {item.id: (e.doc_id, e.start, e.end) for item in evalset_read for e in item.evidence}
    if expected == "unverifiable":
        assert evalset_read.meta["gold"]["unverifiable"] == 6
        assert any(w.startswith("gold cannot be verified: 6 bare span(s)") for w in evalset_read.meta["warnings"])
        return
    truth = {qid: (doc_id, new[doc_id].index(quote), new[doc_id].index(quote) + len(quote))
             for qid, (doc_id, quote) in QUOTES.items()}
    assert spans == truth
    moved = {m["item"] for m in evalset_read.meta["gold"]["moves"]}
    assert moved == ({"t1", "t2"} if form == "resolved" else set())
    assert evalset_read.meta["gold"]["unverifiable"] == 0
    assert bool(evalset_read.meta.get("warnings")) == bool(moved)  # a move is said; nothing else to say


def test_a_duplicated_text_is_never_guessed_but_a_unique_move_beside_it_is_reported(tmp_path):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "resolved", TINY_DOCS, corpus_dir)
    write_corpus(corpus_dir, duplicate_text(TINY_DOCS))
    reading = read_evalset(evalset, load_corpus(corpus_dir))
    assert [(s.item, s.reason) for s in reading.stale] == [("t4", "ambiguous")]
    assert [(m.item, m.new_start - m.start) for m in reading.moved] == [("t6", len(DUPLICATE))]


# --- runs: metrics of re-anchored gold equal those of the gold re-marked by hand -------------


def compose_run(root: Path, corpus: Path, evalset: Path):
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=[
            "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "retrieval=bm25",
            "chunking=fixed", "chunking.size=60", "chunking.overlap=0", f"cache_dir={root / 'cache'}",
            "progress=false", "eval.ks=[1,3,5]",
        ])  # fmt: skip


def run(root: Path, corpus: Path, evalset: Path):
    from ragexp.jobs.job import run_job

    return run_job(job_spec(compose_run(root, corpus, evalset)), output_dir=root / "out" / evalset.stem,
                   log_to=None).output.results


@pytest.mark.parametrize("form", ["quoted", "resolved"])
def test_a_run_on_moved_gold_scores_as_the_gold_re_marked_by_hand(tmp_path, form):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", form, TINY_DOCS, corpus_dir)
    new = insert_before(TINY_DOCS)
    write_corpus(corpus_dir, new)
    by_hand = tmp_path / "by_hand.jsonl"  # bare spans found with str.index in the edited text, recorded on it
    write_set(by_hand, "bare_recorded", new, corpus_dir)
    moved, truth = run(tmp_path, corpus_dir, evalset), run(tmp_path, corpus_dir, by_hand)
    assert moved.meta["gold"]["moved"] == (2 if form == "resolved" else 0)
    assert truth.meta["gold"] == {"moved": 0, "unverifiable": 0, "moves": []}
    rows, truth_rows = {r.query_id: r for r in moved.per_query}, {r.query_id: r for r in truth.per_query}
    assert set(rows) == set(truth_rows)
    for qid, row in rows.items():
        assert row.relevant == truth_rows[qid].relevant
        for name, value in truth_rows[qid].metrics.items():
            assert row.metrics[name] == pytest.approx(value, abs=1e-9), (qid, name)
    # and both are trec_eval's numbers for the hand-marked relevance
    qrels = {r.query_id: {u: int(g) for u, g in r.relevant.items()} for r in truth.per_query if r.relevant}
    ranking = {r.query_id: {unit: float(len(r.ranking) - i) for i, (unit, *_) in enumerate(r.ranking)}
               for r in moved.per_query if r.query_id in qrels}
    scored = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "recall.5"}).evaluate(ranking)
    assert len(scored) == 6
    for qid, measures in scored.items():
        assert rows[qid].metrics["recall_at_5"] == pytest.approx(measures["recall_5"], abs=1e-9)
        assert rows[qid].metrics["mrr"] == pytest.approx(measures["recip_rank"], abs=1e-9)
    assert any(w.startswith("gold moved: 2 span(s)") for w in moved.meta["warnings"]) == (form == "resolved")


def test_stale_gold_refuses_the_run_before_any_model_is_built(tmp_path, monkeypatch):
    import ragexp.jobs.job as job

    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "resolved", TINY_DOCS, corpus_dir)
    write_corpus(corpus_dir, edit_inside(TINY_DOCS))
    monkeypatch.setattr(job, "build_pipeline", lambda *a, **k: pytest.fail("a model was built for stale gold"))
    with pytest.raises(RagexpInputError, match=r"gold no longer reads what it read: 1 evidence of 1 item\(s\) \(t1\)"):
        run(tmp_path, corpus_dir, evalset)


def test_a_run_on_bare_offsets_says_once_that_its_gold_cannot_be_verified(tmp_path):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "bare", TINY_DOCS, corpus_dir)
    results = run(tmp_path, corpus_dir, evalset)
    said = [w for w in results.meta["warnings"] if "cannot be verified" in w]
    assert len(said) == 1 and said[0].startswith("gold cannot be verified: 6 bare span(s)")
    assert results.meta["gold"]["unverifiable"] == 6


# --- evalset resolve and evalset reanchor ------------------------------------------------------


def test_resolve_keeps_what_each_span_read_and_records_its_documents(tmp_path, capsys):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "bare", TINY_DOCS, corpus_dir)
    out = tmp_path / "resolved.jsonl"
    assert main(["evalset", "resolve", str(evalset), "--corpus", str(corpus_dir), "--output", str(out)]) == 0
    assert "warning: 6 bare span(s) or chunk id(s) were given the text" in capsys.readouterr().err
    header, *rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert header["documents"] == {doc_id: sha(TINY_DOCS[doc_id]) for doc_id, _ in QUOTES.values()}
    for row in rows[:6]:
        (evidence,) = row["evidence"]
        assert evidence["quote"] == QUOTES[row["id"]][1] == TINY_DOCS[evidence["doc_id"]][evidence["start"]:evidence["end"]]


def reanchor(*args: str) -> int:
    return main(["evalset", "reanchor", *args])


def test_reanchor_round_trip_moves_spans_writes_lineage_and_is_idempotent(tmp_path, capsys):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "resolved", TINY_DOCS, corpus_dir)
    new = insert_before(TINY_DOCS)
    write_corpus(corpus_dir, new)
    out = tmp_path / "set.v2.jsonl"
    assert reanchor(str(evalset), "--corpus", str(corpus_dir), "--output", str(out)) == 0
    printed = capsys.readouterr().out
    assert "4 unchanged, 2 moved, 0 re-found fuzzily, 0 changed, 0 vanished, 0 unverifiable" in printed
    header = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert header["lineage"]["file"] == "set.jsonl"
    assert header["lineage"]["sha256"] == hashlib.sha256(evalset.read_bytes()).hexdigest()
    assert header["lineage"]["corpus"] == load_corpus(corpus_dir).fingerprint()
    assert header["documents"]["webhooks"] == sha(new["webhooks"])
    moved = load_evalset(out, load_corpus(corpus_dir))
    assert moved.meta["gold"] == {"moved": 0, "unverifiable": 0, "moves": []}  # the new version needs no re-anchoring
    assert {i.id: (i.evidence[0].start, i.evidence[0].end) for i in moved if i.evidence} == {
        qid: (new[d].index(q), new[d].index(q) + len(q)) for qid, (d, q) in QUOTES.items()}
    report = json.loads((tmp_path / "set.v2.jsonl.report.json").read_text(encoding="utf-8"))
    assert report["counts"]["moved"] == 2 and {e["item"] for e in report["evidence"] if e["outcome"] == "moved"} == {"t1", "t2"}
    again = tmp_path / "set.v3.jsonl"
    assert reanchor(str(out), "--corpus", str(corpus_dir), "--output", str(again)) == 0
    assert "6 unchanged, 0 moved" in capsys.readouterr().out


def test_reanchor_reports_fuzzy_changed_and_vanished_and_leaves_them_for_a_person(tmp_path, capsys):
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = write_set(tmp_path / "set.jsonl", "resolved", TINY_DOCS, corpus_dir)
    new = delete_document(edit_inside(TINY_DOCS))
    new["keys"] = new["keys"].replace("there is no downtime", "there is no outage")
    write_corpus(corpus_dir, new)
    out = tmp_path / "set.v2.jsonl"
    assert reanchor(str(evalset), "--corpus", str(corpus_dir), "--output", str(out)) == 1
    printed = capsys.readouterr().out
    assert "1 re-found fuzzily, 1 changed, 1 vanished" in printed
    assert f"ragexp evalset annotate {out} --corpus {corpus_dir}" in printed
    report = {e["item"]: e for e in json.loads(Path(f"{out}.report.json").read_text(encoding="utf-8"))["evidence"]}
    fuzzy = report["t1"]
    assert fuzzy["outcome"] == "fuzzy" and 0.9 <= fuzzy["similarity"] < 1
    assert fuzzy["reads_now"] == "retried with exponential backoff for 48 hours" == new["webhooks"][fuzzy["new_start"]:fuzzy["new_end"]]
    assert report["t3"]["outcome"] == "changed" and report["t5"]["outcome"] == "vanished"
    with pytest.raises(RagexpInputError, match=r"2 evidence of 2 item\(s\) \(t3, t5\)"):  # a person first
        load_evalset(out, load_corpus(corpus_dir))


def test_reanchor_with_the_old_corpus_gives_bare_offsets_their_text(tmp_path, capsys):
    old_dir = write_corpus(tmp_path / "old", TINY_DOCS)
    corpus_dir = write_corpus(tmp_path / "corpus", insert_before(TINY_DOCS))
    evalset = write_set(tmp_path / "set.jsonl", "bare", TINY_DOCS, old_dir)
    out = tmp_path / "set.v2.jsonl"
    assert reanchor(str(evalset), "--corpus", str(corpus_dir), "--output", str(out)) == 1
    assert "6 unverifiable" in capsys.readouterr().out
    assert reanchor(str(evalset), "--corpus", str(corpus_dir), "--old-corpus", str(old_dir), "--output", str(out)) == 0
    new = insert_before(TINY_DOCS)
    rows = {row["id"]: row for row in map(json.loads, out.read_text(encoding="utf-8").splitlines()[1:])}
    for qid, (doc_id, quote) in QUOTES.items():
        assert rows[qid]["evidence"] == [{"doc_id": doc_id, "start": new[doc_id].index(quote),
                                          "end": new[doc_id].index(quote) + len(quote), "quote": quote}]
    wrong_old = write_corpus(tmp_path / "wrong", edit_inside(TINY_DOCS))
    recorded = write_set(tmp_path / "recorded.jsonl", "bare_recorded", TINY_DOCS, old_dir)
    assert main(["evalset", "reanchor", str(recorded), "--corpus", str(corpus_dir), "--old-corpus", str(wrong_old)]) == 2
    assert "document 'webhooks' of the old corpus is not the text the eval set's gold was marked on" in capsys.readouterr().err


# --- the gate: runs on two corpus versions -------------------------------------------------------


@pytest.mark.parametrize("gold", ["unverifiable", "moved", "verified"])
def test_the_gate_refuses_runs_on_two_corpora_when_their_gold_could_not_be_verified(tmp_path, capsys, gold):
    from ragexp.evaluation.results import RunResults
    from tests.test_gate import make_run, ranks_with_losses

    base, cand = make_run(ranks_with_losses(30, 0)), make_run(ranks_with_losses(30, 10))
    record = {"unverifiable": {"moved": 0, "unverifiable": 39, "moves": []},
              "moved": {"moved": 2, "unverifiable": 0, "moves": [{"item": "q1"}, {"item": "q2"}]},
              "verified": {"moved": 0, "unverifiable": 0, "moves": []}}[gold]
    candidate = RunResults(meta={**cand.meta, "corpus_fingerprint": "corpus-2", "gold": record},
                           aggregates=cand.aggregates, per_query=cand.per_query)
    paths = [str(run.save(tmp_path / f"{name}.json")) for name, run in (("base", base), ("cand", candidate))]
    code = main(["gate", "--baseline", paths[0], "--candidate", paths[1]])
    out, err = capsys.readouterr()
    if gold == "unverifiable":
        assert code == 2 and "the candidate's 39 gold span(s) are bare offsets nobody can verify" in err
        assert main(["gate", "--baseline", paths[0], "--candidate", paths[1], "--force"]) == 1
        assert "compared anyway: --force" in capsys.readouterr().out
    else:
        assert code == 1  # the regression itself, decided as always
        assert ("the candidate run re-anchored 2 gold span(s)" in out) == (gold == "moved")


def test_a_results_file_whose_gold_record_is_mistyped_is_refused_at_the_gate(tmp_path):
    from ragexp.evaluation.results import RunResults
    from tests.test_gate import make_run, ranks_with_losses

    run = make_run(ranks_with_losses(5, 0))
    path = RunResults(meta={**run.meta, "gold": {"moved": "2"}}, aggregates=run.aggregates,
                      per_query=run.per_query).save(tmp_path / "r.json")
    with pytest.raises(RagexpInputError, match="meta.gold.moved"):
        RunResults.load(path)


# --- the annotation page records what its gold documents read -----------------------------------


def test_every_annotation_save_records_the_text_its_gold_documents_hold(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from ragexp.annotation.live_corpus import LiveCorpus
    from ragexp.annotation.pool import Pooler
    from ragexp.annotation.server import Annotation, routers
    from ragexp.annotation.session import Session
    from ragexp.web.app import create_app

    monkeypatch.chdir(tmp_path)
    corpus_dir = write_corpus(tmp_path / "corpus", TINY_DOCS)
    evalset = tmp_path / "built.jsonl"
    bare = {"doc_id": "limits", "start": 0, "end": 13}  # an old bare span: its document is never vouched for
    evalset.write_text(json.dumps({"id": "old", "query": "Rate limits?", "evidence": [bare]}) + "\n", encoding="utf-8")
    Session(evalset).queue([{"id": "a", "query": "How long are webhooks retried?"}], "test")
    page = TestClient(create_app(routers(Annotation(Session(evalset), LiveCorpus(corpus_dir), Pooler(["bm25"], depth=3))),
                                 "annotate.html"), base_url="http://127.0.0.1")
    quote = QUOTES["t1"][1]
    start = TINY_DOCS["webhooks"].index(quote)
    reply = page.put("/api/entries/a", json={
        "changes": {"evidence": [{"doc_id": "webhooks", "start": start, "end": start + len(quote), "quote": quote}],
                    "confirmed": True}, "before": {"evidence": [], "confirmed": False}})
    assert reply.status_code == 200
    header = json.loads(evalset.read_text(encoding="utf-8").splitlines()[0])
    assert header["documents"] == {"webhooks": sha(TINY_DOCS["webhooks"])}
    reading = read_evalset(evalset, load_corpus(corpus_dir))
    assert reading.unverifiable == 1 and not reading.stale  # the bare span is said, the marked one checked


# --- the header's records are read at the one gate -----------------------------------------------

GOOD = "a" * 64


@pytest.mark.parametrize(("header", "field"), [
    ({"documents": {"webhooks": "A" * 64}}, "documents.\"webhooks\""),
    ({"documents": {"webhooks": GOOD[:63]}}, "documents.\"webhooks\""),
    ({"documents": {"webhooks": 5}}, "documents.\"webhooks\""),
    ({"documents": {"": GOOD}}, "documents.\"\""),
    ({"documents": ["webhooks"]}, "documents"),
    ({"lineage": {"file": "a.jsonl"}}, "lineage.sha256"),
    ({"lineage": {"file": "a.jsonl", "sha256": GOOD, "parent": "x"}}, "lineage.parent"),
    ({"lineage": {"file": 3, "sha256": GOOD}}, "lineage.file"),
])
def test_a_malformed_gold_record_in_the_header_is_refused_naming_its_field(tmp_path, header, field):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"ragexp_evalset": 1, **header}) + "\n" + json.dumps({"id": "a", "query": "q"}) + "\n",
                    encoding="utf-8")
    with pytest.raises(RagexpInputError) as err:
        read_evalset(path, load_corpus(write_corpus(tmp_path / "corpus", TINY_DOCS)))
    assert err.value.field == field and err.value.line == 1


def test_a_yaml_header_whose_document_id_is_not_a_string_is_refused(tmp_path):
    path = tmp_path / "set.yaml"
    path.write_text(f"ragexp_evalset: 1\ndocuments: {{7: {GOOD}}}\nitems:\n  - {{id: a, query: q}}\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="SHA-256 of its text"):
        read_evalset(path, load_corpus(write_corpus(tmp_path / "corpus", TINY_DOCS)))
