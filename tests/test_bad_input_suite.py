"""Bad input across the CLI and the Python API: one message naming the input and the field,
exit code 2, no traceback, and nothing half-written (no MLflow run or experiment, no stage-cache
entry, no ``outputs/`` folder), secrets never shown nor written.

A subprocess costs 5-50 s on a loaded machine, so the cases of :mod:`bad_input_cases` (input
files, config errors, secrets, ``_target_`` allow-list, tracking store and cache) go through the
real CLI (marked slow), and ``docs/bad-input.md`` is checked to be their table; everything else
calls the API a run calls (``load_corpus``, ``load_evalset``, ``make_chunker``, ``runner.execute``)
in process, and hypothesis feeds random garbage lines and random field types to ``load_evalset``.
The five basic eval-set cases of ``ragexp evalset resolve`` live in ``test_bad_input_evalset.py``.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ragexp.chunking import CHUNKERS, make_chunker
from ragexp.data.evalset_schema import EVIDENCE_FIELDS, ITEM_FIELDS
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.datamodel import Corpus, Document
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache
from tests.helpers.bad_input_cases import (
    CASES,
    DOC_TEXT,
    GOOD_ITEM,
    REPO,
    CaseResult,
    item,
    render_table,
    run_case,
    write_evalset,
)
from tests.helpers.configs import compose_run_config


def stage_cache_files(cache_dir: Path) -> list[Path]:
    """Every file below the stage cache (published entries and leftover staging folders)."""
    return sorted(p for p in cache_dir.rglob("*") if p.is_file()) if cache_dir.exists() else []


def experiments_and_runs(db: Path) -> tuple[list[str], list]:
    """Experiment names and every run in the sqlite MLflow store at ``db`` (none when it was never created)."""
    if not db.exists():
        return [], []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiments = client.search_experiments()
    runs = client.search_runs([e.experiment_id for e in experiments]) if experiments else []
    return [e.name for e in experiments], runs


# --- through the real CLI: the cases of bad_input_cases, also the rows of docs/bad-input.md ---------

RESULTS: dict[str, CaseResult] = {}  # filled by the parametrized test, rendered by the doc test


def files_holding(root: Path, needle: str, skip: Path) -> list[str]:
    """Files below ``root`` (except below ``skip``, the case's own inputs) whose bytes contain ``needle``."""
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and skip not in p.parents and needle.encode() in p.read_bytes()]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path: Path) -> None:
    result = run_case(case, tmp_path / "case")
    RESULTS[case.id] = result
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and result.stdout == "", (result.stdout[-2000:], result.stderr[-2000:])
    assert len(result.lines) == 1 and re.match(r"ragexp \w+: error: ", result.lines[0]), result.stderr[-3000:]
    for part in case.expected:
        assert part in result.shown, (part, result.shown)
    folder = result.dir
    names, runs = experiments_and_runs(folder / "mlflow.db")
    assert runs == [] and set(names) <= {"Default"}, (names, runs)  # no run, no experiment row
    assert stage_cache_files(folder / "cache") == []
    assert not (folder / "outputs").exists() and not list(folder.rglob(".hydra")) and not list(folder.rglob("ragexp_results.json"))
    assert not (folder / "multirun").exists() and not (folder / "out").exists()  # no sweep folder, no multirun.yaml
    if case.secret:
        assert case.secret not in result.stdout + result.stderr
        assert files_holding(folder, case.secret, folder / "in") == []
    if case.id in ("target-not-allowed", "function-target", "hydra-in-config-path", "config-path-prefix", "config-name-outside"):
        assert (folder / "in" / "victim.txt").read_text(encoding="utf-8") == "precious\n"  # never opened for writing
    if case.id.startswith("log-"):
        assert not list(folder.glob("*candidates*"))  # no candidates file, not even a partial one
        assert not list(folder.rglob("*.partial"))
    if case.id == "log-out-is-the-log":
        assert (folder / "in" / "queries.txt").read_text(encoding="utf-8").count("retried?") == 2  # the log untouched
    if case.id == "compare-missing-store":
        assert not (folder / "missing.db").exists()  # a reading command creates no empty store


@pytest.mark.slow
def test_bad_input_table_in_docs_is_current(tmp_path: Path) -> None:
    """``docs/bad-input.md`` is the table of these very runs (cases not run above are run here)."""
    for case in CASES:
        if case.id not in RESULTS:
            RESULTS[case.id] = run_case(case, tmp_path / case.id)
    expected = render_table(RESULTS)
    assert (REPO / "docs" / "bad-input.md").read_text(encoding="utf-8") == expected, (
        "docs/bad-input.md is stale: python -m tests.helpers.bad_input_table > docs/bad-input.md"
    )


# --- the eval set through the loader a run calls -------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    keys = Document("keys", "Keys rotate without downtime.\n", "Keys")
    windows = Document("windows", "Saved on Windows:\r\nline ends are CRLF.\r\n", "Windows")
    umlaut = Document("umlaut", unicodedata.normalize("NFC", "Die Übermittlung wird wiederholt.\n"), "Umlaut")
    return Corpus([Document("webhooks", DOC_TEXT, "Webhooks"), keys, windows, umlaut])


def gold(doc_id: str = "webhooks", **fields) -> list[dict]:
    """A one-entry evidence list."""
    return [{"doc_id": doc_id, **fields}]


# case id -> (second item, field named, part of the message)
EVALSET_ITEM_CASES = {
    "query-int": (item(query=5), "query", "must be a string, got integer 5"),
    "tags-string": (item(tags="x"), "tags", 'must be an array, got string "x"'),
    "tag-int": (item(tags=["ok", 3]), "tags[1]", "must be a string, got integer 3"),
    "answerable-string": (item(answerable="no"), "answerable", "must be a boolean"),
    "evidence-object": (item(evidence={"doc_id": "keys"}), "evidence", "must be an array, got object"),
    "grade-float": (item(evidence=gold("keys", grade=1.5)), "evidence[0].grade", "must be an integer"),
    "end-bool": (item(evidence=gold(start=0, end=True)), "evidence[0].end", "must be an integer, got boolean"),
    "missing-id": (item(id=None), "id", "missing required field"),
    "missing-query": (item(query=None), "query", "missing required field"),
    "missing-doc-id": (item(evidence=[{"quote": "24 hours"}]), "evidence[0].doc_id", "missing required field"),
    "missing-end": (item(evidence=gold(start=3)), "evidence[0].end", "needs both start and end"),
    "missing-evidence": (item(evidence=None), "evidence", "an answerable item needs gold evidence"),
    "misspelt-field": (item(evidance=[]), "evidance", "did you mean 'evidence'?"),
    "duplicate-id": (item(id="q1"), "id", "duplicate item id 'q1' (first on line 1)"),
    "empty-query": (item(query="   "), "query", "the query is empty"),
    "quote-case": (item(evidence=gold(quote="24 HOURS")), "evidence[0].quote", "(it does occur ignoring case)"),
    "occurrence-past-end": (item(evidence=gold(quote="e", occurrence=99)), "evidence[0].quote", "occurrence 99 requested"),
    "empty-span": (item(evidence=gold(start=9, end=9)), "evidence[0]", "empty or reversed span"),
    "chunk-ids-no-chunking": (item(evidence=[], gold_chunk_ids=["webhooks#chunk_0"]), "gold_chunk_ids[0]", "add a header"),
    "not-a-chunk-id": (item(evidence=[], gold_chunk_ids=["webhooks-0"]), "gold_chunk_ids[0]", "DOC_ID#chunk_N"),
    "unanswerable-with-gold": (item(answerable=False), "evidence", '"answerable": false cannot have gold evidence'),
    "zero-width-query": (item(query="\u200b\u2060\ufeff "), "query", "the query has only invisible characters"),
    "quote-lf-doc-crlf": (item(evidence=gold("windows", quote="Windows:\nline")), "evidence[0].quote",
                          "(it occurs once line ends are normalised: the document has CRLF"),
    "quote-crlf-doc-lf": (item(evidence=gold(quote="24 hours.\r\n")), "evidence[0].quote",
                          "the quote has CRLF (\\r\\n) line ends and the document not"),
    "quote-nfd-doc-nfc": (item(evidence=gold("umlaut", quote=unicodedata.normalize("NFD", "Die Übermittlung"))),
                          "evidence[0].quote", "(it occurs after Unicode NFC normalisation"),
    "quote-whitespace": (item(evidence=gold(quote="retried  with")), "evidence[0].quote", "runs of whitespace are collapsed"),
    "quote-near-match": (item(evidence=gold(quote="retried with exponental backof")), "evidence[0].quote",
                         '(closest passage, 97% similar, at offset 22, line 1: "retried with exponential backo")'),
    "quote-no-near-match": (item(evidence=gold(quote="zebra crossing")), "evidence[0].quote",
                            "not found in document 'webhooks'; the document may have changed"),
}


@pytest.mark.parametrize(("bad_item", "field", "message"), EVALSET_ITEM_CASES.values(), ids=EVALSET_ITEM_CASES)
def test_bad_item_names_file_line_and_field(tmp_path: Path, corpus: Corpus, bad_item: dict, field: str, message: str):
    evalset = write_evalset(tmp_path / "evalset.jsonl", bad_item)
    with pytest.raises(RagexpInputError) as caught:
        load_evalset(evalset, corpus)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(evalset), 2, field)
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{evalset}:2: field '{field}': ") and "\n" not in str(caught.value)


def test_gold_chunk_id_past_the_last_chunk_resolves_nowhere(tmp_path: Path, corpus: Corpus) -> None:
    evalset = tmp_path / "evalset.jsonl"
    header = {"ragexp_evalset": 1, "chunking": {"name": "fixed", "size": 40, "overlap": 0}}
    evalset.write_text(
        json.dumps(header) + "\n" + json.dumps(item(evidence=[], gold_chunk_ids=["webhooks#chunk_7"])) + "\n", "utf-8"
    )
    with pytest.raises(RagexpInputError, match=r"chunk index 7 out of range: document 'webhooks' has 2 chunk") as caught:
        load_evalset(evalset, corpus)
    assert (caught.value.line, caught.value.field) == (2, "gold_chunk_ids[0]")


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        pytest.param("items:\n  - id: q1\n    query: [open\n", 4, None, "malformed YAML", id="unclosed-flow"),
        pytest.param("items:\n\t- id: q1\n", 2, None, "malformed YAML", id="tab-indent"),
        pytest.param("- id: q1\n", None, "items", "a YAML eval set is a mapping", id="list-root"),
        pytest.param("items:\n  - q1\n", 2, "items", "each item must be a mapping, got string", id="scalar-item"),
        pytest.param("items:\n  - !!python/object:os.system {}\n", 2, None, "could not determine a constructor", id="tag"),
        pytest.param("ragexp_evalset: 2\nitems: []\n", 1, "ragexp_evalset", "unsupported eval-set format", id="version"),
    ],
)
def test_bad_yaml_evalset_is_one_error(tmp_path: Path, corpus: Corpus, text: str, line, field, message: str) -> None:
    evalset = tmp_path / "evalset.yaml"
    evalset.write_text(text, encoding="utf-8")
    with pytest.raises(RagexpInputError) as caught:
        load_evalset(evalset, corpus)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(evalset), line, field)
    assert message in caught.value.message and "\n" not in str(caught.value)


def test_yaml_with_two_items_keys_is_an_input_error(tmp_path: Path, corpus: Corpus) -> None:
    evalset = tmp_path / "evalset.yaml"
    evalset.write_text("items: []\nitems:\n  - {id: q1, query: q, evidence: [{doc_id: keys}]}\n", encoding="utf-8")
    with pytest.raises(RagexpInputError):
        load_evalset(evalset, corpus)


def test_header_chunking_with_a_list_name_is_an_input_error(tmp_path: Path, corpus: Corpus) -> None:
    evalset = tmp_path / "evalset.jsonl"
    evalset.write_text(
        json.dumps({"ragexp_evalset": 1, "chunking": {"name": ["fixed"]}}) + "\n"
        + json.dumps(item(evidence=[], gold_chunk_ids=["keys#chunk_0"])) + "\n",
        "utf-8",
    )  # fmt: skip
    with pytest.raises(RagexpInputError):
        load_evalset(evalset, corpus)


def test_non_utf8_evalset_names_the_line(tmp_path: Path, corpus: Corpus) -> None:
    evalset = write_evalset(tmp_path / "evalset.jsonl", item(query="Caf\u00e9?"))
    evalset.write_bytes(evalset.read_bytes().replace("Caf\\u00e9".encode(), b"Caf\xe9"))
    with pytest.raises(RagexpInputError, match="not valid UTF-8 \\(byte 0xe9") as caught:
        load_evalset(evalset, corpus)
    assert (caught.value.file, caught.value.line) == (str(evalset), 2)


# --- the corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "line", "field", "message"),
    [
        pytest.param(b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "caf\xe9"}\n', 2, None, "not valid UTF-8", id="non-utf8"),
        pytest.param(b'{"_id": "a", "text": 5}\n', 1, "text", "must be a string, got int 5", id="text-int"),
        pytest.param(b'{"title": "t", "text": "x"}\n', 1, "_id", "missing document id", id="missing-id"),
        pytest.param(b'{"_id": "a"}\n', 1, "text", "missing required field 'text'", id="missing-text"),
        pytest.param(b'{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n', 2, "_id", "duplicate document id", id="dup-id"),
        pytest.param(b'["a", "b"]\n', 1, None, "expected a JSON object per line", id="array-line"),
        pytest.param(b'{"_id": "a", "text": "x", "text": "y"}\n', 1, "text", "the key appears twice", id="dup-key"),
        pytest.param(b'{"_id": "a", "text": "x", "metadata": {"k": 1, "k": 2}}\n', 1, "k", "the key appears twice",
                     id="dup-nested-key"),
        pytest.param(b"\n\n", None, None, "empty corpus: the file holds no documents", id="empty-jsonl"),
    ],
)
def test_bad_jsonl_corpus_is_one_error(tmp_path: Path, content: bytes, line, field, message: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    with pytest.raises(RagexpInputError) as caught:
        load_corpus(path)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), line, field)
    assert message in caught.value.message


def test_non_utf8_file_in_a_corpus_folder_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text(DOC_TEXT, encoding="utf-8")
    (tmp_path / "legacy.txt").write_bytes(b"line one\nSch\xf6n\n")
    with pytest.raises(RagexpInputError, match=r"byte 0xf6 at offset 12") as caught:
        load_corpus(tmp_path)
    assert (caught.value.file, caught.value.line) == (str(tmp_path / "legacy.txt"), 2)


# --- chunking and run config through runner.execute: fail before any stage is cached ------------


@pytest.mark.parametrize("name", [name for name in CHUNKERS if "overlap" in CHUNKERS[name].__dataclass_fields__])
@pytest.mark.parametrize("excess", [0, 1, 1000])
def test_overlap_not_below_size_names_chunking_overlap(name: str, excess: int) -> None:
    size_option = "max_size" if name == "markdown" else "size"
    with pytest.raises(RagexpInputError, match=rf"must be smaller than chunking\.{size_option} \(100\)") as caught:
        make_chunker({"name": name, size_option: 100, "overlap": 100 + excess})
    assert caught.value.field == "chunking.overlap"


CONFIG_ERROR_CASES = [
    pytest.param(("chunking.overlap=120",), "chunking.overlap", id="overlap-ge-size"),
    pytest.param(("eval.ks=[0]",), "eval.ks", id="k-zero"),
    pytest.param(("eval.ks=[5,-1]",), "eval.ks", id="k-negative"),
    pytest.param(("eval.ks=[]",), "eval.ks", id="no-k"),
    pytest.param(("eval.relevance.min_fraction=0",), "eval.relevance.min_fraction", id="min-fraction-zero"),
]


def execute_expecting_input_error(cfg) -> RagexpInputError:
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.jobs.job import run_job

    with pytest.raises(RagexpInputError) as caught:
        run_job(job_spec(cfg), output_dir=Path(cfg.cache_dir).parent / "out", log_to=None)
    return caught.value


@pytest.mark.parametrize(("overrides", "field"), CONFIG_ERROR_CASES)
def test_config_error_names_the_key_and_caches_nothing(tiny_dataset, tmp_path: Path, overrides, field: str) -> None:
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", *overrides)
    assert execute_expecting_input_error(cfg).field == field
    assert stage_cache_files(tmp_path / "cache") == []


@pytest.mark.parametrize("overrides", [("retrieval.k1=-1",), ("retrieval=dense", "embedding.model=nope")], ids=["k1", "model"])
def test_component_config_error_caches_nothing(tiny_dataset, tmp_path: Path, monkeypatch, overrides) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    execute_expecting_input_error(compose_run_config(tiny_dataset, tmp_path / "cache", *overrides))
    assert stage_cache_files(tmp_path / "cache") == []


def test_component_config_error_names_the_nested_key(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from ragexp.evaluation.pipeline import build_component

    node = OmegaConf.create({"name": "bm25", "_target_": "reference_pipelines.bm25.BM25Retriever", "k1": -1})
    with pytest.raises(RagexpInputError) as caught:
        build_component(node, "retrieval", StageCache(tmp_path))
    assert caught.value.field == "retrieval.k1"


def test_unknown_model_lists_the_short_names(tiny_dataset, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "retrieval=dense", "embedding.model=nope")
    error = execute_expecting_input_error(cfg)
    assert re.search(r"cannot load model 'nope'.*short name: minilm .*paraphrase-minilm-l3", error.message), error
    assert error.field == "embedding.model"  # the key the user set, not the retriever that interpolates it


# --- a huge document ----------------------------------------------------------------------------


def huge_document(size: int) -> str:
    """``size`` characters of Markdown (sections, paragraphs of random words) with one unique
    sentence near the end."""
    rng = random.Random(7)
    words = "delivery webhook retry backoff key scope quota refund invoice plan region token".split()
    parts, length, section = ["# Handbook\n\n"], 0, 0
    while length < size - 200:
        if rng.random() < 0.05:
            section += 1
            paragraph = f"## Section {section}\n\n"
        else:
            paragraph = " ".join(rng.choice(words) for _ in range(rng.randint(30, 120))) + ".\n\n"
        parts.append(paragraph)
        length += len(paragraph)
    parts.append("The zephyr vault opens with code 7741 only.\n")
    return "".join(parts)


@pytest.mark.slow
def test_five_megabyte_document_chunks_and_runs(tmp_path: Path, monkeypatch) -> None:
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.jobs.job import run_job

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    text = huge_document(5_000_000)
    (corpus_dir / "handbook.md").write_text(text, encoding="utf-8")
    evalset = tmp_path / "evalset.jsonl"
    evalset.write_text(json.dumps({"id": "vault", "query": "Which code opens the zephyr vault?",
                                   "evidence": [{"doc_id": "handbook", "quote": "code 7741"}]}) + "\n", "utf-8")
    corpus = load_corpus(corpus_dir)
    assert len(corpus["handbook"].text) >= 4_999_800

    chunks = make_chunker({"name": "sentence", "size": 512}).chunk(corpus["handbook"])
    assert all(chunk.text == text[chunk.start : chunk.end] and len(chunk.text) <= 512 for chunk in chunks)
    assert "".join(text[a.end : b.start] for a, b in zip(chunks, chunks[1:])).strip() == ""  # every word is in a chunk

    overrides = ("chunking.size=512", "chunking.overlap=64", "eval.ks=[1,10]")
    cfg = compose_run_config((corpus_dir, evalset), tmp_path / "cache", *overrides)
    output = run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None).output
    assert output.results.aggregates["n_chunks"] >= 5_000_000 / 512
    assert output.results.aggregates["hit_rate_at_10"] == 1.0


# --- hypothesis: random garbage must end in RagexpInputError, never another exception ------------

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=9)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
EVIDENCE = st.dictionaries(
    st.sampled_from([*EVIDENCE_FIELDS, "doc"]),
    JSON_VALUES | st.sampled_from(["webhooks", "keys", "24 hours", "e"]) | st.integers(-3, 80),
    max_size=5,
)
ITEMS = st.dictionaries(
    st.sampled_from([*ITEM_FIELDS, "evidance"]),
    JSON_VALUES | st.lists(EVIDENCE, max_size=3) | st.lists(st.text(max_size=5), max_size=3),
    max_size=8,
)
FUZZ = settings(max_examples=60, deadline=None)


@FUZZ
@given(lines=st.lists(st.binary(max_size=30) | JSON_VALUES.map(json.dumps).map(str.encode), min_size=1, max_size=4))
@example(lines=[b'{"\\n":null}'])  # a key that is a newline: the field named in the error line, escaped
def test_garbage_jsonl_lines_raise_input_errors_only(tmp_path_factory, corpus: Corpus, lines: list[bytes]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "evalset.jsonl"
    path.write_bytes(json.dumps(GOOD_ITEM).encode() + b"\n" + b"\n".join(lines) + b"\n")
    try:
        load_evalset(path, corpus)
    except RagexpInputError as err:
        assert err.file == str(path) and "\n" not in str(err)


@FUZZ
@given(obj=ITEMS)
def test_random_field_types_raise_input_errors_only_and_alike_in_jsonl_and_yaml(
    tmp_path_factory, corpus: Corpus, obj: dict
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    outcomes = []
    for path, text in [
        (folder / "evalset.jsonl", json.dumps(obj) + "\n"),
        (folder / "evalset.yaml", yaml.safe_dump({"items": [obj]}, allow_unicode=True)),
    ]:
        path.write_text(text, encoding="utf-8")
        try:
            outcomes.append(("ok", load_evalset(path, corpus).fingerprint()))
        except RagexpInputError as err:
            assert err.file == str(path) and "\n" not in str(err)
            named = re.split(r"[.\[]", err.field or "")[0]
            assert named in obj or named in ("id", "query", "doc_id", "evidence"), err
            outcomes.append(("error", err.field))  # messages may differ: safe_dump sorts mapping keys
    assert outcomes[0] == outcomes[1]
