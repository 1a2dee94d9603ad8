"""Issue #48: real framework output is placed where its text lies, whatever header it carries; the
ambiguity a passage has is counted truly; identical passages from two documents stay two units; a
run that places too little is refused with its cause; placing is bounded in the passage's length."""

from __future__ import annotations

import random

import pytest

from ragexp.datamodel import Document
from ragexp.errors import RagexpInputError
from ragexp.systems.build import check_system
from ragexp.systems.located_floor import check_located_floor
from ragexp.systems.locate import Locator, Placement
from ragexp.systems.passage_header import HeaderTemplate, content_span
from ragexp.systems.response import Passage
from ragexp.systems.scoring import ranked, unit_of

BODY = ("Failed deliveries are retried with exponential backoff for 24 hours. After the last attempt fails, the "
        "delivery is marked failed and no further attempts are made.")
FRONT = "status: draft\nowner: docs team\n\nThe status line above is part of this page. It stays in the placement."
CORPUS = {
    "webhooks/retries": Document("webhooks/retries", f"# Webhook retries\n\n{BODY}\n\nEach attempt times out after 10 s.\n",
                                 "Webhook retries"),
    "front": Document("front", f"# Front matter\n\n{FRONT}\n", "Front matter"),
    **{f"legal/{i}": Document(f"legal/{i}", f"# Page {i}\n\nTopic number {i} is described here in words of its own, "
                              f"{' '.join(random.Random(i).choice(['alpha', 'beta', 'gamma', 'delta']) for _ in range(30))}."
                              "\n\nAll rights reserved by the Acme Corporation and its licensors worldwide.\n", f"Page {i}")
       for i in range(47)},
}


@pytest.fixture(scope="module")
def locator():
    return Locator(CORPUS)


def true_span(doc_id: str, text: str) -> tuple[int, int]:
    start = CORPUS[doc_id].text.index(text)
    return start, start + len(text)


HEADERS = {
    "llamaindex_llm": "title: Webhook retries\nproduct: Acme API\n\n{}",
    "llamaindex_all": "title: Webhook retries\nurl: https://help.example.com/webhooks/retries.html\nproduct: Acme API\n"
                      "section: webhooks\nfile_name: retries.md\n\n{}",
    "one_key": "file_path: /srv/help/webhooks/retries.md\n\n{}",
    "crlf": "title: Webhook retries\r\nproduct: Acme API\r\n\r\n{}",
    "source_content": "Source: webhooks/retries.md\nContent: {}",
    "document_text": "Document: retries\nText: {}",
    "page_content": "source: retries.md\npage_content: {}",
}


@pytest.mark.parametrize("form", sorted(HEADERS))
@pytest.mark.parametrize("with_id", [True, False])
def test_a_passage_with_a_framework_header_is_placed_at_its_texts_span(locator, form, with_id):
    placed = locator.locate(HEADERS[form].format(BODY), "webhooks/retries" if with_id else None)
    assert (placed.how, placed.doc_id, (placed.start, placed.end)) == ("exact", "webhooks/retries",
                                                                        true_span("webhooks/retries", BODY))


@pytest.mark.parametrize("template, passage", [
    ("[{title}] ({url})\n{content}", "[Webhook retries] (https://x/y)\n{}"),
    ("<doc id={doc}>{content}</doc>", "<doc id=webhooks/retries>{}</doc>"),
    ("{content}\n-- source: {source} --", "{}\n-- source: retries.md --"),
    ("### {title} | {product}\n\n{content}", "### Webhook retries | Acme API\n\n{}"),
])
def test_a_configured_template_cuts_any_other_wrapping(template, passage):
    text = passage.format(BODY)
    assert Locator(CORPUS).locate(text).how != "exact"  # the wrapping is not recognised by itself
    placed = Locator(CORPUS, template=HeaderTemplate.parse(template)).locate(text)
    assert (placed.how, placed.doc_id, (placed.start, placed.end)) == ("exact", "webhooks/retries",
                                                                        true_span("webhooks/retries", BODY))


@pytest.mark.parametrize("bad", ["{title}", "no placeholder", "{content} and {content}", "{a}{content}",
                                 "{title}{source}\n{content}", "x" * 2001 + "{content}", ""])
def test_a_bad_template_is_refused_before_any_work(bad):
    config = {"system": {"name": "recorded", "path": "/dev/null", "response": {"template": bad}}}
    with pytest.raises(RagexpInputError) as refused:
        check_system(config)
    assert refused.value.field == "system.response.template"


def test_a_header_the_document_holds_is_kept_in_the_placement(locator):
    """A passage whose ``key: value`` lines are the page's own text is placed verbatim, whole."""
    placed = locator.locate(FRONT)
    assert (placed.how, (placed.start, placed.end)) == ("exact", true_span("front", FRONT))
    normalised = locator.locate(FRONT.replace("above is", "above  is"))  # not verbatim: the header is cut, then taken back
    assert (normalised.doc_id, normalised.start) == ("front", true_span("front", FRONT)[0])


@pytest.mark.parametrize("text", ["Note: this line has a colon\nand goes on", "a: b", "title: only a header\n\n",
                                  "Failed deliveries: are retried\nwith backoff"])
def test_text_without_a_header_block_is_not_cut(text):
    assert content_span(text) == (0, len(text))


def test_an_ambiguity_is_counted_truly_not_capped(locator):
    boiler = "All rights reserved by the Acme Corporation and its licensors worldwide."
    placed = locator.locate(boiler)
    assert placed.how == "ambiguous" and len(placed.candidates) == 47
    assert placed.reason.startswith("exact match in 47 documents (legal/0, legal/1, legal/10, legal/11, legal/12 and 42 more)")


def test_identical_passages_from_two_documents_stay_two_units_at_their_ranks(locator):
    boiler = "All rights reserved by the Acme Corporation and its licensors worldwide."
    passages = [Passage(boiler, "legal/1"), Passage(boiler), Passage(boiler), Passage(BODY), Passage(boiler, "legal/1")]
    units = []
    seen: dict = {}
    for passage in passages:
        key = (passage.text, passage.doc_id, passage.path)
        seen[key] = seen.get(key, 0) + 1
        units.append(unit_of(passage, locator.locate(passage.text, passage.doc_id), CORPUS, occurrence=seen[key]))
    result = ranked(units)
    ids = [u.id for u in result.units]
    # legal/1's copy placed; the two text-only copies two unplaced units at ranks 2 and 3; BODY at rank 4;
    # the repeat of legal/1's placed copy kept once
    assert len(ids) == 4 and ids[0].startswith("legal/1#chunk_") and ids[1] != ids[2]
    assert all(i.startswith("unlocated:") for i in ids[1:3]) and ids[3].startswith("webhooks/retries#chunk_")
    assert result.duplicates == 1


# --- the located-rate floor -------------------------------------------------------------------


def _pairs(locator, passages):
    return [(p, locator.locate(p.text, p.doc_id, p.path)) for p in passages]


def test_the_floor_names_unknown_document_ids_and_the_fix(locator):
    passages = [Passage(BODY, f"kb-{i}") for i in range(9)] + [Passage(BODY, "webhooks/retries")]
    with pytest.raises(RagexpInputError) as refused:
        check_located_floor(_pairs(locator, passages), locator, 0.95)
    message = refused.value.message
    assert refused.value.field == "system.locate.min_located_rate" and "\n" not in message
    assert message.startswith("only 1 of 10 passages the system returned (10.0%) were placed in the corpus, below "
                              "system.locate.min_located_rate=0.95")
    assert "9 name a document the corpus does not have (kb-0, kb-1" in message
    assert "system.response.doc_id=null" in message


def test_the_floor_names_an_unrecognised_header_and_the_template_option(locator):
    passages = [Passage(f"Result {i} of 10, relevance 0.8{i}, retrieved from the knowledge base on 2026-12-01\n{BODY}")
                for i in range(5)]
    with pytest.raises(RagexpInputError) as refused:
        check_located_floor(_pairs(locator, passages), locator, 0.95)
    message = refused.value.message
    assert ("the passages start with text their document does not hold (e.g. 'Result 0 of 10, relevance 0.80, retrieved "
            "from the knowledge...'), a header around the text") in message
    assert "system.response.template=" in message and "\n" not in message


def test_the_floor_names_every_document_of_a_stale_index(locator):
    edited = BODY.replace("24 hours", "48 hours")  # one word: placed fuzzily
    passages = ([Passage("This page was rewritten since the index was built, nothing of it is left.", "front")] * 3
                + [Passage(f"Topic number {i} was once described here, before the page changed entirely.", f"legal/{i}")
                   for i in range(12)] + [Passage(edited, "webhooks/retries")])
    pairs = _pairs(locator, passages)
    assert pairs[-1][1].how == "fuzzy"
    with pytest.raises(RagexpInputError) as refused:
        check_located_floor(pairs, locator, 0.95)
    message = refused.value.message
    assert "a stale index? 15 passages name documents that are gone or no longer hold their text, 13 documents: front, " \
           "legal/0, legal/1" in message
    assert "legal/11; placed only fuzzily (edited?) in 1 more: webhooks/retries" in message


def test_the_floor_passes_at_its_rate_and_a_lower_floor_lets_the_run_through(locator):
    placed = [Passage(BODY, "webhooks/retries")] * 19 + [Passage("nothing like this is anywhere", "front")]
    check_located_floor(_pairs(locator, placed), locator, 0.95)  # 19 of 20 = 0.95: at the floor
    with pytest.raises(RagexpInputError):
        check_located_floor(_pairs(locator, placed), locator, 0.96)
    check_located_floor(_pairs(locator, [Passage("nothing like this", "kb-1")]), locator, 0.0)


# --- bounded work -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [3_000, 20_000, 200_000])
def test_a_long_passage_not_in_the_corpus_is_refused_by_its_anchors_not_aligned_whole(locator, length, monkeypatch):
    """The work a long passage costs is counted, not timed: the characters handed to the aligner
    stay within a bound linear in its length (a whole alignment would hand it length x region)."""
    from rapidfuzz import fuzz

    import ragexp.systems.locate as locate

    handed = []
    for name in ("partial_ratio_alignment", "ratio", "partial_ratio"):
        real = getattr(fuzz, name)
        monkeypatch.setattr(locate.fuzz, name, lambda a, b, *args, _real=real, **kw: handed.append(len(a) * len(b)) or
                            _real(a, b, *args, **kw))
    rng = random.Random(length)
    words = BODY.split()
    passage = " ".join(rng.choice(words) for _ in range(length // 5))[:length]
    assert locator.locate(passage).how in ("unlocated", "ambiguous")
    assert sum(handed) <= 12 * length * (locate.ANCHOR_CHARS + locate.WINDOW_CHARS), sum(handed)
