"""HTML, PDF and DOCX corpora on real files: demo pages written by markdown-it-py, python-docx and
fpdf2 (tests/helpers/demo_formats.py), bad files written by Pillow, fpdf2 and python-docx
(tests/helpers/bad_documents.py). The whole demo corpus in every form is tests/test_demo_formats.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragexp.data.convert import CONVERTERS, ConvertOptions, converter_for
from ragexp.data.convert.html import decode_html
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import (
    CONVERSION_STAGE,
    load_corpus,
    persist_conversions,
)
from ragexp.data.loaders.evalset import read_evalset
from ragexp.data.loaders.visible_text import project, visible_spans
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache
from tests.helpers.bad_documents import (
    LEGACY_SENTENCE,
    legacy_html,
    long_pdf,
    scanned_pdf,
    text_pdf,
    truncated_docx,
)
from tests.helpers.cli import ragexp
from tests.helpers.demo_formats import BOILERPLATE_MARKERS, FORMATS, render_corpus

DEMO_IDS = ["rate-limits/overview", "webhooks/retries", "authentication/rotating-api-keys"]
HEADING = re.compile(r"^(#{1,6}) +(.+?)\s*$", re.M)


def headings(text: str) -> list[tuple[int, str]]:
    return [(len(m.group(1)), m.group(2).replace("`", "")) for m in HEADING.finditer(text)]


@pytest.fixture(scope="module")
def demo_forms(tmp_path_factory) -> dict[str, Path]:
    """Three demo pages (two with tables) as HTML, DOCX and PDF folders, plus the Markdown originals."""
    root = tmp_path_factory.mktemp("demo-forms")
    corpus_dir, _ = demo_paths()
    forms = {fmt: render_corpus(corpus_dir, root / fmt, fmt, ids=DEMO_IDS) for fmt in FORMATS}
    markdown = root / "md"
    for doc_id in DEMO_IDS:
        (markdown / doc_id).parent.mkdir(parents=True, exist_ok=True)
        (markdown / f"{doc_id}.md").write_text((corpus_dir / f"{doc_id}.md").read_text(encoding="utf-8"), encoding="utf-8")
    return {**forms, "md": markdown}


@pytest.fixture(scope="module")
def demo_corpora(demo_forms) -> dict:
    """Each form loaded once (mammoth takes most of a second per DOCX)."""
    return {fmt: load_corpus(folder) for fmt, folder in demo_forms.items()}


@pytest.fixture(scope="module")
def demo_items_file(tmp_path_factory) -> Path:
    """The demo eval set's items whose evidence lies only in :data:`DEMO_IDS`."""
    _, evalset = demo_paths()
    lines = evalset.read_text(encoding="utf-8").splitlines()
    keep = [lines[0]] + [line for line in lines[1:] if all(e["doc_id"] in DEMO_IDS for e in json.loads(line).get("evidence", []))
                         and json.loads(line).get("evidence")]
    path = tmp_path_factory.mktemp("items") / "evalset.jsonl"
    path.write_text("\n".join(keep) + "\n", encoding="utf-8")
    assert len(keep) > 10
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_demo_quote_resolves_in_each_form(demo_corpora, demo_items_file, fmt) -> None:
    corpus = demo_corpora[fmt]
    reading = read_evalset(demo_items_file, corpus)
    assert [str(p.error) for p in reading.problems] == []
    original = read_evalset(demo_items_file, demo_corpora["md"]).evalset
    for converted, source in zip(reading.evalset.items, original.items, strict=True):
        for span, gold in zip(converted.evidence, source.evidence, strict=True):
            # the span found in the converted text says what the Markdown span says, markup aside
            shown = project(corpus[span.doc_id].text[span.start : span.end])[0]
            assert shown == project(demo_paths()[0].joinpath(f"{gold.doc_id}.md").read_text(encoding="utf-8")[gold.start : gold.end])[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_headings_survive_conversion(demo_forms, demo_corpora, fmt) -> None:
    corpus = demo_corpora[fmt]
    for doc_id in DEMO_IDS:
        original = headings((demo_forms["md"] / f"{doc_id}.md").read_text(encoding="utf-8"))
        assert headings(corpus[doc_id].text) == original, doc_id


@pytest.mark.parametrize("fmt", ["html", "docx"])
def test_tables_stay_markdown_tables(demo_corpora, fmt) -> None:
    text = demo_corpora[fmt]["rate-limits/overview"].text
    assert re.search(r"^\| (\*\*)?Endpoint group(\*\*)? \| (\*\*)?Free(\*\*)? \|", text, re.M)  # DOCX: bold header cells
    assert "| --- | --- | --- | --- | --- |" in text
    assert re.search(r"^\| `?POST /v2/messages`? \| 5 / s \| 50 / s \| 200 / s \| 1,000 / s \|$", text, re.M)


def test_html_boilerplate_is_dropped_unless_asked_to_keep_it(demo_forms, demo_corpora) -> None:
    clean = demo_corpora["html"]["webhooks/retries"]
    kept = load_corpus(demo_forms["html"], html_remove_boilerplate=False)["webhooks/retries"]
    assert not any(marker in clean.text for marker in BOILERPLATE_MARKERS)
    assert all(marker in kept.text for marker in BOILERPLATE_MARKERS)
    assert clean.title == "Webhook retries | Relaywave Help"  # the page's <title>


def test_article_header_is_content_but_a_site_header_is_not(tmp_path: Path) -> None:
    page = ("<html><body><header><nav>Home · Docs</nav></header><article><header><h1>Refunds</h1></header>"
            "<p>Annual plans are refunded pro rata.</p><footer>Updated 2026-01-02</footer></article>"
            "<footer>© Relaywave</footer></body></html>")
    converted = converter_for(".html").convert(page.encode(), ConvertOptions())
    assert converted.text == "# Refunds\n\nAnnual plans are refunded pro rata.\n\nUpdated 2026-01-02"
    assert converted.title == "Refunds"  # no <title>: the first <h1>


def test_pdf_pages_and_page_of(demo_corpora) -> None:
    document = demo_corpora["pdf"]["rate-limits/overview"]
    assert len(document.page_starts) >= 2 and document.page_starts[0] == 0
    assert list(document.page_starts) == sorted(set(document.page_starts))
    second = document.page_starts[1]
    assert document.page_of(0) == 1 and document.page_of(second - 1) == 1 and document.page_of(second) == 2
    assert document.page_of(len(document.text) - 1) == len(document.page_starts)
    assert document.title == "Rate limits"  # the first # heading, found by font size


def test_legacy_encoded_html_is_decoded_with_and_without_a_declaration(tmp_path: Path) -> None:
    declared = converter_for(".html").convert(legacy_html(tmp_path / "a.html", declared=True).read_bytes(), ConvertOptions())
    guessed = converter_for(".html").convert(legacy_html(tmp_path / "b.html", declared=False).read_bytes(), ConvertOptions())
    assert LEGACY_SENTENCE in declared.text and LEGACY_SENTENCE in guessed.text
    assert declared.notes == ()
    assert guessed.notes == ("no charset declared and not valid UTF-8: decoded as windows-1252",)


def test_latin1_label_means_windows_1252_as_browsers_read_it() -> None:
    page = b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>50 \x80 \x96 100 \x80</p>'
    text, notes = decode_html(page)
    assert "50 € – 100 €" in text and notes == []


def test_bad_files_are_skipped_one_line_each_and_nothing_else_is_lost(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    (corpus_dir / "billing.md").write_text("# Billing\n\nInvoices are sent on the 1st.\n", encoding="utf-8")
    text_pdf(corpus_dir / "inverter.pdf", ["The inverter is covered for 10 years."])
    legacy_html(corpus_dir / "warranty.html", declared=False)
    scanned_pdf(corpus_dir / "manual.pdf")
    text_pdf(corpus_dir / "locked.pdf", ["Secret."], user_password="pw")
    truncated_docx(corpus_dir / "firmware.docx")
    (corpus_dir / "logo.png").write_bytes(b"\x89PNG")
    corpus = load_corpus(corpus_dir)
    assert sorted(corpus) == ["billing", "inverter", "warranty"]
    assert "covered for 10 years" in corpus["inverter"].text and LEGACY_SENTENCE in corpus["warranty"].text
    warnings = corpus.conversion.warnings()
    assert [line.split(":")[0] for line in warnings[:3]] == ["firmware.docx", "locked.pdf", "manual.pdf"]
    assert "truncated or damaged" in warnings[0] and "encrypted PDF" in warnings[1] and "scanned PDF" in warnings[2]
    assert warnings[3] == "warranty.html: no charset declared and not valid UTF-8: decoded as windows-1252"
    assert warnings[4] == "1 files with suffixes ragexp does not read were ignored (.png x1)"
    assert len(warnings) == 5
    with pytest.raises(RagexpInputError, match=r"firmware\.docx: skipped: .*\(and 2 more files\); dataset\.strict=true"):
        load_corpus(corpus_dir, strict=True)


def test_a_file_converted_to_empty_text_is_kept_and_reported(tmp_path: Path) -> None:
    (tmp_path / "nav-only.html").write_text("<html><title>Menu</title><body><nav>Home · Docs</nav></body></html>")
    (tmp_path / "real.md").write_text("# Real\n\ntext\n", encoding="utf-8")
    corpus = load_corpus(tmp_path)
    assert corpus["nav-only"].text == "" and corpus["nav-only"].title == "Menu"
    assert corpus.conversion.warnings() == ["nav-only.html: converted to empty text (nothing readable in it)"]
    with pytest.raises(RagexpInputError, match="nav-only.html: converted to empty text"):
        load_corpus(tmp_path, strict=True)


def test_conversions_are_cached_by_content_and_written_only_when_persisted(demo_forms, tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    first = load_corpus(demo_forms["pdf"], cache=cache)
    assert not (tmp_path / "cache" / CONVERSION_STAGE).exists()  # refused input would leave nothing
    persist_conversions(first, cache)
    assert len(list((tmp_path / "cache" / CONVERSION_STAGE).iterdir())) == len(DEMO_IDS)
    second = load_corpus(demo_forms["pdf"], cache=cache)
    assert second.conversion.cache_hits == len(DEMO_IDS) and second.conversion.pending == []
    assert [(d.text, d.title, d.page_starts) for d in second.values()] == [(d.text, d.title, d.page_starts) for d in first.values()]
    assert second.fingerprint() == first.fingerprint()


def test_a_new_converter_version_is_a_new_corpus_and_says_so(demo_forms, tmp_path: Path, monkeypatch) -> None:
    cache = StageCache(tmp_path / "cache")
    before = load_corpus(demo_forms["pdf"], cache=cache)
    persist_conversions(before, cache)
    monkeypatch.setattr("ragexp.data.convert.base._version", lambda distribution: "99.0")
    after = load_corpus(demo_forms["pdf"], cache=cache)
    assert after.fingerprint() != before.fingerprint()
    assert [d.text for d in after.values()] == [d.text for d in before.values()]  # same text, new corpus all the same
    assert after.conversion.cache_hits == 0
    assert after.conversion.warnings()[0] == (
        f"corpus changed because converter pdf went from {before.conversion.converters['pdf']!r} to 'pdf/3 pypdfium2 99.0'")


def test_markdown_only_corpus_keeps_its_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    corpus = load_corpus(tmp_path)
    assert corpus.conversion is None
    from ragexp.runtime.fingerprint import stable_hash

    assert corpus.fingerprint() == stable_hash([("a", "A", "# A\n\ntext\n")])


def test_visible_text_maps_back_to_the_converted_span() -> None:
    text = "## Limits\n\n| Plan | Rate |\n| --- | --- |\n| **Growth** | `200 / s` |\n\n- Use [batch sending](x.md).\n"
    visible, origin = project(text)
    assert visible == "Limits Plan Rate Growth 200 / s Use batch sending."
    assert len(origin) == len(visible)
    [(start, end)] = visible_spans(text, "| Growth | 200 / s |")
    assert text[start:end] == "Growth** | `200 / s"
    [(start, end)] = visible_spans(text, "Use batch sending.")
    assert text[start:end] == "Use [batch sending](x.md)."
    assert visible_spans(text, "Rate Growth 300") == []


def test_visible_text_is_only_for_converted_documents(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    (corpus_dir / "limits.md").write_text("The limit is **200 / s** on Growth.\n", encoding="utf-8")
    (corpus_dir / "page.html").write_text("<p>The limit is <b>200 / s</b> on Growth.</p>", encoding="utf-8")
    evalset = tmp_path / "evalset.jsonl"
    lines = [{"id": f"q{i}", "query": "limit?", "evidence": [{"doc_id": doc, "quote": "The limit is 200 / s on Growth."}]}
             for i, doc in enumerate(["limits", "page"])]
    evalset.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    reading = read_evalset(evalset, load_corpus(corpus_dir))
    assert [p.error.line for p in reading.problems] == [1]  # the Markdown document is quoted exactly or not at all
    assert reading.visible_quotes == 1


def test_a_visible_quote_found_twice_is_ambiguous(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "p.html").write_text("<p>Retry <b>after</b> 5 s.</p><p>Retry <i>after</i> 5 s.</p>")
    evalset = tmp_path / "e.jsonl"
    evalset.write_text(json.dumps({"id": "q", "query": "?", "evidence": [{"doc_id": "p", "quote": "Retry after 5 s."}]}) + "\n")
    [problem] = read_evalset(evalset, load_corpus(tmp_path / "corpus")).problems
    assert "occurs 2 times" in str(problem.error)


def test_a_500_page_pdf_converts_with_its_page_map(tmp_path: Path) -> None:
    converted = converter_for(".pdf").convert(long_pdf(tmp_path / "long.pdf", 500).read_bytes(), ConvertOptions())
    assert len(converted.page_starts) == 500
    page_17 = converted.text[converted.page_starts[16] : converted.page_starts[17]]
    assert page_17.startswith("# Section 7\n\nPage 7 paragraph 1.")  # pages 11-20 repeat pages 1-10


def test_every_converter_names_its_libraries() -> None:
    for converter in CONVERTERS:
        assert re.fullmatch(rf"{converter.name}/\d+( [\w.-]+ [\w.+-]+)+", converter.identity()), converter.identity()
        assert "missing" not in converter.identity()


@pytest.mark.slow
def test_run_on_a_pdf_corpus_shows_pages_in_the_per_query_table(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    long_pdf(corpus_dir / "portal.pdf", 3)
    text_pdf(corpus_dir / "warranty.pdf", ["The inverter warranty lasts 10 years.", "Batteries are covered for 5 years."])
    evalset = tmp_path / "evalset.jsonl"
    items = [{"id": "q1", "query": "How long is the battery warranty?", "evidence": [{"doc_id": "warranty", "quote": "Batteries are covered for 5 years."}]},
             {"id": "q2", "query": "Which section is the third page?", "evidence": [{"doc_id": "portal", "quote": "Section 3"}]}]
    evalset.write_text("\n".join(json.dumps(i) for i in items) + "\n", encoding="utf-8")
    ragexp(tmp_path, "run", "dataset=evalset", f"dataset.corpus={corpus_dir}", f"dataset.evalset={evalset}",
           f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress=false", "retrieval=bm25", "chunking=fixed",
           "chunking.size=300", "chunking.overlap=0", f"cache_dir={tmp_path / 'cache'}", "hydra.run.dir=out")
    results = json.loads((tmp_path / "out" / "ragexp_results.json").read_text(encoding="utf-8"))
    rows = {row["query_id"]: row for row in results["per_query"]}
    assert rows["q1"]["gold_pages"] == ["warranty p. 1"] and rows["q2"]["gold_pages"] == ["portal p. 3"]
    from ragexp.evaluation.results import QueryResult
    from ragexp.tracking.run_logger import _with_page

    top = rows["q2"]["ranking"][0][0]
    assert _with_page(top, QueryResult.from_dict(rows["q2"])).endswith(f"({rows['q2']['pages'][top]})")
    assert results["meta"]["corpus_conversion"]["converted"] == {"pdf": 2}
