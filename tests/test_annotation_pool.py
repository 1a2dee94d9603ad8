"""A cleaner annotation pool: heading-only units dropped and counted, each passage's heading path,
identical texts marked, the multi-chunk hint not fired by a section repeated word for word, and
the pool chunked as the eval set's header names."""

from __future__ import annotations

from ragexp.annotation.hints import ChunkMap, category_hints
from ragexp.annotation.pool import Pooler, heading_only, heading_path, mark_identical, pool_order
from ragexp.chunking.fixed import FixedSizeChunker
from ragexp.chunking.markdown import markdown_sections
from ragexp.datamodel import Chunk, Corpus, Document

MANUAL = ("# Manual\n\n## CTA-861\n\n## Setup\n\nPlug the cable into port HDMI 1.\n\n### Reset\n\n"
          "Hold the power button for ten seconds.\n\n## Appendix\n\n### Reset\n\nHold the power button for ten seconds.\n")


def test_heading_only_text_is_recognised() -> None:
    assert heading_only("## CTA-861\n") and heading_only("# A\n\n## B\n  \n")
    assert not heading_only("## Setup\n\nPlug the cable in.") and not heading_only("plain")


def test_heading_path_names_the_section_an_offset_lies_in() -> None:
    assert heading_path(MANUAL, 0) == ["Manual"]
    assert heading_path(MANUAL, MANUAL.index("Plug")) == ["Manual", "Setup"]
    assert heading_path(MANUAL, MANUAL.index("Hold")) == ["Manual", "Setup", "Reset"]
    assert heading_path(MANUAL, MANUAL.rindex("Hold")) == ["Manual", "Appendix", "Reset"]
    assert heading_path("no headings here", 3) == []


def test_identical_texts_are_marked_with_each_other() -> None:
    candidates = [{"unit_id": "a", "text": "Hold the power\nbutton."}, {"unit_id": "b", "text": "Other."},
                  {"unit_id": "c", "text": "Hold the power button."}]
    mark_identical(candidates)
    assert [c["same_text"] for c in candidates] == [["c"], [], ["a"]]


def _span(text: str, quote: str, occurrence: int = 0) -> dict:
    start = text.index(quote) if occurrence == 0 else text.rindex(quote)
    return {"doc_id": "m", "start": start, "end": start + len(quote), "quote": quote, "grade": 1}


def test_a_repeated_section_marked_twice_is_not_multi_chunk_but_two_answers_are() -> None:
    corpus = Corpus([Document(id="m", text=MANUAL)])
    chunk_map = ChunkMap(corpus, [Chunk(id=f"m#chunk_{i}", doc_id="m", index=i, start=a, end=b, text=MANUAL[a:b])
                                  for i, (a, b, _) in enumerate(markdown_sections(MANUAL))])  # one chunk a section
    reset = "Hold the power button for ten seconds."
    twice = [_span(MANUAL, reset), _span(MANUAL, reset, occurrence=1)]
    assert "multi-chunk" not in category_hints("How do I reset it?", twice, chunk_map)
    spread = [_span(MANUAL, "Plug the cable into port HDMI 1."), _span(MANUAL, reset)]
    assert "multi-chunk" in category_hints("How do I set up and reset it?", spread, chunk_map)


def test_the_pool_drops_heading_only_units_and_uses_the_eval_sets_chunking(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    corpus = Corpus([Document(id="m", text=MANUAL), Document(id="n", text="# Notes\n\nNothing about buttons.\n"),
                     Document(id="o", text="# Other\n\nCables and ports.\n")])
    sections = Pooler(["bm25"], depth=20, chunking={"name": "markdown", "max_size": 200, "min_size": 5})
    assert any(heading_only(chunk.text) for chunk in sections.chunker().chunk_corpus(corpus))  # "## CTA-861"
    pool = sections.pool(corpus, "CTA-861 reset power button cable")
    assert pool.heading_only >= 1 and pool.candidates
    assert all(not heading_only(c["text"]) for c in pool.candidates)
    assert all(c["headings"] == heading_path(corpus[c["doc_id"]].text, c["start"]) for c in pool.candidates)
    repeated = [c for c in pool.candidates if "Hold the power" in c["text"]]
    assert len(repeated) == 2 and repeated[0]["same_text"] == [repeated[1]["unit_id"]]
    fixed = Pooler(["bm25"], depth=10, chunking={"name": "fixed", "size": 40, "overlap": 0})
    assert isinstance(fixed.chunker(), FixedSizeChunker)
    assert all(c["end"] - c["start"] <= 40 for c in fixed.pool(corpus, "reset power button").candidates)


def test_the_pool_answers_from_the_first_pipeline_built_and_grows_in_place(tmp_path, monkeypatch) -> None:
    """A slow second pipeline (held here until released) does not hold the first question back:
    the pool comes from the one built, names the other as pending, and once it is built the pool
    holds both pipelines' units, the first ones in the same order (each unit's place is its own)."""
    import threading

    import ragexp.evaluation.pipeline as pipeline_module

    monkeypatch.chdir(tmp_path)
    corpus = Corpus([Document(id="m", text=MANUAL)] + [Document(id=f"d{i}", text=f"# Doc {i}\n\nPower cable number {i}.\n")
                                                        for i in range(8)])
    release, built = threading.Event(), []
    real = pipeline_module.build_component

    class Deeper:
        """A second pipeline that finds other units: ranks 4-6 of BM25."""

        def __init__(self, inner) -> None:
            self.inner = inner

        def index(self, chunks) -> None:
            self.inner.index(chunks)

        def search(self, queries, k):
            return [ranking[k : 2 * k] for ranking in self.inner.search(queries, 2 * k)]

    def build(cfg, group, cache):
        built.append(cfg.get("k1"))
        if len(built) == 2:  # the second pipeline: held as a dense index build would be
            assert release.wait(60)
            return Deeper(real(cfg, group, cache))
        return real(cfg, group, cache)

    monkeypatch.setattr(pipeline_module, "build_component", build)
    pooler = Pooler(["bm25", "bm25"], depth=3, chunking={"name": "markdown", "max_size": 200, "min_size": 5})
    first = pooler.pool(corpus, "power cable reset")
    assert first.pending == ["bm25"] and len(first.candidates) == 3
    release.set()
    pooler.warm(corpus)
    grown = pooler.pool(corpus, "power cable reset")
    shown = [c["unit_id"] for c in first.candidates]
    assert grown.pending == [] and len(grown.candidates) == 6
    assert [c["unit_id"] for c in grown.candidates if c["unit_id"] in shown] == shown  # the first three keep their order
    assert pool_order(["c", "a", "b"], 0, "q") == [u for u in pool_order(["a", "b", "c", "d", "e"], 0, "q") if u in "abc"]
