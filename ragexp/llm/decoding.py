"""Batched decoding for a transformers causal LM: left padding, one KV cache, early exits.

:func:`decode_batch` continues several token prompts at once. The prompts are left-padded to
one width ``W``: row ``i``'s tokens fill the right end of a ``(B, W)`` tensor, the attention
mask is 0 on the pads, and position ids count real tokens only (``pos = cumsum(mask) - 1``), so
every row sees exactly the positions and tokens it would see alone; a batch gives the answers
of batch 1 up to float rounding in the batched matrix products.

Each step appends one token per unfinished row: the argmax of the next-token logits at
``temperature == 0``, else a draw from ``softmax(logits / temperature)``. A row finishes on an
end-of-sequence token (not kept: ``eos``), when ``stop_hit(tokens)`` says its text now holds a
stop string (``stop``), or after ``max_new_tokens`` tokens (``length``). Finished rows leave the
batch and their KV-cache rows are dropped, so a long answer does not drag short ones along.

Timing: ``prefill_s`` is the first forward pass (all prompt tokens, which yields each row's
first new token); ``decode_s`` covers every later pass. ``decode_tokens = completion tokens -
1`` per row, since the first token comes out of the prefill pass.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DecodedRow:
    """The new tokens of one prompt (an end-of-sequence token is not included) and why it stopped."""

    tokens: list[int]
    finish_reason: str


@dataclass(frozen=True)
class DecodedBatch:
    rows: list[DecodedRow]
    prefill_s: float
    decode_s: float

    @property
    def decode_tokens(self) -> int:
        """Tokens made by decode passes: every row's completion minus its first token."""
        return sum(max(0, len(row.tokens) + (row.finish_reason == "eos") - 1) for row in self.rows)


def cache_argument(model: torch.nn.Module) -> str:
    """The name under which ``model.forward`` takes and returns its KV cache (transformers 5
    renamed ``past_key_values`` to ``cache``)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of shape ``(B, max len)``, each prompt at the right end."""
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        if prompt:
            input_ids[row, width - len(prompt) :] = torch.as_tensor(list(prompt), dtype=torch.long)
            attention[row, width - len(prompt) :] = 1
    return input_ids, attention


def positions(attention: torch.Tensor) -> torch.Tensor:
    """Position ids that skip pads: ``cumsum(mask) - 1``, pads clamped to 0."""
    return (attention.cumsum(-1) - 1).clamp(min=0)


def decode_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_ids: Collection[int],
    pad_id: int,
    temperature: float = 0.0,
    stop_hit: Callable[[list[int]], bool] | None = None,
    device: str = "cpu",
    row_done: Callable[[int], None] | None = None,
) -> DecodedBatch:
    """Continue every prompt (see the module docstring); ``prompts`` must be non-empty token lists.
    ``row_done(i)`` is called once per prompt, as soon as row ``i`` has ended (for progress only:
    it cannot change what is decoded)."""
    cache_name = cache_argument(model)
    input_ids, attention = left_pad(prompts, pad_id)
    input_ids, attention = input_ids.to(device), attention.to(device)
    generated: list[list[int]] = [[] for _ in prompts]
    reasons: list[str | None] = [None] * len(prompts)
    active = list(range(len(prompts)))  # original row index of each batch row
    eos = torch.as_tensor(sorted(eos_ids), dtype=torch.long, device=device)
    started = time.perf_counter()
    prefill_s = 0.0
    with torch.inference_mode():
        output = model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions(attention), use_cache=True,
            logits_to_keep=1,
        )  # fmt: skip
        cache = getattr(output, cache_name)
        next_position = positions(attention)[:, -1:] + 1
        for step in range(max_new_tokens):
            logits = output.logits[:, -1, :].float()
            if temperature > 0:
                chosen = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1).squeeze(1)
            else:
                chosen = logits.argmax(dim=-1)
            if step == 0:
                prefill_s = time.perf_counter() - started
            is_eos = torch.isin(chosen, eos).tolist()
            keep = []
            for batch_row, (row, token, ended) in enumerate(zip(active, chosen.tolist(), is_eos)):
                if ended:
                    reasons[row] = "eos"
                    continue
                generated[row].append(token)
                if stop_hit is not None and stop_hit(generated[row]):
                    reasons[row] = "stop"
                elif len(generated[row]) >= max_new_tokens:
                    reasons[row] = "length"
                else:
                    keep.append(batch_row)
            if row_done is not None:
                for row in active:
                    if reasons[row] is not None:
                        row_done(row)
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.as_tensor(keep, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                attention, next_position, chosen = attention[index], next_position[index], chosen[index]
                active = [active[i] for i in keep]
            attention = torch.cat([attention, attention.new_ones((len(active), 1))], dim=1)
            output = model(
                input_ids=chosen[:, None], attention_mask=attention, position_ids=next_position, use_cache=True,
                **{cache_name: cache},
            )  # fmt: skip
            cache = getattr(output, cache_name)
            next_position = next_position + 1
    decode_s = time.perf_counter() - started - prefill_s
    if row_done is not None:  # rows cut by max_new_tokens == 0 never entered the loop
        for row in (row for row, reason in enumerate(reasons) if reason is None):
            row_done(row)
    rows = [DecodedRow(tokens, reason or "length") for tokens, reason in zip(generated, reasons)]
    return DecodedBatch(rows, prefill_s, decode_s)
