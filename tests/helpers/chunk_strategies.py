"""Hypothesis strategies: awkward texts and valid random chunker configs."""

from __future__ import annotations

from hypothesis import strategies as st

from ragexp.chunking import CHUNKERS

TEXT_PIECES = st.one_of(
    st.sampled_from(
        [
            "e.g.", "Dr.", "i.e.", "1.5", "U.S.", "etc.", "...", "!", "?", ".", ",", "\n", "\n\n", "\r\n", " ",
            "  ", "\t", "- ", "1. ", "| a | b |\n|---|---|\n", "```\n# code\n```\n", "~~~\n", "# ", "## Heading\n",
            "###### deep #\n", "\u00a0", "\u3000", "。", "😀", "é", "\x00", "\u200d", "\x1c",
        ]
    ),
    st.text(min_size=1, max_size=12),
    st.text(alphabet="abcdefghij", min_size=30, max_size=200),
    st.from_regex(r"[A-Z][a-z]{1,8}", fullmatch=True),
)


TEXTS = st.lists(TEXT_PIECES, max_size=40).map("".join)


SEPARATOR_CHOICES = ["\n\n", "\n", "<sentence>", " ", ".", ","]


@st.composite
def chunker_configs(draw: st.DrawFn) -> dict:
    """A valid config for a random chunker (regex tokens), with random sizes and overlaps."""
    name = draw(st.sampled_from(sorted(CHUNKERS)))
    if name == "fixed":
        size = draw(st.integers(1, 80))
        unit = draw(st.sampled_from(["chars", "tokens"]))
        return {"name": name, "unit": unit, "size": size, "overlap": draw(st.integers(0, size - 1))}
    if name == "sentence":
        return {"name": name, "size": draw(st.integers(1, 120)), "overlap_sentences": draw(st.integers(0, 3))}
    if name == "recursive":
        size = draw(st.integers(1, 120))
        separators = draw(st.lists(st.sampled_from(SEPARATOR_CHOICES), max_size=4)) + [""]
        return {"name": name, "size": size, "overlap": draw(st.integers(0, size - 1)), "separators": separators}
    if name == "markdown":
        max_size = draw(st.integers(1, 200))
        return {
            "name": name,
            "max_size": max_size,
            "min_size": draw(st.integers(0, max_size)),
            "overlap": draw(st.integers(0, max_size - 1)),
        }
    return {"name": name}
