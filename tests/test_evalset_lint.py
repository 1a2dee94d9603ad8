"""``ragexp evalset lint``: stale gold against the live corpus, duplicates, coverage, noise note."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ragexp.cli import main
from ragexp.data.lint import NoiseFloor, lint_evalset

REPO = Path(__file__).resolve().parents[1]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragexp.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_tiny_dataset_lints_clean_with_category_warnings(tiny_dataset) -> None:
    corpus, evalset = tiny_dataset
    report = lint_evalset(evalset, corpus)
    assert report.exit_code == 0
    assert report.errors == []
    coverage = [f.message for f in report.warnings if f.check == "category-coverage"]
    assert len(coverage) == 2
    assert "no item is tagged 'multi-chunk'" in coverage[0]
    assert "no item is tagged 'boundary'" in coverage[1]
    assert report.tag_counts == {"verbatim": 2, "paraphrase": 2, "synonym": 2, "unanswerable": 1}
    assert (report.n_items, report.n_answerable, report.noise_floor.n) == (7, 6, 6)


def test_corpus_edited_after_export_reports_every_stale_gold(tiny_dataset) -> None:
    corpus, evalset = tiny_dataset
    webhooks = corpus / "webhooks.md"
    webhooks.write_text(
        webhooks.read_text(encoding="utf-8").replace("times out after 10 seconds", "times out"), encoding="utf-8"
    )
    (corpus / "refunds.md").unlink()

    report = lint_evalset(evalset, corpus)
    stale = [(f.check, f.line, f.item_id, f.field) for f in report.errors]
    assert stale == [
        ("unresolved-gold", 3, "t2", "evidence[0].quote"),
        ("unresolved-gold", 6, "t5", "evidence[0].doc_id"),
    ]
    assert "quote \"times out after 10 seconds\" not found in document 'webhooks'" in report.errors[0].message
    assert report.exit_code == 1

    result = run_cli("evalset", "lint", str(evalset), "--corpus", str(corpus))
    assert result.returncode == 1, result.stderr
    assert f"error[unresolved-gold] {evalset}:3: field 'evidence[0].quote': quote" in result.stdout
    assert (
        f"error[unresolved-gold] {evalset}:6: field 'evidence[0].doc_id': unknown document id 'refunds'"
        in result.stdout
    )


def test_cli_lint_json_and_exit_codes(tiny_dataset, capsys) -> None:
    corpus, evalset = tiny_dataset
    assert main(["evalset", "lint", str(evalset), "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "note: with n=6 answerable items" in out
    assert out.rstrip().endswith("0 error(s), 2 warning(s)")

    (corpus / "refunds.md").unlink()
    assert main(["evalset", "lint", str(evalset), "--corpus", str(corpus), "--format", "json"]) == 1
    as_json = json.loads(capsys.readouterr().out)
    assert [(e["line"], e["item_id"], e["check"]) for e in as_json["errors"]] == [(6, "t5", "unresolved-gold")]
    assert as_json["noise_floor"]["n"] == 6
    assert as_json["exit_code"] == 1


def test_duplicates_empty_queries_missing_answers_and_whitespace_spans(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.md").write_text("Alpha beta.\n\n   \nGamma.", encoding="utf-8")
    evidence = [{"doc_id": "doc"}]
    evalset = write_jsonl(
        tmp_path / "evalset.jsonl",
        [
            {"id": "a", "query": "What is alpha?", "evidence": evidence, "gold_answer": "beta"},
            {"id": "b", "query": "What is alpha?", "evidence": evidence, "gold_answer": "beta"},
            {"id": "c", "query": "  what IS   alpha ", "evidence": evidence, "key_facts": ["beta"]},
            {"id": "d", "query": " ", "evidence": evidence, "gold_answer": "x"},
            {"id": "e", "query": "What is gamma?", "evidence": [{"doc_id": "doc", "start": 11, "end": 16}]},
            {"id": "a", "query": "Nothing here?", "answerable": False},
        ],
    )
    report = lint_evalset(evalset, corpus)
    found = [(f.severity, f.check, f.line, f.item_id) for f in report.findings if f.check != "category-coverage"]
    assert found == [
        ("warning", "duplicate-query", 2, "b"),
        ("warning", "near-duplicate-query", 3, "c"),
        ("error", "empty-query", 4, "d"),
        ("error", "whitespace-span", 5, "e"),
        ("warning", "no-gold-answer", 5, "e"),
        ("error", "duplicate-id", 6, "a"),
        ("warning", "gold-check", None, None),  # e's bare span: nothing records what it read
    ]
    assert "gold cannot be verified: 1 bare span(s)" in next(f.message for f in report.findings if f.check == "gold-check")
    assert "item 'a' on line 1" in report.findings[0].message
    assert report.exit_code == 1


def tagged_items(n: int, tags_of: dict[int, list[str]]) -> list[dict]:
    return [
        {
            "id": f"q{i}",
            "query": f"question {i}",
            "evidence": [{"doc_id": "doc"}],
            "gold_answer": "a",
            "tags": tags_of.get(i, ["verbatim"]),
        }
        for i in range(n)
    ]


@pytest.mark.parametrize(("n_boundary", "warned"), [(0, "no item is"), (1, "only 1 of 40 items (2.5%) are"), (2, None)])
def test_category_coverage_threshold_is_five_percent(tmp_path: Path, n_boundary: int, warned: str | None) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.md").write_text("text", encoding="utf-8")
    tags_of = {i: ["Boundary"] for i in range(n_boundary)}
    tags_of |= {
        10: ["paraphrase"],
        11: ["paraphrase"],
        12: ["Synonym"],
        13: ["synonym"],
        14: ["multi_chunk"],
        15: ["MULTI-CHUNK"],
    }
    items = tagged_items(38, tags_of) + [
        {"id": f"u{i}", "query": f"unanswerable {i}", "answerable": False} for i in range(2)
    ]
    report = lint_evalset(write_jsonl(tmp_path / "e.jsonl", items), corpus)
    coverage = [f.message for f in report.warnings if f.check == "category-coverage"]
    if warned is None:
        assert coverage == []
    else:
        assert len(coverage) == 1
        assert coverage[0].startswith(f"{warned} tagged 'boundary'")
        assert "at least 5% (2 items)" in coverage[0]


def test_noise_note_states_standard_error_and_detectable_difference() -> None:
    floor = NoiseFloor.for_size(120)
    assert floor.standard_error == pytest.approx(math.sqrt(0.8 * 0.2 / 120))
    assert floor.minimum_detectable_difference == pytest.approx(2 * math.sqrt(0.8 * 0.2 / 120))
    assert floor.n_for_article_tolerance == 1600
    sentence = floor.sentence()
    assert "with n=120 answerable items" in sentence
    assert "is 3.7 points" in sentence
    assert "smaller than 7.3 points (~2 standard errors) is within noise" in sentence


def test_documents_without_text_or_title_are_counted_and_gold_only_there_is_an_error(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    docs = [{"_id": "a", "title": "Retries", "text": "Webhooks retry for 24 hours."},
            {"_id": "keys", "title": "API keys", "text": ""},  # title only: indexed, fine
            {"_id": "blank1", "title": "", "text": ""}, {"_id": "blank2", "title": " ", "text": "\n"}]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    evalset = tmp_path / "evalset.jsonl"
    items = [{"id": "q1", "query": "How long do webhooks retry?", "evidence": [{"doc_id": "a"}], "gold_answer": "24 hours"},
             {"id": "q2", "query": "What is on the blank page?", "evidence": [{"doc_id": "blank1"}], "gold_answer": "x"},
             {"id": "q3", "query": "Which keys exist?", "evidence": [{"doc_id": "keys"}, {"doc_id": "blank2"}], "gold_answer": "x"}]
    evalset.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    report = lint_evalset(evalset, corpus)
    warning = next(f for f in report.warnings if f.check == "unindexable-document")
    assert "2 of 4 documents" in warning.message and "'blank1'" in warning.message
    assert [(f.check, f.item_id) for f in report.errors] == [("unindexable-gold", "q2")]  # q3 still has indexed gold
    assert report.exit_code == 1


def test_an_unanswerable_item_with_key_facts_is_an_error(tmp_path: Path) -> None:
    """Key facts of an unanswerable item (an adjudicator turned it unanswerable and the facts stayed)
    are an error; its gold answer is the reply expected instead ("The docs do not say") and lints clean."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.md").write_text("Alpha beta.", encoding="utf-8")
    evalset = write_jsonl(tmp_path / "evalset.jsonl", [
        {"id": "a", "query": "What is alpha?", "evidence": [{"doc_id": "doc"}], "gold_answer": "beta", "key_facts": ["beta"]},
        {"id": "u1", "query": "Is there gamma?", "answerable": False, "gold_answer": "Gamma is 3.", "key_facts": ["gamma is 3"]},
        {"id": "u2", "query": "Is there delta?", "answerable": False, "gold_answer": "The docs do not say."},
        {"id": "u3", "query": "Is there epsilon?", "answerable": False, "evidence": [{"doc_id": "doc", "grade": 0}]},
    ])
    report = lint_evalset(evalset, corpus)
    found = [(f.check, f.line, f.item_id, f.field) for f in report.findings if f.severity == "error"]
    assert found == [("facts-of-unanswerable", 2, "u1", "key_facts")]
    assert report.exit_code == 1
