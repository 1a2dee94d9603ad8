"""Reading query logs (plain, JSONL, CSV, gzip), screening personal data, exact dedup with counts."""

from __future__ import annotations

import csv
import gzip
import json
import re
import tracemalloc
from pathlib import Path

import pytest

from ragexp.candidates.distinct import DistinctQueries, tidy
from ragexp.candidates.log_reader import LogStats, read_log
from ragexp.candidates.personal_data import (
    CARD,
    EMAIL,
    PHONE,
    SECRET,
    luhn_valid,
    sensitive_kind,
)
from ragexp.errors import RagexpInputError

QUERIES = ["How do I reset my password?", "What is the rate limit?", 'Does "quoted, text" survive?']


def _write(path: Path, fmt: str, queries=QUERIES) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8", newline="") as out:
        if fmt == "text":
            out.write("".join(q + "\n" for q in queries))
        elif fmt == "jsonl":
            out.write("".join(json.dumps({"ts": i, "request": {"q": q}}) + "\n" for i, q in enumerate(queries)))
        else:
            writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t")
            writer.writerow(["ts", "query"])
            writer.writerows([i, q] for i, q in enumerate(queries))
    return path


@pytest.mark.parametrize(("name", "fmt", "field"), [
    ("log.txt", "text", None), ("log.txt.gz", "text", None), ("log.jsonl", "jsonl", "request.q"),
    ("log.jsonl.gz", "jsonl", "request.q"), ("log.csv", "csv", None), ("log.tsv", "tsv", None), ("log.csv.gz", "csv", "query"),
])  # fmt: skip
def test_every_format_yields_the_queries_with_their_line_numbers(tmp_path, name, fmt, field):
    path = _write(tmp_path / name, fmt)
    got = list(read_log(path, field=field))
    assert [q for _, q in got] == QUERIES
    assert [n for n, _ in got] == ([2, 3, 4] if fmt in ("csv", "tsv") else [1, 2, 3])


def test_gzip_is_found_by_its_magic_bytes_and_format_can_be_forced(tmp_path):
    path = tmp_path / "queries.log"
    path.write_bytes(gzip.compress("".join(json.dumps({"query": q}) + "\n" for q in QUERIES).encode()))
    assert [q for _, q in read_log(path, fmt="jsonl")] == QUERIES


def test_a_csv_field_over_two_lines_keeps_its_line_break_and_first_line_number(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text('a,query\n1,"first line\nsecond line"\n2,plain\n', encoding="utf-8")
    assert list(read_log(path)) == [(2, "first line\nsecond line"), (4, "plain")]


def test_blank_lines_and_null_fields_are_counted_not_returned(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "a?"}\n\n   \n{"query": null}\n{"query": "b?"}\n', encoding="utf-8")
    stats = LogStats()
    assert [q for _, q in read_log(path, stats=stats)] == ["a?", "b?"]
    assert (stats.lines, stats.blank) == (5, 3)


def test_an_overlong_line_is_skipped_counted_and_never_held_whole(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("short one\n" + "x" * 5_000_000 + "\nshort two\n", encoding="utf-8")
    stats = LogStats()
    tracemalloc.start()
    got = list(read_log(path, stats=stats))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got == [(1, "short one"), (3, "short two")]
    assert stats.too_long == 1
    assert peak < 1_000_000  # the 5 MB line was read in 4 kB pieces


@pytest.mark.parametrize(("content", "expected"), [
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "a binary file"),
    (b"", "empty log"),
    (b"\n\n  \n", "empty log"),
    ("caf\u00e9\n".encode("latin-1"), ":1: not valid UTF-8 (byte 0xe9)"),
    (b"\x1f\x8b\x08\x00garbage that is no deflate stream", "not a readable gzip file"),
])  # fmt: skip
def test_bad_logs_fail_with_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "log.txt"
    path.write_bytes(content)
    with pytest.raises(RagexpInputError, match=re.escape(expected)) as err:
        list(read_log(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_truncated_gzip_names_the_line_where_it_broke(tmp_path):
    path = _write(tmp_path / "log.txt.gz", "text", QUERIES * 2000)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(RagexpInputError, match=r"log\.txt\.gz:\d+: not a readable gzip file"):
        list(read_log(path))


@pytest.mark.parametrize(("name", "content", "field", "expected"), [
    ("log.jsonl", '{"query": "a"}\n{"q": "b"}\n', None, r"log\.jsonl:2: field 'query': no such field in this line \(its keys: q\)"),
    ("log.jsonl", '{"query": 3}\n', None, r":1: field 'query': must be a string, got int"),
    ("log.jsonl", '{"query": "a"\n', None, r":1: malformed JSON"),
    ("log.jsonl", '["a"]\n', None, r":1: expected a JSON object per line, got list"),
    ("log.csv", "ts,q\n1,a\n", None, r"log\.csv:1: field 'query': no such column \(columns: ts, q\)"),
    ("log.csv", 'ts,query\n1,"never closed\n', None, r"log\.csv:2: malformed CSV"),
    ("log.txt", "a\n", "query", r"field 'field': --field applies to JSONL and CSV logs"),
])  # fmt: skip
def test_bad_records_name_file_line_and_field(tmp_path, name, content, field, expected):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RagexpInputError, match=expected):
        list(read_log(path, field=field))


def test_a_missing_log_or_a_folder_is_bad_input(tmp_path):
    with pytest.raises(RagexpInputError, match="no such log file"):
        list(read_log(tmp_path / "missing.txt"))
    with pytest.raises(RagexpInputError, match="is a folder"):
        list(read_log(tmp_path))


# --- personal data and secrets --------------------------------------------------------------------

@pytest.mark.parametrize("number", ["4111111111111111", "5500000000000004", "378282246310005", "6011111111111117"])
def test_luhn_accepts_published_test_card_numbers(number):
    assert luhn_valid(number)
    assert not luhn_valid(number[:-1] + str((int(number[-1]) + 1) % 10))


@pytest.mark.parametrize(("text", "kind"), [
    ("reset password for jane.doe+x@example.co.uk please", EMAIL),
    ("why was my card 4111 1111 1111 1111 charged twice", CARD),
    ("card 5500-0000-0000-0004 declined", CARD),
    ("call me on +1 415 555 0132", PHONE),
    ("my number is (415) 555-0132", PHONE),
    ("+49 30 1234567 is my office", PHONE),
    ("my key sk-proj-abcdefghijklmnop123 fails", SECRET),
    ("Authorization: Bearer abcdefgh12345678", SECRET),
    ("token ghp_abcdefghijklmnopqrstuvwxyz123456", SECRET),
    ("is AbCdEfGhIjKlMnOpQrStUv123456 a valid key", SECRET),
    ("What happened between 1914-1918?", None),
    ("How many people lived in Warsaw in 2010?", None),
    ("card 4111 1111 1111 1112 (fails Luhn, 16 digits: no phone either)", None),
    ("What does error 429 mean?", None),
    ("What is the population of Warsaw, 1,700,000?", None),
])  # fmt: skip
def test_sensitive_kind(text, kind):
    assert sensitive_kind(text) == kind


def test_no_squad_question_is_taken_for_personal_data(shared_data):
    """10,570 real questions (SQuAD v1.1 dev), none holding personal data: none is left out."""
    path = shared_data / "squad_v1.1_dev" / "queries.jsonl"
    flagged = [q for _, q in read_log(path, field="text") if sensitive_kind(q)]
    assert flagged == []


# --- exact duplicates -------------------------------------------------------------------------------

def test_exact_duplicates_are_merged_by_lint_rule_with_counts_and_forms():
    table = DistinctQueries()
    source = table.add_source("log.txt")
    for line, query in enumerate(["How do I reset my password?", "how do i reset my password", "HOW DO I RESET MY PASSWORD?",
                                  "How do I reset my password?", "What is the rate limit?", "!!!", "mail me at a@b.example.com",
                                  "How\u200b do I reset my  password?"], start=1):
        table.add(query, source, line)
    assert table.queries == 8
    assert table.left_out == {EMAIL: 1}
    assert table.no_words == 1
    assert [(e.text, e.count, e.line) for e in table.entries] == [("How do I reset my password?", 5, 1), ("What is the rate limit?", 1, 5)]
    assert table.duplicates == 4
    first = table.entries[0]
    assert first.form_counts() == {"How do I reset my password?": 3, "how do i reset my password": 1, "HOW DO I RESET MY PASSWORD?": 1}
    assert first.most_common_form() == "How do I reset my password?"


def test_a_new_wording_with_a_secret_is_left_out_even_when_its_words_match_a_kept_query():
    table = DistinctQueries()
    source = table.add_source("log.txt")
    table.add("api key sk proj abcdefghijklmnop123 fails", source, 1)
    table.add("api key sk-proj-abcdefghijklmnop123 fails", source, 2)
    assert [e.count for e in table.entries] == [1]
    assert table.left_out == {SECRET: 1}


def test_tidy_keeps_case_and_removes_invisible_characters():
    assert tidy("  Ｗhat\u200b is   it?\t") == "What is it?"


def test_the_candidates_file_is_written_whole_with_the_users_permissions(tmp_path):
    import os

    from ragexp.candidates.jsonl_file import write_jsonl

    path = tmp_path / "c.jsonl"
    write_jsonl(path, [{"query": "é?"}, {"query": "b"}])
    assert path.read_text(encoding="utf-8") == '{"query": "é?"}\n{"query": "b"}\n'
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask

    def rows():
        yield {"query": "new"}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_jsonl(path, rows())
    assert path.read_text(encoding="utf-8").startswith('{"query": "é?"}') and list(tmp_path.iterdir()) == [path]
