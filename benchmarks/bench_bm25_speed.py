"""BM25 query speed: our sparse-matrix BM25 vs rank_bm25's get_scores, same tokens, same scores.

Corpus: 50,000 passages (every SciFact title and abstract sentence, in corpus order). Queries:
the first ``--queries`` SciFact claims. For each variant the script asserts that our full score
vectors equal rank_bm25's (max |diff| <= 1e-9 x max |score|), then times

- ours: ``BM25Retriever.search(queries, k=100)`` — tokenising the queries, scoring, top-100;
- rank_bm25: ``get_scores(tokens)`` + ``argsort`` top-100 per query on pre-tokenised queries,

and prints the ratio (target: >= 50x). Index times (both including tokenising) are for information. Run: ``python -m benchmarks.bench_bm25_speed``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
from rank_bm25 import BM25L, BM25Okapi, BM25Plus

from benchmarks import shared_data_dir
from ragexp.datamodel import Chunk  # noqa: E402
from ragexp.text.tokenize import Tokenizer  # noqa: E402
from reference_pipelines.bm25 import BM25Retriever  # noqa: E402

RANK_BM25 = {"okapi": BM25Okapi, "bm25l": BM25L, "bm25plus": BM25Plus}
TARGET_RATIO = 50.0


def scifact_passages(folder: Path, limit: int) -> list[str]:
    passages: list[str] = []
    with open(folder / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            passages.append(doc["title"])
            passages += [s for s in re.split(r"(?<=[.!?])\s+", doc["text"]) if s.strip()]
            if len(passages) >= limit:
                break
    return passages[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    folder = shared_data_dir() / "scifact"
    passages = scifact_passages(folder, args.passages)
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for _, line in zip(range(args.queries), handle)]
    chunks = [Chunk(f"p{i}#chunk_0", f"p{i}", 0, 0, len(t), t) for i, t in enumerate(passages)]
    print(f"{len(passages)} passages, {len(queries)} queries\n")

    header = f"{'variant':9s} {'ours index s':>12s} {'rank_bm25 index s':>17s} {'ours query ms':>13s} {'rank_bm25 query ms':>18s} {'speed-up':>9s} {'max rel diff':>12s}"
    print(header + "\n" + "-" * len(header))
    failures = 0
    for variant, reference_cls in RANK_BM25.items():
        ours = BM25Retriever(variant=variant)
        start = time.perf_counter()
        ours.index(chunks)
        ours_index_s = time.perf_counter() - start

        start = time.perf_counter()  # both index times include tokenising (a fresh tokenizer: cold stem memo)
        tokenizer = Tokenizer()
        reference = reference_cls([tokenizer(chunk.text) for chunk in chunks])
        reference_index_s = time.perf_counter() - start
        query_tokens = [ours.tokenizer(q) for q in queries]

        ours.search(queries[:5], k=100)  # warm-up
        start = time.perf_counter()
        ours.search(queries, k=100)
        ours_s = time.perf_counter() - start

        start = time.perf_counter()
        expected = []
        for tokens in query_tokens:
            scores = reference.get_scores(tokens)
            np.argsort(-scores)[:100]
            expected.append(scores)
        reference_s = time.perf_counter() - start

        expected = np.array(expected)
        rel_diff = float(np.abs(ours.score_all(queries) - expected).max() / np.abs(expected).max())
        assert rel_diff <= 1e-9, f"{variant}: scores differ from rank_bm25 (max rel diff {rel_diff:.2e})"
        ratio = reference_s / ours_s
        failures += ratio < TARGET_RATIO
        print(
            f"{variant:9s} {ours_index_s:12.2f} {reference_index_s:17.2f} {1000 * ours_s / len(queries):13.3f} "
            f"{1000 * reference_s / len(queries):18.2f} {ratio:8.0f}x {rel_diff:12.1e}"
        )
    print(f"\ntarget: speed-up >= {TARGET_RATIO:.0f}x for every variant: {'PASS' if not failures else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
