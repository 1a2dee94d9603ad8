"""The context's label lines as a small model copies them: a doubled title made single, and label
copies taken out of an answer before anything reads it (the shapes SmolLM2 produced on the demo:
benchmarks/data/demo_answer_claims.csv), while document text that looks like a heading stays."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ragexp.data.context import context_labels, context_titles, format_context, is_title_copy, label_title, strip_label_copies
from ragexp.datamodel import Chunk

TITLES = ["Proration > Proration > Downgrades", "Plan comparison > Plan comparison > Changing plans",
          "Prration > Prration > Frequently asked questions", "Downgrading", "Payment methods and failed payments"]
CHUNKS = [Chunk(f"c{i}", f"d{i}", 0, 0, 10, f"# Heading {i}\nText of passage {i}.", title) for i, title in enumerate(TITLES)]
CONTEXT = format_context(CHUNKS)


def test_a_title_that_repeats_its_document_title_is_labelled_once() -> None:
    assert label_title("e-Manual, part 7 > e-Manual, part 7 > Displaying the Home Screen") == \
        "e-Manual, part 7 > Displaying the Home Screen"
    assert label_title("Refund policy > Refund policy > Annual plans") == "Refund policy > Annual plans"
    assert label_title("Refund policy > Annual plans > Annual plans") == "Refund policy > Annual plans"
    assert label_title("A > B > A") == "A > B > A"  # only a part equal to the one right before it goes
    assert label_title("Line\nbreak > x") == "Line break > x"
    assert CONTEXT.splitlines()[0] == "[1] Proration > Downgrades"
    assert context_labels(CONTEXT) == ["Proration > Downgrades", "Plan comparison > Changing plans",
                                       "Prration > Frequently asked questions", "Downgrading",
                                       "Payment methods and failed payments"]
    assert context_labels("Plain text.") == []


def test_label_copies_are_taken_out_of_an_answer_and_counted() -> None:
    # q016 of the held demo claims: every line a copy of a label, one misspelled, one a bare title
    answer = ("[1] Proration > Prration > Downgrades\n[2] Plan comparison > Plan comparison > Changing plans\n"
              "[3] Prration > Prration > Frequently asked questions\n[4] Downgrading\n[5] Payment methods and failed payments")
    assert strip_label_copies(answer, CONTEXT) == ("", 5)
    kept, removed = strip_label_copies("Proration > Proration > Downgrades\nA downgrade takes effect at the end.", CONTEXT)
    assert (kept, removed) == ("A downgrade takes effect at the end.", 1)
    assert strip_label_copies("- [2]\nYes.", CONTEXT) == ("Yes.", 1)
    # shapes from the demo run's answers to q025-q148 (the held claims are q001-q024): a label's first
    # part after its number, a path whose parts are all one heading, a copy in bold
    context = format_context([
        Chunk("a", "a", 0, 0, 1, "Text a.", "Verifying webhook signatures > Verifying webhook signatures > Timestamp tolerance"),
        Chunk("b", "b", 0, 0, 1, "Text b.", "API keys > API keys"),
        Chunk("c", "c", 0, 0, 1, "Text c.", "Deleting data > Deleting data > Erasing a person")])
    answer = ("1. [1] Verifying webhook signatures\n2. API keys > API keys > API keys\n"
              "3. **Deleting data > Erasng a person**\n4. Keys are rotated every 90 days.")
    assert strip_label_copies(answer, context) == ("4. Keys are rotated every 90 days.", 3)


def test_document_text_and_other_contexts_are_left_alone() -> None:
    for answer in ("Downgrading", "Payment methods and failed payments",  # a heading alone is document text
                   "[1] A downgrade takes effect at the end of the period.",  # a citation before a statement
                   "[9] Proration > Downgrades",  # no passage 9: not one of this context's labels
                   "Billing > Invoices"):  # a path, but not a label of this context
        assert strip_label_copies(answer, CONTEXT) == (answer, 0), answer
    assert strip_label_copies("[1] Proration > Downgrades", "no labels in this context") == ("[1] Proration > Downgrades", 0)


_text = st.text(st.sampled_from(list("ab >[]1\n")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_text, _text), min_size=1, max_size=4), _text)
@example([("1> 1", "")], "1 > 1")  # the whole answer is a label copy: nothing is kept (found in CI)
def test_stripping_only_ever_removes_whole_lines(parts, answer) -> None:
    chunks = [Chunk(f"c{i}", "d", i, 0, 1, text, title) for i, (title, text) in enumerate(parts)]
    context = format_context(chunks)
    kept, removed = strip_label_copies(answer, context)
    if removed == 0:
        assert kept == answer
    else:
        lines = answer.split("\n")
        assert len([line for line in kept.split("\n") if line.strip()]) <= len(lines) - removed
        # every line kept is a line of the answer (an answer that was all label copies keeps nothing)
        assert all(line.strip() in [x.strip() for x in lines] for line in kept.split("\n") if line.strip())


# --- section titles however an answer lists them (issue #50) ---------------------------------------

_word = st.text(st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ")), min_size=3, max_size=9)
_title = st.lists(_word, min_size=1, max_size=4).map(" ".join)
LISTINGS = ("{t}", "1. {t}", "12) {t}", "- {t}", "* {t}", "• {t}", "**{t}**", "__{t}__", "*{t}*", "`{t}`", "### {t}",
            "# {t}", "[{t}](#anchor)", "{t}:", "1. **{t}**:", "- [{t}](#x)", "{t}.")
"""How a small model lists a title it copies (``1. <title>`` the commonest on held-out corpora)."""


def _context(label_paths: list[list[str]], headings: list[str]) -> str:
    chunks = [Chunk(f"c{i}", "d", i, 0, 1, "\n".join([*(f"## {h}" for h in headings[i::len(label_paths)]),
                                                     "Some statement about the product."]), " > ".join(path))
              for i, path in enumerate(label_paths)]
    return format_context(chunks)


def test_a_long_label_with_a_statement_after_it_is_kept() -> None:
    """Found by the property test below in a full run: a 72-character label path followed by a
    25-character statement was difflib-similar (ratio 0.85) to the label and the line was dropped."""
    path = ["AAA", "AAA AAA AAAAAAAA AAAAAAAAA", "AAAAAAA AAAAAAAA AAAAAAAAA AAAAAAAAA"]
    context = _context([path, ["AAA"]], [])
    line = f"{' > '.join(path)} It is done in two steps."
    assert strip_label_copies(line, context) == (line, 0)
    assert strip_label_copies(" > ".join(path), context)[1] == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_title, min_size=1, max_size=3), min_size=1, max_size=3), st.lists(_title, max_size=3),
       st.sampled_from(LISTINGS), st.data())
def test_a_title_copy_is_recognised_however_it_is_listed(paths, headings, listing, data) -> None:
    context = _context(paths, headings)
    path = data.draw(st.sampled_from(paths)).copy()
    path[:] = label_title(" > ".join(path)).split(" > ")  # the parts the label shows (a repeated one once)
    i = data.draw(st.integers(0, len(path) - 1))
    j = data.draw(st.integers(i + 1, len(path)))
    title = data.draw(st.sampled_from([" > ".join(path[i:j]), *headings]))  # a label part, a run of them, a heading
    line = listing.format(t=title)
    assert is_title_copy(line, context), line
    statement = "It is done in two steps."
    assert strip_label_copies(f"{line}\n{statement}", context) == (statement, 1)
    assert strip_label_copies(f"{statement}\n{line}", context) == (statement, 1)
    # more than the title on the line: a statement, kept; as the whole plain answer, a title may be the answer
    assert strip_label_copies(f"{line} {statement}", context)[1] == 0
    if listing == "{t}" and " > " not in title:  # one title, the whole answer, written plainly: may be the answer
        assert strip_label_copies(line, context) == (line, 0)
    assert not is_title_copy(f"{title} is set per key", context)


def test_no_labels_no_titles_and_short_or_near_titles_are_no_copies() -> None:
    context = _context([["Refund policy", "Annual plans"], ["Downgrades"]], ["Retries"])
    assert context_titles(context) == ["Refund policy", "Annual plans", "Downgrades", "Retries"]
    assert context_titles("Plain text.\n## A heading") == []  # not a labelled context
    for line in ("1. A downgrade.", "- Annual plan refunds", "1. Retry", "2. [1] Annual plans", "- plans"):
        assert not is_title_copy(line, context), line
    assert is_title_copy("1. Refund polcy > Annual plans", context) is False  # a short title is never fuzzy
    assert is_title_copy("**Refund policy > Annual plans**", context)
