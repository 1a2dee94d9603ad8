"""Re-anchoring an eval set after the corpus changed: ``ragexp evalset reanchor``'s work and the
check every run makes, timed with their peak memory.

Corpus. ``--documents`` synthetic help pages (seeded): a ``# title`` line and 8-14 paragraphs of
40-90 words drawn from a 5,000-word vocabulary, about 5 KB each, as one corpus JSONL file.

Eval set. ``--items`` items, each one span of 12-40 words from a distinct random document, with its
quote and the header's record of every gold document (what ``ragexp evalset resolve`` writes).

Edit. ``--changed`` (a share) of the documents, drawn at random (``--all-gold``: every gold
document among them, the worst case), get a new paragraph near their top (a span in one moves);
in one changed gold document in five a word inside its span is replaced as well (its span
changed: re-found fuzzily, or left for a person).

Measured, each in a freshly spawned process (its own peak RSS, ``ru_maxrss``, interpreter and imports included): reading the new corpus; the
check a run makes at load time (:func:`ragexp.data.loaders.evalset.read_evalset`: one hash per
recorded document, each moved span found again); and :func:`ragexp.commands._evalset_reanchor.reanchor`
(the locator over the gold documents, exact -> normalised -> fuzzy). Wall time on this machine,
one thread (``OMP_NUM_THREADS=1``); the load (``uptime``) is printed.

    python -m benchmarks.bench_reanchor [--documents 10000] [--items 150] [--changed 0.1] [--all-gold] [--seed 0]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

PARAGRAPH = ("This page was reorganised in the latest documentation release: sections were merged and renamed, "
             "examples were updated, and older answers moved to the changelog.\n\n")


def make_corpus(n_docs: int, rng: random.Random) -> dict[str, str]:
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range(5000)]
    docs = {}
    for i in range(n_docs):
        paragraphs = [" ".join(rng.choices(vocabulary, k=rng.randint(40, 90))) + "." for _ in range(rng.randint(8, 14))]
        docs[f"doc{i:05d}"] = f"# Page {i}\n\n" + "\n\n".join(paragraphs) + "\n"
    return docs


def write_corpus(path: Path, docs: dict[str, str]) -> None:
    path.write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items()), encoding="utf-8")


def make_evalset(docs: dict[str, str], n_items: int, rng: random.Random) -> tuple[list[dict], list[str]]:
    from ragexp.datamodel import text_sha256

    gold_docs = rng.sample(sorted(docs), n_items)
    items = []
    for i, doc_id in enumerate(gold_docs):
        text = docs[doc_id]
        words = [(m.start(), m.end()) for m in __import__("re").finditer(r"\S+", text[text.index("\n\n") + 2:])]
        offset = text.index("\n\n") + 2
        first = rng.randrange(0, len(words) - 40)
        length = rng.randint(12, 40)
        start, end = offset + words[first][0], offset + words[first + length - 1][1]
        items.append({"id": f"q{i:03d}", "query": f"question {i}", "evidence": [
            {"doc_id": doc_id, "start": start, "end": end, "quote": text[start:end]}]})
    header = {"ragexp_evalset": 1, "name": "bench", "documents": {d: text_sha256(docs[d]) for d in gold_docs}}
    return [header, *items], gold_docs


def edit(docs: dict[str, str], evalset: list[dict], share: float, all_gold: bool,
         rng: random.Random) -> tuple[dict[str, str], dict]:
    gold = {item["evidence"][0]["doc_id"]: item["evidence"][0] for item in evalset[1:]}
    n_changed = int(len(docs) * share)
    changed = set(rng.sample(sorted(gold), min(len(gold), n_changed))) if all_gold else set()
    changed |= set(rng.sample(sorted(set(docs) - changed), n_changed - len(changed)))
    new, edited_inside = dict(docs), 0
    for doc_id in changed:
        text = docs[doc_id]
        cut = text.index("\n\n") + 2
        if doc_id in gold and rng.random() < 0.2:
            span = gold[doc_id]
            words = text[span["start"]:span["end"]].split(" ")
            words[len(words) // 2] = "replaced"
            text = text[:span["start"]] + " ".join(words) + text[span["end"]:]
            edited_inside += 1
        new[doc_id] = text[:cut] + PARAGRAPH + text[cut:]
    return new, {"documents_changed": len(changed), "gold_documents_changed": len(changed & set(gold)),
                 "spans_edited_inside": edited_inside}


def measured(target, *args):
    """``target(*args)`` in a fresh (spawned) process: its result, wall seconds and peak RSS in MiB."""
    pool = multiprocessing.get_context("spawn").Pool(1)
    try:
        return pool.apply(_timed, (target, *args))
    finally:
        pool.close()
        pool.join()


def _timed(target, *args):
    started = time.perf_counter()
    result = target(*args)
    return result, time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_only(corpus_path: str):
    from ragexp.data.loaders.corpus import load_corpus

    return len(load_corpus(corpus_path))


def check(corpus_path: str, evalset_path: str):
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.data.loaders.evalset import read_evalset

    corpus = load_corpus(corpus_path)
    started = time.perf_counter()
    reading = read_evalset(evalset_path, corpus)
    return {"moved": len(reading.moved), "stale": len(reading.stale), "check_s": time.perf_counter() - started}


def reanchor_all(corpus_path: str, evalset_path: str):
    from ragexp.commands._evalset_reanchor import reanchor
    from ragexp.data.evalset_schema import read_file
    from ragexp.data.loaders.corpus import load_corpus

    corpus = load_corpus(corpus_path)
    started = time.perf_counter()
    result = reanchor(read_file(evalset_path), Path(evalset_path), corpus, None)
    return {**result.counts(), "reanchor_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=150)
    parser.add_argument("--changed", type=float, default=0.1)
    parser.add_argument("--all-gold", action="store_true", help="every gold document among the changed ones")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("load:", open("/proc/loadavg").read().split()[:3])
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        docs = make_corpus(args.documents, rng)
        evalset, _ = make_evalset(docs, args.items, rng)
        new, edits = edit(docs, evalset, args.changed, args.all_gold, rng)
        write_corpus(root / "new.jsonl", new)
        (root / "evalset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in evalset), encoding="utf-8")
        size = (root / "new.jsonl").stat().st_size
        print(f"corpus: {len(new)} documents, {size / 2**20:.1f} MiB; eval set: {args.items} items; edits: {edits}")
        _, load_s, load_mib = measured(load_only, str(root / "new.jsonl"))
        print(f"read the corpus alone:     {load_s:6.2f} s, peak RSS {load_mib:6.0f} MiB")
        for label, corpus in [("unchanged", docs), ("changed", new)]:
            write_corpus(root / f"{label}.jsonl", corpus)
            found, wall, mib = measured(check, str(root / f"{label}.jsonl"), str(root / "evalset.jsonl"))
            print(f"run's gold check, {label:9s}: {found['check_s'] * 1000:7.1f} ms (after reading the corpus; "
                  f"{wall:.2f} s in all), peak RSS {mib:6.0f} MiB; moved {found['moved']}, stale {found['stale']}")
        found, wall, mib = measured(reanchor_all, str(root / "new.jsonl"), str(root / "evalset.jsonl"))
        counts = {k: v for k, v in found.items() if k != "reanchor_s"}
        print(f"reanchor:                  {found['reanchor_s']:6.2f} s (after reading the corpus; {wall:.2f} s in all), "
              f"peak RSS {mib:6.0f} MiB; {counts}")


if __name__ == "__main__":
    main()
