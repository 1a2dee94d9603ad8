"""Loaders: own corpus and eval-set formats (every evidence form), BEIR and SQuAD."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ragexp.data.loaders import load_beir, load_corpus, load_evalset, load_squad
from ragexp.data.loaders.evalset import evalset_to_jsonl, read_evalset
from ragexp.datamodel import Document, Evidence
from ragexp.errors import RagexpInputError

RETRY_SENTENCE = "Webhooks retry with exponential backoff for 24 hours before being marked failed."


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
    return root


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture()
def corpus(tmp_path: Path):
    root = write_files(
        tmp_path / "docs",
        {
            "webhooks/retries.md": "# Webhook retries\n\n" + RETRY_SENTENCE + "\nRetries stop after 24 hours.\n",
            "billing/refunds.txt": "Annual plans are refunded pro rata. Annual plans renew yearly.\n",
            "aaa.md": "aaa",
        },
    )
    return load_corpus(root)


def evalset_file(tmp_path: Path, items: list[dict], header: dict | None = None) -> Path:
    rows = ([header] if header else []) + items
    return write_jsonl(tmp_path / "evalset.jsonl", rows)


def item(evidence: list[dict], **fields) -> dict:
    return {"id": "q1", "query": "How long do webhooks retry?", "evidence": evidence} | fields


# --- corpus ------------------------------------------------------------------------------------


def test_corpus_folder_ids_titles_and_byte_exact_text(tmp_path: Path) -> None:
    retries = "\ufeff  Intro line\r\n```sh\n# not a title\n```\n# Webhook retries #\r\nBody  \r\n\n"
    root = write_files(
        tmp_path / "docs",
        {
            "webhooks/retries.md": retries,
            "notes.TXT": "plain notes",
            "guide.markdown": "## Only a level-2 heading\n",
            "image.png": b"\x89PNG",
            ".git/readme.md": "hidden",
            "drafts/.wip.md": "hidden too",
        },
    )
    corpus = load_corpus(root)
    assert list(corpus) == ["guide", "notes", "webhooks/retries"]
    assert corpus["webhooks/retries"].text == retries
    assert corpus["webhooks/retries"].title == "Webhook retries"
    assert corpus["notes"].title == "notes"
    assert corpus["guide"].title == "guide"
    assert corpus.source == str(root)


def test_corpus_folder_rejects_non_utf8_naming_file_and_line(tmp_path: Path) -> None:
    root = write_files(tmp_path / "docs", {"ok.md": "fine", "bad.md": b"line one\nline \xff two\n"})
    with pytest.raises(RagexpInputError) as err:
        load_corpus(root)
    assert err.value.file == str(root / "bad.md")
    assert err.value.line == 2
    assert "UTF-8" in err.value.message


def test_corpus_folder_rejects_two_files_with_one_id(tmp_path: Path) -> None:
    root = write_files(tmp_path / "docs", {"faq.md": "a", "faq.txt": "b"})
    with pytest.raises(RagexpInputError, match="'faq' is also produced by"):
        load_corpus(root)


@pytest.mark.parametrize("make_empty", ["folder", "folder_without_documents", "jsonl"])
def test_empty_corpus_is_an_input_error(tmp_path: Path, make_empty: str) -> None:
    if make_empty == "jsonl":
        path = tmp_path / "corpus.jsonl"
        path.write_text("\n\n", encoding="utf-8")
    else:
        path = write_files(tmp_path / "docs", {"img.png": b"x"} if make_empty == "folder_without_documents" else {})
        path.mkdir(exist_ok=True)
    with pytest.raises(RagexpInputError, match="empty corpus") as err:
        load_corpus(path)
    assert err.value.file == str(path)


def test_corpus_jsonl_accepts_id_or__id_and_optional_title(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"_id": "d1", "title": "T", "text": " spaced \n", "metadata": {}}, {"id": "d2", "text": "two"}],
    )
    corpus = load_corpus(path)
    assert corpus.documents() == [Document("d1", " spaced \n", "T"), Document("d2", "two", "")]


@pytest.mark.parametrize(
    ("rows", "line", "field", "message"),
    [
        ([{"_id": "d1", "text": "a"}, {"_id": "d1", "text": "b"}], 2, "_id", "duplicate document id"),
        ([{"_id": "d1"}], 1, "text", "missing required field"),
        ([{"text": "a"}], 1, "_id", "missing document id"),
        ([{"_id": 7, "text": "a"}], 1, "_id", "must be a string"),
    ],
)
def test_corpus_jsonl_errors_name_line_and_field(tmp_path: Path, rows, line, field, message) -> None:
    with pytest.raises(RagexpInputError, match=message) as err:
        load_corpus(write_jsonl(tmp_path / "corpus.jsonl", rows))
    assert (err.value.line, err.value.field) == (line, field)


# --- eval set: evidence forms ------------------------------------------------------------------


def test_every_evidence_form_resolves_to_doc_or_span(tmp_path: Path, corpus) -> None:
    text = corpus["webhooks/retries"].text
    start = text.index(RETRY_SENTENCE)
    path = evalset_file(
        tmp_path,
        [
            item(
                [
                    {"doc_id": "billing/refunds", "grade": 2},
                    {"doc_id": "webhooks/retries", "start": start, "end": start + 8},
                    {"doc_id": "webhooks/retries", "quote": "exponential backoff"},
                ],
                gold_answer="24 hours",
                tags=["paraphrase"],
                category="boundary",
            )
        ],
    )
    loaded = load_evalset(path, corpus).items[0]
    backoff = text.index("exponential backoff")
    assert loaded.evidence == (
        Evidence("billing/refunds", None, None, 2),
        Evidence("webhooks/retries", start, start + 8),
        Evidence("webhooks/retries", backoff, backoff + len("exponential backoff")),
    )
    assert text[start : start + 8] == "Webhooks"
    assert loaded.tags == ("paraphrase", "boundary")
    assert loaded.reference_answers == ("24 hours",)


def test_identical_spans_from_different_forms_are_kept_once(tmp_path: Path, corpus) -> None:
    start = corpus["webhooks/retries"].text.index("Retries stop")
    evidence = [
        {"doc_id": "webhooks/retries", "quote": "Retries stop"},
        {"doc_id": "webhooks/retries", "start": start, "end": start + 12},
    ]
    loaded = load_evalset(evalset_file(tmp_path, [item(evidence)]), corpus)
    assert loaded.items[0].evidence == (Evidence("webhooks/retries", start, start + 12),)


def test_quote_ambiguity_needs_an_occurrence(tmp_path: Path, corpus) -> None:
    ambiguous = [item([{"doc_id": "billing/refunds", "quote": "Annual plans"}])]
    with pytest.raises(RagexpInputError, match=r"occurs 2 times .* \(at offsets 0, 36\).*occurrence") as err:
        load_evalset(evalset_file(tmp_path, ambiguous), corpus)
    assert (err.value.line, err.value.field) == (1, "evidence[0].quote")

    second = [item([{"doc_id": "billing/refunds", "quote": "Annual plans", "occurrence": 2}])]
    assert load_evalset(evalset_file(tmp_path, second), corpus).items[0].evidence == (
        Evidence("billing/refunds", 36, 48),
    )

    third = [item([{"doc_id": "billing/refunds", "quote": "Annual plans", "occurrence": 3}])]
    with pytest.raises(RagexpInputError, match="occurs only 2 time"):
        load_evalset(evalset_file(tmp_path, third), corpus)


def test_overlapping_quote_occurrences_count_as_ambiguous(tmp_path: Path, corpus) -> None:
    with pytest.raises(RagexpInputError, match="occurs 2 times"):
        load_evalset(evalset_file(tmp_path, [item([{"doc_id": "aaa", "quote": "aa"}])]), corpus)
    path = evalset_file(tmp_path, [item([{"doc_id": "aaa", "quote": "aa", "occurrence": 2}])])
    assert load_evalset(path, corpus).items[0].evidence == (Evidence("aaa", 1, 3),)


# --- eval set: the method article's gold_chunk_ids -----------------------------------------------

FIXED_100 = {"name": "fixed", "unit": "chars", "size": 100, "overlap": 0}


def numbered_document(sentences: list[str]) -> str:
    """Lines padded to exactly 100 characters (99 + newline), so fixed 100-char chunk i is line i."""
    return "".join(sentence.ljust(99, ".") + "\n" for sentence in sentences)


@pytest.fixture()
def article_corpus(tmp_path: Path):
    sentences = [f"Section {i} of the webhook guide" for i in range(4)] + [RETRY_SENTENCE, "Retry schedule table"]
    root = write_files(tmp_path / "article", {"doc_112.md": numbered_document(sentences)})
    return load_corpus(root)


def test_method_article_item_with_gold_chunk_ids_becomes_the_chunk_span(tmp_path: Path, article_corpus) -> None:
    article_item = {
        "id": "webhook-retry",
        "query": "How long does a webhook retry before giving up?",
        "gold_chunk_ids": ["doc_112#chunk_4"],
        "gold_answer": RETRY_SENTENCE,
    }
    path = evalset_file(tmp_path, [article_item], header={"ragexp_evalset": 1, "chunking": FIXED_100})
    loaded = load_evalset(path, article_corpus)
    (evidence,) = loaded.items[0].evidence
    assert (evidence.doc_id, evidence.start, evidence.end) == ("doc_112", 400, 499)
    assert article_corpus["doc_112"].text[evidence.start : evidence.end].startswith(RETRY_SENTENCE)
    assert loaded.meta["chunking"] == FIXED_100

    resolved = tmp_path / "resolved.jsonl"
    resolved.write_text(evalset_to_jsonl(loaded, article_corpus), encoding="utf-8")
    reloaded = load_evalset(resolved, article_corpus)
    assert "chunking" not in reloaded.meta
    assert reloaded.fingerprint() == loaded.fingerprint()


def test_gold_chunk_ids_need_a_header_chunking_and_a_chunk_that_exists(tmp_path: Path, article_corpus) -> None:
    no_header = [{"id": "q", "query": "q", "gold_chunk_ids": ["doc_112#chunk_4"]}]
    with pytest.raises(RagexpInputError, match="add a header line") as err:
        load_evalset(evalset_file(tmp_path, no_header), article_corpus)
    assert (err.value.line, err.value.field) == (1, "gold_chunk_ids[0]")

    out_of_range = [{"id": "q", "query": "q", "gold_chunk_ids": ["doc_112#chunk_6"]}]
    header = {"ragexp_evalset": 1, "chunking": FIXED_100}
    with pytest.raises(RagexpInputError, match=r"has 6 chunk\(s\) \(chunk_0..chunk_5\)") as err:
        load_evalset(evalset_file(tmp_path, out_of_range, header), article_corpus)
    assert (err.value.line, err.value.field) == (2, "gold_chunk_ids[0]")


# --- eval set: file layout and errors ------------------------------------------------------------


def test_yaml_evalset_resolves_like_jsonl_and_reports_item_lines(tmp_path: Path, corpus) -> None:
    path = tmp_path / "evalset.yaml"
    path.write_text(
        "name: yaml-set\n"
        "items:\n"
        "  - id: q1\n"
        "    query: How long do webhooks retry?\n"
        "    evidence:\n"
        "      - {doc_id: webhooks/retries, quote: exponential backoff}\n"
        "  - id: q2\n"
        "    query: Unknown\n"
        "    evidence: [{doc_id: webhooks/retry}]\n",
        encoding="utf-8",
    )
    reading = read_evalset(path, corpus)
    assert reading.evalset.name == "yaml-set"
    assert reading.item_lines == [3, 7]
    assert reading.evalset.items[0].evidence[0].start == corpus["webhooks/retries"].text.index("exponential backoff")
    (problem,) = reading.problems
    assert (problem.kind, problem.error.line, problem.error.field) == ("unresolved-gold", 7, "evidence[0].doc_id")
    assert "did you mean 'webhooks/retries'?" in problem.error.message


BAD_ITEMS = [
    pytest.param(item([{"doc_id": "nope"}]), "evidence[0].doc_id", "unknown document id 'nope'", id="unknown-doc"),
    pytest.param(item([{"doc_id": "aaa", "quote": "zzz"}]), "evidence[0].quote", "not found", id="quote-missing"),
    pytest.param(item([{"doc_id": "aaa", "quote": "AAA"}]), "evidence[0].quote", "ignoring case", id="quote-case"),
    pytest.param(item([{"doc_id": "aaa", "start": 1, "end": 4}]), "evidence[0]", "out of range", id="span-range"),
    pytest.param(
        item([{"doc_id": "aaa", "start": 2, "end": 2}]), "evidence[0]", "start must be < end", id="span-empty"
    ),
    pytest.param(item([{"doc_id": "aaa", "start": 1}]), "evidence[0].end", "needs both start and end", id="span-half"),
    pytest.param(
        item([{"doc_id": "aaa", "start": 0, "end": 1.5}]), "evidence[0].end", "must be an integer", id="float"
    ),
    pytest.param(item([{"doc_id": "aaa", "grade": -1}]), "evidence[0].grade", "must be >= 0", id="grade"),
    pytest.param(item([{"doc_id": "aaa", "occurrence": 1}]), "evidence[0].occurrence", "only a quote", id="occ"),
    pytest.param(item(["aaa"]), "evidence[0]", "must be an object", id="evidence-string"),
    pytest.param(
        item([{"doc_id": "aaa"}], answerable=False), "evidence", "cannot have gold evidence", id="unanswerable"
    ),
    pytest.param(item([]), "evidence", "needs gold evidence", id="no-evidence"),
    pytest.param(item([{"doc_id": "aaa", "grade": 0}]), "evidence", "grade 0", id="only-grade-0"),
    pytest.param(item([{"doc_id": "aaa"}], query="  "), "query", "query is empty", id="empty-query"),
    pytest.param({"query": "q", "evidence": [{"doc_id": "aaa"}]}, "id", "missing required field", id="no-id"),
    pytest.param({"id": "q1", "evidence": [{"doc_id": "aaa"}]}, "query", "missing required field", id="no-query"),
    pytest.param(item([{"doc_id": "aaa"}], id=3), "id", "must be a string, got integer 3", id="int-id"),
    pytest.param(item([{"doc_id": "aaa"}], tags="x"), "tags", "must be an array", id="tags-type"),
    pytest.param(item([{"doc_id": "aaa"}], evidance=[]), "evidance", "did you mean 'evidence'", id="typo"),
    pytest.param(
        item([{"doc_id": "aaa", "quote": "a", "occurrence": 1}, {"doc_id": "aaa", "start": 0, "end": 1, "grade": 2}]),
        "evidence",
        "grades 1 and 2",
        id="grade-conflict",
    ),
]


@pytest.mark.parametrize(("bad_item", "field", "message"), BAD_ITEMS)
def test_bad_items_raise_naming_file_line_and_field(tmp_path: Path, corpus, bad_item, field, message) -> None:
    good = item([{"doc_id": "aaa"}], id="q0")
    path = evalset_file(tmp_path, [good, bad_item], header={"ragexp_evalset": 1, "name": "n"})
    with pytest.raises(RagexpInputError) as err:
        load_evalset(path, corpus)
    assert (err.value.file, err.value.line, err.value.field) == (str(path), 3, field)
    assert message in err.value.message


def test_duplicate_ids_name_the_first_line(tmp_path: Path, corpus) -> None:
    path = evalset_file(tmp_path, [item([{"doc_id": "aaa"}]), item([{"doc_id": "aaa"}], query="other")])
    with pytest.raises(RagexpInputError, match=r"duplicate item id 'q1' \(first on line 1\)") as err:
        load_evalset(path, corpus)
    assert (err.value.line, err.value.field) == (2, "id")


@pytest.mark.parametrize(
    ("content", "line", "field", "message"),
    [
        (
            '{"id": "q1", "query": "x", "evidence": [{"doc_id": "aaa"}]}\n{"id": "q2", "query": \n',
            2,
            None,
            "malformed JSON",
        ),
        ("[1, 2]\n", 1, None, "expected a JSON object"),
        (
            '{"id": "q1", "query": "x", "evidence": [{"doc_id": "aaa"}]}\n{"ragexp_evalset": 1}\n',
            2,
            "ragexp_evalset",
            "only come first",
        ),
        (
            '{"ragexp_evalset": 2}\n{"id": "q1", "query": "x", "evidence": [{"doc_id": "aaa"}]}\n',
            1,
            "ragexp_evalset",
            "version",
        ),
        ('{"ragexp_evalset": 1, "chunkin": {}}\n', 1, "chunkin", "did you mean 'chunking'"),
        ('{"ragexp_evalset": 1}\n', None, None, "holds no items"),
    ],
)
def test_unreadable_files_raise_structural_errors(tmp_path: Path, corpus, content, line, field, message) -> None:
    path = tmp_path / "evalset.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RagexpInputError, match=message) as err:
        read_evalset(path, corpus)
    assert (err.value.line, err.value.field) == (line, field)


def test_read_evalset_collects_every_content_problem_in_file_order(tmp_path: Path, corpus) -> None:
    items = [
        item([{"doc_id": "nope"}], id="a"),
        item([{"doc_id": "aaa", "quote": "gone"}, {"doc_id": "aaa", "start": 0, "end": 9}], id="b"),
        item([{"doc_id": "aaa"}], id="a"),
    ]
    reading = read_evalset(evalset_file(tmp_path, items), corpus)
    found = [(p.kind, p.error.line, p.error.field) for p in reading.problems]
    assert found == [
        ("unresolved-gold", 1, "evidence[0].doc_id"),
        ("unresolved-gold", 2, "evidence[0].quote"),
        ("unresolved-gold", 2, "evidence[1]"),
        ("duplicate-id", 3, "id"),
    ]
    assert [i.id for i in reading.evalset.items] == ["a", "b", "a"]


def test_resolved_jsonl_round_trips_to_the_same_fingerprint(tmp_path: Path, corpus) -> None:
    items = [
        item(
            [{"doc_id": "billing/refunds", "grade": 2}, {"doc_id": "aaa", "quote": "a", "occurrence": 3}],
            answers=["x", "y"],
            key_facts=["k"],
            tags=["t"],
            gold_answer="x",
        ),
        {"id": "q2", "query": "unanswerable?", "answerable": False},
    ]
    loaded = load_evalset(evalset_file(tmp_path, items, {"ragexp_evalset": 1, "name": "rt"}), corpus)
    out = tmp_path / "resolved.jsonl"
    out.write_text(evalset_to_jsonl(loaded, corpus), encoding="utf-8")
    reloaded = load_evalset(out, corpus)
    assert reloaded.items == loaded.items
    assert reloaded.name == "rt"
    assert reloaded.fingerprint() == loaded.fingerprint()


# --- BEIR ----------------------------------------------------------------------------------------


def test_beir_scifact_counts_and_graded_qrels_equal_the_file(shared_data: Path) -> None:
    root = shared_data / "scifact"
    corpus, evalset = load_beir(root, split="test")
    assert len(corpus) == 5183
    assert len(evalset) == 300
    [warning] = evalset.meta["warnings"]
    assert warning.startswith("809 of 1109 queries in queries.jsonl have no judgement in qrels/test.tsv") and "799 more" in warning
    with open(root / "qrels" / "test.tsv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))[1:]
    expected: dict[str, dict[str, int]] = {}
    for query_id, doc_id, score in rows:
        expected.setdefault(query_id, {})[doc_id] = int(score)
    assert {i.id: {e.doc_id: e.grade for e in i.evidence} for i in evalset} == expected
    assert all(not e.is_span for i in evalset for e in i.evidence)
    first = json.loads((root / "corpus.jsonl").open(encoding="utf-8").readline())
    assert (corpus[first["_id"]].title, corpus[first["_id"]].text) == (first["title"], first["text"])
    queries = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (root / "queries.jsonl").open()}
    assert all(i.query == queries[i.id] for i in evalset)


def beir_folder(root: Path, qrels: str) -> Path:
    root.mkdir()
    write_jsonl(
        root / "corpus.jsonl", [{"_id": "d1", "title": "", "text": "one"}, {"_id": "d2", "title": "T", "text": "two"}]
    )
    write_jsonl(
        root / "queries.jsonl",
        [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}, {"_id": "q3", "text": "third"}],
    )
    write_files(root, {"qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + qrels})
    return root


def test_beir_keeps_zero_grades_and_only_judged_queries_in_query_order(tmp_path: Path) -> None:
    root = beir_folder(tmp_path / "beir", "q3\td2\t2\nq1\td1\t0\nq3\td1\t1\n")
    _, evalset = load_beir(root)
    assert [i.id for i in evalset] == ["q1", "q3"]
    assert evalset.meta["warnings"] == ["1 of 3 queries in queries.jsonl have no judgement in qrels/test.tsv and are not "
                                        "in the eval set: q2"]  # named, not dropped silently
    assert evalset.items[1].evidence == (Evidence("d2", grade=2), Evidence("d1", grade=1))
    assert evalset.items[0].evidence == (Evidence("d1", grade=0),)
    assert evalset.name == "beir-test"


@pytest.mark.parametrize(
    ("qrels", "field", "message"),
    [
        ("q1\td9\t1\n", "corpus-id", "not in corpus.jsonl"),
        ("q9\td1\t1\n", "query-id", "not in queries.jsonl"),
        ("q1\td1\thigh\n", "score", "integer"),
        ("q1\td1\n", None, "3 tab-separated columns"),
    ],
)
def test_beir_qrels_errors_name_line_and_column(tmp_path: Path, qrels, field, message) -> None:
    root = beir_folder(tmp_path / "beir", "q1\td1\t1\n" + qrels)
    with pytest.raises(RagexpInputError, match=message) as err:
        load_beir(root)
    assert (err.value.file, err.value.line, err.value.field) == (str(root / "qrels" / "test.tsv"), 3, field)


# --- SQuAD ---------------------------------------------------------------------------------------


def test_squad_shared_dev_set_article_documents_and_answer_spans(shared_data: Path) -> None:
    corpus, evalset = load_squad(shared_data / "squad_v1.1_dev")
    assert len(corpus) == 48
    assert len(evalset) == 10570
    assert len({i.id for i in evalset}) == 10570
    for eval_item in evalset:
        assert eval_item.evidence
        assert eval_item.gold_answer == eval_item.answers[0]
        text = corpus[eval_item.evidence[0].doc_id].text
        assert all(text[e.start : e.end] in eval_item.answers for e in eval_item.evidence)
        assert len(set(eval_item.evidence)) == len(eval_item.evidence)


def test_squad_paragraph_evidence_is_the_whole_paragraph(shared_data: Path) -> None:
    source = json.loads((shared_data / "squad_v1.1_dev" / "dev-v1.1.reconstructed.json").read_text(encoding="utf-8"))
    contexts = {qa["id"]: p["context"] for a in source["data"] for p in a["paragraphs"] for qa in p["qas"]}
    corpus, evalset = load_squad(shared_data / "squad_v1.1_dev" / "dev-v1.1.reconstructed.json", evidence="paragraph")
    for eval_item in evalset:
        (span,) = eval_item.evidence
        assert corpus[span.doc_id].text[span.start : span.end] == contexts[eval_item.id]


def squad_file(path: Path, paragraphs: list[dict], title: str = "Some_Article") -> Path:
    path.write_text(
        json.dumps({"version": "1.1", "data": [{"title": title, "paragraphs": paragraphs}]}), encoding="utf-8"
    )
    return path


def test_squad_offsets_shift_by_paragraph_and_duplicate_answers_collapse(tmp_path: Path) -> None:
    paragraphs = [
        {"context": "Alpha beta.", "qas": []},
        {
            "context": "Gamma delta.",
            "qas": [
                {
                    "id": "x",
                    "question": "Which?",
                    "answers": [
                        {"text": "delta", "answer_start": 6},
                        {"text": "delta", "answer_start": 6},
                        {"text": "Gamma", "answer_start": 0},
                    ],
                }
            ],
        },
        {"context": "Unknown.", "qas": [{"id": "y", "question": "Impossible?", "answers": [], "is_impossible": True}]},
    ]
    corpus, evalset = load_squad(squad_file(tmp_path / "s.json", paragraphs))
    doc = corpus["Some_Article"]
    assert doc.text == "Alpha beta.\n\nGamma delta.\n\nUnknown."
    assert doc.title == "Some Article"
    x, y = evalset.items
    assert x.evidence == (Evidence("Some_Article", 19, 24), Evidence("Some_Article", 13, 18))
    assert x.answers == ("delta", "delta", "Gamma")
    assert (y.answerable, y.evidence, y.gold_answer) == (False, (), None)


def test_squad_answer_start_that_misses_the_answer_is_an_error(tmp_path: Path) -> None:
    paragraphs = [
        {
            "context": "Gamma delta.",
            "qas": [{"id": "x", "question": "?", "answers": [{"text": "delta", "answer_start": 5}]}],
        }
    ]
    with pytest.raises(RagexpInputError, match="does not point at the answer text") as err:
        load_squad(squad_file(tmp_path / "s.json", paragraphs))
    assert err.value.field == "data[0].paragraphs[0].qas[0].answers[0].answer_start"


def test_squad_folder_must_hold_exactly_one_json(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}", encoding="utf-8")
    (tmp_path / "b.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RagexpInputError, match=r"exactly one \*.json .* a.json, b.json"):
        load_squad(tmp_path)


# --- provenance: source and added -----------------------------------------------------------------


def test_source_and_added_are_read_written_back_and_added_leaves_the_fingerprint_alone(tmp_path: Path, corpus) -> None:
    base = item([{"doc_id": "aaa"}])
    for name in "abc":
        (tmp_path / name).mkdir()
    plain = load_evalset(evalset_file(tmp_path / "a", [base]), corpus)
    dated = load_evalset(evalset_file(tmp_path / "b", [{**base, "added": "2026-12-04T10:15:00Z"}]), corpus)
    sourced = load_evalset(evalset_file(tmp_path / "c", [{**base, "source": "failure", "added": "2026-12-04"}]), corpus)
    assert (plain.items[0].source, plain.items[0].added) == (None, None)
    assert (sourced.items[0].source, sourced.items[0].added) == ("failure", "2026-12-04")
    assert dated.fingerprint() == plain.fingerprint()  # when an item joined changes no number
    assert sourced.fingerprint() != plain.fingerprint()  # its source decides which per-source mean it enters
    out = tmp_path / "resolved.jsonl"
    out.write_text(evalset_to_jsonl(sourced, corpus), encoding="utf-8")
    assert load_evalset(out, corpus).items == sourced.items


def test_an_eval_set_without_provenance_keeps_the_fingerprint_it_had_before_the_fields_existed(corpus, tmp_path) -> None:
    """The fingerprint names the experiment and the resume key: adding optional fields must not change it."""
    from ragexp.runtime.fingerprint import stable_hash

    loaded = load_evalset(evalset_file(tmp_path, [item([{"doc_id": "aaa"}], tags=["t"], gold_answer="x")]), corpus)
    fields_before = ("id", "query", "evidence", "gold_answer", "answers", "key_facts", "tags", "answerable")
    before = stable_hash([{key: value for key, value in i.to_dict().items() if key in fields_before} for i in loaded.items])
    assert loaded.fingerprint() == before


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"source": "synthetic"}, "source", "must be one of log, hand, draft, failure"),
        ({"source": 3}, "source", "must be a string"),
        ({"added": "yesterday"}, "added", "must be an ISO 8601 date"),
        ({"added": "2026-13-01"}, "added", "must be an ISO 8601 date"),
    ],
)
def test_bad_provenance_is_one_error_naming_the_field(tmp_path: Path, corpus, extra, field, message) -> None:
    with pytest.raises(RagexpInputError) as err:
        load_evalset(evalset_file(tmp_path, [{**item([{"doc_id": "aaa"}]), **extra}]), corpus)
    assert (err.value.field, err.value.line) == (field, 1)
    assert message in err.value.message


def test_page_of_maps_offsets_to_one_based_pages() -> None:
    from ragexp.datamodel import Document

    doc = Document("manual", "p1 text\fp2 text\fp3", page_starts=(0, 8, 16))
    assert [doc.page_of(offset) for offset in (0, 7, 8, 15, 16, 99)] == [1, 1, 2, 2, 3, 3]
    assert Document("plain", "no pages").page_of(3) is None
