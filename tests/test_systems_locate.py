"""Placing a system's passages in the corpus (:mod:`ragexp.systems.locate`): each stage against
offsets known by construction, ambiguity named, stale ids never placed elsewhere."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.datamodel import Document
from ragexp.systems.locate import Locator
from ragexp.systems.normalised_text import comparable

RETRIES = ("# Webhook retries\n\nFailed deliveries are retried with **exponential backoff** for 24 hours. After the "
           "last attempt fails, the delivery is marked failed and no further attempts are made. See "
           "[replaying events](replaying.md#how) to send it again.\n\nEach attempt times out after 10 seconds; "
           "respond with a 2xx status quickly and process the event later.\n")
CORPUS = {
    "webhooks/retries": Document("webhooks/retries", RETRIES, "Webhook retries"),
    "webhooks/legacy": Document("webhooks/legacy", "# Legacy webhooks\n\nVersion 1 webhooks retried for 3 days. "
                                "After the last attempt fails, the delivery is marked failed and no further attempts "
                                "are made.\n", "Legacy webhooks"),
    "keys/rotation": Document("keys/rotation", "You can have two active keys at once. Create the new key, deploy it, "
                              "then revoke the old key: there is no downtime. Keys & scopes: read-only keys cannot "
                              "send messages.\n", "Key rotation"),
    "twice": Document("twice", "Alpha beta gamma delta epsilon zeta eta theta. Some other words in between here. "
                      "Alpha beta gamma delta epsilon zeta eta theta.\n", ""),
}
SENTENCE = "Failed deliveries are retried with **exponential backoff** for 24 hours."


@pytest.fixture(scope="module")
def locator():
    return Locator(CORPUS)


def span_of(doc_id: str, text: str) -> tuple[int, int]:
    start = CORPUS[doc_id].text.index(text)
    return start, start + len(text)


def test_a_verbatim_passage_is_placed_exactly_with_or_without_its_document(locator):
    for doc_id in (None, "webhooks/retries", "help/webhooks/retries.md", "https://help.example.com/webhooks/retries.html"):
        placed = locator.locate(f"  {SENTENCE}\n", doc_id=doc_id)
        assert (placed.how, placed.doc_id, (placed.start, placed.end), placed.similarity) == (
            "exact", "webhooks/retries", span_of("webhooks/retries", SENTENCE), 1.0), doc_id


@pytest.mark.parametrize("rewrite", [
    lambda s: " ".join(s.split()).replace(" ", "\n", 3),  # whitespace re-wrapped
    lambda s: s.replace("**", ""),  # markup stripped
    lambda s: s.replace("**exponential backoff**", "<b>exponential&nbsp;backoff</b>"),  # as HTML
    lambda s: s.upper().replace("FAILED", "ＦＡＩＬＥＤ"),  # case, full-width (NFKC)
    lambda s: s[:40] + "…",  # cut short with an ellipsis
])
def test_a_rewritten_passage_is_placed_after_normalising(locator, rewrite):
    placed = locator.locate(rewrite(SENTENCE))
    assert placed.how == "normalised" and placed.doc_id == "webhooks/retries"
    start, end = span_of("webhooks/retries", SENTENCE)
    assert start <= placed.start < placed.end <= end and placed.end - placed.start >= 35


def test_a_passage_with_the_document_title_prepended_is_placed_without_it(locator):
    sentence = "Create the new key, deploy it, then revoke the old key: there is no downtime."
    placed = locator.locate(f"Key rotation\n\n{sentence}")
    assert (placed.how, placed.doc_id, (placed.start, placed.end)) == ("normalised", "keys/rotation",
                                                                       span_of("keys/rotation", sentence))


def test_markup_cut_by_a_passage_boundary_does_not_keep_it_from_matching(locator):
    text = CORPUS["webhooks/retries"].text
    cut = text[text.index("ing.md#how)"):text.index("process the event")]  # starts inside a link target
    placed = locator.locate(" ".join(cut.split()))
    assert placed.how == "normalised" and placed.doc_id == "webhooks/retries"
    assert placed.start == text.index(" to send it again") + 1 and placed.end == text.index("process the event") - 1


def test_a_noisy_passage_is_placed_by_fuzzy_alignment_with_its_similarity(locator):
    rng = random.Random(7)
    original = CORPUS["webhooks/retries"].text[18:260]
    noisy = "".join(rng.choice("xyzq") if rng.random() < 0.02 and c.isalpha() else c for c in original)
    assert noisy != original
    placed = locator.locate(noisy)
    assert placed.how == "fuzzy" and placed.doc_id == "webhooks/retries" and 0.9 <= placed.similarity < 1.0
    assert abs(placed.start - 18) <= 3 and abs(placed.end - 260) <= 3


def test_text_in_two_documents_is_ambiguous_and_a_document_id_resolves_it(locator):
    shared = "After the last attempt fails, the delivery is marked failed and no further attempts are made."
    placed = locator.locate(shared)
    assert placed.how == "ambiguous" and set(placed.candidates) == {"webhooks/retries", "webhooks/legacy"}
    assert not placed.located and "2 documents" in placed.reason
    there = locator.locate(shared, doc_id="webhooks/legacy")
    assert (there.how, there.doc_id, (there.start, there.end)) == ("exact", "webhooks/legacy", span_of("webhooks/legacy", shared))


def test_text_twice_in_one_document_is_ambiguous_even_with_its_id(locator):
    placed = locator.locate("Alpha beta gamma delta epsilon zeta eta theta.", doc_id="twice")
    assert placed.how == "ambiguous" and placed.candidates == ("twice",) and "2 places" in placed.reason


def test_a_stale_passage_is_unlocated_and_never_placed_by_its_text_elsewhere(locator):
    gone = locator.locate(SENTENCE, doc_id="webhooks/removed-page")
    assert gone.how == "unlocated" and gone.doc_id == "webhooks/removed-page" and "not in the corpus" in gone.reason
    edited = locator.locate("Failed deliveries are retried with exponential backoff for 72 hours, then dropped for good "
                            "without any notice to the account owner.", doc_id="webhooks/retries")
    assert edited.how == "unlocated" and "not found in document 'webhooks/retries'" in edited.reason
    foreign = locator.locate("Quarterly revenue grew by eleven percent, driven by enterprise subscriptions in Europe.")
    assert foreign.how == "unlocated" and "best fuzzy similarity" in foreign.reason
    assert locator.locate("Nope.").how == "unlocated" and locator.locate("  ").reason == "the passage is empty"


def test_an_entity_in_the_corpus_matches_its_character(locator):
    placed = locator.locate("keys & scopes: read-only keys cannot send messages")
    assert placed.how == "normalised" and placed.doc_id == "keys/rotation"
    assert CORPUS["keys/rotation"].text[placed.start:placed.end].lower().startswith("keys & scopes")


def test_the_comparable_form_maps_back_to_the_original_offsets():
    text = "A <i>b</i>&amp;c **d** [e](f.md)  ﬁg\n# H"
    form = comparable(text)
    assert form.form == "ab&cdefigh"
    assert [text[o] for o in form.offsets] == ["A", "b", "&", "c", "d", "e", "ﬁ", "ﬁ", "g", "H"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"ab Z*_#|>[]()<>&;amp#x41:./\n\t", "&amp;", "&lt;", "&hellip;", "<b>", "</i>",
                                 "](u.md)", "é", "ﬁ"]), max_size=60).map("".join))
def test_the_fast_ascii_form_is_the_character_by_character_form(text):
    from ragexp.systems.normalised_text import _any_comparable

    fast, slow = comparable(text), _any_comparable(text)
    assert fast.form == slow.form and fast.offsets.tolist() == slow.offsets.tolist()
