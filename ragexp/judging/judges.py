"""Claim judges: decide whether a context supports a claim, and write the question an answer
responds to (for answer relevance).

Every judge exposes ``model_id``, ``split_claims(answer)``, ``judge_claims(claims, context) ->
list[Verdict]`` and ``generate_question(answer) -> str | None``.

Every judge reads the context's document text only
(:func:`~ragexp.judging.evidence.document_text`): the ``[i] doc-id > Heading`` label lines
ragexp puts in front of each retrieved chunk for the generator are not evidence, and the
shipped thresholds were fitted on contexts without them.

- :class:`LLMJudge` asks a chat model the faithfulness prompt and parses the reply strictly: the
  first word, lower-cased and stripped of punctuation, must be ``yes`` or ``no``; anything else
  (and any :class:`~ragexp.llm.LLMCallError`) is a judge failure (``supported=None``).
- :class:`LocalLikelihoodJudge` scores with a local model's log-probabilities instead of reading
  its text (see its docstring for the methods and how the default was chosen).
- :class:`LexicalJudge` is a deterministic proxy: the share of the claim's content tokens found
  in the context; it writes no questions, so answer relevance is undefined with it.
- :class:`EmbeddingJudge`: the claim's cosine similarity to its best-matching context sentence
  under a sentence encoder (the run's); writes no questions either.

The scoring judges call a claim supported iff its score ``>= threshold``. The threshold is a
calibration file's (``calibration=PATH``, written by ``ragexp judge calibrate``: fitted on human
labels, with its cross-validated agreement), else the ``threshold`` given, else the judge's
default; ``threshold_source`` says which, ``calibration`` holds the file's content, and
``identity()`` names the judge a calibration file must have been fitted for
(:mod:`ragexp.judging.calibration.record`).

Judging with the generator's own model invites self-preference bias (a judge is lenient with
text that sounds like itself): :func:`warn_if_self_judging` warns loudly when the ids match.
"""

from __future__ import annotations

import logging
import math
import string
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import Stemmer

from ragexp.data.context import passage_spans
from ragexp.errors import RagexpInputError
from ragexp.judging.answer_relevance import QUESTION_PROMPT, generate_questions
from ragexp.judging.calibration.record import (
    JudgeCalibration,
    choose_threshold,
    load_calibration,
)
from ragexp.judging.claims import (
    ClaimSplitter,
    SentenceClaimSplitter,
    make_claim_splitter,
)
from ragexp.judging.evidence import (
    closest_sentence,
    document_sentence_spans,
    document_text,
    sentence_token_sets,
)
from ragexp.judging.faithfulness import FAITHFULNESS_PROMPT, Verdict
from ragexp.llm.base import (
    ChatModel,
    LLMCallError,
    LLMResponse,
    ScoringModel,
    as_messages,
    complete_all,
)
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.text_vectors import with_text_vectors
from ragexp.text.tokenize import claim_words

logger = logging.getLogger(__name__)

_STRIP = string.punctuation + "\u201c\u201d\u2018\u2019"


class SelfPreferenceWarning(UserWarning):
    """The judge is the model that generated the answers it judges."""


def warn_if_self_judging(judge_model_id: str, generator_model_id: str | None) -> bool:
    """Warn (``warnings.warn`` and a WARNING log record) when judge and generator are one model."""
    if generator_model_id is None or judge_model_id != generator_model_id:
        return False
    message = (
        f"judge model {judge_model_id!r} is also the generator: self-preference bias makes "
        "faithfulness optimistic; use an independently chosen judge model"
    )
    logger.warning(message)
    warnings.warn(message, SelfPreferenceWarning, stacklevel=2)
    return True


def parse_yes_no(text: str) -> bool | None:
    """``True``/``False`` for a reply whose first word is yes/no (any case, punctuation
    stripped: ``"Yes."``, ``"**no**"``); ``None`` for anything else."""
    words = text.split()
    if not words:
        return None
    return {"yes": True, "no": False}.get(words[0].strip(_STRIP).lower())


class LLMJudge:
    """A chat model as judge: one call per claim with ``template`` (``{context}``, ``{claim}``)."""

    def __init__(
        self,
        chat_model: ChatModel,
        template: str = FAITHFULNESS_PROMPT,
        claim_splitter: str | ClaimSplitter = "llm",
        question_template: str = QUESTION_PROMPT,
        max_tokens: int = 8,
        calibration: str | None = None,
    ) -> None:
        self.chat_model = chat_model
        self.model_id = chat_model.model_id
        #: Measured agreement with human labels (``ragexp judge calibrate --judge openai``), if given.
        self.calibration: JudgeCalibration | None = (
            None if calibration is None else load_calibration(calibration, self.identity())
        )
        self.template = template
        self.question_template = question_template
        self.max_tokens = max_tokens
        self.claim_splitter = (
            make_claim_splitter(claim_splitter, chat_model) if isinstance(claim_splitter, str) else claim_splitter
        )

    def identity(self) -> dict[str, str]:
        return {"kind": "llm", "model_id": self.model_id}

    def split_claims(self, answer: str) -> list[str]:
        return self.claim_splitter.split(answer)

    def judge_claims(self, claims: Sequence[str], context: str) -> list[Verdict]:
        return self.judge_claims_batch([(claims, context)])[0]

    def judge_claims_batch(self, items: Sequence[tuple[Sequence[str], str]]) -> list[list[Verdict]]:
        """:meth:`judge_claims` for several ``(claims, context)`` items; all prompts go to the
        chat model together (:func:`~ragexp.llm.base.complete_all`)."""
        flat = [(claim, context) for claims, context in items for claim in claims]
        prompts = [self.template.format(context=document_text(context), claim=claim) for claim, context in flat]
        responses = complete_all(self.chat_model, prompts, max_tokens=self.max_tokens, temperature=0.0)
        verdicts = [self._verdict(claim, response) for (claim, _), response in zip(flat, responses)]
        out, at = [], 0
        for claims, _ in items:
            out.append(verdicts[at : at + len(claims)])
            at += len(claims)
        return out

    @staticmethod
    def _verdict(claim: str, response: LLMResponse | LLMCallError) -> Verdict:
        if isinstance(response, LLMCallError):
            return Verdict(claim, None, None, "", error=str(response))
        supported = parse_yes_no(response.text)
        if supported is None:
            return Verdict(claim, None, None, response.text, error="verdict is neither yes nor no")
        return Verdict(claim, supported, float(supported), response.text)

    def generate_question(self, answer: str) -> str:
        (question,) = self.generate_questions([answer])
        if isinstance(question, LLMCallError):
            raise question
        return question

    def generate_questions(self, answers: Sequence[str]) -> list[str | LLMCallError]:
        return generate_questions(self.chat_model, answers, self.question_template)




class LexicalJudge:
    """Deterministic support proxy::

        support(claim, context) = |content(claim) ∩ content(context)| / |content(claim)|

    over the context's document text (label lines left out: :mod:`ragexp.judging.evidence`),
    where ``content(t)`` is the set of Snowball-stemmed lower-case alphanumeric runs of ``t``
    (``idempotency_conflict`` -> ``idempot``, ``conflict``) minus English stop words
    (:func:`ragexp.text.tokenize.claim_words`; its stoplist is not BM25's, and says why). Supported
    iff ``support >= threshold``. A claim with no content token (``"Yes."``) cannot be judged: a
    judge failure.
    A verdict's ``evidence`` is the context sentence sharing the most content tokens with the claim.

    :data:`DEFAULT_THRESHOLD` is the fit (``ragexp judge calibrate``) on all 72 claims of
    ``ragexp/data/datasets/demo/calibration.csv``; docs/judging.md gives its cross-validated numbers
    there and its numbers on held-out SciFact claims.
    """

    model_id = "lexical"
    DEFAULT_THRESHOLD = 0.866071
    SCORE_RANGE = (0.0, 1.0)  # a threshold outside it is refused before any model is built

    def __init__(
        self, threshold: float | None = None, calibration: str | None = None, claim_splitter: ClaimSplitter | None = None
    ) -> None:
        choice = choose_threshold(self.DEFAULT_THRESHOLD, threshold, calibration, self.identity(), score_range=self.SCORE_RANGE)
        self.threshold, self.threshold_source, self.calibration = choice.threshold, choice.source, choice.calibration
        self.claim_splitter = claim_splitter or SentenceClaimSplitter()
        self._stemmer = Stemmer.Stemmer("english")

    def identity(self) -> dict[str, str]:
        return {"kind": "lexical", "model_id": self.model_id}

    def content_tokens(self, text: str) -> set[str]:
        return claim_words(text, self._stemmer)

    def split_claims(self, answer: str) -> list[str]:
        return self.claim_splitter.split(answer)

    def judge_claims(self, claims: Sequence[str], context: str) -> list[Verdict]:
        context_tokens = self.content_tokens(document_text(context))
        sentences = sentence_token_sets(context, self.content_tokens)
        return [self._judge(claim, context_tokens, sentences) for claim in claims]

    def scores(self, claims: Sequence[str], context: str) -> list[float | None]:
        """Each claim's support (``None`` for a claim without content tokens)."""
        return [verdict.score for verdict in self.judge_claims(claims, context)]

    def _judge(self, claim: str, context_tokens: set[str], sentences) -> Verdict:
        tokens = self.content_tokens(claim)
        if not tokens:
            return Verdict(claim, None, None, "", error="claim has no content token")
        missing = sorted(tokens - context_tokens)
        support = 1.0 - len(missing) / len(tokens)
        raw = f"support={support:.3f}" + (f" missing={' '.join(missing)}" if missing else "")
        return Verdict(claim, support >= self.threshold, support, raw, evidence=closest_sentence(tokens, sentences))

    def generate_question(self, answer: str) -> None:
        return None


class EmbeddingJudge:
    """Support as semantic similarity::

        s = max_j cos(encode_query(claim), encode_passage(sentence_j))

    over the sentences of the context's document text (split like answers, label lines left out:
    :func:`~ragexp.judging.evidence.document_sentence_spans`)
    with the sentence encoder the config builds (``encoder: ${embedding}`` in ``conf/judge/embedding.yaml``:
    the run's embedding model). Supported iff ``s >= threshold``. Similar is
    not entailed: a claim that negates or changes a number of a context sentence stays close to it.

    :data:`DEFAULT_THRESHOLD` is the fit (``ragexp judge calibrate``) on all 72 claims of
    ``ragexp/data/datasets/demo/calibration.csv`` with all-MiniLM-L6-v2; docs/judging.md gives its
    cross-validated numbers there and its numbers on held-out SciFact claims.

    The encoder's backend does not change :meth:`identity` (ONNX fp32 equals torch to cosine
    0.9999, :mod:`ragexp.models.onnx_export`); its precision does (``minilm@…/int8``): an int8
    encoder needs its own calibration. With a stage cache each sentence is encoded once per
    encoder (:mod:`ragexp.runtime.text_vectors`).
    """

    DEFAULT_THRESHOLD = 0.664979
    SCORE_RANGE = (-1.0, 1.0)  # cosine similarity

    def __init__(
        self, encoder: Any, threshold: float | None = None, calibration: str | None = None,
        claim_splitter: ClaimSplitter | None = None, cache: StageCache | None = None,
    ) -> None:
        if not (hasattr(encoder, "encode_queries") and hasattr(encoder, "encode_passages")):
            raise RagexpInputError("must be a sentence encoder built from config (encoder: ${embedding})", field="encoder")
        self.encoder = with_text_vectors(encoder, cache)
        model = self.encoder.identity["model"]
        precision = self.encoder.identity.get("precision", "fp32")
        self.model_id = f"{model['name']}@{model['weights'][:16]}" + ("" if precision == "fp32" else f"/{precision}")
        choice = choose_threshold(self.DEFAULT_THRESHOLD, threshold, calibration, self.identity(), score_range=self.SCORE_RANGE)
        self.threshold, self.threshold_source, self.calibration = choice.threshold, choice.source, choice.calibration
        self.claim_splitter = claim_splitter or SentenceClaimSplitter()

    def identity(self) -> dict[str, str]:
        return {"kind": "embedding", "model_id": self.model_id}

    def split_claims(self, answer: str) -> list[str]:
        return self.claim_splitter.split(answer)

    def scores(self, claims: Sequence[str], context: str) -> list[float]:
        """Each claim's cosine to its most similar context sentence."""
        return [score for score, _ in self._best_sentences(claims, context)]

    def _best_sentences(self, claims: Sequence[str], context: str) -> list[tuple[float, list[int]]]:
        """Each claim's best cosine and the ``[start, end]`` of that context sentence."""
        if not claims:
            return []
        spans = document_sentence_spans(context) or passage_spans(context)
        sentences = [context[start:end] for start, end in spans]
        similarity = _unit_rows(self.encoder.encode_queries(list(claims))) @ _unit_rows(self.encoder.encode_passages(sentences)).T
        return [(float(row.max()), list(spans[int(row.argmax())])) for row in similarity]

    def judge_claims(self, claims: Sequence[str], context: str) -> list[Verdict]:
        return [
            Verdict(claim, score >= self.threshold, score, f"cosine={score:.4f} threshold={self.threshold:g}", evidence=span)
            for claim, (score, span) in zip(claims, self._best_sentences(claims, context))
        ]

    def generate_question(self, answer: str) -> None:
        return None


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), so a product of two is a cosine matrix."""
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


LIKELIHOOD_METHODS = ("yes_no", "pmi", "pmi_min", "combo")
CLAIM_WITH_CONTEXT = "Context:\n{context}\n\nClaim:"
CLAIM_WITHOUT_CONTEXT = "Claim:"


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


class LocalLikelihoodJudge:
    """A small local model as judge, by likelihood instead of by its generated text.

    Methods (``s`` is the verdict's ``score``; supported iff ``s >= threshold``):

    - ``yes_no``: the faithfulness prompt in the model's chat template (its ``render``; plain text
      followed by ``Answer:`` without one), then
      ``s = log(P(yes) + P(Yes)) - log(P(no) + P(No))`` for the assistant's first word.
    - ``pmi``: how much the context raises the claim's likelihood, per word::

          s = [log P(claim | "Context: {context} Claim:") - log P(claim | "Claim:")] / n_words

    - ``pmi_min``: the same, word by word, keeping the least supported word
      (``s = min_i [log P(w_i | context, w_<i) - log P(w_i | w_<i)]``), so one wrong number
      or name sinks the claim.
    - ``combo``: ``s = yes_no / yes_no_scale + pmi_min / pmi_min_scale``, both scores brought to a
      common scale (the scales are their standard deviations on the calibration set).

    The default thresholds are fits on all 72 hand-labelled claims of
    ``ragexp/data/datasets/demo/calibration.csv`` scored with SmolLM2-135M (by ``ragexp judge
    calibrate``; ``combo``'s by an earlier rule), the combo scales are the scores' standard
    deviations there; ``pmi`` is the default method because it costs two forward passes
    per claim. Every method is close to chance with a 135M model (docs/judging.md has the
    cross-validated and held-out numbers): calibrate with ``ragexp judge calibrate --judge local
    --method M`` before trusting it, and always for another model.
    Question writing (answer relevance) uses ``question_model`` if given, else the scoring
    model when it can also complete prompts (greedy).
    """

    DEFAULT_THRESHOLDS = {"yes_no": -0.999874, "pmi": 2.86605, "pmi_min": -1.25179, "combo": -4.23}
    COMBO_SCALES = (0.2864, 0.8736)

    def __init__(
        self,
        scoring_model: ScoringModel,
        method: str = "pmi",
        threshold: float | None = None,
        template: str = FAITHFULNESS_PROMPT,
        claim_splitter: ClaimSplitter | None = None,
        question_model: ChatModel | None = None,
        question_template: str = QUESTION_PROMPT,
        calibration: str | None = None,
    ) -> None:
        if method not in LIKELIHOOD_METHODS:
            raise ValueError(f"unknown likelihood method {method!r}; use one of {', '.join(LIKELIHOOD_METHODS)}")
        self.scoring_model = scoring_model
        self.model_id = scoring_model.model_id
        self.method = method
        choice = choose_threshold(self.DEFAULT_THRESHOLDS[method], threshold, calibration, self.identity())
        self.threshold, self.threshold_source, self.calibration = choice.threshold, choice.source, choice.calibration
        self.template = template
        self.claim_splitter = claim_splitter or SentenceClaimSplitter()
        if question_model is None and isinstance(scoring_model, ChatModel):
            question_model = scoring_model
        self.question_model = question_model
        self.question_template = question_template

    def identity(self) -> dict[str, str]:
        return {"kind": "local_likelihood", "method": self.method, "model_id": self.model_id}

    def split_claims(self, answer: str) -> list[str]:
        return self.claim_splitter.split(answer)

    def judge_claims(self, claims: Sequence[str], context: str) -> list[Verdict]:
        return self.judge_claims_batch([(claims, context)])[0]

    def judge_claims_batch(self, items: Sequence[tuple[Sequence[str], str]]) -> list[list[Verdict]]:
        """:meth:`judge_claims` for several ``(claims, context)`` items, scored in one model call
        (each context encoded once for all its claims, the bare ``Claim:`` prefix once for all).
        If that call fails, each item is scored alone, so a failure stays with its own item."""
        try:
            batched = self.scores_batch(items)
        except LLMCallError as err:
            if len(items) == 1:
                claims = items[0][0]
                return [[Verdict(claim, None, None, "", error=str(err)) for claim in claims]]
            return [self.judge_claims(claims, context) for claims, context in items]
        return [
            [self._verdict(claim, float(score)) for claim, score in zip(claims, scores)]
            for (claims, _), scores in zip(items, batched)
        ]

    def _verdict(self, claim: str, score: float) -> Verdict:
        raw = f"{self.method}={score:.4f} threshold={self.threshold:g}"
        return Verdict(claim, score >= self.threshold, score, raw)

    def scores(self, claims: Sequence[str], context: str) -> list[float]:
        """The method's support score for each claim (see the class docstring)."""
        return self.scores_batch([(claims, context)])[0]

    def scores_batch(self, items: Sequence[tuple[Sequence[str], str]]) -> list[list[float]]:
        """:meth:`scores` for every ``(claims, context)`` item, from one ``logprobs`` call."""
        plans = [self._plan(self.method, list(claims), document_text(context)) for claims, context in items]
        logprobs = self.scoring_model.logprobs([pair for pairs, _ in plans for pair in pairs])
        out, at = [], 0
        for pairs, combine in plans:
            out.append(combine(logprobs[at : at + len(pairs)]))
            at += len(pairs)
        return out

    def _plan(self, method: str, claims: list[str], context: str) -> tuple[list[tuple[str, str]], Callable]:
        """The ``(prefix, continuation)`` pairs ``method`` needs for ``claims`` and the function
        that turns their log-probabilities into one score per claim."""
        if method == "yes_no":
            return self._yes_no_plan(claims, context)
        if method == "pmi":
            return self._pmi_plan(claims, context)
        if method == "pmi_min":
            return self._pmi_min_plan(claims, context)
        yes_no_pairs, yes_no = self._yes_no_plan(claims, context)
        pmi_min_pairs, pmi_min = self._pmi_min_plan(claims, context)
        yes_no_scale, pmi_min_scale = self.COMBO_SCALES

        def combo(logprobs: list[float]) -> list[float]:
            first, second = yes_no(logprobs[: len(yes_no_pairs)]), pmi_min(logprobs[len(yes_no_pairs) :])
            return [y / yes_no_scale + p / pmi_min_scale for y, p in zip(first, second)]

        return yes_no_pairs + pmi_min_pairs, combo

    def _yes_no_plan(self, claims: list[str], context: str) -> tuple[list[tuple[str, str]], Callable]:
        render = getattr(self.scoring_model, "render", None)
        words = ("yes", "Yes", "no", "No")
        pairs = []
        for claim in claims:
            prompt = self.template.format(context=context, claim=claim)
            if render is not None:
                pairs.extend((render(as_messages(prompt)), word) for word in words)
            else:
                pairs.extend((prompt + "\nAnswer:", " " + word) for word in words)

        def combine(logprobs: list[float]) -> list[float]:
            return [
                _logsumexp(logprobs[i : i + 2]) - _logsumexp(logprobs[i + 2 : i + 4]) for i in range(0, len(logprobs), 4)
            ]

        return pairs, combine

    def _pmi_plan(self, claims: list[str], context: str) -> tuple[list[tuple[str, str]], Callable]:
        with_context = CLAIM_WITH_CONTEXT.format(context=context)
        pairs = [(with_context, " " + claim) for claim in claims] + [(CLAIM_WITHOUT_CONTEXT, " " + claim) for claim in claims]

        def combine(logprobs: list[float]) -> list[float]:
            conditioned, unconditioned = logprobs[: len(claims)], logprobs[len(claims) :]
            return [(c - u) / max(1, len(claim.split())) for claim, c, u in zip(claims, conditioned, unconditioned)]

        return pairs, combine

    def _pmi_min_plan(self, claims: list[str], context: str) -> tuple[list[tuple[str, str]], Callable]:
        with_context = CLAIM_WITH_CONTEXT.format(context=context)
        conditioned_pairs, unconditioned_pairs, owners = [], [], []
        for index, claim in enumerate(claims):
            words = claim.split()
            for i, word in enumerate(words):
                seen = "".join(" " + w for w in words[:i])
                conditioned_pairs.append((with_context + seen, " " + word))
                unconditioned_pairs.append((CLAIM_WITHOUT_CONTEXT + seen, " " + word))
                owners.append(index)

        def combine(logprobs: list[float]) -> list[float]:
            conditioned, unconditioned = logprobs[: len(owners)], logprobs[len(owners) :]
            best: list[float] = [math.inf] * len(claims)
            for index, c, u in zip(owners, conditioned, unconditioned):
                best[index] = min(best[index], c - u)
            return best

        return conditioned_pairs + unconditioned_pairs, combine

    def generate_question(self, answer: str) -> str | None:
        (question,) = self.generate_questions([answer])
        if isinstance(question, LLMCallError):
            raise question
        return question

    def generate_questions(self, answers: Sequence[str]) -> list[str | None | LLMCallError]:
        """The question model's questions, in one batch; ``None`` each without a question model."""
        if self.question_model is None:
            return [None] * len(answers)
        return generate_questions(self.question_model, answers, self.question_template)
