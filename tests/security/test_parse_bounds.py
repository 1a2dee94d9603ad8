"""Roots 3 and 4 of issue #40: bounds on what parsing produces and on the numbers that size work.

Caps counted file bytes: a small PDF whose stream inflates, a page of tiny elements, a results
file of empty objects, a YAML eval set of a few MB, a gzip log each grew to gigabytes or ran for
minutes inside their byte caps. Each hostile file below is refused in one line, and where the
parser is Python its traced peak (``tracemalloc``) stays a small multiple of the file, because the
count comes before the tree. ``benchmarks/bench_hostile_files.py`` measures the whole process
(peak RSS and time to refusal, before and after: docs/bad-input.md). Numbers that size work
(``eval.ks``, ``eval.bootstrap_resamples``, ...) are bounded before any work, and the retrieval
depth by the chunks the corpus has.

Fails before (``a39e7ac``): every hostile-file test (no refusal, or one after the tree was built:
tracemalloc peaks of 0.2-0.9 GB, the gzip log read for minutes, the PDF inflated by PDFium), the
``annotate --from-run`` side door (the stored chunking was read without the closed schema), and
every number test (only ``>= 1`` was checked).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

import pytest

from ragexp.errors import RagexpInputError
from tests.helpers import hostile_files

MIB = 1 << 20


def traced_peak(call) -> tuple[BaseException | None, int]:
    """What ``call()`` raised (or ``None``) and the peak of Python's traced allocations meanwhile."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except Exception as err:  # noqa: BLE001 - the caller asserts which
        raised = err
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return raised, peak


# --- structured files read by the gate ---------------------------------------------------------------------------


def test_a_results_file_of_empty_objects_is_refused_before_parsing(tmp_path):
    from ragexp.evaluation.results import MAX_VALUES, RunResults

    path = hostile_files.results_empty_objects(tmp_path / "r.json", MAX_VALUES + 10)
    text_bytes = path.stat().st_size
    raised, peak = traced_peak(lambda: RunResults.load(path))
    assert isinstance(raised, RagexpInputError) and "JSON values" in str(raised), raised
    assert peak < 3 * text_bytes + 8 * MIB, (peak, text_bytes)  # the text and one copy, never the objects


def test_a_yaml_eval_set_of_many_nodes_is_refused_while_composing(tmp_path):
    from ragexp.data.evalset_schema import read_file
    from ragexp.stored.limits import MAX_YAML_NODES

    path = hostile_files.yaml_many_nodes(tmp_path / "evalset.yaml", 5 * MAX_YAML_NODES)
    raised, peak = traced_peak(lambda: read_file(path))
    assert isinstance(raised, RagexpInputError) and "YAML nodes" in str(raised), raised
    assert peak < 250 * MIB, peak  # MAX_YAML_NODES composed at most


def test_a_saved_config_of_many_nodes_is_refused(tmp_path):
    from ragexp.config.run_config import MAX_CONFIG_BYTES, MAX_CONFIG_NODES, parse_run_config

    path = hostile_files.yaml_many_nodes(tmp_path / "resolved.yaml", (MAX_CONFIG_BYTES - 20) // 3)
    raised, peak = traced_peak(lambda: parse_run_config(path))
    assert isinstance(raised, RagexpInputError) and f"{MAX_CONFIG_NODES:,} YAML nodes" in str(raised), raised
    assert peak < 40 * MIB, peak


def test_a_jsonl_eval_set_holding_millions_of_values_is_refused_before_parsing(tmp_path):
    from ragexp.data.evalset_schema import read_file
    from ragexp.stored.limits import MAX_JSON_VALUES

    path = hostile_files.jsonl_many_values(tmp_path / "evalset.jsonl", 2 * MAX_JSON_VALUES)
    raised, peak = traced_peak(lambda: read_file(path))
    assert isinstance(raised, RagexpInputError) and "JSON values" in str(raised), raised
    assert peak < 3 * path.stat().st_size + 8 * MIB, peak  # the text, and the structure of one line-aligned piece


# --- documents --------------------------------------------------------------------------------------------------


def test_an_html_page_of_tiny_elements_is_refused_before_a_tree_is_built(tmp_path):
    from ragexp.data.convert.base import ConvertOptions, Unconvertible
    from ragexp.data.convert.html import MAX_ELEMENTS, convert_html

    data = hostile_files.html_many_elements(tmp_path / "p.html", MAX_ELEMENTS + 1_000).read_bytes()
    raised, peak = traced_peak(lambda: convert_html(data, ConvertOptions()))
    assert isinstance(raised, Unconvertible) and "HTML tags" in str(raised), raised
    assert peak < 4 * len(data) + 8 * MIB, peak


def test_a_docx_of_many_elements_is_refused_before_mammoth_parses_it(tmp_path):
    from ragexp.data.convert.base import ConvertOptions, Unconvertible
    from ragexp.data.convert.docx import MAX_XML_ELEMENTS, convert_docx

    data = hostile_files.docx_many_elements(tmp_path / "d.docx", MAX_XML_ELEMENTS + 1_000).read_bytes()
    assert len(data) < 100_000  # a tiny file
    raised, peak = traced_peak(lambda: convert_docx(data, ConvertOptions()))
    assert isinstance(raised, Unconvertible) and "tags" in str(raised), raised
    assert peak < 16 * MIB, peak  # one unpacked part, never mammoth's tree


@pytest.mark.parametrize("chain", ["flate", "hex+flate", "a85+flate"])
def test_a_pdf_whose_streams_inflate_past_the_bound_is_refused_before_pdfium(tmp_path, chain):
    import base64

    from ragexp.data.convert.base import ConvertOptions, Unconvertible
    from ragexp.data.convert.pdf import convert_pdf
    from ragexp.data.convert.pdf_streams import MAX_DECODED_BYTES

    data = hostile_files.pdf_bomb(tmp_path / "bomb.pdf", MAX_DECODED_BYTES + 16 * MIB).read_bytes()
    if chain != "flate":  # the same stream wrapped in a text filter first
        start, end = data.index(b"stream\n") + 7, data.index(b"\nendstream")
        body = data[start:end]
        wrapped = body.hex().encode() + b">" if chain == "hex+flate" else base64.a85encode(body) + b"~>"
        name = b"/ASCIIHexDecode" if chain == "hex+flate" else b"/ASCII85Decode"
        data = (data[:start].replace(b"/Filter /FlateDecode", b"/Filter [" + name + b" /FlateDecode]")
                .replace(b"/Length %d" % len(body), b"/Length %d" % len(wrapped)) + wrapped + data[end:])
    assert len(data) < 2 * MIB
    started = time.perf_counter()
    with pytest.raises(Unconvertible, match="decode to more than"):
        convert_pdf(data, ConvertOptions())
    assert time.perf_counter() - started < 30


def _lzw_encode(data: bytes) -> bytes:
    """PDF LZW (early change 1) written from the specification, to check the bounded decoder."""
    table = {bytes([i]): i for i in range(256)}
    codes, word, width, out, bits, value = [256], b"", 9, bytearray(), 0, 0
    size = 257
    for byte in data:
        grown = word + bytes([byte])
        if grown in table:
            word = grown
            continue
        codes.append(table[word])
        table[grown] = len(table) + 2
        word = bytes([byte])
        if len(table) + 2 >= 4094:
            codes.append(256)
            table = {bytes([i]): i for i in range(256)}
    codes += [table[word]] if word else []
    codes.append(257)
    for code in codes:
        value, bits = (value << width) | code, bits + width
        while bits >= 8:
            bits -= 8
            out.append((value >> bits) & 0xFF)
        size = 257 if code == 256 else size + 1  # the decoder's table: no entry for the first code after a clear
        width = 9 if code == 256 else min(12, 9 + (size >= 511) + (size >= 1023) + (size >= 2047))
    if bits:
        out.append((value << (8 - bits)) & 0xFF)
    return bytes(out)


@pytest.mark.parametrize("data", [b"", b"a", b"abababababab", bytes(range(256)) * 20, b"x" * 50_000, b"TOBEORNOTTOBE" * 300])
def test_the_bounded_lzw_decoder_reads_pdf_lzw(data):
    from ragexp.data.convert import pdf_streams

    assert pdf_streams._lzw(_lzw_encode(data), len(data) + 1) == data
    if data:
        with pytest.raises(pdf_streams._Over):
            pdf_streams._lzw(_lzw_encode(data), len(data) - 1)


# --- query logs -------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_gzip_bomb_log_is_refused_while_it_is_read(tmp_path):
    from ragexp.candidates.log_reader import read_log

    path = hostile_files.gzip_bomb(tmp_path / "search.log.gz", 400 * MIB)
    assert path.stat().st_size < 2 * MIB
    started = time.perf_counter()
    with pytest.raises(RagexpInputError, match="gzip bomb"):
        for _ in read_log(path):
            pass
    assert time.perf_counter() - started < 60


def test_distinct_queries_beyond_the_bound_are_refused_naming_the_line(tmp_path, monkeypatch):
    from ragexp.candidates import distinct
    from ragexp.candidates.log_reader import read_log

    monkeypatch.setattr(distinct, "MAX_DISTINCT", 1_000)
    path = hostile_files.distinct_queries_log(tmp_path / "q.log", 1_500)
    table = distinct.DistinctQueries()
    source = table.add_source(str(path))
    with pytest.raises(RagexpInputError, match="more than 1,000 distinct queries") as caught:
        for line, query in read_log(path):
            table.add(query, source, line)
    assert caught.value.line == 1_001 and len(table.entries) == 1_000


# --- annotate --from-run: the stored config through the whole gate ---------------------------------------------


@pytest.mark.parametrize(("stored", "words"), [
    ("chunking: {name: fixed, size: 100}\nhydra: {run: {dir: x}}\n", "no hydra settings"),
    ("chunking: {name: fixed, size: '${oc.env:HOME}'}\n", "interpolation"),
    ("chunking: {name: fixed, sise: 100}\n", "unknown key"),
    ("chunking: {name: fixed, size: 100}\nnot_a_group: 1\n", "not a ragexp config key"),
    ("chunking: {name: fixed, size: !!binary aGVsbG8=}\n", "binary"),
])
def test_annotate_from_run_reads_the_stored_config_through_the_gate(tmp_path, monkeypatch, stored, words):
    from mlflow.tracking import MlflowClient

    from ragexp.commands._evalset_annotate import _run_chunking

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    saved = tmp_path / "resolved.yaml"
    saved.write_text("dataset: {_target_: ragexp.data.dataset.DemoDataset, name: demo}\n"
                     "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n" + stored, encoding="utf-8")
    client.log_artifact(run_id, str(saved), artifact_path="config")
    with pytest.raises(RagexpInputError) as caught:
        _run_chunking(argparse.Namespace(from_run=run_id, tracking_uri=uri))
    assert words in str(caught.value) and f"run {run_id}: config/resolved.yaml" in str(caught.value), caught.value


# --- numbers that size work -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("override", "field"), [
    ("eval.ks=[1,5,1001]", "eval.ks[2]"), ("eval.ks=[1000000000000]", "eval.ks[0]"),
    ("eval.retrieve_k=1000000000", "eval.retrieve_k"), ("eval.context_k=200", "eval.context_k"),
    ("eval.bootstrap_resamples=1000000000", "eval.bootstrap_resamples"), ("eval.sample=1000000000000", "eval.sample"),
])
def test_a_number_that_sizes_work_is_bounded_before_any_work(override, field):
    from ragexp.config.compose import compose_config
    from ragexp.config.schema import validate

    cfg = compose_config(["retrieval=bm25", "cache_dir=/tmp/never-written", override])
    with pytest.raises(RagexpInputError) as caught:
        validate(cfg)
    assert caught.value.field == field, caught.value


def test_context_k_may_reach_the_deepest_cut_off_and_no_further():
    from ragexp.config.compose import compose_config
    from ragexp.config.schema import validate

    base = ["retrieval=bm25", "cache_dir=/tmp/never-written", "eval.ks=[1,3]", "eval.retrieve_k=0"]
    validate(compose_config([*base, "eval.context_k=3"]))
    with pytest.raises(RagexpInputError, match="goes 3 deep"):
        validate(compose_config([*base, "eval.context_k=4"]))


def test_the_retrieval_depth_is_cut_to_the_chunks_the_corpus_has():
    from ragexp.config.compose import compose_config
    from ragexp.evaluation.pipeline import Pipeline
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.evaluation.retrieval_step import retrieval_depth

    options = job_spec(compose_config(["retrieval=bm25", "eval.ks=[1,1000]", "cache_dir=/tmp/never-written"])).eval
    pipeline = Pipeline(retriever=None, reranker=None, generator=None)
    assert retrieval_depth(options, pipeline, 37) == 37 and retrieval_depth(options, pipeline, 5_000) == 1000


def test_a_gate_spec_and_the_cli_counts_are_bounded():
    from ragexp.comparison.gate import GateSpec
    from ragexp.config.bounds import check_count

    with pytest.raises(RagexpInputError, match="n_resamples"):
        GateSpec.from_mapping({"metrics": {"hit_rate_at_5": {}}, "resampling": {"n_resamples": 10**9}})
    for value in (0, -1, 10**9, True, 1.5, "3"):
        with pytest.raises(RagexpInputError, match="--pool-depth"):
            check_count(value, "--pool-depth", high=1000)
    assert check_count(1000, "--pool-depth", high=1000) == 1000


def test_a_huge_sample_of_candidates_is_refused_before_any_log_is_read(tmp_path):
    from ragexp.candidates.from_logs import import_queries

    with pytest.raises(RagexpInputError) as caught:
        import_queries([tmp_path / "never-read.log"], 10**12, tmp_path / "out.jsonl", encode=None, model_name="m")
    assert caught.value.field == "--sample"
