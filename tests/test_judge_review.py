"""``ragexp judge review`` without a browser: kappa and its interval against independent truth,
the span a verdict rests on, and the review session's labels file and agreement log.

The page itself, the real server and MLflow are in ``tests/test_browser_judge_review.py``.
"""

from __future__ import annotations

import csv
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from ragexp.evaluation.results import QueryResult
from ragexp.judging.calibration.kappa_interval import kappa_interval
from ragexp.judging.calibration.labels import (
    COLUMNS,
    NOT_SUPPORTED,
    SUPPORTED,
    read_labels,
)
from ragexp.judging.claims import sentence_spans, split_sentences
from ragexp.judging.judges import LexicalJudge
from ragexp.judge_review.sample import (
    EVIDENCE_BY_JUDGE,
    EVIDENCE_BY_OVERLAP,
    review_claims,
)
from ragexp.judge_review.session import SKIP, ReviewSession
from ragexp.web.edit_session import Conflict

S, N = SUPPORTED, NOT_SUPPORTED


def table_ratings(a: int, b: int, c: int, d: int) -> tuple[list[str], list[str]]:
    """Two raters over a + b + c + d items: a (S,S), b (S,N), c (N,S), d (N,N)."""
    first = [S] * (a + b) + [N] * (c + d)
    second = [S] * a + [N] * b + [S] * c + [N] * d
    return first, second


def test_kappa_and_interval_by_hand() -> None:
    """20 claims: 9 both supported, 2 human-only, 3 judge-only, 6 both not supported.

    p_o = 15/20 = 0.75; human S 11/20, judge S 12/20; p_e = 0.55*0.6 + 0.45*0.4 = 0.51;
    kappa = 0.24/0.49 = 24/49.
    Fleiss-Cohen-Everitt variance, with 1 - kappa = 25/49:
      diagonal  0.45*(1 - 1.15*25/49)^2 + 0.30*(1 - 0.85*25/49)^2
      off       (25/49)^2 * [p_SN*(p_.S + p_N.)^2 + p_NS*(p_.N + p_S.)^2]
                = (25/49)^2 * [0.10*(0.60 + 0.45)^2 + 0.15*(0.40 + 0.55)^2]
      minus     (24/49 - 0.51*25/49)^2
    over 20 * 0.49^2; the 95 % interval is kappa -/+ 1.959964 * sqrt(var).
    """
    human, judge = table_ratings(9, 2, 3, 6)
    k = Fraction(24, 49)
    one = 1 - k
    diagonal = Fraction(45, 100) * (1 - Fraction(115, 100) * one) ** 2 + Fraction(30, 100) * (1 - Fraction(85, 100) * one) ** 2
    off = one**2 * (Fraction(10, 100) * Fraction(105, 100) ** 2 + Fraction(15, 100) * Fraction(95, 100) ** 2)
    variance = (diagonal + off - (k - Fraction(51, 100) * one) ** 2) / (20 * Fraction(49, 100) ** 2)
    se = float(variance) ** 0.5

    result = kappa_interval(human, judge)

    assert result.kappa == pytest.approx(24 / 49, abs=1e-12)
    assert result.kappa == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)
    assert result.se == pytest.approx(se, rel=1e-9)
    assert (result.low, result.high) == pytest.approx((24 / 49 - 1.959964 * se, 24 / 49 + 1.959964 * se), abs=1e-5)


@pytest.mark.parametrize("cells", [(5, 0, 0, 5), (1, 4, 4, 1), (12, 3, 1, 4), (0, 3, 2, 0), (7, 1, 0, 0)])
def test_kappa_equals_sklearn(cells) -> None:
    human, judge = table_ratings(*cells)
    assert kappa_interval(human, judge).kappa == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)


def test_standard_error_matches_the_bootstrap() -> None:
    """The analytic standard error is the spread of kappa over resamples of the claims (2000
    bootstrap resamples of 400 claims, kappa by scikit-learn): within 7 %."""
    rng = np.random.default_rng(7)
    truth = rng.random(400) < 0.6
    human = np.where(truth, S, N)
    judge = np.where(np.where(rng.random(400) < 0.8, truth, ~truth), S, N)
    boot = []
    for _ in range(2000):
        index = rng.integers(0, 400, 400)
        boot.append(cohen_kappa_score(human[index], judge[index]))
    result = kappa_interval(list(human), list(judge))
    assert result.se == pytest.approx(float(np.std(boot, ddof=1)), rel=0.07)


def test_undefined_kappa_has_no_interval() -> None:
    assert kappa_interval([], []).kappa is None
    one_label = kappa_interval([S, S, S], [S, S, S])
    assert (one_label.kappa, one_label.low, one_label.high) == (None, None, None)
    constant_judge = kappa_interval([S, N, S, N], [S, S, S, S])
    assert (constant_judge.kappa, constant_judge.low, constant_judge.high) == (0.0, None, None)
    perfect = kappa_interval([S, N, S, N], [S, N, S, N])
    assert (perfect.kappa, perfect.low, perfect.high) == (1.0, 1.0, 1.0)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(list("ab .!?\n-*•1)\"'Ae.g.X\t")), max_size=80))
def test_sentence_spans_point_at_the_split_sentences(text: str) -> None:
    spans = sentence_spans(text)
    assert [text[start:end] for start, end in spans] == split_sentences(text)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert all(text[start:end] == text[start:end].strip() for start, end in spans)


CONTEXT = ("[1] Webhooks\nFailed deliveries are retried with exponential backoff for 24 hours. "
           "After that the event is marked failed.\n\n[2] Rate limits\nThe search endpoint allows 30 requests per minute.")


def test_lexical_verdict_points_at_the_sentence_sharing_most_words() -> None:
    [retry, failed, missing] = LexicalJudge().judge_claims(
        ["Deliveries are retried for 24 hours.", "The event is marked failed.", "Refunds take a week."], CONTEXT)
    assert CONTEXT[slice(*retry.evidence)] == "Failed deliveries are retried with exponential backoff for 24 hours."
    assert CONTEXT[slice(*failed.evidence)] == "After that the event is marked failed."
    assert missing.evidence is None and missing.supported is False


def per_query_rows() -> list[QueryResult]:
    """Two queries, five claims: verdicts as a run stores them (one without a stored span)."""
    judge = LexicalJudge()
    rows = []
    for query_id, answer in (("q1", "Deliveries are retried for 24 hours. The event is marked failed."),
                             ("q2", "Search allows 30 requests per minute. Refunds take a week. Webhooks time out.")):
        verdicts = [v.to_dict() for v in judge.judge_claims(judge.split_claims(answer), CONTEXT)]
        rows.append({"query_id": query_id, "query": f"question {query_id}", "answer": answer, "claims": verdicts,
                     "judge_context": CONTEXT})
    rows[1]["claims"][0]["evidence"] = None  # as an LLM judge stores it
    nothing = judge.judge_claims(["The CEO likes blue."], "")  # nothing retrieved: not drawn
    rows.append({"query_id": "q3", "query": "question q3", "answer": "The CEO likes blue.", "judge_context": "",
                 "claims": [v.to_dict() for v in nothing]})
    return [QueryResult.from_dict(row) for row in rows]


def test_review_claims_carry_the_judges_span_or_the_closest_sentence() -> None:
    claims = review_claims(per_query_rows(), prefix="RUN/")
    assert [c.row.id for c in claims] == ["RUN/q1#claim_0", "RUN/q1#claim_1", "RUN/q2#claim_0", "RUN/q2#claim_1",
                                          "RUN/q2#claim_2"]
    assert claims[0].evidence_by == EVIDENCE_BY_JUDGE
    assert claims[2].evidence_by == EVIDENCE_BY_OVERLAP
    assert CONTEXT[slice(*claims[2].evidence)] == "The search endpoint allows 30 requests per minute."
    assert claims[3].evidence is None and claims[3].evidence_by is None  # "Refunds take a week": no shared word
    assert claims[0].query == "question q1" and claims[0].answer.startswith("Deliveries")


def test_weighted_kappa_equals_sklearn_with_sample_weights() -> None:
    """A sample drawn across verdicts weighs each claim by its verdict's count over its labelled count."""
    human, judge = table_ratings(7, 3, 2, 8)
    weights = [4.0 if j == S else 0.5 for j in judge]
    result = kappa_interval(human, judge, weights=weights)
    assert result.kappa == pytest.approx(cohen_kappa_score(human, judge, sample_weight=weights), abs=1e-12)
    assert result.kappa != pytest.approx(cohen_kappa_score(human, judge), abs=1e-3)
    unweighted = kappa_interval(human, judge)
    assert kappa_interval(human, judge, weights=[3.0] * 20).se == pytest.approx(unweighted.se, abs=1e-12)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[dict, dict, dict]] = []

    def __call__(self, metrics, tags, artifacts) -> None:
        self.calls.append((metrics, tags, artifacts))


def session(tmp_path: Path, recorder: Recorder, labels: Path | None = None) -> ReviewSession:
    claims = [c for c in review_claims(per_query_rows(), prefix="RUN/") if c.row.judge_label]
    return ReviewSession(run_id="RUN", run_name="bm25", claims=claims, labels_path=labels or tmp_path / "labels.csv",
                         seed=0, total_claims=len(claims), log=recorder)


def test_verdicts_go_to_the_labels_csv_and_agreement_is_logged_once_all_are_decided(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    other = ("OTHER/q9#claim_0", "", "some context", "some claim", S, "", N, "0.5", "")
    with labels.open("w", encoding="utf-8", newline="") as handle:  # a row of an earlier review stays
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerow(other)
    recorder = Recorder()
    review = session(tmp_path, recorder, labels)
    ids = [c.row.id for c in review.claims]
    judge = {c.row.id: c.row.judge_label for c in review.claims}
    human = {ids[0]: S, ids[1]: N, ids[2]: S, ids[3]: N}
    review.label(ids[0], N, "")
    shown = {ids[0]: N}  # a change of mind: replaced, not appended
    for claim_id, label in human.items():
        review.label(claim_id, label, shown.get(claim_id, ""))
    assert recorder.calls == []  # one claim still open
    reply = review.label(ids[4], SKIP, "")

    rows = {row.id: row for row in read_labels(labels)}
    assert list(rows) == ["OTHER/q9#claim_0", *ids]
    assert {i: rows[i].human_label for i in human} == human
    assert rows[ids[4]].human_label == "" and rows[ids[4]].note == "skipped"
    assert all(rows[i].judge_label == judge[i] and rows[i].context == CONTEXT for i in ids)

    [(metrics, tags, artifacts)] = recorder.calls
    h, j = [human[i] for i in human], [judge[i] for i in human]
    assert metrics["judge_review/n"] == 4 and metrics["judge_review/skipped"] == 1 and metrics["judge_review/sampled"] == 5
    assert metrics["judge_review/accuracy"] == pytest.approx(sum(a == b for a, b in zip(h, j)) / 4)
    if len(set(h) | set(j)) > 1:
        assert metrics["judge_review/kappa"] == pytest.approx(cohen_kappa_score(h, j))
        assert metrics["judge_review/kappa_ci_low"] <= metrics["judge_review/kappa"] <= metrics["judge_review/kappa_ci_high"]
    assert tags == {"judge_review.seed": "0", "judge_review.labels_file": str(labels)}
    assert artifacts["judge_review/labels.csv"].count("RUN/") == 5
    assert reply["done"] and reply["logged"]["metrics"] == metrics


def test_two_pages_giving_one_claim_different_verdicts_get_409_and_other_claims_merge(tmp_path: Path) -> None:
    """Two pages (or servers) on one labels file, both loaded with nothing decided."""
    labels = tmp_path / "labels.csv"
    page_a, page_b = session(tmp_path, Recorder()), session(tmp_path, Recorder())
    first, second = page_a.claims[0].row.id, page_a.claims[1].row.id
    page_a.label(first, S, "")
    written = labels.read_bytes()
    with pytest.raises(Conflict, match=f"{first} was marked supported elsewhere .* since this page showed no verdict; "
                                       "nothing was written"):
        page_b.label(first, N, "")
    assert labels.read_bytes() == written
    assert page_b.label(first, S, "")["already_so"]  # the same verdict on both pages: no conflict, nothing written
    assert labels.read_bytes() == written
    reply = page_b.label(second, N, "")  # another claim: lands, the first page's verdict kept
    assert not reply["already_so"] and reply["verdicts"][first] == S and reply["verdicts"][second] == N
    assert {row.id: row.human_label for row in read_labels(labels)} == {first: S, second: N}
    assert [c["human_label"] for c in page_a.state()["claims"]][:2] == [S, N]  # each load shows the file


def test_a_conflict_names_their_verdict_and_sending_it_as_before_keeps_mine(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    page_a, page_b = session(tmp_path, Recorder()), session(tmp_path, Recorder())
    first = page_a.claims[0].row.id
    page_a.label(first, S, "")
    with pytest.raises(Conflict) as conflict:
        page_b.label(first, N, "")
    assert conflict.value.detail()["theirs"] == {"label": S} and conflict.value.detail()["before"] == S
    page_b.label(first, N, conflict.value.before)  # "keep mine" on the page
    assert {row.id: row.human_label for row in read_labels(labels)}[first] == N


def test_a_verdict_written_before_the_server_died_is_retried_without_conflict(tmp_path: Path) -> None:
    """The page's verdict is written, its reply never arrives (the server is killed after the write,
    or fails with 5xx), a restarted server reads the file, the page retries the same request and
    then sends its next verdict made on top of it. With the whole-file etag the page still held
    the etag from before its own write, and the retry was a 409 against its own save."""
    from fastapi.testclient import TestClient

    from ragexp.judge_review.router import review_router
    from ragexp.web.app import create_app

    labels = tmp_path / "labels.csv"

    def start() -> TestClient:
        return TestClient(create_app([review_router(session(tmp_path, Recorder()))], "review.html"),
                          raise_server_exceptions=False, base_url="http://127.0.0.1")

    client = start()
    first = client.get("/api/review").json()["claims"][0]["id"]
    verdict = {"id": first, "label": S, "before": ""}
    assert client.put("/api/review/label", json=verdict).status_code == 200  # written; its reply is lost
    written = labels.read_bytes()

    restarted = start()
    assert [c["human_label"] for c in restarted.get("/api/review").json()["claims"]][0] == S
    again = restarted.put("/api/review/label", json=verdict)
    assert again.status_code == 200 and again.json()["already_so"] and again.json()["verdicts"][first] == S
    assert labels.read_bytes() == written  # nothing written twice
    changed = restarted.put("/api/review/label", json={"id": first, "label": N, "before": S})
    assert changed.status_code == 200 and not changed.json()["already_so"]
    assert [(row.id, row.human_label) for row in read_labels(labels)] == [(first, N)]


def test_the_review_logs_after_a_restart_when_the_last_verdict_was_written_before_the_kill(tmp_path: Path) -> None:
    """The last verdict was written but the server died before logging: the retry is already so
    and logs the agreement to the run (nothing else would)."""
    review = session(tmp_path, Recorder())
    for claim in review.claims:
        review.label(claim.row.id, S, "")
    recorder = Recorder()
    restarted = session(tmp_path, recorder)
    reply = restarted.label(review.claims[-1].row.id, S, "")
    assert reply["already_so"] and reply["logged"] and len(recorder.calls) == 1
    restarted.label(review.claims[-1].row.id, S, "")
    assert len(recorder.calls) == 1  # logged once, not at every retry


def test_a_reopened_review_starts_from_the_saved_verdicts(tmp_path: Path) -> None:
    review = session(tmp_path, Recorder())
    review.label(review.claims[1].row.id, N, "")
    again = session(tmp_path, Recorder())
    assert [c["human_label"] for c in again.state()["claims"]][:2] == ["", N]


def test_bad_labels_are_refused(tmp_path: Path) -> None:
    review = session(tmp_path, Recorder())
    with pytest.raises(ValueError, match="label must be one of"):
        review.label(review.claims[0].row.id, "maybe", "")
    with pytest.raises(ValueError, match="before .* must be one of"):
        review.label(review.claims[0].row.id, S, "maybe")
    with pytest.raises(KeyError):
        review.label("RUN/q7#claim_0", S, "")
    assert not (tmp_path / "labels.csv").exists()


def test_a_failed_log_keeps_the_verdict_and_says_why(tmp_path: Path) -> None:
    def unreachable(metrics, tags, artifacts) -> None:
        raise ConnectionError("store at sqlite:///gone.db is unreachable")

    review = session(tmp_path, Recorder())
    review.log = unreachable
    for claim in review.claims:
        reply = review.label(claim.row.id, S, "")
    assert reply["done"] and reply["logged"] is None
    assert reply["log_error"] == "ConnectionError: store at sqlite:///gone.db is unreachable"
    assert len(read_labels(tmp_path / "labels.csv")) == len(review.claims)


class WordCountEncoder:
    """A stand-in sentence encoder: counts of a few words (cosine = shared-word similarity)."""

    identity = {"model": {"name": "word-counts", "weights": "0" * 16}}
    VOCABULARY = ("deliveries", "retried", "hours", "event", "failed", "search", "requests")

    def _encode(self, texts):
        return np.array([[text.lower().count(word) for word in self.VOCABULARY] for text in texts], dtype=float)

    encode_queries = encode_passages = _encode


def test_embedding_verdict_points_at_the_sentence_its_score_comes_from() -> None:
    from ragexp.judging.judges import EmbeddingJudge

    judge = EmbeddingJudge(WordCountEncoder())
    [verdict] = judge.judge_claims(["The event has failed."], CONTEXT)
    assert CONTEXT[slice(*verdict.evidence)] == "After that the event is marked failed."
    assert verdict.score == pytest.approx(1.0)  # same word counts as that sentence


def test_the_page_api_answers_409_404_and_422(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from ragexp.judge_review.router import review_router
    from ragexp.web.app import create_app

    review = session(tmp_path, Recorder())
    client = TestClient(create_app([review_router(review)], "review.html"), base_url="http://127.0.0.1")
    state = client.get("/api/review").json()
    first, second = (c["id"] for c in state["claims"][:2])
    saved = client.put("/api/review/label", json={"id": first, "label": S, "before": ""})
    assert saved.status_code == 200 and not saved.json()["already_so"]
    other = client.put("/api/review/label", json={"id": first, "label": N, "before": ""})  # a page still showing none
    assert other.status_code == 409 and "nothing was written" in other.json()["detail"]["message"]
    assert client.put("/api/review/label", json={"id": "RUN/q9#claim_0", "label": S, "before": ""}).status_code == 404
    assert client.put("/api/review/label", json={"id": second, "label": "maybe", "before": ""}).status_code == 422
    no_before = client.put("/api/review/label", json={"id": second, "label": N})  # a page from before this API
    assert no_before.status_code == 422 and "before" in no_before.json()["detail"]["message"]
    assert [(row.id, row.human_label) for row in read_labels(tmp_path / "labels.csv")] == [(first, S)]
    assert "review.js" in client.get("/").text


def test_the_bootstrap_kappa_interval_is_the_percentiles_of_resampled_claims() -> None:
    """The multinomial bootstrap against its definition (resample the 15 claims with replacement,
    kappa by scikit-learn, undefined resamples as 0): percentiles within 0.03 of each other; it is
    wider than the large-sample interval at 15 items, holds kappa, and is the same on a rerun."""
    from ragexp.judging.calibration.kappa_interval import bootstrap_kappa_interval

    human, judge = table_ratings(6, 2, 1, 6)
    boot = bootstrap_kappa_interval(human, judge)
    rng = np.random.default_rng(1)
    h, j = np.array(human), np.array(judge)
    direct = []
    for _ in range(4000):
        index = rng.integers(0, 15, 15)
        a, b = h[index], j[index]
        direct.append(0.0 if len(set(a) | set(b)) == 1 else cohen_kappa_score(a, b))
    assert (boot.low, boot.high) == pytest.approx(tuple(np.quantile(direct, [0.025, 0.975])), abs=0.03)
    fleiss = kappa_interval(human, judge)
    assert boot.kappa == fleiss.kappa and boot.low <= boot.kappa <= boot.high
    assert boot.high - boot.low > fleiss.high - fleiss.low
    assert bootstrap_kappa_interval(human, judge) == boot
    assert bootstrap_kappa_interval([S, S], [S, S]).low is None  # undefined stays undefined
