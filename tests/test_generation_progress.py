"""The answers' progress bar moves per question while a local model decodes a batch.

The ``generate+judge`` bar advanced once per round of 32 questions: with ``eval.sample=20`` it sat at
0/20 for minutes, then jumped to 20/20. A local model now reports each answer as its row of the
decoded batch ends (``decode_batch(row_done=...)`` -> :func:`ragexp.runtime.progress.tick`). The
report is progress only: the same prompts decoded with and without a listener give byte-identical
answers, token counts and finish reasons.
"""

from __future__ import annotations

import os

import pytest

from ragexp.runtime import progress

pytestmark = pytest.mark.slow
PROMPTS = [
    "Name one primary colour.",
    "What is 2 + 2? Answer with a number.",
    "Write one sentence about the sea.",
    "List three fruits, separated by commas.",
    "Say hello.",
]


@pytest.fixture(scope="module")
def smollm():
    """SmolLM2-135M from the user's converted-weights cache (converted there once if absent)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragexp.llm.local_hf import LocalHFModel

    return LocalHFModel("smollm2-135m", batch_size=8, threads=1)


def answers(model, prompts):
    return [(r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason) for r in
            model.complete_batch(prompts, max_tokens=24)]


def test_each_answer_ticks_as_its_row_ends_and_the_answers_are_unchanged(smollm):
    silent = answers(smollm, PROMPTS)
    ticks: list[int] = []
    with progress.ticking(ticks.append):
        counted = answers(smollm, PROMPTS)
    assert counted == silent  # byte-identical: the listener only counts
    assert ticks == [1] * len(PROMPTS)  # one tick per question, all five in one decoded batch of 8
    progress.tick()  # outside the block nothing listens
    assert ticks == [1] * len(PROMPTS)


def test_rows_report_in_the_order_they_end(smollm):
    """The rows of one batch end at different steps (the decode loop drops each as it ends): a row
    that stops sooner is reported sooner, so the bar moves during the batch, not at its end."""
    from ragexp.llm.decoding import decode_batch

    tokenizer = smollm.weights.tokenizer
    encoded = [tokenizer(smollm.render([{"role": "user", "content": p}]), add_special_tokens=False)["input_ids"]
               for p in PROMPTS]
    order: list[int] = []
    eos = smollm.weights.model.generation_config.eos_token_id
    decoded = decode_batch(smollm.weights.model, encoded, max_new_tokens=24, eos_ids=set(eos if isinstance(eos, list) else [eos]),
                           pad_id=smollm._pad_id, row_done=order.append)
    lengths = [len(row.tokens) + (row.finish_reason == "eos") for row in decoded.rows]
    assert sorted(order) == list(range(len(PROMPTS)))
    assert [lengths[i] for i in order] == sorted(lengths), (order, lengths)  # reported when each ended
    assert len(set(lengths)) > 1, lengths  # the rows did end at different steps
