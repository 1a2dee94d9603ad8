"""Log-probabilities of continuations, each distinct prefix encoded once.

A scored pair is ``(tokens, n_prefix)``: the conditioning tokens ``tokens[:n_prefix]`` and the
continuation ``tokens[n_prefix:]``, scored as::

    score = sum_{t >= n_prefix} log p(tokens_t | tokens_<t)        (nats)

Pairs with the same conditioning tokens form a group (a judge scores every claim of an answer
against one context, and every claim of every answer against the bare ``"Claim:"``). Each
group's prefix goes through the model once, alone, so no short prefix is padded to a long one;
its KV cache and its last-position logits (which score each continuation's first token) are
kept, and the group's continuations, right-padded to the longest of them, are scored against
copies of that cache in batches of ``batch_size``: position ids continue from the prefix
length, the attention mask covers the prefix and the continuation's own real tokens. The
result equals one full forward pass per pair up to float rounding (tests: 1e-4 nats).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Sequence

import torch

from ragexp.llm.decoding import cache_argument

Pair = tuple[list[int], int]


def group_by_prefix(pairs: Sequence[Pair]) -> dict[tuple[int, ...], list[int]]:
    """Indices of ``pairs`` by their conditioning tokens, in first-seen order."""
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for index, (tokens, n_prefix) in enumerate(pairs):
        groups[tuple(tokens[:n_prefix])].append(index)
    return groups


def score_pairs(model: torch.nn.Module, pairs: Sequence[Pair], *, pad_id: int, batch_size: int, device: str = "cpu") -> list[float]:
    """The continuation log-probability of every pair (see the module docstring); a pair with
    no continuation token scores 0. Every prefix must be non-empty."""
    scores = [0.0] * len(pairs)
    cache_name = cache_argument(model)
    for prefix, members in group_by_prefix(pairs).items():
        members = [i for i in members if len(pairs[i][0]) > pairs[i][1]]
        if not members:
            continue
        continuations = [pairs[i][0][pairs[i][1] :] for i in members]
        with torch.inference_mode():
            output = model(input_ids=torch.tensor([prefix], device=device), use_cache=True, logits_to_keep=1)
        prefix_cache = getattr(output, cache_name)
        first = torch.log_softmax(output.logits[0, -1].float(), dim=-1)
        for start in range(0, len(members), batch_size):
            chunk = continuations[start : start + batch_size]
            cache = prefix_cache if start + batch_size >= len(members) else copy.deepcopy(prefix_cache)
            chunk_scores = _score_continuations(model, cache, cache_name, len(prefix), chunk, first, pad_id, device)
            for index, score in zip(members[start : start + batch_size], chunk_scores):
                scores[index] = score
    return scores


def _score_continuations(
    model: torch.nn.Module,
    cache,
    cache_name: str,
    n_prefix: int,
    continuations: list[list[int]],
    first: torch.Tensor,
    pad_id: int,
    device: str,
) -> list[float]:
    """Score ``continuations`` after a prefix whose batch-1 ``cache`` is given (consumed)."""
    scores = [float(first[c[0]]) for c in continuations]
    fed = [c[:-1] for c in continuations]  # the last token is predicted, never fed
    width = max(len(f) for f in fed)
    if width == 0:
        return scores
    rows = len(fed)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attention = torch.zeros((rows, n_prefix + width), dtype=torch.long)
    attention[:, :n_prefix] = 1
    for row, tokens in enumerate(fed):
        input_ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        attention[row, n_prefix : n_prefix + len(tokens)] = 1
    position_ids = (n_prefix + torch.arange(width)).expand(rows, width)
    cache.batch_repeat_interleave(rows)
    with torch.inference_mode():
        logits = model(
            input_ids=input_ids.to(device), attention_mask=attention.to(device), position_ids=position_ids.to(device),
            use_cache=True, **{cache_name: cache},
        ).logits  # fmt: skip
        log_probs = torch.log_softmax(logits.float(), dim=-1)
    for row, tokens in enumerate(continuations):
        targets = torch.tensor(tokens[1:], dtype=torch.long, device=log_probs.device)
        if len(targets):
            steps = torch.arange(len(targets), device=log_probs.device)
            scores[row] += float(log_probs[row, steps, targets].sum())
    return scores
