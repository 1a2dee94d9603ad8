"""``ragexp evalset agreement``: two annotators' files of the same questions compared against
independent truth (scikit-learn's kappa, hand-counted characters, a bootstrap), the disagreements
queued in a form the annotation page loads, the note in MLflow, and bad input refused in one line."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import mlflow
import numpy as np
import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient
from sklearn.metrics import cohen_kappa_score

from ragexp.annotation.agreement import agreement
from ragexp.annotation.judgments import ItemJudgments, corpus_judgments, file_judgments, paired_judgments
from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation, routers
from ragexp.annotation.session import Session
from ragexp.cli import main
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.tracking import store
from ragexp.tracking.agreement_note import AGREEMENT_TAG, SECTION_TITLE
from ragexp.web.app import create_app
from tests.helpers.annotator_pair import ALICE, BOB, write
from tests.helpers.tiny_dataset import TINY_DOCS

REFUNDS = len(TINY_DOCS["refunds"])
#: The truth about the pair (tests/helpers/annotator_pair.py), counted by hand.
ANSWERABLE = ([1, 1, 1, 0, 1, 1, 0, 1, 1, 0], [1, 1, 0, 0, 1, 1, 0, 1, 1, 1])
#: (item, document) both judged: i1 webhooks, i2 keys, i3 keys, i4 limits, i5 limits, i5 refunds, i6 refunds, i9 webhooks
RELEVANT = ([1, 1, 1, 0, 1, 0, 1, 1], [1, 1, 0, 0, 1, 1, 1, 1])
#: Per item with evidence: (characters both covered, characters alice + bob covered).
SPANS = {"i1": (20, 80), "i2": (20, 40), "i3": (0, 37), "i5": (30, 80), "i6": (10, REFUNDS + 10), "i8": (0, 20),
         "i9": (10, 20), "i10": (0, 10)}


@pytest.fixture
def pair(tiny_dataset, tmp_path):
    corpus, _ = tiny_dataset
    return str(corpus), write(tmp_path / "alice.jsonl", ALICE), write(tmp_path / "bob.jsonl", BOB)


def test_kappas_equal_scikit_learn_and_overlap_the_hand_count(pair):
    corpus_dir, alice, bob = pair
    corpus = load_corpus(corpus_dir)
    judgments = (corpus_judgments(load_evalset(alice, corpus), corpus), corpus_judgments(load_evalset(bob, corpus), corpus))
    result = agreement(paired_judgments(*judgments), ("alice", "bob"), 0.5)

    assert result.items == 10
    assert result.answerable.interval.kappa == pytest.approx(cohen_kappa_score(*ANSWERABLE), abs=1e-12)
    assert result.answerable.agreed == 8
    assert result.relevance.interval.kappa == pytest.approx(cohen_kappa_score(*RELEVANT), abs=1e-12)
    assert (result.relevance.n, result.relevance.agreed, result.judged_by_one) == (8, 6, 3)  # i8 twice, i10 once
    assert result.span_items == len(SPANS)
    both, total = (sum(values) for values in zip(*SPANS.values()))
    assert result.span_micro_f1 == pytest.approx(2 * both / total)
    assert result.span_macro_f1 == pytest.approx(sum(2 * b / t for b, t in SPANS.values()) / len(SPANS))
    # i1's F1 is exactly 0.5, not below the threshold
    assert [d.item_id for d in result.disagreements] == ["i3", "i5", "i6", "i8", "i10"]
    reasons = {d.item_id: d.reasons for d in result.disagreements}
    assert reasons["i3"] == ("answerable: alice yes, bob no", "keys: alice relevant, bob not relevant", "evidence F1 0.00")
    assert reasons["i5"] == ("refunds: alice not relevant, bob relevant",)
    assert reasons["i6"] == (f"evidence F1 {20 / (REFUNDS + 10):.2f}",)


def test_interval_is_the_spread_of_a_bootstrap():
    """Over 300 items, the analytic standard errors of both kappas are within 10 % of the standard
    deviation of kappa over 2000 resamples of the items."""
    rng = random.Random(3)
    labels = {"answerable": ([], []), "relevant": ([], [])}
    pairs = []
    for i in range(300):
        truth, relevant = rng.random() < 0.7, rng.random() < 0.5
        answerable = (truth, truth if rng.random() < 0.85 else not truth)
        found = (relevant, relevant if rng.random() < 0.75 else not relevant)
        pair = []
        for side in (0, 1):
            labels["answerable"][side].append(answerable[side])
            labels["relevant"][side].append(found[side])
            pair.append(ItemJudgments(f"q{i}", "?", answerable[side], {"keys": found[side]}, {}))
        pairs.append(tuple(pair))
    result = agreement(pairs, ("a", "b"), 0.5)

    draws = np.random.default_rng(5)
    for kappa, (first, second) in ((result.answerable, labels["answerable"]), (result.relevance, labels["relevant"])):
        first, second = np.array(first), np.array(second)
        assert kappa.interval.kappa == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
        index = draws.integers(0, 300, (2000, 300))  # 2000 resamples of the 300 items
        a, b = first[index], second[index]
        p_o, p_a, p_b = (a == b).mean(axis=1), a.mean(axis=1), b.mean(axis=1)
        p_e = p_a * p_b + (1 - p_a) * (1 - p_b)
        boot = (p_o - p_e) / (1 - p_e)  # Cohen's kappa of each resample
        assert kappa.interval.se == pytest.approx(float(np.std(boot, ddof=1)), rel=0.10)
        assert kappa.interval.low == pytest.approx(kappa.interval.kappa - 1.959964 * kappa.interval.se, abs=1e-5)


@pytest.fixture
def global_tracking_uri_restored():
    """The command sets MLflow's process-wide tracking URI (to this test's store): unset it after."""
    yield
    mlflow.set_tracking_uri(None)


def test_command_prints_queues_for_the_page_and_notes_in_mlflow(pair, tmp_path, monkeypatch, capsys,
                                                                global_tracking_uri_restored):
    corpus_dir, alice, bob = pair
    monkeypatch.chdir(tmp_path)  # the pool's stage cache defaults to ./.ragexp_cache
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    queue = tmp_path / "adjudicated.jsonl"
    assert main(["evalset", "agreement", alice, bob, "--corpus", corpus_dir, "--queue", str(queue), "--adjudicator", "carol",
                 "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    kappa = cohen_kappa_score(*ANSWERABLE)
    assert f"answerability       kappa {kappa:.3f} (95% CI " in out
    assert "agreed on 6/8 documents both judged (3 judged by one only, not counted)" in out
    assert "disagreements       5 items" in out and "    i5: refunds: alice not relevant, bob relevant" in out
    # i2, i4, i7 alike; i3 i5 i6 i8 i10 disagree; i1 (F1 0.5) and i9 (grade 2 vs 1) differ less
    assert (f"{queue}: 3 items both gave alike (settled), 5 disagreements and 2 smaller differences queued "
            "(11 passages to judge, neither side preselected)") in out

    # the annotation page's own loader and API read the queue: each item that differs is to be reviewed
    page = TestClient(create_app(routers(Annotation(Session(queue), LiveCorpus(corpus_dir), Pooler(["bm25"], depth=3))),
                                 "annotate.html"), base_url="http://127.0.0.1")
    state = page.get("/api/state").json()
    assert [(e["id"], e["status"]) for e in state["entries"]] == [
        ("i1", "review"), ("i2", "done"), ("i3", "review"), ("i4", "done"), ("i5", "review"), ("i6", "review"),
        ("i7", "done"), ("i8", "review"), ("i9", "review"), ("i10", "review")]
    i5 = next(e for e in state["entries"] if e["id"] == "i5")
    assert i5["evidence"] == [{"doc_id": "limits", "start": 0, "end": 30, "quote": TINY_DOCS["limits"][:30]}]  # agreed
    assert i5["review"]["reason"] == "alice and bob disagree: refunds: alice not relevant, bob relevant"
    assert i5["review"]["adjudication"] == {"names": ["alice", "bob"], "answerable": [True, True], "gold_answer": ["", ""],
                                            "key_facts": [[], []], "tags": [[], []]}
    candidates = page.get("/api/entries/i5/candidates").json()
    assert candidates["kind"] == "review"
    assert [(c["doc_id"], c["start"], c["end"], c["verdicts"]) for c in candidates["candidates"]] == [
        ("refunds", 0, REFUNDS, [{"grade": 0, "how": "document"}, {"grade": 1, "how": "within"}]),  # bob's span inside
        ("refunds", 0, 20, [{"grade": 0, "how": "document"}, {"grade": 1, "how": "span"}])]
    assert candidates["candidates"][1]["text"] == TINY_DOCS["refunds"][:20]
    i3 = next(e for e in state["entries"] if e["id"] == "i3")
    assert i3["evidence"] == [] and i3.get("answerable") is None  # nothing agreed; the flag is the adjudicator's call
    i3_units = page.get("/api/entries/i3/candidates").json()["candidates"]
    assert [c["verdicts"] for c in i3_units] == [[{"grade": 1, "how": "span"}, {"grade": 0, "how": "span"}]]
    i9 = next(e for e in state["entries"] if e["id"] == "i9")
    assert i9["review"]["reason"] == "alice and bob differ: evidence (2 entries given by one only)"
    header, *items = map(json.loads, queue.read_text().splitlines())
    assert [item["id"] for item in items] == ["i2", "i4", "i7"]  # settled: in the eval set already
    assert header["name"] == "support-adjudicated"
    assert header["adjudication"]["adjudicator"] == "carol"
    assert header["adjudication"]["sources"] == [  # the pair's items record no annotator: the files name them
        {"file": "alice.jsonl", "sha256": hashlib.sha256(Path(alice).read_bytes()).hexdigest()},
        {"file": "bob.jsonl", "sha256": hashlib.sha256(Path(bob).read_bytes()).hexdigest()}]

    experiment = MlflowClient(uri).get_experiment_by_name(f"support-{load_evalset(alice, load_corpus(corpus_dir)).fingerprint()[:8]}")
    description = experiment.tags[store.DESCRIPTION_TAG]
    agreement_line, rest = description.split("\n\n", 1)
    assert agreement_line.startswith(f"{SECTION_TITLE}: answerability kappa {kappa:.2f} (95% CI ")
    assert "alice vs bob on 10 questions: agreed on 8/10 items and 6/8 documents both judged, 5 items disagree" in agreement_line
    assert rest.startswith("**ragexp** runs on eval set **support**")  # the description a run would write, kept
    assert json.loads(experiment.tags[AGREEMENT_TAG])["answerable"]["kappa"] == pytest.approx(kappa)

    assert main(["evalset", "agreement", alice, bob, "--corpus", corpus_dir, "--tracking-uri", uri,
                 "--experiment", experiment.name]) == 0
    assert "noted in the description" in capsys.readouterr().out
    assert MlflowClient(uri).get_experiment(experiment.experiment_id).tags[store.DESCRIPTION_TAG].count(SECTION_TITLE) == 1


def test_without_a_corpus_spans_as_written_give_the_same_numbers(tiny_dataset, tmp_path, capsys):
    """Evidence written as start/end spans needs no corpus: the same agreement as loaded against it,
    the annotators named by the ``annotator`` their items record."""
    corpus_dir, _ = tiny_dataset
    spans_only = [(dict(a, annotator="alice"), dict(b, annotator="bob")) for a, b in zip(ALICE, BOB) if a["id"] != "i6"]
    first = write(tmp_path / "one.jsonl", [a for a, _ in spans_only])
    second = write(tmp_path / "two.jsonl", [b for _, b in spans_only])
    corpus = load_corpus(corpus_dir)
    loaded = agreement(paired_judgments(*(corpus_judgments(load_evalset(f, corpus), corpus) for f in (first, second))),
                       ("alice", "bob"), 0.5)
    read = agreement(paired_judgments(file_judgments(first), file_judgments(second)), ("alice", "bob"), 0.5)
    assert read == loaded and read.span_items == 7

    assert main(["evalset", "agreement", first, second, "--no-log"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"agreement of alice ({first}) and bob ({second}) on 9 questions\n")
    assert out.endswith(loaded.render(f"alice ({first})", f"bob ({second})") + "\n")


def test_the_queue_is_a_new_file_built_from_both_never_an_annotators_copy(pair, tmp_path, monkeypatch, capsys):
    """A copy of alice's file is refused (its verdicts would start preselected); queueing the same
    pair again into its own queue adds nothing; the adjudicated set runs under its own name."""
    corpus_dir, alice, bob = pair
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(alice, copy)
    code, err = run_cli(capsys, alice, bob, "--corpus", corpus_dir, "--queue", str(copy), "--adjudicator", "carol")
    assert code == 2 and "queue into a new file" in err[0]
    queue = tmp_path / "adjudicated.jsonl"
    args = ["evalset", "agreement", alice, bob, "--corpus", corpus_dir, "--queue", str(queue), "--adjudicator", "carol", "--no-log"]
    assert main(args) == 0
    before = queue.read_bytes(), Session(queue).sidecar.read_bytes()
    capsys.readouterr()
    assert main(args) == 0
    assert ": 0 items both gave alike (settled), 0 disagreements and 0 smaller differences queued (0 passages to judge, " \
           "neither side preselected), 10 queued before" in capsys.readouterr().out
    assert (queue.read_bytes(), Session(queue).sidecar.read_bytes()) == before
    assert load_evalset(queue, load_corpus(corpus_dir)).name == "support-adjudicated"


def run_cli(capsys, *args) -> tuple[int, list[str]]:
    code = main(["evalset", "agreement", *args, "--no-log"])
    return code, capsys.readouterr().err.splitlines()


def test_bad_input_is_one_line_and_exit_2(pair, tmp_path, capsys):
    corpus_dir, alice, bob = pair
    fewer = write(tmp_path / "carol.jsonl", BOB[:-1])
    renamed = write(tmp_path / "dave.jsonl", [*BOB[:-1], {**BOB[-1], "query": "something else?"}])
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text(json.dumps({"query": "How do I reset my password?", "source": "log"}) + "\n")
    cases = {
        "only in": (alice, fewer, "--corpus", corpus_dir),
        "asks 'question i10?'": (alice, renamed, "--corpus", corpus_dir),
        "field 'id'": (alice, str(candidates), "--corpus", corpus_dir),
        "alice.jsonl:7: field 'evidence[0]': --corpus DIR is needed: this evidence is a whole document": (alice, bob),
        "the same file": (alice, alice, "--corpus", corpus_dir),
        "field '--queue': needs --corpus DIR": (alice, bob, "--queue", str(tmp_path / "adjudicated.jsonl"), "--adjudicator", "c"),
        "name a new file": (alice, bob, "--corpus", corpus_dir, "--queue", bob, "--adjudicator", "carol"),
        "--queue FILE and --adjudicator NAME go together": (alice, bob, "--corpus", corpus_dir, "--queue",
                                                            str(tmp_path / "adjudicated.jsonl")),
        "between 0 and 1": (alice, bob, "--corpus", corpus_dir, "--span-threshold", "1.5"),
    }
    for expected, args in cases.items():
        code, err = run_cli(capsys, *args)
        assert code == 2 and len(err) == 1 and expected in err[0], (expected, err)
        assert err[0].startswith("ragexp evalset: error: ")
    assert main(["evalset", "agreement", alice, bob]) == 2  # no --corpus to name A's experiment by
    assert "pass --corpus DIR, --experiment NAME or --no-log" in capsys.readouterr().err
