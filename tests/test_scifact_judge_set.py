"""The hand-labelled SciFact judge set (benchmarks/data/): ids, labels, the documented counts and
draw procedure, and the ragexp labels CSV written from it.

SciFact itself is read here with ``json``/``csv`` directly, independently of the module under test.
Tests that need the texts skip when the shared SciFact folder is absent (see ``conftest.shared_data``).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from benchmarks.scifact_judge_draw import bm25_stream, cited_stream, load_claims
from benchmarks.scifact_judge_set import LABELS_CSV, main, read_pairs
from ragexp.errors import USAGE_EXIT_CODE
from ragexp.judging.calibration.labels import read_labels

READS_CSV = LABELS_CSV.parent / "scifact_judge_reads.csv"
# The counts benchmarks/data/README.md documents.
LABEL_COUNTS = {"SUPPORT": 100, "CONTRADICT": 50, "NEI": 50}
NEI_QUOTA = {"cited": 20, "bm25_top1_uncited": 30}
UNDECIDABLE = 42


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _jsonl(path: Path) -> dict[str, dict]:
    return {obj["_id"]: obj for obj in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def _qrels(scifact: Path) -> set[tuple[str, str]]:
    pairs = set()
    for split in ("test", "train"):
        lines = (scifact / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        pairs |= {tuple(line.split("\t")[:2]) for line in lines if line}
    return pairs


def test_labels_are_allowed_unique_and_counted_as_documented():
    rows = _rows(LABELS_CSV)
    assert list(rows[0]) == ["claim_id", "doc_id", "label", "source"]
    assert Counter(row["label"] for row in rows) == LABEL_COUNTS
    nei_by_source = Counter(row["source"] for row in rows if row["label"] == "NEI")
    assert nei_by_source == NEI_QUOTA
    assert Counter(row["source"] for row in rows) == {
        "cited": 150 + NEI_QUOTA["cited"],
        "bm25_top1_uncited": NEI_QUOTA["bm25_top1_uncited"],
    }
    assert len({(row["claim_id"], row["doc_id"]) for row in rows}) == len(rows)
    assert len({row["claim_id"] for row in rows}) == len(rows)  # one pair per claim
    assert len(read_pairs()) == len(rows)


def test_kept_pairs_are_the_reads_log_under_the_quota_rule():
    """Reads in log order (bm25 stream, then cited); a reading is kept while its quota is open."""
    reads = _rows(READS_CSV)
    quota = {"SUPPORT": LABEL_COUNTS["SUPPORT"], "CONTRADICT": LABEL_COUNTS["CONTRADICT"]}
    kept = []
    for read in reads:
        label, stream = read["reading"], read["stream"]
        open_quota = NEI_QUOTA if label == "NEI" else quota
        key = stream if label == "NEI" else label
        if label != "UNDECIDABLE" and open_quota[key] > 0:
            open_quota[key] -= 1
            kept.append([read["claim_id"], read["doc_id"], label, stream])
    assert kept == [list(row.values()) for row in _rows(LABELS_CSV)]
    assert sum(read["reading"] == "UNDECIDABLE" for read in reads) == UNDECIDABLE


def test_labelled_ids_exist_and_sources_match_the_qrels(shared_data):
    scifact = shared_data / "scifact"
    claims, corpus, cited = _jsonl(scifact / "queries.jsonl"), _jsonl(scifact / "corpus.jsonl"), _qrels(scifact)
    for row in _rows(LABELS_CSV):
        assert row["claim_id"] in claims and row["doc_id"] in corpus
        assert ((row["claim_id"], row["doc_id"]) in cited) == (row["source"] == "cited")


def test_reads_follow_the_seeded_draw_streams(shared_data):
    data = load_claims(shared_data / "scifact")
    streams = {"cited": cited_stream(data), "bm25_top1_uncited": bm25_stream(data)}
    reads = _rows(READS_CSV)
    for name, stream in streams.items():
        positions = [int(read["position"]) for read in reads if read["stream"] == name]
        assert positions == list(range(len(positions)))  # a prefix of the stream, none skipped unread
        drawn = [(c.claim_id, c.doc_id) for c in stream[: len(positions)]]
        assert drawn == [(read["claim_id"], read["doc_id"]) for read in reads if read["stream"] == name]


def test_written_csv_is_a_ragexp_labels_csv(shared_data, tmp_path):
    scifact = shared_data / "scifact"
    out = tmp_path / "scifact_judge.csv"
    assert main(["--scifact", str(scifact), "--out", str(out)]) == 0
    claims, corpus = _jsonl(scifact / "queries.jsonl"), _jsonl(scifact / "corpus.jsonl")
    written = read_labels(out)
    pairs = _rows(LABELS_CSV)
    assert len(written) == len(pairs)
    for row, pair in zip(written, pairs):
        doc = corpus[pair["doc_id"]]
        assert row.id == f"scifact/{pair['claim_id']}/{pair['doc_id']}"
        assert row.claim == claims[pair["claim_id"]]["text"].strip()
        assert row.context == f"{doc['title']}\n{doc['text']}".strip()
        assert row.context_doc_id == pair["doc_id"]
        assert row.note == pair["label"]
        assert row.human_label == ("supported" if pair["label"] == "SUPPORT" else "not_supported")


def test_bad_label_is_one_line_and_exit_2(tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text("claim_id,doc_id,label,source\n13,7662395,NEI,cited\n14,1,MAYBE,cited\n", encoding="utf-8")
    assert (
        main(["--scifact", str(tmp_path), "--out", str(tmp_path / "out.csv"), "--labels", str(labels)])
        == USAGE_EXIT_CODE
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"{labels}:3: field 'label': 'MAYBE'" in err


def test_unknown_abstract_names_its_line(shared_data, tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "claim_id,doc_id,label,source\n13,7662395,NEI,cited\n13,999999999,NEI,bm25_top1_uncited\n", encoding="utf-8"
    )
    out = tmp_path / "out.csv"
    assert (
        main(["--scifact", str(shared_data / "scifact"), "--out", str(out), "--labels", str(labels)]) == USAGE_EXIT_CODE
    )
    assert f"{labels}:3: field 'doc_id': abstract '999999999'" in capsys.readouterr().err
    assert not out.exists()
