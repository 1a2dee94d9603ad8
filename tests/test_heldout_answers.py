"""Title copies and end repeats on real answers from held-out corpora (issue #50).

``benchmarks/data/heldout_answers.jsonl`` holds SmolLM2-135M's 50 answers (``generator=local``, greedy)
on two corpora that are not the demo: 20 questions on package READMEs (``benchmarks.manual_corpus``)
and 30 sampled SQuAD v1.1 dev questions (article-titled Wikipedia text), each with the text the model
call returned, how it ended, what the code before #50 stored and judged, and its context (each
passage cut to its label line, its first 150 characters and its heading lines: every title the
context shows). Each answer goes through the answer's end (:func:`ragexp.llm.answer_end.final_cut`,
then ``end_at_sentence`` where it was cut off), label and title stripping and claim splitting as a run
does them; the counts come from ``benchmarks.title_copies``, whose rules are its own."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.title_copies import end_repeat, is_title, titles
from ragexp.data.context import strip_label_copies
from ragexp.judging.claims import split_sentences
from ragexp.judging.faithfulness import Verdict, faithfulness_batch
from ragexp.llm.answer_end import end_at_sentence, final_cut
from reference_pipelines.generators.llm import CUT_OFF

ROWS = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "benchmarks" / "data"
                                       / "heldout_answers.jsonl").read_text(encoding="utf-8").splitlines()]
STOP = ["\n\n", "Question:"]  # conf/generator/local.yaml
REPEAT_NGRAM = 10


class SentenceJudge:
    """Splits as the run's lexical judge does (sentences) and calls every claim supported: only
    which claims reach the judge is under test."""

    def split_claims(self, answer: str) -> list[str]:
        return split_sentences(answer)

    def judge_claims(self, claims, context):
        return [Verdict(claim, True, 1.0, "") for claim in claims]


def answer_now(row: dict) -> str:
    text, reason = final_cut(row["returned"], STOP, REPEAT_NGRAM, row["finish_reason"])
    answer = end_at_sentence(text) if reason in CUT_OFF else text.strip()
    return strip_label_copies(answer, row["context"])[0]


def shapes(answers: list[str], claims: list[list[str]]) -> tuple[int, int, int]:
    """(answers with a title line, answers whose last sentence repeats, claims that are titles)."""
    known = [titles(row["context"]) for row in ROWS]
    return (sum(any(is_title(line, k) for line in a.splitlines() if line.strip()) for a, k in zip(answers, known)),
            sum(end_repeat(a) for a in answers),
            sum(is_title(c, k) for cs, k in zip(claims, known) for c in cs))


def test_the_fixture_is_what_the_runs_produced():
    assert len(ROWS) == 50 and [r["corpus"] for r in ROWS].count("package-readmes") == 20
    # before #50, on the stored answers: one SQuAD answer was two title lines, two ended by repeating
    # an earlier line, and the judge judged both title lines as claims
    assert shapes([r["stored_before"] for r in ROWS], [r["claims_before"] for r in ROWS]) == (1, 2, 2)


def test_no_title_copy_or_end_repeat_is_left_and_no_title_is_judged():
    answers = [answer_now(row) for row in ROWS]
    judged = faithfulness_batch([(a, row["context"]) for a, row in zip(answers, ROWS)], SentenceJudge())
    assert shapes(answers, [[v.claim for v in f.verdicts] for f in judged]) == (0, 0, 0)
    # the rest is the answer as before: only the two copies' lines and the two repeats changed
    changed = {row["id"]: (row["stored_before"], a) for row, a in zip(ROWS, answers) if a != row["stored_before"]}
    assert changed == {
        "56e1f10ee3433e1400423225": ("1. Computational complexity theory\n2. Computational complexity theory", ""),
        "572929d56aef051400154b0c": (
            '1. Breakfast\n2. Breakfast in the morning (kiamsha kinywa)\n3. Breakfast in the afternoon (chakula cha mchana)\n'
            '4. Breakfast in the evening (chakula cha jioni or known simply as "chajio")\n5. Breakfast in the morning (kiamsha kinywa)',
            '1. Breakfast\n2. Breakfast in the morning (kiamsha kinywa)\n3. Breakfast in the afternoon (chakula cha mchana)\n'
            '4. Breakfast in the evening (chakula cha jioni or known simply as "chajio")')}
