"""Spans written with their quote are checked at load time; unanswerable items may carry judged negatives."""

from __future__ import annotations

import json

import pytest

from ragexp.data.lint import lint_evalset
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.errors import RagexpInputError
from tests.helpers.tiny_dataset import TINY_DOCS


def write(path, *items):
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n", encoding="utf-8")
    return path


def span(doc_id, quote, **extra):
    start = TINY_DOCS[doc_id].index(quote)
    return {"doc_id": doc_id, "start": start, "end": start + len(quote), "quote": quote, **extra}


def test_a_span_with_its_quote_follows_its_text_and_goes_stale_when_the_text_changes(tiny_dataset, tmp_path):
    corpus_dir, _ = tiny_dataset
    evalset = write(tmp_path / "set.jsonl", {"id": "a", "query": "How long?", "evidence": [span("webhooks", "24 hours")]})
    item = load_evalset(evalset, load_corpus(corpus_dir)).items[0]
    assert TINY_DOCS["webhooks"][item.evidence[0].start:item.evidence[0].end] == "24 hours"
    (corpus_dir / "webhooks.md").write_text("Intro.\n" + TINY_DOCS["webhooks"], encoding="utf-8")
    moved = load_evalset(evalset, load_corpus(corpus_dir))
    expected = TINY_DOCS["webhooks"].index("24 hours") + len("Intro.\n")
    assert (moved.items[0].evidence[0].start, moved.items[0].evidence[0].end) == (expected, expected + len("24 hours"))
    assert moved.meta["gold"]["moved"] == 1 and "gold moved: 1 span(s)" in moved.meta["warnings"][0]
    (corpus_dir / "webhooks.md").write_text(TINY_DOCS["webhooks"].replace("24 hours", "48 hours"), encoding="utf-8")
    with pytest.raises(RagexpInputError, match="gold no longer reads what it read: 1 evidence of 1 item") as err:
        load_evalset(evalset, load_corpus(corpus_dir))
    assert 'item \'a\', document \'webhooks\'' in str(err.value) and 'now reads "48 hours" (changed)' in str(err.value)
    report = lint_evalset(evalset, corpus_dir)
    assert report.exit_code == 1 and "stale gold" in report.render_text()


def test_an_unanswerable_item_may_carry_judged_negatives_but_no_gold(tiny_dataset, tmp_path):
    corpus_dir, _ = tiny_dataset
    corpus = load_corpus(corpus_dir)
    negative = span("refunds", "Monthly plans are not refunded.", grade=0)
    ok = write(tmp_path / "ok.jsonl", {"id": "u", "query": "CEO's colour?", "answerable": False, "evidence": [negative]})
    item = load_evalset(ok, corpus).items[0]
    assert item.answerable is False and [e.grade for e in item.evidence] == [0]
    bad = write(tmp_path / "bad.jsonl", {"id": "u", "query": "CEO's colour?", "answerable": False,
                                        "evidence": [{**negative, "grade": 1}]})
    with pytest.raises(RagexpInputError, match='"answerable": false cannot have gold evidence'):
        load_evalset(bad, corpus)
