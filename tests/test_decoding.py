"""Batched decoding and prefix-shared scoring on a tiny random Llama (built in the test, no
weights needed), checked against transformers' own ``generate`` and a full forward pass per pair."""

from __future__ import annotations

import random

import pytest
import torch

from ragexp.llm.decoding import decode_batch, left_pad, positions
from ragexp.llm.prefix_scoring import score_pairs

PAD, EOS = 0, 1


@pytest.fixture(scope="module")
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=96, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=2,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharpen the random logits so greedy choices are not near-ties
        model.lm_head.weight.mul_(8.0)
    return model


def _prompts(seed: int, count: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 96) for _ in range(rng.randrange(3, 40))] for _ in range(count)]


def _generate_alone(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
            eos_token_id=EOS, pad_token_id=PAD,
        )  # fmt: skip
    new = out[0, len(prompt) :].tolist()
    return new[: new.index(EOS)] if EOS in new else new


def test_left_padding_puts_prompts_right_and_positions_skip_pads():
    ids, mask = left_pad([[5, 6, 7], [8]], PAD)
    assert ids.tolist() == [[5, 6, 7], [PAD, PAD, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert positions(mask).tolist() == [[0, 1, 2], [0, 0, 0]]


def test_a_batch_decodes_what_transformers_generate_decodes_one_prompt_at_a_time(tiny_llama):
    prompts = _prompts(1, 6)
    batch = decode_batch(tiny_llama, prompts, max_new_tokens=12, eos_ids={EOS}, pad_id=PAD)
    expected = [_generate_alone(tiny_llama, p, 12) for p in prompts]
    assert [row.tokens for row in batch.rows] == expected
    for row in batch.rows:
        assert row.finish_reason == ("length" if len(row.tokens) == 12 else "eos")
    assert batch.prefill_s > 0 and batch.decode_s >= 0


def test_finished_rows_leave_the_batch_without_changing_the_others(tiny_llama):
    prompts = _prompts(2, 5)
    full = decode_batch(tiny_llama, prompts, max_new_tokens=10, eos_ids={EOS}, pad_id=PAD)
    # stop row 0 after its 2nd token: the other rows must still decode exactly as before
    stop_after_two = lambda tokens: tokens == full.rows[0].tokens[:2]
    cut = decode_batch(tiny_llama, prompts, max_new_tokens=10, eos_ids={EOS}, pad_id=PAD, stop_hit=stop_after_two)
    assert cut.rows[0].tokens == full.rows[0].tokens[:2] and cut.rows[0].finish_reason == "stop"
    assert [r.tokens for r in cut.rows[1:]] == [r.tokens for r in full.rows[1:]]


def test_decode_token_count_excludes_the_token_the_prefill_made(tiny_llama):
    batch = decode_batch(tiny_llama, _prompts(3, 3), max_new_tokens=5, eos_ids=set(), pad_id=PAD)
    assert [len(r.tokens) for r in batch.rows] == [5, 5, 5] and batch.decode_tokens == 3 * 4


def _naive_score(model, tokens: list[int], n_prefix: int) -> float:
    with torch.inference_mode():
        log_probs = torch.log_softmax(model(input_ids=torch.tensor([tokens])).logits[0].float(), dim=-1)
    steps = torch.arange(n_prefix - 1, len(tokens) - 1)
    return float(log_probs[steps, torch.tensor(tokens[n_prefix:])].sum())


def test_prefix_shared_scores_equal_one_full_pass_per_pair(tiny_llama):
    rng = random.Random(4)
    long_prefix, short_prefix = [rng.randrange(3, 96) for _ in range(60)], [7, 8]
    pairs = []
    for _ in range(11):  # 11 continuations of one prefix: more than a batch of 4, so the cache is copied
        pairs.append((long_prefix + [rng.randrange(3, 96) for _ in range(rng.randrange(1, 9))], len(long_prefix)))
        pairs.append((short_prefix + [rng.randrange(3, 96) for _ in range(rng.randrange(1, 9))], len(short_prefix)))
    pairs.append((short_prefix, len(short_prefix)))  # no continuation token: scores 0
    scores = score_pairs(tiny_llama, pairs, pad_id=PAD, batch_size=4)
    expected = [_naive_score(tiny_llama, tokens, n) if len(tokens) > n else 0.0 for tokens, n in pairs]
    assert scores == pytest.approx(expected, abs=1e-4)
    assert all(s < 0 for s in scores[:-1]) and scores[-1] == 0.0
