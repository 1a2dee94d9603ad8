"""Local generation and judging under competing load: 1 vs 2 torch threads, spinning vs passive wait.

torch's CPU kernels run on GNU OpenMP. By default an OpenMP thread that reaches the end of a
parallel region spins before it sleeps; when the cores are shared, the thread it waits for may
be off-core, and a 2-thread run can become many times slower than a 1-thread one
(docs/generation.md, "Speed of local models"). ``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads
sleep at once. The policy is read once, when torch loads libgomp, so every configuration runs in
its own process:

- ``1 thread``: ``threads: 1`` (no OpenMP team, the policy does not matter);
- ``2 threads, spinning``: ``threads: 2``, ``OMP_WAIT_POLICY`` unset (libgomp's default);
- ``2 threads, passive``: ``threads: 2``, ``OMP_WAIT_POLICY=PASSIVE``.

Each child builds the demo prompts of ``generator=local`` (top ``--context-k`` chunks), times
:meth:`LocalHFModel.complete_batch` on the first ``--n`` of them (``generator=local``'s model
settings, the repetition stop off) and the local judge's pmi
scoring of those answers' claims, and prints one JSON line. ``--busy`` processes that only spin
(``while True: pass``) compete for the cores during every child; the configurations run in
turns for ``--rounds`` rounds so they meet the same load. Load average (``os.getloadavg``) is
printed with every line.

Run: ``python -m benchmarks.bench_threads_load [--n 8] [--busy 1] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {"1 thread": (1, None), "2 threads, spinning": (2, None), "2 threads, passive": (2, "PASSIVE")}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min) {five:.2f} (5 min)"


def child(threads: int, n: int, context_k: int, cache_dir: Path) -> dict:
    """Generation and judging of the first ``n`` demo prompts at ``threads``; timings in seconds."""
    from benchmarks.bench_generation import demo_prompts
    from ragexp.judging.claims import SentenceClaimSplitter
    from ragexp.judging.judges import LocalLikelihoodJudge
    from ragexp.llm.local_hf import LocalHFModel

    prompts, generator_cfg = demo_prompts(cache_dir, context_k)
    prompts = prompts[:n]
    spec = {k: v for k, v in generator_cfg["model"].items() if k not in ("backend", "repeat_ngram")}
    model = LocalHFModel(**{**spec, "threads": threads})
    t0 = time.perf_counter()
    answers = model.complete_batch(prompts, max_tokens=int(generator_cfg["max_new_tokens"]), stop=list(generator_cfg["stop"]))
    generate_s = time.perf_counter() - t0
    # the judged context is the generator's numbered passages, which the prompt holds verbatim
    contexts = [p.split("Context:\n", 1)[1].rsplit("\n\nQuestion:", 1)[0] for p in prompts]
    items = [(SentenceClaimSplitter().split(a.text), c) for a, c in zip(answers, contexts)]
    items = [(claims, context) for claims, context in items if claims]
    t0 = time.perf_counter()
    LocalLikelihoodJudge(model, method="pmi").judge_claims_batch(items)
    judge_s = time.perf_counter() - t0
    return {
        "threads": model.threads, "questions": len(prompts), "generate_s": generate_s,
        "generated_tokens": sum(a.completion_tokens for a in answers), "claims": sum(len(c) for c, _ in items),
        "judge_s": judge_s, "answers": [a.text for a in answers],
    }  # fmt: skip


def run_child(label: str, args: argparse.Namespace) -> dict:
    threads, policy = CONFIGS[label]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    command = [sys.executable, "-m", "benchmarks.bench_threads_load", "--child", str(threads), "--n", str(args.n),
               "--context-k", str(args.context_k), "--cache-dir", str(args.cache_dir)]  # fmt: skip
    out = subprocess.run(command, env=env, cwd=REPO, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="demo questions per child")
    parser.add_argument("--busy", type=int, default=1, help="competing processes that only spin")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--context-k", type=int, default=5, help="chunks in each prompt (eval.context_k)")
    parser.add_argument("--cache-dir", type=Path, default=REPO / ".ragexp_cache")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.n, args.context_k, args.cache_dir)))
        return 0

    print(f"start: {load()}; owned cores {len(os.sched_getaffinity(0))}; {args.busy} busy process(es)")
    run_child("1 thread", args)  # warms the stage cache (prompts) and the converted weights, untimed
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    results: dict[str, list[dict]] = {label: [] for label in CONFIGS}
    try:
        for round_ in range(args.rounds):
            order = list(CONFIGS) if round_ % 2 == 0 else list(reversed(CONFIGS))
            for label in order:
                before = load()
                result = run_child(label, args)
                results[label].append(result)
                print(f"round {round_ + 1} | {label} | generate {result['generate_s']:.1f} s | "
                      f"judge {result['judge_s']:.1f} s ({result['claims']} claims) | {before} -> {load()}", flush=True)  # fmt: skip
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(f"\n| {args.n} demo questions, {args.busy} busy process(es) | generation s/question | judging s/claim |\n|---|---|---|")
    for label, rows in results.items():
        questions = sum(r["questions"] for r in rows)
        claims = sum(r["claims"] for r in rows)
        print(f"| {label} | {sum(r['generate_s'] for r in rows) / questions:.2f} | {sum(r['judge_s'] for r in rows) / claims:.2f} |")
    reference = results["1 thread"][0]["answers"]
    same = all(r["answers"] == reference for rows in results.values() for r in rows)
    print(f"\nanswers equal in every configuration: {same} (end: {load()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
