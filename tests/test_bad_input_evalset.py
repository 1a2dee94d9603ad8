"""Bad eval-set input: one line naming file, line and field; exit 2; no traceback.

The five kinds of bad input run the real CLI in a subprocess; the rest call ``ragexp.cli.main``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragexp.cli import main

REPO = Path(__file__).resolve().parents[1]
DOC = "Webhooks retry with exponential backoff for 24 hours before being marked failed.\n"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragexp.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "webhooks").mkdir(parents=True)
    (root / "webhooks" / "retries.md").write_text(DOC, encoding="utf-8")
    return root


def evalset_with(tmp_path: Path, second_line: str) -> Path:
    good = {"id": "q1", "query": "How long do retries last?", "evidence": [{"doc_id": "webhooks/retries"}]}
    path = tmp_path / "evalset.jsonl"
    path.write_text(json.dumps(good) + "\n" + second_line + "\n", encoding="utf-8")
    return path


def bad_item(evidence: dict) -> str:
    return json.dumps({"id": "q2", "query": "When are webhooks marked failed?", "evidence": [evidence]})


def assert_one_line_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for part in expected:
        assert part in lines[0]


CASES = [
    pytest.param('{"id": "q2", "query": "oops", ', ":2: malformed JSON at column", id="malformed-line"),
    pytest.param(
        bad_item({"doc_id": "webhooks/retry"}), ":2: field 'evidence[0].doc_id': unknown document id", id="unknown-doc"
    ),
    pytest.param(
        bad_item({"doc_id": "webhooks/retries", "quote": "48 hours"}),
        ":2: field 'evidence[0].quote': quote",
        id="quote-not-found",
    ),
    pytest.param(
        bad_item({"doc_id": "webhooks/retries", "start": 70, "end": 500}),
        ":2: field 'evidence[0]': span [70, 500) is out of range",
        id="span-out-of-range",
    ),
]


@pytest.mark.parametrize(("second_line", "expected"), CASES)
def test_bad_evalset_line_is_one_line_exit_2(tmp_path: Path, corpus: Path, second_line: str, expected: str) -> None:
    evalset = evalset_with(tmp_path, second_line)
    result = run_cli("evalset", "resolve", str(evalset), "--corpus", str(corpus))
    assert_one_line_error(result, f"ragexp evalset: error: {evalset}{expected}")
    assert result.stdout == ""


def test_empty_corpus_is_one_line_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.pdf").write_bytes(b"%PDF")
    evalset = evalset_with(tmp_path, bad_item({"doc_id": "webhooks/retries"}))
    result = run_cli("evalset", "resolve", str(evalset), "--corpus", str(empty))
    assert_one_line_error(result, f"ragexp evalset: error: {empty}: empty corpus: no *.md/*.markdown/*.txt/*.html/*.htm/"
                                  "*.pdf/*.docx files below this folder that could be read (notes.pdf: damaged PDF")


@pytest.mark.parametrize("unusable", ["malformed-line", "empty-corpus"])
def test_lint_exits_2_on_unusable_input(tmp_path: Path, corpus: Path, capsys, unusable: str) -> None:
    if unusable == "empty-corpus":
        corpus = tmp_path / "empty"
        corpus.mkdir()
    evalset = evalset_with(tmp_path, "{not json}" if unusable == "malformed-line" else bad_item({"doc_id": "x"}))
    assert main(["evalset", "lint", str(evalset), "--corpus", str(corpus)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert (
        f"{evalset}:2: malformed JSON" if unusable == "malformed-line" else f"{corpus}: empty corpus"
    ) in captured.err


def test_resolve_writes_spans_for_a_good_evalset(tmp_path: Path, corpus: Path, capsys) -> None:
    evalset = evalset_with(tmp_path, bad_item({"doc_id": "webhooks/retries", "quote": "24 hours"}))
    out = tmp_path / "resolved.jsonl"
    assert main(["evalset", "resolve", str(evalset), "--corpus", str(corpus), "--output", str(out)]) == 0
    assert capsys.readouterr().err.strip() == "resolved 2 items: 1 span and 1 whole-document evidence"
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    start = DOC.index("24 hours")
    assert rows[2]["evidence"] == [{"doc_id": "webhooks/retries", "start": start, "end": start + 8, "quote": "24 hours"}]
    assert rows[0]["documents"] == {"webhooks/retries": hashlib.sha256(DOC.encode("utf-8")).hexdigest()}
