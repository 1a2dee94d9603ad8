"""The built-in demo (Relaywave help centre + hand-built eval set) stays internally consistent.

Plain-JSON checks state the contract of the shipped files; the last tests load them through the
real loaders, so the demo that ``ragexp run`` uses by default always loads.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset

CORPUS_DIR, EVALSET_PATH = demo_paths()
REPO_ROOT = Path(__file__).resolve().parents[1]

MIN_DOCUMENTS = 32
MIN_ITEMS = 120
CORPUS_WORDS = (35_000, 60_000)
MIN_ITEMS_PER_TAG = {
    "verbatim": 20,
    "paraphrase": 25,
    "synonym": 20,
    "multi-chunk": 20,
    "boundary": 15,
    "near-duplicate": 10,
    "table": 10,
    "unanswerable": 15,
}
# Pages that state outdated facts on purpose: the near-duplicate trap. Gold never points at them
# for a near-duplicate item.
STALE_PAGES = {"webhooks/legacy-v1-webhooks", "pagination/legacy-offset-pagination", "reference/changelog"}


@pytest.fixture(scope="module")
def documents() -> dict[str, str]:
    return {
        path.relative_to(CORPUS_DIR).with_suffix("").as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(CORPUS_DIR.rglob("*.md"))
    }


@pytest.fixture(scope="module")
def header_and_items() -> tuple[dict, list[dict]]:
    lines = EVALSET_PATH.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


@pytest.fixture(scope="module")
def items(header_and_items) -> list[dict]:
    return header_and_items[1]


def test_corpus_is_a_realistic_help_centre(documents):
    assert len(documents) >= MIN_DOCUMENTS
    assert len({doc_id.split("/")[0] for doc_id in documents}) >= 10, "documents live in topic subfolders"
    for doc_id, text in documents.items():
        assert text.startswith("# "), f"{doc_id} must start with a '# Title' line"
        assert "\r" not in text, f"{doc_id} must use LF line endings (evidence offsets index the raw text)"
    unsectioned = [d for d, text in documents.items() if len(text.split()) > 450 and "\n## " not in text]
    assert not unsectioned, f"pages of more than 450 words are split into ## sections: {unsectioned}"
    words = sum(len(text.split()) for text in documents.values())
    assert CORPUS_WORDS[0] <= words <= CORPUS_WORDS[1]
    lengths = sorted(len(text.split()) for text in documents.values())
    assert lengths[0] <= 200 and lengths[-1] >= 1_500, "page lengths vary from short notes to long guides"
    assert sum("\n|---" in text for text in documents.values()) >= 20, "tables are part of the corpus"
    assert sum("```" in text for text in documents.values()) >= 20, "code blocks are part of the corpus"


def test_header_names_the_format_and_the_set(header_and_items):
    header, _ = header_and_items
    assert header["ragexp_evalset"] == 1
    assert header["name"] == "relaywave-demo"


def test_ids_and_queries_are_unique(items):
    assert len(items) >= MIN_ITEMS
    ids = [item["id"] for item in items]
    queries = [item["query"].strip().lower() for item in items]
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]
    assert len(set(queries)) == len(queries), [q for q, n in Counter(queries).items() if n > 1]


def test_every_quote_occurs_exactly_once_or_at_its_occurrence(items, documents):
    for item in items:
        for evidence in item["evidence"]:
            doc_id, quote = evidence["doc_id"], evidence["quote"]
            assert doc_id in documents, f"{item['id']}: unknown document {doc_id!r}"
            count = _count_overlapping(documents[doc_id], quote)
            wanted = evidence.get("occurrence")
            if wanted is None:
                assert count == 1, f"{item['id']}: quote occurs {count} times in {doc_id}: {quote[:60]!r}"
            else:
                assert 1 <= wanted <= count, f"{item['id']}: occurrence {wanted} of {count} in {doc_id}"


def test_answerable_items_carry_gold_answer_and_key_facts(items):
    for item in items:
        if item.get("answerable", True):
            assert item["evidence"], f"{item['id']}: answerable item without evidence"
            assert item["gold_answer"].strip() and item["key_facts"], item["id"]
        else:
            assert item["evidence"] == [] and "unanswerable" in item["tags"], item["id"]
            assert item["gold_answer"].strip(), f"{item['id']}: unanswerable items carry a refusal as gold"


def test_key_facts_are_findable_in_the_evidence_documents(items, documents):
    for item in items:
        evidence_text = "\n".join(documents[e["doc_id"]] for e in item["evidence"]).lower()
        for fact in item.get("key_facts", []):
            assert fact.lower() in evidence_text, f"{item['id']}: key fact {fact!r} not in its evidence documents"


def test_tag_counts_meet_the_minimums(items):
    counts = Counter(tag for item in items for tag in item["tags"])
    short = {tag: (counts[tag], minimum) for tag, minimum in MIN_ITEMS_PER_TAG.items() if counts[tag] < minimum}
    assert not short, f"(have, need) per tag: {short}"
    assert set(counts) <= set(MIN_ITEMS_PER_TAG), f"unknown tags: {set(counts) - set(MIN_ITEMS_PER_TAG)}"


def test_multi_chunk_items_need_two_passages_with_a_key_fact_each(items):
    for item in (i for i in items if "multi-chunk" in i["tags"]):
        assert len(item["evidence"]) >= 2, item["id"]
        for evidence in item["evidence"]:
            quote = evidence["quote"].lower()
            assert any(fact.lower() in quote for fact in item["key_facts"]), (
                f"{item['id']}: evidence in {evidence['doc_id']} contributes no key fact"
            )


def test_near_duplicate_gold_is_the_current_page_and_a_stale_twin_exists(items, documents):
    near_duplicates = [i for i in items if "near-duplicate" in i["tags"]]
    for item in near_duplicates:
        assert not {e["doc_id"] for e in item["evidence"]} & STALE_PAGES, item["id"]
    assert STALE_PAGES <= set(documents)


def test_demo_ships_with_the_package():
    package_data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["ragexp"]
    assert "data/datasets/demo/**/*" in package_data
    assert CORPUS_DIR.is_dir() and EVALSET_PATH.is_file()


def test_loaders_read_the_demo_and_resolve_every_quote(items):
    corpus = load_corpus(CORPUS_DIR)
    evalset = load_evalset(EVALSET_PATH, corpus)
    assert len(evalset) == len(items)
    assert corpus["webhooks/retries"].title == "Webhook retries"
    for raw, loaded in zip(items, evalset, strict=True):
        assert loaded.id == raw["id"] and loaded.answerable == raw.get("answerable", True)
        quotes = {e["quote"] for e in raw["evidence"]}
        spans = {corpus[e.doc_id].text[e.start : e.end] for e in loaded.evidence}
        assert spans == quotes, raw["id"]


def _count_overlapping(text: str, quote: str) -> int:
    count, start = 0, text.find(quote)
    while start != -1:
        count, start = count + 1, text.find(quote, start + 1)
    return count
