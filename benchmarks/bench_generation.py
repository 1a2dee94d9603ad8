"""Local generation and judging speed on the demo, old path vs new path, measured in one run.

Prompts are the real demo prompts of ``ragexp run generator=local``: the 148 demo questions, each
with the top 3 chunks of markdown-1024 + hybrid RRF, in the grounded-QA template, sent through
SmolLM2-135M's chat template. Sections (``--sections``, all by default):

- ``paths``: on the first ``--n-old`` questions, s/question, prefill and decode tokens/s of
  - ``old``: the path before this change: one question at a time through ``model.generate``,
    float32, torch's default threads, ``max_new_tokens`` 96, no stop string;
  - ``generate``: plain ``model.generate``, batch 1, with the new path's threads, weights, stop
    strings and budget (the reference for the new decoding loop);
  - ``new``: :meth:`LocalHFModel.complete_batch` as ``conf/generator/local.yaml`` sets it up
    (batches of 8 sorted by length, left padding, stop strings, its threads and quantization);
  and how many answers ran to the token cap, and whether ``new`` answers equal ``generate``'s.
- ``quant``: the new path with float32 / bfloat16 / dynamic int8 weights on ``--n`` questions:
  speed, agreement of the greedy answers with float32 (exact match; token agreement = mean
  over questions of common-prefix tokens / longer answer's tokens), and whether each weight
  type answers in batches of 8 as it does one question at a time (batch invariance).
- ``threads``: the new path at 1 and at 2 torch threads on ``--n-threads`` questions, run in
  alternating order (1, 2, 1, 2 on halves), and whether the answers are equal.
- ``judge``: the local judge's pmi scoring of the claims of the ``paths`` answers: the old
  scorer (every pair a full pass, batches of 8 right-padded to the longest pair, all-position
  logits) vs the new one (each context once per answer, ``Claim:`` once), with the largest
  score difference.

Prefill time of ``model.generate`` is the time until its first stopping-criteria call (the
first token exists then); decode is the rest. Load average (``os.getloadavg``) is printed before
and after each section: timings on a machine shared with other jobs are not those of idle cores.

Run: ``python -m benchmarks.bench_generation [--n-old 12] [--n 40] [--n-threads 24]``
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

DEFAULT_THREADS = torch.get_num_threads()  # before ragexp sets anything: what the old path ran with

from omegaconf import OmegaConf
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

from ragexp.llm.local_hf import LocalHFModel

OLD_MAX_NEW_TOKENS = 96


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def demo_prompts(cache_dir: Path, context_k: int = 3) -> tuple[list[str], dict]:
    """The demo run's generator prompts (top ``context_k`` chunks) and the generator config of ``generator=local``."""
    from hydra import compose, initialize_config_dir

    from ragexp.config.compose import CONFIG_DIR
    from ragexp.config.schema import register_schema
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.evaluation.pipeline import build_pipeline
    from ragexp.evaluation.prepared import prepare_data
    from ragexp.evaluation.retrieval_step import retrieval_step
    from ragexp.runtime.stage_cache import StageCache

    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["generator=local", f"eval.context_k={context_k}", f"cache_dir={cache_dir}", "progress=false"])
    generator_cfg = OmegaConf.to_container(cfg.generator, resolve=True)
    cache = StageCache(cache_dir)
    spec = job_spec(cfg)
    pipeline = build_pipeline(spec, cache)
    data = prepare_data(spec, cache, progress=False)
    rankings = retrieval_step(spec, data, pipeline, cache).rankings
    chunks = data.chunks_by_id
    generator = pipeline.generator
    prompts = [
        generator.build_prompt(item.query, [chunks[cid] for cid, _ in ranking[: cfg.eval.context_k]])
        for item, ranking in zip(data.evalset.items, rankings)
    ]
    return prompts, generator_cfg


@dataclass
class PathResult:
    name: str
    texts: list[str]
    completion_tokens: list[int]
    finish: list[str]
    prompt_tokens: int
    prefill_s: float
    decode_s: float
    wall_s: float

    def row(self) -> str:
        decode_tokens = sum(max(0, n - 1) for n in self.completion_tokens)
        capped = sum(f == "length" for f in self.finish)
        n = len(self.texts)
        return (
            f"| {self.name} | {self.wall_s / n:.2f} | {self.prompt_tokens / self.prefill_s:.0f} | "
            f"{decode_tokens / self.decode_s:.1f} | {sum(self.completion_tokens) / self.wall_s:.1f} | {capped}/{n} |"
        )


HEADER = (
    "| {first} | s/question | prefill tokens/s | decode tokens/s | generated tokens/s (wall) | ran to the cap |{extra}\n"
    "|---|---|---|---|---|---|{extra_rule}"
)


class FirstTokenClock(StoppingCriteria):
    """Records when ``generate`` has its first new token (the end of prefill); never stops."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self, input_ids, scores, **kwargs):
        if self.first is None:
            self.first = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def hf_generate(model: LocalHFModel, prompts: list[str], max_new_tokens: int, stop: list[str] | None, name: str) -> PathResult:
    """One prompt at a time through ``model.generate`` (greedy), like the old ``LocalHFModel``;
    the text is cut before the first stop string as the old path did."""
    hf, tokenizer = model.weights.model, model.weights.tokenizer
    eos = hf.generation_config.eos_token_id
    texts, counts, finish, prompt_tokens, prefill_s, decode_s = [], [], [], 0, 0.0, 0.0
    started = time.perf_counter()
    for prompt in prompts:
        ids = tokenizer(model.render([{"role": "user", "content": prompt}]), add_special_tokens=False, return_tensors="pt")["input_ids"]
        config = GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None, top_k=None, eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id, stop_strings=stop,
        )  # fmt: skip
        clock = FirstTokenClock()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config, tokenizer=tokenizer,
                stopping_criteria=StoppingCriteriaList([clock]),
            )  # fmt: skip
        t1 = time.perf_counter()
        new = out[0, ids.shape[1] :].tolist()
        text = tokenizer.decode(new, skip_special_tokens=True)
        hit = [marker for marker in stop or [] if marker in text]
        finish.append("eos" if new and new[-1] == eos else "stop" if hit else "length")
        for marker in stop or []:
            text = text.split(marker, 1)[0]
        texts.append(text)
        counts.append(len(new))
        prompt_tokens += ids.shape[1]
        prefill_s += clock.first - t0
        decode_s += t1 - clock.first
    return PathResult(name, texts, counts, finish, prompt_tokens, prefill_s, decode_s, time.perf_counter() - started)


def new_path(model: LocalHFModel, prompts: list[str], max_new_tokens: int, stop: list[str], name: str) -> PathResult:
    """All prompts in one :meth:`LocalHFModel.complete_batch` call (no call cache)."""
    started = time.perf_counter()
    responses = model.complete_batch(prompts, max_tokens=max_new_tokens, stop=stop)
    wall = time.perf_counter() - started
    return PathResult(
        name,
        [r.text for r in responses],
        [r.completion_tokens for r in responses],
        [r.finish_reason for r in responses],
        sum(r.prompt_tokens for r in responses),
        sum(r.prefill_s for r in responses),
        sum(r.decode_s for r in responses),
        wall,
    )


def agreement(reference: list[str], other: list[str], tokenizer) -> tuple[int, float]:
    """Exact matches, and mean common-prefix tokens / longer answer's tokens."""
    exact, shares = 0, []
    for a, b in zip(reference, other):
        exact += a == b
        ta, tb = tokenizer(a, add_special_tokens=False)["input_ids"], tokenizer(b, add_special_tokens=False)["input_ids"]
        common = 0
        for x, y in zip(ta, tb):
            if x != y:
                break
            common += 1
        shares.append(common / max(len(ta), len(tb), 1))
    return exact, sum(shares) / len(shares)


def old_logprobs(model: LocalHFModel, pairs: list[tuple[str, str]], batch_size: int = 8) -> list[float]:
    """The scorer before this change (kept here only to measure against): every pair one full
    sequence, batches of 8 in list order right-padded to the longest, logits at every position."""
    hf, tokenizer = model.weights.model, model.weights.tokenizer
    encoded = []
    for prefix, continuation in pairs:
        context = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        whole = tokenizer(prefix + continuation, add_special_tokens=False)["input_ids"]
        encoded.append((whole, len(context)))
    scores = []
    for start in range(0, len(encoded), batch_size):
        batch = encoded[start : start + batch_size]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, _) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        with torch.inference_mode():
            logits = hf(input_ids=input_ids, attention_mask=attention).logits
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        for row, (ids, n_context) in enumerate(batch):
            targets = torch.tensor(ids[n_context:])
            positions = torch.arange(n_context - 1, len(ids) - 1)
            scores.append(float(log_probs[row, positions, targets].sum()))
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-old", type=int, default=12, help="questions for the old and generate paths and the judge")
    parser.add_argument("--n", type=int, default=40, help="questions for the quantisation comparison")
    parser.add_argument("--n-threads", type=int, default=24, help="questions for the 1 vs 2 threads comparison")
    parser.add_argument("--sections", default="paths,judge,quant,threads")
    parser.add_argument("--cache-dir", type=Path, default=REPO / ".ragexp_cache")
    args = parser.parse_args()
    sections = set(args.sections.split(","))

    print(f"start: {load()}; torch default threads {DEFAULT_THREADS}; owned cores {len(os.sched_getaffinity(0))}")
    prompts, generator_cfg = demo_prompts(args.cache_dir)
    spec = dict(generator_cfg["model"])
    spec.pop("backend", None)
    max_new_tokens, stop = int(generator_cfg["max_new_tokens"]), list(generator_cfg.get("stop") or ["\n\n", "Question:"])
    print(f"{len(prompts)} demo prompts; generator=local: {spec}, max_new_tokens {max_new_tokens}, stop {stop!r}")

    float32 = LocalHFModel(**{**spec, "quantization": "none", "dtype": "float32", "threads": DEFAULT_THREADS})
    paths: dict[str, PathResult] = {}
    if sections & {"paths", "judge"}:
        subset = prompts[: args.n_old]
        print(f"\n## paths: first {len(subset)} questions ({load()})\n")
        torch.set_num_threads(DEFAULT_THREADS)
        paths["old"] = hf_generate(float32, subset, OLD_MAX_NEW_TOKENS, None, f"old (generate, batch 1, {DEFAULT_THREADS} threads, float32, no stop)")
        new_model = LocalHFModel(**spec)
        weights = new_model.dtype if new_model.quantization == "none" else new_model.quantization
        paths["generate"] = hf_generate(new_model, subset, max_new_tokens, stop, f"model.generate batch 1 ({new_model.threads} threads, {weights})")
        paths["new"] = new_path(new_model, subset, max_new_tokens, stop, f"new (batch {new_model.batch_size}, {new_model.threads} threads, {weights})")
        print(HEADER.format(first="path", extra="", extra_rule=""))
        for result in paths.values():
            print(result.row())
        same = sum(a == b for a, b in zip(paths["generate"].texts, paths["new"].texts))
        print(f"\nnew answers equal to model.generate batch 1 (same weights, threads, stop): {same}/{len(subset)}")
        speedup = paths["old"].wall_s / paths["new"].wall_s
        print(f"new vs old: {speedup:.1f}x less time per question ({load()})")

    if "judge" in sections:
        from ragexp.judging.claims import SentenceClaimSplitter
        from ragexp.judging.judges import LocalLikelihoodJudge

        print(f"\n## judge: pmi on the claims of the {len(paths['new'].texts)} new answers ({load()})\n")
        judge = LocalLikelihoodJudge(float32, method="pmi")
        # the judged context is the generator's numbered passages, which the prompt holds verbatim
        contexts = [p.split("Context:\n", 1)[1].rsplit("\n\nQuestion:", 1)[0] for p in prompts[: args.n_old]]
        items = [(SentenceClaimSplitter().split(text), c) for text, c in zip(paths["new"].texts, contexts)]
        items = [(claims, context) for claims, context in items if claims]
        n_claims = sum(len(c) for c, _ in items)
        torch.set_num_threads(DEFAULT_THREADS)
        t0 = time.perf_counter()
        old_scores = []
        for claims, context in items:
            plan_pairs, combine = judge._pmi_plan(list(claims), context)
            old_scores.extend(combine(old_logprobs(float32, plan_pairs)))
        old_s = time.perf_counter() - t0
        threads = LocalHFModel(**{**spec, "quantization": "none"}).threads
        t0 = time.perf_counter()
        new_scores = [v.score for verdicts in judge.judge_claims_batch(items) for v in verdicts]
        new_s = time.perf_counter() - t0
        diff = max(abs(a - b) for a, b in zip(old_scores, new_scores))
        print("| scorer | s/answer | claims | max abs pmi difference |\n|---|---|---|---|")
        print(f"| old (full pass per pair, padded batches, {DEFAULT_THREADS} threads) | {old_s / len(items):.2f} | {n_claims} | |")
        print(f"| new (context once per answer, {threads} threads) | {new_s / len(items):.2f} | {n_claims} | {diff:.1e} |")

        from ragexp.judging.answer_relevance import QUESTION_PROMPT

        answers = [text for text in paths["new"].texts if text.strip()]
        question_prompts = [QUESTION_PROMPT.format(answer=text) for text in answers]
        torch.set_num_threads(DEFAULT_THREADS)
        old_questions = hf_generate(float32, question_prompts, 64, ["\n\n"], f"old: one at a time ({DEFAULT_THREADS} threads)")
        new_questions = new_path(LocalHFModel(**{**spec, "quantization": "none"}), question_prompts, 64, ["\n\n"], f"new: batched ({threads} threads)")
        same = sum(a == b for a, b in zip(old_questions.texts, new_questions.texts))
        print(f"\nanswer relevance: the judge (float32) writes the question of each of {len(answers)} answers\n")
        print(HEADER.format(first="question writing", extra="", extra_rule=""))
        print(old_questions.row())
        print(new_questions.row())
        print(f"\nsame questions: {same}/{len(answers)} ({load()})")

    if "quant" in sections:
        subset = prompts[: args.n]
        print(f"\n## quant: {len(subset)} questions, new path ({load()})\n")
        results, invariant = {}, {}
        for label, overrides in (("float32", {"quantization": "none", "dtype": "float32"}),
                                 ("bfloat16", {"quantization": "none", "dtype": "bfloat16"}),
                                 ("dynamic_int8", {"quantization": "dynamic_int8", "dtype": "float32"})):  # fmt: skip
            model = LocalHFModel(**{**spec, **overrides})
            results[label] = new_path(model, subset, max_new_tokens, stop, f"{label} ({model.threads} threads)")
            alone = new_path(LocalHFModel(**{**spec, **overrides, "batch_size": 1}), subset, max_new_tokens, stop, "")
            invariant[label] = sum(a == b for a, b in zip(alone.texts, results[label].texts))
        print(HEADER.format(
            first="weights", extra=" exact match with float32 | token agreement with float32 | batch 8 = batch 1 |",
            extra_rule="---|---|---|",
        ))  # fmt: skip
        for label, result in results.items():
            exact, share = agreement(results["float32"].texts, result.texts, float32.weights.tokenizer)
            print(f"{result.row()} {exact}/{len(subset)} | {share:.3f} | {invariant[label]}/{len(subset)} |")
        print(f"({load()})")

    if "threads" in sections:
        subset = prompts[: args.n_threads]
        half = len(subset) // 2
        print(f"\n## threads: {len(subset)} questions, new path, 1 vs 2 threads in alternating halves ({load()})\n")
        totals = {1: [0.0, 0], 2: [0.0, 0]}
        answers = {1: [], 2: []}
        for part, order in ((subset[:half], (1, 2)), (subset[half:], (2, 1))):
            for count in order:
                model = LocalHFModel(**{**spec, "threads": count})
                result = new_path(model, part, max_new_tokens, stop, "")
                totals[count][0] += result.wall_s
                totals[count][1] += len(part)
                answers[count].append(result.texts)
        print("| threads | s/question |\n|---|---|")
        for count, (seconds, n) in totals.items():
            print(f"| {count} | {seconds / n:.2f} |")
        same = sum(a == b for x, y in zip(answers[1], answers[2]) for a, b in zip(x, y))
        print(f"\nanswers equal at 1 and 2 threads: {same}/{len(subset)} ({load()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
