"""``ragexp evalset queries`` end to end with the real MiniLM model, and a 1M-line log in bounded memory."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from ragexp.candidates.distinct import DistinctQueries, tidy
from ragexp.candidates.log_reader import read_log
from ragexp.data.lint import normalise_query
from tests.helpers.cli import ragexp

pytestmark = pytest.mark.slow

TOPICS = [
    "How do I reset my password?", "How long are webhooks retried?", "What is the rate limit of the search endpoint?",
    "Can I get a refund on an annual plan?", "How do I rotate an API key?", "Where do I download my invoices?",
    "How do I delete my account?", "Which SDKs are available?", "What does error 429 mean?", "How do I enable two-factor authentication?",
    "Does the free plan include API access?", "How do I add a team member?", "How do I verify a webhook signature?",
    "What payment methods do you accept?", "How long do you keep my data?", "Is there a sandbox for testing?",
]  # fmt: skip
PARAPHRASE = "How can I reset my password?"  # cosine 0.992 with the first topic: a near duplicate
PERSONAL = ["reset password for jane.doe@example.com", "call me on +1 415 555 0132 about billing",
            "my key sk-proj-abcdefghijklmnop1234 is rejected"]  # fmt: skip


def _log_lines(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for rank, topic in enumerate(TOPICS):
        for _ in range(max(1, 40 // (rank + 1))):  # frequent and rare topics
            lines.append(rng.choice([topic, topic.lower(), topic.rstrip("?"), topic.upper(), f"  {topic}  "]))
    lines += [PARAPHRASE] * 6 + PERSONAL
    rng.shuffle(lines)
    return lines[:200]


def test_candidates_from_a_log_with_duplicates_and_personal_data(tmp_path):
    lines = _log_lines()
    assert len(lines) <= 200
    log = tmp_path / "queries.txt"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "candidates.jsonl"
    proc = ragexp(tmp_path, "evalset", "queries", str(log), "--sample", "10", "--out", str(out))
    stdout = proc.stdout
    assert f"read {len(lines)} lines from 1 log file(s)" in stdout
    assert "left out 3 queries holding personal data or secrets: " in stdout
    assert all(kind in stdout for kind in ("1 e-mail address", "1 phone number", "1 secret"))
    distinct_keys = {normalise_query(line) for line in lines if line not in PERSONAL}
    assert f"{len(lines) - 3 - len(distinct_keys)} merged, {len(distinct_keys)} distinct queries" in stdout
    assert "near-duplicate threshold: cosine >= 0.94, chosen for minilm on ragexp's 110 hand-labelled question pairs, not on this log" in stdout
    assert "near duplicates: 1 merged" in stdout  # the paraphrase joins the password question
    candidates = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(candidates) == 10
    text = out.read_text(encoding="utf-8")
    assert not any(marker in text for marker in ("jane.doe", "415 555", "sk-proj"))
    counts = Counter(normalise_query(line) for line in lines if line not in PERSONAL)
    for candidate in candidates:
        assert set(candidate) == {"query", "source", "log", "line", "frequency", "cluster", "cluster_size",
                                  "cluster_frequency", "variants", "n_variants"}
        assert candidate["source"] == "log" and candidate["log"] == str(log)
        assert normalise_query(lines[candidate["line"] - 1]) == normalise_query(candidate["query"])  # first occurrence
        expected = counts[normalise_query(candidate["query"])]
        if candidate["query"] == TOPICS[0]:
            expected += counts[normalise_query(PARAPHRASE)]
            assert {"query": PARAPHRASE, "count": 6, "similarity": pytest.approx(0.985, abs=0.01)} in candidate["variants"]
        assert candidate["frequency"] == expected
        wordings = Counter(tidy(line) for line in lines if normalise_query(line) == normalise_query(candidate["query"]))
        assert wordings[candidate["query"]] == max(wordings.values())  # the most frequent wording of the query
    assert TOPICS[0] in {c["query"] for c in candidates}  # the most frequent topic is sampled ...
    assert len({c["cluster"] for c in candidates}) == 5  # ... and every one of the ceil(10 / 2) clusters

    # The same queries as gzipped JSONL under a nested key give the same candidates.
    jsonl = tmp_path / "queries.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"request": {"q": line}}) + "\n" for line in lines)
    again = tmp_path / "again.jsonl"
    ragexp(tmp_path, "evalset", "queries", str(jsonl), "--field", "request.q", "--sample", "10", "--out", str(again))
    strip = [{k: v for k, v in json.loads(line).items() if k != "log"} for line in again.read_text(encoding="utf-8").splitlines()]
    assert strip == [{k: v for k, v in c.items() if k != "log"} for c in candidates]


def test_a_given_threshold_is_used_and_said(tmp_path):
    log = tmp_path / "queries.txt"
    log.write_text("\n".join(_log_lines()) + "\n", encoding="utf-8")
    proc = ragexp(tmp_path, "evalset", "queries", str(log), "--sample", "4", "--out", str(tmp_path / "c.jsonl"), "--threshold", "0.995")
    assert "near-duplicate threshold: cosine >= 0.995, given with --threshold" in proc.stdout
    assert "near duplicates: 0 merged" in proc.stdout


def test_a_million_line_log_is_read_in_memory_bounded_by_its_distinct_queries(tmp_path):
    """1M lines, 2,000 distinct queries: the table holds 2,000 entries and Python's traced peak stays
    far below the file's size (the log is 40+ MB; see benchmarks/bench_query_import.py for RSS)."""
    log = tmp_path / "big.txt"
    rng = random.Random(0)
    queries = [f"{TOPICS[i % len(TOPICS)]} variant {i}" for i in range(2000)]
    with log.open("w", encoding="utf-8") as handle:
        for _ in range(1000):
            handle.write("\n".join(rng.choices(queries, k=1000)) + "\n")
    assert log.stat().st_size > 40_000_000
    table = DistinctQueries()
    source = table.add_source(str(log))
    tracemalloc.start()
    for line, query in read_log(Path(log)):
        table.add(query, source, line)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert table.queries == 1_000_000 and len(table.entries) == 2000 and table.duplicates == 998_000
    assert peak < 5_000_000
