"""Query-log import: read + personal-data screen + exact dedup throughput per log format, and a
1M-line log through the whole ``ragexp evalset queries`` (wall time, peak memory).

Logs are made from the 10,570 real SQuAD v1.1 dev questions: Zipf-distributed frequencies
(exponent 1.1), 45 % of the lines reworded (lower case, upper case, no ``?``, extra spaces,
``What's``), 1 % with an e-mail address, phone number, card number or key appended. The same
queries are written as plain text, JSONL (``{"ts", "user", "query"}``), CSV and gzipped plain text.

1. Throughput: each format's read stage (:func:`ragexp.candidates.log_reader.read_log` into
   :class:`ragexp.candidates.distinct.DistinctQueries`) in one process, formats interleaved
   (plain, JSONL, CSV, gzip, plain, ...) for ``--repeats`` rounds so shared load hits all alike;
   median and range of lines/s.
2. In fresh processes, each with its wall time and peak resident memory (the child's own ``VmHWM``
   from ``/proc/self/status``, Linux; ``ru_maxrss`` would also count the parent's memory, which a
   child spawned with vfork inherits as its high-water mark): the read stage alone on a 1M-line log
   (``--big-lines``), the read stage on 1M lines of which every one is distinct (the worst case for
   memory), and the whole ``ragexp evalset queries --sample 100`` on the 1M-line log.

3. ``--threshold``: the near-duplicate threshold chosen for MiniLM on the labelled pairs, and how many
   SQuAD v1.1 dev questions have another SQuAD question at or above it (nearly all of those are
   different questions worded alike: what an embedding threshold cannot separate).

Run: ``python -m benchmarks.bench_query_import [--lines 200000] [--repeats 3] [--big-lines 1000000] [--threshold]``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import REPO, shared_data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FORMATS = {"plain": "queries.txt", "jsonl": "queries.jsonl", "csv": "queries.csv", "gzip": "queries.txt.gz"}


def _luhn_complete(prefix: str) -> str:
    for check in "0123456789":
        digits = [int(c) for c in prefix + check]
        total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
        if total % 10 == 0:
            return prefix + check
    raise AssertionError("unreachable")


def _personal(rng: random.Random, query: str) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"{query} my email is user{rng.randrange(1000)}@example.com"
    if kind == 1:
        return f"{query} call me on +1 415 555 {rng.randrange(1000, 9999)}"
    if kind == 2:
        card = _luhn_complete("4111" + "".join(rng.choice("0123456789") for _ in range(11)))
        return f"why was my card {card[:4]} {card[4:8]} {card[8:12]} {card[12:]} charged twice"
    return "api key sk-" + "".join(rng.choice("abcdefghijkLMNOP0123456789") for _ in range(24)) + " does not work"


def _reworded(rng: random.Random, query: str) -> str:
    r = rng.random()
    if r < 0.55:
        return query
    return rng.choice([query.lower(), query.rstrip("?").strip(), "  " + query.replace(" ", "  ") + "??", query.upper(),
                       query.replace("What is", "What's"), query.lower().rstrip("?")])


def log_queries(n: int, seed: int = 0, distinct_lines: bool = False) -> list[str]:
    """``n`` logged queries (see the module docstring); ``distinct_lines`` makes every line its own query."""
    path = shared_data_dir() / "squad_v1.1_dev" / "queries.jsonl"
    questions = [json.loads(line)["text"].strip() for line in path.open(encoding="utf-8")]
    rng = random.Random(seed)
    rng.shuffle(questions)
    if distinct_lines:
        return [f"{rng.choice(questions)} (case {i})" for i in range(n)]
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(questions))]
    out = []
    for index in rng.choices(range(len(questions)), weights=weights, k=n):
        query = _reworded(rng, questions[index])
        out.append(_personal(rng, query) if rng.random() < 0.01 else query)
    return out


def write_logs(folder: Path, queries: list[str]) -> dict[str, Path]:
    paths = {name: folder / file for name, file in FORMATS.items()}
    paths["plain"].write_text("".join(q + "\n" for q in queries), encoding="utf-8")
    with paths["jsonl"].open("w", encoding="utf-8") as out:
        out.writelines(json.dumps({"ts": 1_700_000_000 + i, "user": f"u{i % 977}", "query": q}) + "\n" for i, q in enumerate(queries))
    with paths["csv"].open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["ts", "user", "query"])
        writer.writerows([1_700_000_000 + i, f"u{i % 977}", q] for i, q in enumerate(queries))
    with gzip.open(paths["gzip"], "wt", encoding="utf-8") as out:
        out.writelines(q + "\n" for q in queries)
    return paths


def read_stage(path: Path) -> tuple[float, int, int]:
    """Seconds to read, screen and dedup ``path``; lines read; distinct queries."""
    from ragexp.candidates.distinct import DistinctQueries
    from ragexp.candidates.log_reader import LogStats, read_log

    stats, table = LogStats(), DistinctQueries()
    source = table.add_source(str(path))
    start = time.perf_counter()
    for line, query in read_log(path, stats=stats):
        table.add(query, source, line)
    return time.perf_counter() - start, stats.lines, len(table.entries)


def throughput(folder: Path, lines: int, repeats: int) -> None:
    paths = write_logs(folder, log_queries(lines))
    rates: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(repeats):
        for name, path in paths.items():  # interleaved: plain, jsonl, csv, gzip, plain, ...
            seconds, n, distinct = read_stage(path)
            rates[name].append(n / seconds)
    print(f"read + screen + exact dedup, {lines:,} lines ({distinct:,} distinct), {repeats} interleaved rounds")
    print("| format | file size | lines/s, median | range |")
    print("|---|---|---|---|")
    for name, values in rates.items():
        size = paths[name].stat().st_size / 1e6
        print(f"| {name} | {size:.1f} MB | {statistics.median(values):,.0f} | {min(values):,.0f}-{max(values):,.0f} |")


PEAK = """
def _peak_mb():
    line = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
"""
READ_ONLY = PEAK + """
import sys
from pathlib import Path
from benchmarks.bench_query_import import read_stage
seconds, lines, distinct = read_stage(Path(sys.argv[1]))
print(f"{lines:,} lines, {distinct:,} distinct, {seconds:.1f} s, {lines / seconds:,.0f} lines/s; peak RSS {_peak_mb():,.0f} MB")
"""
WHOLE_COMMAND = PEAK + """
import sys
from ragexp.cli import main
code = main(sys.argv[1:])
print(f"peak RSS {_peak_mb():,.0f} MB (torch and the model included)")
sys.exit(code)
"""


def _child(code: str, *args: str) -> tuple[float, str]:
    """Wall seconds and stdout of ``python -c code args`` run from the repository."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stdout


def big_log(folder: Path, lines: int) -> None:
    log = folder / "big.txt"
    log.write_text("".join(q + "\n" for q in log_queries(lines, seed=1)), encoding="utf-8")
    wall, out = _child(READ_ONLY, str(log))
    print(f"\nread stage alone, {lines:,} lines ({log.stat().st_size / 1e6:.0f} MB): {out.strip()}, wall {wall:.1f} s")
    distinct_log = folder / "distinct.txt"
    distinct_log.write_text("".join(q + "\n" for q in log_queries(lines, distinct_lines=True)), encoding="utf-8")
    wall, out = _child(READ_ONLY, str(distinct_log))
    print(f"read stage alone, {lines:,} lines all distinct ({distinct_log.stat().st_size / 1e6:.0f} MB): {out.strip()}, wall {wall:.1f} s")
    wall, out = _child(WHOLE_COMMAND, "evalset", "queries", str(log), "--sample", "100", "--out", str(folder / "c.jsonl"))
    print(f"\nragexp evalset queries on {lines:,} lines ({log.stat().st_size / 1e6:.0f} MB), --sample 100: wall {wall:.1f} s")
    print("\n".join(f"    {line}" for line in out.strip().splitlines()))


def threshold_on_squad() -> None:
    import numpy as np

    from ragexp.candidates.near_duplicates import fit_threshold
    from ragexp.candidates.query_encoder import QueryEncoder

    encode = QueryEncoder("minilm")
    chosen = fit_threshold(encode, "minilm")
    print(f"\nthreshold {chosen.value:g}: {chosen.how}")
    path = shared_data_dir() / "squad_v1.1_dev" / "queries.jsonl"
    questions = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    vectors = encode(questions)
    nearest = np.full(len(questions), -1.0, dtype=np.float32)
    for start in range(0, len(questions), 2048):
        block = vectors[start : start + 2048] @ vectors.T
        block[np.arange(len(block)), np.arange(start, start + len(block))] = -1.0  # not itself
        nearest[start : start + 2048] = block.max(axis=1)
    for threshold in (0.90, chosen.value):
        share = float((nearest >= threshold).mean())
        print(f"SQuAD v1.1 dev questions with another question at cosine >= {threshold:g}: "
              f"{int((nearest >= threshold).sum()):,} of {len(questions):,} ({share:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200_000, help="lines per format for the throughput table (0: skip)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--big-lines", type=int, default=1_000_000, help="lines of the whole-command run (0: skip)")
    parser.add_argument("--threshold", action="store_true", help="also: the threshold and SQuAD questions above it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragexp-bench-logs-") as tmp:
        if args.lines:
            throughput(Path(tmp), args.lines, args.repeats)
        if args.big_lines:
            big_log(Path(tmp), args.big_lines)
    if args.threshold:
        threshold_on_squad()


if __name__ == "__main__":
    main()
