"""``ragexp evalset diff``: added, removed, changed items; fingerprints; comparability; exit codes."""

from __future__ import annotations

import json

from ragexp.data.evalset_diff import diff_evalsets, render_text
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from tests.helpers.cli import ragexp
from tests.helpers.tiny_dataset import TINY_DOCS


def _write(path, items):
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n", encoding="utf-8")
    return path


def _items():
    return [
        {"id": "t1", "query": "How long are webhooks retried?", "evidence": [{"doc_id": "webhooks", "quote": "24 hours"}],
         "gold_answer": "24 hours", "tags": ["verbatim"], "source": "hand", "added": "2026-12-01"},
        {"id": "t2", "query": "When does a delivery time out?", "evidence": [{"doc_id": "webhooks", "quote": "10 seconds"}],
         "source": "log"},
        {"id": "t3", "query": "Can I rotate keys?", "evidence": [{"doc_id": "keys", "quote": "there is no downtime"}], "source": "log"},
    ]  # fmt: skip


def test_diff_names_added_removed_and_changed_fields(tiny_dataset, tmp_path):
    corpus_path, _ = tiny_dataset
    corpus = load_corpus(corpus_path)
    old_items = _items()
    new_items = [dict(item) for item in old_items]
    new_items[0] = {**new_items[0], "tags": ["verbatim", "boundary"], "added": "2026-12-04"}  # tags changed, date ignored
    new_items[1] = {**new_items[1], "evidence": [{"doc_id": "webhooks", "quote": "after 10 seconds"}]}
    del new_items[2]
    new_items.append({"id": "t4", "query": "What is the search limit?", "evidence": [{"doc_id": "limits", "quote": "30 requests"}],
                      "source": "draft"})
    old = load_evalset(_write(tmp_path / "old.jsonl", old_items), corpus)
    new = load_evalset(_write(tmp_path / "new.jsonl", new_items), corpus)
    diff = diff_evalsets(old, new)
    assert [i.id for i in diff.added] == ["t4"] and [i.id for i in diff.removed] == ["t3"]
    assert {c.id: sorted(c.fields) for c in diff.changed} == {"t1": ["tags"], "t2": ["evidence"]}
    t2 = next(c for c in diff.changed if c.id == "t2")
    old_span, new_span = t2.fields["evidence"][0][0], t2.fields["evidence"][1][0]
    text = corpus["webhooks"].text
    assert text[old_span.start:old_span.end] == "10 seconds" and text[new_span.start:new_span.end] == "after 10 seconds"
    assert diff.unchanged == 0 and not diff.comparable
    assert (diff.old_fingerprint, diff.new_fingerprint) == (old.fingerprint(), new.fingerprint())


def test_only_added_dates_changed_is_identical_and_comparable(tiny_dataset, tmp_path):
    corpus = load_corpus(tiny_dataset[0])
    old = load_evalset(_write(tmp_path / "old.jsonl", _items()), corpus)
    new = load_evalset(_write(tmp_path / "new.jsonl", [{**item, "added": "2027-01-01"} for item in _items()]), corpus)
    diff = diff_evalsets(old, new)
    assert diff.identical and diff.comparable and diff.unchanged == 3 and not diff.reordered


def test_a_quote_rewritten_as_the_same_span_is_no_change(tiny_dataset, tmp_path):
    corpus = load_corpus(tiny_dataset[0])
    items = _items()
    start = corpus["webhooks"].text.index("24 hours")
    rewritten = [{**items[0], "evidence": [{"doc_id": "webhooks", "start": start, "end": start + 8}]}, *items[1:]]
    diff = diff_evalsets(load_evalset(_write(tmp_path / "a.jsonl", items), corpus),
                         load_evalset(_write(tmp_path / "b.jsonl", rewritten), corpus))
    assert diff.identical and diff.comparable


def test_cli_exit_codes_and_report(tiny_dataset, tmp_path):
    corpus, _ = tiny_dataset
    old = _write(tmp_path / "old.jsonl", _items())
    reordered = _write(tmp_path / "reordered.jsonl", list(reversed(_items())))
    changed = _write(tmp_path / "changed.jsonl", [{**_items()[0], "source": "failure"}, *_items()[1:]])
    same = ragexp(tmp_path, "evalset", "diff", str(old), str(old), "--corpus", str(corpus), check=False)
    assert same.returncode == 0 and "comparable: yes" in same.stdout
    moved = ragexp(tmp_path, "evalset", "diff", str(old), str(reordered), "--corpus", str(corpus), check=False)
    assert moved.returncode == 1 and "different order" in moved.stdout and "comparable: no" in moved.stdout
    proc = ragexp(tmp_path, "evalset", "diff", str(old), str(changed), "--corpus", str(corpus), "--format", "json", check=False)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["changed"] == [{"id": "t1", "fields": {"source": {"old": "hand", "new": "failure"}}}]
    assert report["comparable"] is False and report["unchanged"] == 2
    bad = ragexp(tmp_path, "evalset", "diff", str(old), str(tmp_path / "nope.jsonl"), "--corpus", str(corpus), check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_evidence_changes_show_grades_so_a_judged_negative_is_not_new_gold(tiny_dataset, tmp_path):
    corpus, _ = tiny_dataset
    items = _items()
    judged = [{**items[0], "evidence": [*items[0]["evidence"], {"doc_id": "keys", "quote": "there is no downtime", "grade": 0}]},
              {**items[1], "evidence": [{**items[1]["evidence"][0], "grade": 2}]}, items[2]]
    old, new = _write(tmp_path / "old.jsonl", items), _write(tmp_path / "new.jsonl", judged)
    loaded = load_corpus(corpus)
    text = render_text(diff_evalsets(load_evalset(old, loaded), load_evalset(new, loaded)), "old", "new")
    start = TINY_DOCS["keys"].index("there is no downtime")
    assert f"t1: evidence +keys[{start}:{start + 20}] judged not relevant" in text
    assert "t2: evidence webhooks[" in text and "grade 1 -> 2" in text
