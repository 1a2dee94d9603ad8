"""Bad input through the real ``ragexp`` CLI: the cases, how one is run, and the table of them.

Each :class:`CliCase` builds its input under ``<dir>/in`` and returns the ``ragexp`` arguments;
:func:`run_case` runs them in a subprocess with ``<dir>`` as working directory. The test
(``tests/test_bad_input_suite.py``) asserts one error line, exit code 2, the expected parts of the
line, that nothing was written, and that a case's secret is nowhere in the output or in any file
written below ``<dir>``. ``docs/bad-input.md`` is :func:`render_table` of these same runs
(regenerate: ``python -m tests.helpers.bad_input_table > docs/bad-input.md``; a test fails when it differs).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.system_server import Raw

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
DOC_TEXT = "Failed deliveries are retried with exponential backoff for 24 hours.\n"
GOOD_ITEM = {"id": "q1", "query": "How long are deliveries retried?", "evidence": [{"doc_id": "webhooks", "quote": "24 hours"}]}
#: A fake key in the shape of a real one; it must never be printed or written.
SECRET = "sk-ragexp-TEST-5f0c2a9e41b7d3c8e6a1"
# MLflow logs two INFO lines while it creates a fresh sqlite store; they are not ragexp's message.
MLFLOW_LOG_LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d INFO mlflow\.")


def write_evalset(path: Path, *items: dict | str) -> Path:
    """A JSONL eval set: ``GOOD_ITEM`` on line 1, then ``items`` (objects or raw lines)."""
    lines = [json.dumps(GOOD_ITEM), *(item if isinstance(item, str) else json.dumps(item) for item in items)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def item(**fields) -> dict:
    """A valid second item with ``fields`` replaced (``None`` removes a field)."""
    base = {"id": "q2", "query": "How long may a delivery take?",
            "evidence": [{"doc_id": "webhooks", "start": 0, "end": 17, "quote": "Failed deliveries"}]}
    return {key: value for key, value in (base | fields).items() if value is not None}


@dataclass
class Case:
    """What a case's ``make`` gets: the working directory, the inputs folder (a one-document
    corpus ``in/corpus`` is written), and an exit stack for clean-ups (an unmount)."""

    dir: Path
    stack: contextlib.ExitStack
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "ragexp.cli"])

    @property
    def inputs(self) -> Path:
        return self.dir / "in"

    @property
    def corpus(self) -> Path:
        return self.inputs / "corpus"

    def evalset(self, *items: dict | str) -> Path:
        return write_evalset(self.inputs / "evalset.jsonl", *items)

    def run(self, *overrides: str, evalset: Path | None = None, corpus: Path | None = None) -> list[str]:
        """``ragexp run`` on the case's data and a sqlite store in the working directory."""
        evalset = evalset or self.inputs / "evalset.jsonl"
        if not evalset.exists():
            self.evalset()
        return [
            "run", "dataset=evalset", f"dataset.corpus={corpus or self.corpus}", f"dataset.evalset={evalset}",
            f"tracking.uri=sqlite:///{self.dir / 'mlflow.db'}", "tracking.experiment=bad-input", "progress=false",
            "retrieval=bm25", "chunking=fixed", "chunking.size=120", "chunking.overlap=20", f"cache_dir={self.dir / 'cache'}",
            *overrides,
        ]  # fmt: skip


@dataclass(frozen=True)
class CliCase:
    id: str
    what: str  # the case as the table shows it
    make: Callable[[Case], list[str]]
    expected: tuple[str, ...]  # parts of the one error line ("<dir>" stands for the case's folder)
    secret: str | None = None


@dataclass(frozen=True)
class CaseResult:
    returncode: int
    stdout: str
    stderr: str
    dir: Path

    @property
    def lines(self) -> list[str]:
        """stderr without blank lines and MLflow's store-creation log lines."""
        return [line for line in self.stderr.splitlines() if line.strip() and not MLFLOW_LOG_LINE.match(line)]

    @property
    def shown(self) -> str:
        """The error line with the case's folder written ``<dir>`` and a local server's port
        ``<port>`` (as the table shows it)."""
        shown = (self.lines[0] if self.lines else "").replace(str(self.dir), "<dir>")
        return re.sub(r"http://127\.0\.0\.1:\d+/search", "http://127.0.0.1:<port>/search", shown)  # a test system's port


def run_case(case: CliCase, folder: Path) -> CaseResult:
    (folder / "in" / "corpus").mkdir(parents=True)
    (folder / "in" / "corpus" / "webhooks.md").write_text(DOC_TEXT, encoding="utf-8")
    with contextlib.ExitStack() as stack:
        context = Case(folder, stack)
        argv = case.make(context)
        proc = subprocess.run([*context.command, *argv], cwd=folder, env={**ENV, **context.env},
                              capture_output=True, text=True, timeout=600, check=False)
    return CaseResult(proc.returncode, proc.stdout, proc.stderr, folder)


# --- eval set and corpus --------------------------------------------------------------------------


def _malformed_jsonl(c: Case) -> list[str]:
    return c.run(evalset=c.evalset('{"id": "q2", "query": '))


def _malformed_yaml(c: Case) -> list[str]:
    evalset = c.inputs / "evalset.yaml"
    evalset.write_text("items:\n  - id: q1\n    query: [How long are\n", encoding="utf-8")
    return c.run(evalset=evalset)


def _span_start_is_a_string(c: Case) -> list[str]:
    return c.run(evalset=c.evalset(item(evidence=[{"doc_id": "webhooks", "start": "10", "end": 20}])))


def _non_utf8_corpus_file(c: Case) -> list[str]:
    (c.corpus / "legacy.txt").write_bytes("Caf\u00e9 menu\n".encode("latin-1"))
    return c.run()


def _empty_corpus(c: Case) -> list[str]:
    (c.corpus / "webhooks.md").unlink()
    return c.run()


def _duplicate_json_key(c: Case) -> list[str]:
    line = '{"id": "q2", "query": "How long are deliveries retried?", "query": "Ignored?", "evidence": [{"doc_id": "webhooks"}]}'
    return c.run(evalset=c.evalset(line))


def _duplicate_json_key_in_corpus(c: Case) -> list[str]:
    corpus = c.inputs / "corpus.jsonl"
    corpus.write_text('{"_id": "webhooks", "text": "Failed deliveries are retried.", "text": "Other text."}\n', "utf-8")
    return c.run(corpus=corpus)


def _scanned_pdf_strict(c: Case) -> list[str]:
    from tests.helpers.bad_documents import scanned_pdf

    scanned_pdf(c.corpus / "manual.pdf")
    return c.run("dataset.strict=true")


def _encrypted_pdf_strict(c: Case) -> list[str]:
    from tests.helpers.bad_documents import text_pdf

    text_pdf(c.corpus / "inverter.pdf", ["The inverter is covered for 10 years."], user_password="secret")
    return c.run("dataset.strict=true")


def _truncated_docx_strict(c: Case) -> list[str]:
    from tests.helpers.bad_documents import truncated_docx

    truncated_docx(c.corpus / "firmware.docx")
    return c.run("dataset.strict=true")


def _quote_in_a_skipped_pdf(c: Case) -> list[str]:
    from tests.helpers.bad_documents import scanned_pdf

    scanned_pdf(c.corpus / "manual.pdf")
    return c.run(evalset=c.evalset(item(evidence=[{"doc_id": "manual", "quote": "covered for 10 years"}])))


def _strict_not_a_boolean(c: Case) -> list[str]:
    return c.run("dataset.strict=maybe")


def _zero_width_query(c: Case) -> list[str]:
    return c.run(evalset=c.evalset(item(query="\u200b\u200d\ufeff")))


def _quote_with_crlf(c: Case) -> list[str]:
    (c.corpus / "webhooks.md").write_bytes(b"Failed deliveries are retried\r\nwith exponential backoff for 24 hours.\r\n")
    return c.run(evalset=c.evalset(item(evidence=[{"doc_id": "webhooks", "quote": "retried\nwith exponential"}])))


def _quote_in_nfd(c: Case) -> list[str]:
    text = DOC_TEXT + unicodedata.normalize("NFC", "Die Übermittlung wird 24 Stunden lang wiederholt.\n")
    (c.corpus / "webhooks.md").write_text(text, encoding="utf-8")
    quote = unicodedata.normalize("NFD", "Die Übermittlung")  # U with a combining diaeresis
    return c.run(evalset=c.evalset(item(evidence=[{"doc_id": "webhooks", "quote": quote}])))


def _quote_near_match(c: Case) -> list[str]:
    return c.run(evalset=c.evalset(item(evidence=[{"doc_id": "webhooks", "quote": "retried with exponental backof"}])))


def _overlap_not_below_size(c: Case) -> list[str]:
    return c.run("chunking.overlap=120")


def _unknown_model(c: Case) -> list[str]:
    return c.run("retrieval=dense", "embedding.model=nope")


def _int8_on_torch(c: Case) -> list[str]:
    return c.run("retrieval=dense", "embedding.backend=torch", "embedding.precision=int8")


# --- config and overrides ---------------------------------------------------------------------------


def _typo_in_a_key(c: Case) -> list[str]:
    return c.run("chunking.sise=256")


def _unknown_group_option(c: Case) -> list[str]:
    return c.run("embedding=nope")


def _wrong_type(c: Case) -> list[str]:
    return c.run("eval.ks=[a]")


def _bad_override_syntax(c: Case) -> list[str]:
    return c.run("eval.ks=[1,")


def _target_outside_the_allow_list(c: Case) -> list[str]:
    victim = c.inputs / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    return c.run("retrieval._target_=logging.FileHandler", f"+retrieval.filename={victim}", "+retrieval.mode=w")


def _function_in_a_shipped_package(c: Case) -> list[str]:
    victim = c.inputs / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    return c.run("retrieval._target_=ragexp.judging.calibration.labels.write_labels", f"+retrieval.path={victim}")


def _partial_target(c: Case) -> list[str]:
    return c.run("+retrieval._partial_=true")


def _bootstrap_resamples_negative(c: Case) -> list[str]:
    return c.run("eval.bootstrap_resamples=-1")


def _k1_nan(c: Case) -> list[str]:
    return c.run("retrieval.k1=nan")


def _threshold(value: str) -> Callable[[Case], list[str]]:
    return lambda c: c.run("generator=extractive", f"judge.threshold={value}")


def _calibration_file(**fields) -> Callable[[Case], list[str]]:
    def make(c: Case) -> list[str]:
        from ragexp.judging.calibration.record import FORMAT
        from ragexp.judging.judges import LexicalJudge

        record = {"format": FORMAT, "judge": LexicalJudge().identity(), "threshold": 0.8, "labels": {}, "n": 40,
                  "label_counts": {"supported": 20, "unsupported": 20}, "n_unscored": 0, "n_unlabelled": 0,
                  "estimate": "5-fold cross-validation", "folds": 5, "seed": 0, "accuracy": 0.8, "kappa": 0.6}
        text = json.dumps(record | fields, allow_nan=True)
        path = c.inputs / "calibration.json"
        path.write_text(text, encoding="utf-8")
        return c.run("generator=extractive", f"judge.calibration={path}")
    return make


def _hydra_callback_in_a_hand_given_config(c: Case) -> list[str]:
    victim = c.inputs / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    folder = c.inputs / "handed"
    folder.mkdir()
    (folder / "resolved.yaml").write_text(
        "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n"
        f"hydra:\n  callbacks:\n    evil: {{_target_: logging.FileHandler, filename: {victim}, mode: w}}\n",
        encoding="utf-8")
    return ["run", "--config-path", str(folder), "--config-name", "resolved"]


def _endpoint_not_named_here(c: Case) -> list[str]:
    """A whole saved config (as ``resolved.yaml``) whose generator was re-pointed."""
    from omegaconf import OmegaConf

    from ragexp.config.compose import compose_config

    folder = c.inputs / "handed"
    folder.mkdir()
    config = compose_config([*c.run("generator=openai", "generator.model.base_url=http://203.0.113.7/v1",
                                    "generator.model.api_key_env=AWS_SECRET_ACCESS_KEY")[1:]])
    (folder / "resolved.yaml").write_text(OmegaConf.to_yaml(config, resolve=True), encoding="utf-8")
    return ["run", "--config-path", str(folder), "--config-name", "resolved"]


def _sweep_with_a_secret_in_a_config_file(c: Case) -> list[str]:
    experiment = c.inputs / "conf" / "experiment"
    experiment.mkdir(parents=True)
    (experiment / "leaky.yaml").write_text(f"# @package _global_\ngenerator:\n  name: x\n  note: Bearer {SECRET[3:]}\n",
                                           encoding="utf-8")
    return ["run", "-m", "--config-dir", str(c.inputs / "conf"), *c.run("experiment=leaky", "chunking.size=100,120")[1:]]


def _sweep_with_overlap_above_size(c: Case) -> list[str]:
    return ["run", "-m", *c.run("chunking.overlap=5000", "retrieval.k1=1.2,1.5")[1:]]


def _sweep_without_an_eval_set(c: Case) -> list[str]:
    args = [a for a in c.run("retrieval.k1=1.2,1.5")[1:] if not a.startswith("dataset.evalset=")]
    return ["run", "-m", *args]


def _secret_from_env_in_the_run_dir(c: Case) -> list[str]:
    c.env["LEAKY"] = SECRET
    return c.run("hydra.run.dir=out/${oc.env:LEAKY}")


def _key_as_a_config_key(c: Case) -> list[str]:
    return c.run(f"+dataset.{SECRET}=1")


def _api_key_in_a_url_query(c: Case) -> list[str]:
    return c.run("generator=openai", "generator.model.base_url=http://127.0.0.1:9/v1?key=plainvalue")


def _read_only_store(c: Case) -> list[str]:
    """An existing store on a read-only file system (a read-only bind mount when this process may
    mount, else the store's folder and file made read-only)."""
    from ragexp.tracking import store

    folder = c.inputs / "ro"
    folder.mkdir()
    store.connect(f"sqlite:///{folder / 'mlflow.db'}")
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, check=False)
    if mounted.returncode == 0:
        c.stack.callback(subprocess.run, ["umount", "-l", str(folder)], check=False)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True, check=True)
    else:
        (folder / "mlflow.db").chmod(0o444)
        folder.chmod(0o555)
        c.stack.callback(folder.chmod, 0o755)
    return c.run(f"tracking.uri=sqlite:///{folder / 'mlflow.db'}")


def _doc_id_with_a_newline(c: Case) -> list[str]:
    results = c.inputs / "run_results.json"  # the suite checks that no run wrote a ragexp_results.json
    results.write_text(json.dumps({"format": "ragexp-results/1", "meta": {}, "aggregates": {}, "per_query": [
        {"query_id": "q1", "ranking": [["webhooks\nq2 Q0 forged 1 99 ragexp", 1.0]], "relevant": {}}]}), encoding="utf-8")
    return ["export", str(results), "--run", str(c.dir / "run.trec"), "--qrels", str(c.dir / "qrels.trec")]


# --- secrets ----------------------------------------------------------------------------------------


def _key_in_api_key_env(c: Case) -> list[str]:
    return c.run("generator=openai", f"generator.model.api_key_env={SECRET}")


def _credentials_in_base_url(c: Case) -> list[str]:
    return c.run("generator=openai", f"generator.model.base_url=http://user:{SECRET}@127.0.0.1:9/v1")


def _new_api_key_field(c: Case) -> list[str]:
    return c.run("generator=openai", f"+generator.model.API_KEY={SECRET}")


def _api_key_field_without_plus(c: Case) -> list[str]:
    return c.run("generator=openai", f"generator.model.API_KEY={SECRET}")


def _bearer_token_value(c: Case) -> list[str]:
    return c.run(f"+tracking.note=Bearer {SECRET[3:]}")


def _key_through_env_interpolation(c: Case) -> list[str]:
    c.env["LEAKY_BASE_URL"] = f"http://user:{SECRET}@127.0.0.1:9/v1"
    return c.run("generator=openai", "generator.model.base_url=${oc.env:LEAKY_BASE_URL}")


def _key_in_a_config_file(c: Case) -> list[str]:
    experiment = c.inputs / "conf" / "experiment"
    experiment.mkdir(parents=True)
    (experiment / "leaky.yaml").write_text(
        f"# @package _global_\ndefaults:\n  - override /generator: openai\ngenerator:\n  model:\n    api_key_env: {SECRET}\n",
        encoding="utf-8",
    )
    return ["run", "--config-dir", str(c.inputs / "conf"), *c.run("experiment=leaky")[1:]]


# --- tracking store and cache -----------------------------------------------------------------------


def _postgres_without_driver(c: Case) -> list[str]:
    return c.run("tracking.uri=postgresql://ragexp@127.0.0.1:9/mlflow")


def _sqlite_under_a_file(c: Case) -> list[str]:
    return c.run("tracking.uri=sqlite:////etc/passwd/m.db")


def _file_uri(c: Case) -> list[str]:
    return c.run(f"tracking.uri=file://{c.dir / 'mlruns'}")


def _plain_path_uri(c: Case) -> list[str]:
    return c.run(f"tracking.uri={c.dir / 'mlruns'}")


def _credentials_in_tracking_uri(c: Case) -> list[str]:
    return c.run(f"tracking.uri=postgresql://ragexp:{SECRET}@127.0.0.1:9/mlflow")


def _compare_without_a_store(c: Case) -> list[str]:
    return ["compare", "--tracking-uri", f"sqlite:///{c.dir / 'missing.db'}"]


def _per_query_with_one_run(c: Case) -> list[str]:
    return ["compare", "--per-query", "0" * 32, "--tracking-uri", f"sqlite:///{c.dir / 'missing.db'}"]


def _per_query_with_the_same_run_twice(c: Case) -> list[str]:
    return ["compare", "--per-query", "0" * 32, "0" * 32, "--tracking-uri", f"sqlite:///{c.dir / 'missing.db'}"]


# --- query logs (ragexp evalset queries) -------------------------------------------------------------


def _queries(c: Case, log: Path, *options: str) -> list[str]:
    return ["evalset", "queries", str(log), "--sample", "5", "--out", str(c.dir / "candidates.jsonl"), *options]


def _binary_log(c: Case) -> list[str]:
    log = c.inputs / "app.log"
    log.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    return _queries(c, log)


def _empty_log(c: Case) -> list[str]:
    log = c.inputs / "queries.txt"
    log.write_bytes(b"")
    return _queries(c, log)


def _log_without_the_field(c: Case) -> list[str]:
    log = c.inputs / "search.jsonl"
    log.write_text('{"ts": 1, "q": "How long are deliveries retried?"}\n', encoding="utf-8")
    return _queries(c, log)


def _truncated_gzip_log(c: Case) -> list[str]:
    import gzip

    log = c.inputs / "queries.txt.gz"
    log.write_bytes(gzip.compress("".join(f"How long are deliveries retried, case {i}?\n" for i in range(5000)).encode())[:400])
    return _queries(c, log)


def _log_of_one_huge_line(c: Case) -> list[str]:
    log = c.inputs / "queries.txt"
    log.write_text("x" * 1_000_000 + "\n", encoding="utf-8")
    return _queries(c, log)


def _out_is_the_log(c: Case) -> list[str]:
    log = c.inputs / "queries.txt"
    log.write_text("How long are deliveries retried?\nHow long are deliveries retried?\n", encoding="utf-8")
    return ["evalset", "queries", str(log), "--sample", "5", "--out", str(log)]


def _out_is_a_folder(c: Case) -> list[str]:
    log = c.inputs / "queries.txt"
    log.write_text("How long are deliveries retried?\n", encoding="utf-8")
    return ["evalset", "queries", str(log), "--sample", "5", "--out", str(c.inputs)]


# --- the annotation page (ragexp evalset annotate) ------------------------------------------------------

BUSY_PORT = 59123  # fixed, so the table reads the same on every run


def _annotate(c: Case, evalset: Path, *options: str) -> list[str]:
    return ["evalset", "annotate", str(evalset), "--corpus", str(c.corpus), *options]


def _annotate_busy_port(c: Case) -> list[str]:
    import socket

    taken = c.stack.enter_context(socket.socket())
    with contextlib.suppress(OSError):  # already taken by someone else: busy all the same
        taken.bind(("127.0.0.1", BUSY_PORT))
        taken.listen()
    return _annotate(c, c.dir / "built.jsonl", "--port", str(BUSY_PORT))


def _annotate_failures_without_run(c: Case) -> list[str]:
    return _annotate(c, c.dir / "built.jsonl", "--failures", "--queue-only")


def _annotate_yaml(c: Case) -> list[str]:
    evalset = c.inputs / "evalset.yaml"
    evalset.write_text("items: []\n", encoding="utf-8")
    return _annotate(c, evalset, "--queue-only")


def _annotate_broken_queue(c: Case) -> list[str]:
    (c.inputs / "built.annotation.json").write_text('{"ragexp_annotation": 1, "entries": [', encoding="utf-8")
    return _annotate(c, c.inputs / "built.jsonl", "--queue-only")


def _annotate_queries_not_jsonl(c: Case) -> list[str]:
    queries = c.inputs / "questions.txt"  # a plain query log, not the candidates file made from it
    queries.write_text("How long are deliveries retried?\n", encoding="utf-8")
    return _annotate(c, c.dir / "built.jsonl", "--queries", str(queries), "--queue-only")


def _draft_out_is_a_folder(c: Case) -> list[str]:
    return ["evalset", "draft", "--corpus", str(c.corpus), "--per-category", "1", "--out", str(c.inputs)]


SIMULATED_ENOSPC = """
import errno, os, sys
cache, rename = os.environ["RAGEXP_FULL_DISK_UNDER"], os.rename
def full(src, dst, *args, **kwargs):
    if str(dst).startswith(cache):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
    return rename(src, dst, *args, **kwargs)
os.rename = full
from ragexp.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _full_disk_under_cache_dir(c: Case) -> list[str]:
    """A 4 KiB tmpfs mounted as cache_dir when this process may mount one (root), else the same
    ENOSPC raised by a patched ``os.rename`` for paths under cache_dir (the message is the same)."""
    cache = c.dir / "cache"
    cache.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(cache)], capture_output=True, check=False)
    if mounted.returncode == 0:
        c.stack.callback(subprocess.run, ["umount", "-l", str(cache)], check=False)
    else:
        c.command = [sys.executable, "-c", SIMULATED_ENOSPC]
        c.env["RAGEXP_FULL_DISK_UNDER"] = str(cache)
    return c.run()


# --- judge review (ragexp judge review) ---------------------------------------------------------------

#: A fixed port, so the busy-port message is the same on every run (taken by the case itself).
REVIEW_BUSY_PORT = 47391


def _review(c: Case, run_id: str, *, port: int = 0, store: Path | None = None) -> list[str]:
    return ["judge", "review", run_id, "-n", "5", "--labels", str(c.dir / "labels.csv"), "--port", str(port),
            "--tracking-uri", f"sqlite:///{store or c.inputs / 'store.db'}"]


def _review_unknown_run(c: Case) -> list[str]:
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{c.inputs / 'store.db'}").search_experiments(max_results=1)  # creates the store
    return _review(c, "0" * 32)


def _review_run_without_claims(c: Case) -> list[str]:
    """A logged retrieval-only run (per-query rows, no judged claims), in a store outside the
    case folder (the suite checks that folder holds no results file and no run)."""
    import tempfile

    from mlflow.tracking import MlflowClient

    from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults

    outside = Path(c.stack.enter_context(tempfile.TemporaryDirectory(prefix="ragexp-review-case-")))
    client = MlflowClient(f"sqlite:///{outside / 'store.db'}")
    experiment = client.create_experiment("retrieval", artifact_location=(outside / "artifacts").as_uri())
    run = client.create_run(experiment, run_name="retrieval-only")
    results = RunResults(meta={}, aggregates={"mrr": 1.0}, per_query=[QueryResult("q1", GOOD_ITEM["query"])])
    client.log_artifact(run.info.run_id, str(results.save(outside / ARTIFACT_NAME)))
    client.set_terminated(run.info.run_id)
    return _review(c, run.info.run_id, store=outside / "store.db")


def _review_busy_port(c: Case) -> list[str]:
    import socket

    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.stack.callback(holder.close)
    with contextlib.suppress(OSError):  # already taken by another program: busy all the same
        holder.bind(("127.0.0.1", REVIEW_BUSY_PORT))
        holder.listen(1)
    return _review(c, "0" * 32, port=REVIEW_BUSY_PORT)



# --- issue #30: resources and shapes that crashed or hung -------------------------------------------------

NESTED_2000 = "[" * 2000 + "]" * 2000


def _evalset_line_nested_2000_deep(c: Case) -> list[str]:
    return c.run(evalset=c.evalset('{"id": "q2", "query": "x", "evidence": ' + NESTED_2000 + "}"))


def _log_line_nested_2000_deep(c: Case) -> list[str]:
    log = c.inputs / "search.jsonl"
    log.write_text('{"query": "a"}\n{"query": ' + NESTED_2000 + "}\n", encoding="utf-8")
    return _queries(c, log)


def _base_url_not_a_host(c: Case) -> list[str]:
    return c.run("generator=openai", "generator.model.base_url='https://[::ffff:evil]/v1'")


def _draft_with_a_folder_as_model(c: Case) -> list[str]:
    return ["evalset", "draft", "--corpus", str(c.corpus), "--per-category", "1", "--model", "/usr/lib",
            "--out", str(c.dir / "drafts.jsonl")]


def _review_labels_a_folder(c: Case) -> list[str]:
    (c.inputs / "labels").mkdir()
    return ["judge", "review", "0" * 32, "-n", "5", "--labels", str(c.inputs / "labels"), "--port", "0",
            "--tracking-uri", f"sqlite:///{c.inputs / 'store.db'}"]


def _calibration_names(target: Callable[[Case], str]) -> Callable[[Case], list[str]]:
    return lambda c: c.run("generator=extractive", f"judge.calibration={target(c)}")


def _fifo(c: Case) -> str:
    os.mkfifo(c.inputs / "calibration.fifo")
    return str(c.inputs / "calibration.fifo")


def _sparse_markdown(c: Case) -> list[str]:
    with open(c.corpus / "huge.md", "wb") as handle:  # 1.5 GB of nothing: no disk used
        handle.truncate(1500 * 2**20)
    return c.run()


def _docx_bomb(c: Case) -> list[str]:
    import zipfile

    with zipfile.ZipFile(c.corpus / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b" " * (200 * 2**20))
    return c.run("dataset.strict=true")


def _alias_bomb_in_a_handed_config(c: Case) -> list[str]:
    folder = c.inputs / "handed"
    folder.mkdir()
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    (folder / "resolved.yaml").write_text("tracking:\n  note:\n" + "".join(f"    {line}\n" for line in levels),
                                          encoding="utf-8")
    return ["run", "--config-path", str(folder), "--config-name", "resolved"]


# --- issue #40: the command line, URLs, parse bounds, numbers ----------------------------------------


def _handed_callback_folder(c: Case) -> Path:
    folder = c.inputs / "handed"
    folder.mkdir()
    (folder / "resolved.yaml").write_text(
        "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n"
        f"hydra:\n  callbacks:\n    evil: {{_target_: logging.FileHandler, filename: {c.inputs / 'victim.txt'}, mode: w}}\n",
        encoding="utf-8")
    (c.inputs / "victim.txt").write_text("precious\n", encoding="utf-8")
    return folder


def _config_path_prefix(c: Case) -> list[str]:
    return ["run", "--config-pa", str(_handed_callback_folder(c)), "--config-name", "resolved"]


def _experimental_rerun(c: Case) -> list[str]:
    (c.inputs / "config.pickle").write_bytes(b"not read")
    return ["run", "--experimental-rerun", str(c.inputs / "config.pickle")]


def _config_name_outside(c: Case) -> list[str]:
    return ["run", "--config-path", str(_handed_callback_folder(c)), "--config-name", "../handed/resolved"]


def _stored_int_over_digit_limit(c: Case) -> list[str]:
    folder = c.inputs / "handed"
    folder.mkdir()
    (folder / "resolved.yaml").write_text("retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n"
                                          "eval:\n  bootstrap_resamples: " + "1" * 5000 + "\n", encoding="utf-8")
    return ["run", "--config-path", str(folder), "--config-name", "resolved"]


def _results_of_empty_objects(c: Case) -> list[str]:
    from tests.helpers.hostile_files import results_empty_objects

    results = results_empty_objects(c.inputs / "run_results.json", 4_000_010)
    return ["export", str(results), "--run", str(c.dir / "run.trec"), "--qrels", str(c.dir / "qrels.trec")]


def _yaml_evalset_of_many_nodes(c: Case) -> list[str]:
    from tests.helpers.hostile_files import yaml_many_nodes

    return c.run(evalset=yaml_many_nodes(c.inputs / "evalset.yaml", 250_000))


def _gzip_bomb_log(c: Case) -> list[str]:
    from tests.helpers.hostile_files import gzip_bomb

    return _queries(c, gzip_bomb(c.inputs / "search.log.gz", 300 * 1024 * 1024))


def _model_folder_not_a_model(c: Case) -> list[str]:
    return c.run("retrieval=dense", "embedding.model=/usr/lib")


def _tracking_uri_an_existing_file(c: Case) -> list[str]:
    (c.inputs / "__init__.py").write_text("", encoding="utf-8")
    return [arg if not arg.startswith("tracking.uri=") else f"tracking.uri=sqlite:///{c.inputs / '__init__.py'}"
            for arg in c.run()]

# --- a black-box system (system=http / python / recorded) -------------------------------------------

SYSTEM_PASSAGE = {"text": "Failed deliveries are retried with exponential backoff for 24 hours.", "doc_id": "webhooks"}


def _system_http(reply, *overrides: str, allow: bool = True) -> Callable[[Case], list[str]]:
    """``ragexp run system=http`` against a real server on 127.0.0.1 that answers every query with ``reply``."""
    def make(c: Case) -> list[str]:
        from tests.helpers.system_server import serve

        server = c.stack.enter_context(serve(lambda body: reply))
        if allow:
            c.env["RAGEXP_ALLOWED_ENDPOINTS"] = server.url
        return c.run("system=http", f"system.url={server.url}", "system.max_retries=0", *overrides)
    return make


def _system_endpoint_down(c: Case) -> list[str]:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/search"
    c.env["RAGEXP_ALLOWED_ENDPOINTS"] = url
    return c.run("system=http", f"system.url={url}", "system.max_retries=0")


def _system_raising_callable(c: Case) -> list[str]:
    package = c.inputs / "site"
    (package / "team_rag-0.1.dist-info").mkdir(parents=True)
    (package / "team_rag.py").write_text("class Pipeline:\n    def __call__(self, query):\n"
                                         "        raise ConnectionError('vector store unreachable')\n", encoding="utf-8")
    (package / "team_rag-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: team-rag\nVersion: 0.1\n",
                                                                 encoding="utf-8")
    (package / "team_rag-0.1.dist-info" / "entry_points.txt").write_text(
        "[ragexp.components]\nteam = team_rag:Pipeline\n", encoding="utf-8")
    c.env["PYTHONPATH"] = os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")])
    return c.run("system=python", "system.target=team_rag.Pipeline")


def _system_recorded_missing_query(c: Case) -> list[str]:
    recorded = c.inputs / "outputs.jsonl"
    recorded.write_text(json.dumps({"query_id": "q1", "passages": [SYSTEM_PASSAGE]}) + "\n", encoding="utf-8")
    return c.run("system=recorded", f"system.path={recorded}", evalset=c.evalset(item()))


def _system_recorded_not_json(c: Case) -> list[str]:
    recorded = c.inputs / "outputs.jsonl"
    recorded.write_text('{"query_id": "q1", "passages": [\n', encoding="utf-8")
    return c.run("system=recorded", f"system.path={recorded}")


def _system_option_typo(c: Case) -> list[str]:
    return c.run("system=http", "system.url=http://127.0.0.1:9/search", "+system.timout_s=5")


def _system_with_a_generator(c: Case) -> list[str]:
    return c.run("system=recorded", f"system.path={c.corpus / 'webhooks.md'}", "generator=extractive")


CASES = [
    CliCase("malformed-jsonl", "eval set: a JSONL line cut off", _malformed_jsonl, ("<dir>/in/evalset.jsonl:2: ", "malformed JSON")),
    CliCase("malformed-yaml", "eval set: malformed YAML", _malformed_yaml, ("<dir>/in/evalset.yaml:", "malformed YAML")),
    CliCase("span-start-string", 'eval set: `"start": "10"`', _span_start_is_a_string,
            ("<dir>/in/evalset.jsonl:2: field 'evidence[0].start': must be an integer", '"10"')),
    CliCase("duplicate-json-key", "eval set: a key twice in one JSON line", _duplicate_json_key,
            ("<dir>/in/evalset.jsonl:2: field 'query': the key appears twice",)),
    CliCase("duplicate-json-key-corpus", "corpus JSONL: a key twice in one line", _duplicate_json_key_in_corpus,
            ("<dir>/in/corpus.jsonl:1: field 'text': the key appears twice",)),
    CliCase("zero-width-query", "eval set: a query of zero-width characters only", _zero_width_query,
            ("<dir>/in/evalset.jsonl:2: field 'query': the query has only invisible characters",)),
    CliCase("quote-crlf", "eval set: quote with LF, document with CRLF line ends", _quote_with_crlf,
            ("field 'evidence[0].quote'", "the document has CRLF")),
    CliCase("quote-nfd", "eval set: quote in NFD, document in NFC", _quote_in_nfd,
            ("field 'evidence[0].quote'", "NFC normalisation")),
    CliCase("quote-near-match", "eval set: quote with typos", _quote_near_match,
            ("field 'evidence[0].quote'", "closest passage", "at offset 22, line 1")),
    CliCase("non-utf8-corpus", "corpus: a Latin-1 file", _non_utf8_corpus_file,
            ("<dir>/in/corpus/legacy.txt:1: ", "not valid UTF-8", "0xe9")),
    CliCase("empty-corpus", "corpus: no documents", _empty_corpus, ("<dir>/in/corpus: ", "empty corpus")),
    CliCase("scanned-pdf-strict", "corpus: a scanned (image-only) PDF, `dataset.strict=true`", _scanned_pdf_strict,
            ("<dir>/in/corpus/manual.pdf: ", "scanned PDF", "no text layer", "dataset.strict=true")),
    CliCase("encrypted-pdf-strict", "corpus: a password-protected PDF, `dataset.strict=true`", _encrypted_pdf_strict,
            ("<dir>/in/corpus/inverter.pdf: ", "encrypted PDF", "password")),
    CliCase("truncated-docx-strict", "corpus: a truncated DOCX, `dataset.strict=true`", _truncated_docx_strict,
            ("<dir>/in/corpus/firmware.docx: ", "truncated or damaged")),
    CliCase("quote-in-skipped-pdf", "eval set: a quote in a scanned PDF (skipped, not strict)", _quote_in_a_skipped_pdf,
            ("field 'evidence[0].doc_id'", "manual.pdf was skipped", "scanned PDF")),
    CliCase("strict-not-boolean", "`dataset.strict=maybe`", _strict_not_a_boolean,
            ("field 'dataset.strict': must be true or false",)),
    CliCase("overlap-ge-size", "`chunking.overlap=120` with size 120", _overlap_not_below_size,
            ("field 'chunking.overlap'", "(120)")),
    CliCase("unknown-model", "`embedding.model=nope`", _unknown_model,
            ("field 'embedding.model'", "'nope'", "minilm", "paraphrase-minilm-l3")),
    CliCase("int8-on-torch", "`embedding.backend=torch embedding.precision=int8` (int8 is ONNX only)", _int8_on_torch,
            ("field 'embedding.precision'", "needs backend onnx")),
    CliCase("typo-in-key", "`chunking.sise=256` (typo)", _typo_in_a_key,
            ("field 'chunking.sise': unknown key; did you mean 'size'?",)),
    CliCase("unknown-option", "`embedding=nope`", _unknown_group_option,
            ("Could not find 'embedding/nope'", "minilm", "paraphrase_minilm_l3")),
    CliCase("wrong-type", "`eval.ks=[a]`", _wrong_type, ("field 'eval.ks[0]'", "could not be converted to Integer")),
    CliCase("override-syntax", "`eval.ks=[1,`", _bad_override_syntax, ("bad override syntax",)),
    CliCase("target-not-allowed", "`retrieval._target_=logging.FileHandler` (+ filename, mode=w)",
            _target_outside_the_allow_list,
            ("field 'retrieval._target_'", "'logging.FileHandler' is not a registered component class", "ragexp.components")),
    CliCase("function-target", "`retrieval._target_=ragexp.judging.calibration.labels.write_labels` (a function)",
            _function_in_a_shipped_package, ("field 'retrieval._target_'", "not a registered component class")),
    CliCase("partial-target", "`+retrieval._partial_=true`", _partial_target,
            ("field 'retrieval._partial_'", "_partial_ is not allowed")),
    CliCase("hydra-in-config-path", "`--config-path DIR`, the file sets `hydra.callbacks` (a FileHandler)",
            _hydra_callback_in_a_hand_given_config,
            ("<dir>/in/handed/resolved.yaml: field 'hydra.callbacks.evil._target_'", "come from this machine")),
    CliCase("endpoint-not-named", "`--config-path DIR`, the file sends `$AWS_SECRET_ACCESS_KEY` to another host",
            _endpoint_not_named_here,
            ("field 'generator.model.base_url'", "$AWS_SECRET_ACCESS_KEY", "http://203.0.113.7/v1", "--allow-endpoint")),
    CliCase("bootstrap-negative", "`eval.bootstrap_resamples=-1`", _bootstrap_resamples_negative,
            ("field 'eval.bootstrap_resamples'", "positive integer")),
    CliCase("k1-nan", "`retrieval.k1=nan`", _k1_nan, ("field 'retrieval.k1'", "finite number")),
    CliCase("threshold-nan", "`judge.threshold=nan`", _threshold("nan"), ("field 'judge.threshold'", "finite number")),
    CliCase("threshold-negative", "`judge.threshold=-5` (lexical scores lie in [0, 1])", _threshold("-5"),
            ("field 'judge.threshold'", "in [0, 1]", "-5")),
    CliCase("threshold-string", "`judge.threshold='0.5'` (a string)", _threshold("'0.5'"),
            ("field 'judge.threshold'", "a number", "'0.5'")),
    CliCase("calibration-threshold-nan", "calibration file: `\"threshold\": NaN`", _calibration_file(threshold=float("nan")),
            ("<dir>/in/calibration.json: field 'judge.threshold'", "finite number")),
    CliCase("calibration-threshold-infinity", "calibration file: `\"threshold\": Infinity`",
            _calibration_file(threshold=float("inf")), ("<dir>/in/calibration.json: ", "Infinity is not a number")),
    CliCase("calibration-threshold-string", "calibration file: `\"threshold\": \"0.5\"`", _calibration_file(threshold="0.5"),
            ("<dir>/in/calibration.json: field 'judge.threshold'", "'0.5'")),
    CliCase("calibration-kappa-nan", "calibration file: `\"kappa\": NaN`", _calibration_file(kappa=float("nan")),
            ("<dir>/in/calibration.json: field 'judge.kappa'", "finite number in [-1, 1]")),
    CliCase("sweep-secret-in-config-file", "`-m --config-dir DIR experiment=leaky`, the file holds `Bearer ...`",
            _sweep_with_a_secret_in_a_config_file, ("field 'generator.note'", "a bearer token (not shown)"), SECRET[3:]),
    CliCase("sweep-overlap-above-size", "`-m chunking.overlap=5000 retrieval.k1=1.2,1.5`", _sweep_with_overlap_above_size,
            ("field 'chunking.overlap'", "5000")),
    CliCase("sweep-no-eval-set", "`-m dataset=evalset` without `dataset.evalset`", _sweep_without_an_eval_set,
            ("field 'dataset.evalset'", "is required")),
    CliCase("key-via-env-in-run-dir", "`hydra.run.dir=out/${oc.env:LEAKY}` holding `sk-...`", _secret_from_env_in_the_run_dir,
            ("field 'hydra.run.dir'", "(not shown)"), SECRET),
    CliCase("key-as-config-key", "`+dataset.sk-...=1` (the key as a config key)", _key_as_a_config_key,
            ("field 'dataset (a key there)'", "(not shown)"), SECRET),
    CliCase("key-in-url-query", "`generator.model.base_url=http://host/v1?key=...`", _api_key_in_a_url_query,
            ("field 'generator.model.base_url'", "a secret URL parameter"), "plainvalue"),
    CliCase("read-only-store", "an existing store on a read-only file system", _read_only_store,
            ("field 'tracking.uri'", "<dir>/in/ro/mlflow.db", "is not writable")),
    CliCase("export-id-with-newline", "`ragexp export` of a result whose document id holds a newline",
            _doc_id_with_a_newline, ("ragexp export: error: <dir>/in/run_results.json: field 'per_query[0].ranking'",
                                     "holds whitespace")),
    CliCase("key-in-api-key-env", "`generator.model.api_key_env=sk-...` (the key, not its variable)", _key_in_api_key_env,
            ("field 'generator.model.api_key_env'", "NAME of an environment variable"), SECRET),
    CliCase("url-credentials", "`generator.model.base_url=http://user:sk-...@host/v1`", _credentials_in_base_url,
            ("field 'generator.model.base_url'", "(not shown)"), SECRET),
    CliCase("api-key-field", "`+generator.model.API_KEY=sk-...`", _new_api_key_field,
            ("field 'generator.model.API_KEY'", "api_key_env"), SECRET),
    CliCase("api-key-field-no-plus", "`generator.model.API_KEY=sk-...` (no `+`)", _api_key_field_without_plus,
            ("field 'generator.model.API_KEY'", "api_key_env"), SECRET),
    CliCase("bearer-token", "`+tracking.note=Bearer ...`", _bearer_token_value,
            ("field 'tracking.note'", "a bearer token (not shown)"), SECRET[3:]),
    CliCase("key-via-env", "`generator.model.base_url=${oc.env:LEAKY_BASE_URL}` holding `user:sk-...@`",
            _key_through_env_interpolation, ("field 'generator.model.base_url'", "(not shown)"), SECRET),
    CliCase("key-in-config-file", "`--config-dir DIR experiment=leaky`, the file sets `api_key_env: sk-...`",
            _key_in_a_config_file, ("field 'generator.model.api_key_env'",), SECRET),
    CliCase("postgres-no-driver", "`tracking.uri=postgresql://...` without its driver", _postgres_without_driver,
            ("field 'tracking.uri'", "postgresql://ragexp@127.0.0.1:9/mlflow", "driver")),
    CliCase("sqlite-under-a-file", "`tracking.uri=sqlite:////etc/passwd/m.db`", _sqlite_under_a_file,
            ("field 'tracking.uri'", "cannot create the sqlite store /etc/passwd/m.db", "/etc/passwd is a file")),
    CliCase("file-uri", "`tracking.uri=file:///...`", _file_uri, ("field 'tracking.uri'", "file store", "sqlite:///")),
    CliCase("plain-path-uri", "`tracking.uri=/some/folder`", _plain_path_uri, ("field 'tracking.uri'", "file store")),
    CliCase("tracking-uri-credentials", "`tracking.uri=postgresql://user:sk-...@host/db`", _credentials_in_tracking_uri,
            ("field 'tracking.uri'", "(not shown)", "PGPASSWORD"), SECRET),
    CliCase("compare-missing-store", "`ragexp compare --tracking-uri sqlite:///missing.db`", _compare_without_a_store,
            ("ragexp compare: error: field 'tracking.uri': no MLflow store at <dir>/missing.db",)),
    CliCase("compare-per-query-one-run", "`ragexp compare --per-query RUN_ID` (one run)", _per_query_with_one_run,
            ("ragexp compare: error: field 'RUN_ID': --per-query compares exactly two runs, got 1 run ids",)),
    CliCase("compare-per-query-same-run", "`ragexp compare --per-query RUN_ID RUN_ID` (the same run twice)",
            _per_query_with_the_same_run_twice,
            ("ragexp compare: error: field 'RUN_ID': --per-query got run " + "0" * 32 + " twice; give two different runs",)),
    CliCase("log-binary", "`ragexp evalset queries` on a binary file", _binary_log,
            ("ragexp evalset: error: <dir>/in/app.log: a binary file, not a text query log",)),
    CliCase("log-empty", "`ragexp evalset queries` on an empty log", _empty_log,
            ("ragexp evalset: error: <dir>/in/queries.txt: empty log",)),
    CliCase("log-missing-field", "`ragexp evalset queries` on JSONL without the query field", _log_without_the_field,
            ("<dir>/in/search.jsonl:1: field 'query': no such field in this line (its keys: ts, q)", "--field")),
    CliCase("log-one-huge-line", "`ragexp evalset queries` on a log of one 1 MB line", _log_of_one_huge_line,
            ("queries.txt", "1 line(s) longer than 4,096 characters skipped")),
    CliCase("log-out-is-the-log", "`ragexp evalset queries LOG --out LOG` (the log itself)", _out_is_the_log,
            ("field '--out'", "is one of the logs read")),
    CliCase("log-out-is-a-folder", "`ragexp evalset queries --out DIR` (an existing folder)", _out_is_a_folder,
            ("field '--out'", "is a folder")),
    CliCase("log-truncated-gzip", "`ragexp evalset queries` on a cut-off gzip log", _truncated_gzip_log,
            ("<dir>/in/queries.txt.gz:", "not a readable gzip file")),
    CliCase("annotate-busy-port", "`ragexp evalset annotate --port P` while P is taken", _annotate_busy_port,
            ("ragexp evalset: error: field '--port': port 59123 on 127.0.0.1 is already in use",)),
    CliCase("annotate-failures-without-run", "`ragexp evalset annotate --failures` without `--from-run`",
            _annotate_failures_without_run, ("field '--failures': --failures needs --from-run RUN_ID",)),
    CliCase("annotate-yaml", "`ragexp evalset annotate` on a YAML eval set", _annotate_yaml,
            ("<dir>/in/evalset.yaml: annotate writes the JSONL eval-set format",)),
    CliCase("annotate-queries-not-jsonl", "`ragexp evalset annotate --queries LOG` (a plain log, not candidates)",
            _annotate_queries_not_jsonl, ("<dir>/in/questions.txt:1", "JSON")),
    CliCase("draft-out-is-a-folder", "`ragexp evalset draft --out DIR` (an existing folder)", _draft_out_is_a_folder,
            ("field '--out'", "is a folder")),
    CliCase("annotate-broken-queue", "`ragexp evalset annotate` with a cut-off `.annotation.json` queue", _annotate_broken_queue,
            ("<dir>/in/built.annotation.json:1: cannot read the annotation queue",)),
    CliCase("disk-full", "a full disk under `cache_dir` (ENOSPC)", _full_disk_under_cache_dir,
            ("field 'cache_dir'", "cannot write the stage cache under <dir>/cache", "errno 28")),
    CliCase("review-unknown-run", "`ragexp judge review` with a run id the store does not hold", _review_unknown_run,
            ("ragexp judge: error: field 'RUN_ID': no run with id '00000000000000000000000000000000'",)),
    CliCase("review-no-claims", "`ragexp judge review` on a run without generator and judge", _review_run_without_claims,
            ("ragexp judge: error: field 'RUN_ID': the run has no judged claims", "judge=lexical")),
    CliCase("review-busy-port", "`ragexp judge review --port P` with P taken", _review_busy_port,
            (f"ragexp judge: error: field '--port': port {REVIEW_BUSY_PORT} on 127.0.0.1 is already in use",)),
    CliCase("evalset-nested-2000", "eval-set line nested 2,000 levels deep", _evalset_line_nested_2000_deep,
            ("<dir>/in/evalset.jsonl:2", "nested more than 64 levels deep")),
    CliCase("log-nested-2000", "`ragexp evalset queries` on a JSONL line nested 2,000 deep", _log_line_nested_2000_deep,
            ("<dir>/in/search.jsonl:2", "nested more than 64 levels deep")),
    CliCase("base-url-not-a-host", "`generator.model.base_url='https://[::ffff:evil]/v1'`", _base_url_not_a_host,
            ("field 'generator.model.base_url'", "not an IPv6 address", "canonical form")),
    CliCase("draft-model-a-folder", "`ragexp evalset draft --model /usr/lib` (a folder, not a model)",
            _draft_with_a_folder_as_model, ("field 'model'", "does not look like a model")),
    CliCase("model-folder-not-a-model", "`embedding.model=/usr/lib` (nothing hashed before the refusal)",
            _model_folder_not_a_model, ("field 'embedding.model'", "does not look like a model")),
    CliCase("review-labels-a-folder", "`ragexp judge review --labels DIR` (a folder)", _review_labels_a_folder,
            ("field '--labels'", "is a folder")),
    CliCase("calibration-dev-zero", "`judge.calibration=/dev/zero`", _calibration_names(lambda c: "/dev/zero"),
            ("/dev/zero: field 'judge.calibration'", "not a regular file")),
    CliCase("calibration-fifo", "`judge.calibration=FIFO` (a named pipe)", _calibration_names(_fifo),
            ("field 'judge.calibration'", "not a regular file")),
    CliCase("calibration-folder", "`judge.calibration=DIR` (a folder)", _calibration_names(lambda c: str(c.inputs)),
            ("field 'judge.calibration'", "is a folder")),
    CliCase("corpus-sparse-1500mb", "a 1.5 GB sparse `.md` in the corpus", _sparse_markdown,
            ("<dir>/in/corpus/huge.md: is 1,572,864,000 bytes",)),
    CliCase("docx-bomb", "a 0.2 MB DOCX unpacking to 200 MiB, `dataset.strict=true`", _docx_bomb,
            ("bomb.docx", "ZIP bomb")),
    CliCase("alias-bomb", "`--config-path DIR`, the file is an 8-level YAML alias bomb", _alias_bomb_in_a_handed_config,
            ("<dir>/in/handed/resolved.yaml", "YAML aliases")),
    CliCase("tracking-uri-existing-file", "`tracking.uri=sqlite:///.../__init__.py` (an existing empty file)",
            _tracking_uri_an_existing_file, ("field 'tracking.uri'", "is not a sqlite database")),
    CliCase("system-endpoint-down", "`system=http`, nothing listens at `system.url`", _system_endpoint_down,
            ("field 'system': the system failed on 1 of 1 queries", "connection x1", "cannot reach")),
    CliCase("system-not-allowed", "`system=http system.url=URL` that neither `conf/` nor the allow-list names",
            _system_http({"passages": [SYSTEM_PASSAGE]}, allow=False), ("field 'system.url'", "--allow-endpoint")),
    CliCase("system-http-4xx", "`system=http`, the endpoint answers 401", _system_http(Raw(b'{"detail": "no token"}', 401)),
            ("http_4xx x1", "answered HTTP 401", "no token")),
    CliCase("system-http-5xx", "`system=http`, the endpoint answers 503", _system_http(Raw(b"overloaded", 503)),
            ("http_5xx x1", "answered HTTP 503", "after 1 attempt(s)")),
    CliCase("system-malformed-json", "`system=http`, the body is not JSON", _system_http(Raw(b'{"passages": [')),
            ("malformed x1", "not usable JSON")),
    CliCase("system-passage-not-text", '`system=http`, a passage\'s `"text": 42`',
            _system_http({"passages": [{"text": 42, "doc_id": "webhooks"}]}), ("malformed x1", "passage 1's 'text' is a number, not text")),
    CliCase("system-huge-response", "`system=http`, a 5 MB body (`system.max_response_bytes=100000`)",
            _system_http(Raw(b" " * 5_000_000), "system.max_response_bytes=100000"),
            ("too_large x1", "more than 100,000 bytes")),
    CliCase("system-timeout", "`system=http`, the endpoint takes 3 s (`system.timeout_s=0.5`)",
            _system_http(Raw(b"{}", delay_s=3.0), "system.timeout_s=0.5"), ("timeout x1", "within 0.5s")),
    CliCase("system-callable-raises", "`system=python`, the callable raises", _system_raising_callable,
            ("raised x1", "team_rag.Pipeline(query) raised ConnectionError: vector store unreachable")),
    CliCase("system-recorded-missing", "`system=recorded`, the file has no line for an eval query",
            _system_recorded_missing_query, ("missing x1", "outputs.jsonl has no line for query 'q2'")),
    CliCase("system-recorded-not-json", "`system=recorded`, a line cut off", _system_recorded_not_json,
            ("<dir>/in/outputs.jsonl:1", "malformed JSON")),
    CliCase("system-option-typo", "`+system.timout_s=5` (a typo)", _system_option_typo,
            ("field 'system.timout_s'", "did you mean 'timeout_s'?")),
    CliCase("system-with-generator", "`system=recorded generator=extractive`", _system_with_a_generator,
            ("field 'generator'", "leave the generator out")),
    CliCase("config-path-prefix", "`--config-pa DIR` (a prefix of `--config-path`), the file sets `hydra.callbacks`",
            _config_path_prefix, ("field 'argv': unknown option '--config-pa'",)),
    CliCase("experimental-rerun", "`--experimental-rerun FILE` (Hydra's pickle rerun)", _experimental_rerun,
            ("field 'argv': unknown option '--experimental-rerun'",)),
    CliCase("config-name-outside", "`--config-name ../handed/resolved` (outside the chosen folder)", _config_name_outside,
            ("field '--config-name'", "plain config name")),
    CliCase("override-int-over-digit-limit", "`eval.bootstrap_resamples=` a 5,000-digit number",
            lambda c: c.run("eval.bootstrap_resamples=" + "1" * 5000), ("field 'argv': bad override syntax", "ValueError")),
    CliCase("stored-int-over-digit-limit", "`--config-path DIR`, the file holds a 5,000-digit number",
            _stored_int_over_digit_limit, ("<dir>/in/handed/resolved.yaml", "a number of 5,000 characters")),
    CliCase("resamples-unbounded", "`eval.bootstrap_resamples=1000000000`", lambda c: c.run("eval.bootstrap_resamples=1000000000"),
            ("field 'eval.bootstrap_resamples'", "from 1 to 100,000")),
    CliCase("cutoff-unbounded", "`eval.ks=[1,1000000000000]`", lambda c: c.run("eval.ks=[1,1000000000000]"),
            ("field 'eval.ks[1]'", "from 1 to 1,000")),
    CliCase("context-k-beyond-ranking", "`eval.context_k=500` (the ranking goes 100 deep)", lambda c: c.run("eval.context_k=500"),
            ("field 'eval.context_k'", "goes 100 deep")),
    CliCase("endpoint-backslash", "`generator.model.base_url=http://good.host\\@evil.example/v1`",
            lambda c: c.run("generator=openai", "generator.model.base_url=http://good.host\\@evil.example/v1"),
            ("field 'generator.model.base_url'", "canonical form")),
    CliCase("tracking-uri-not-canonical", "`tracking.uri=HTTP://MLflow.internal:5000`",
            lambda c: c.run("tracking.uri=HTTP://MLflow.internal:5000"),
            ("field 'tracking.uri'", "write http://mlflow.internal:5000")),
    CliCase("results-empty-objects", "`ragexp export` of a 12 MB results file of 4M empty objects", _results_of_empty_objects,
            ("<dir>/in/run_results.json", "JSON values", "refused before parsing")),
    CliCase("yaml-evalset-many-nodes", "eval set: a 0.75 MB YAML file of 250,000 empty lists", _yaml_evalset_of_many_nodes,
            ("<dir>/in/evalset.yaml", "more than 200,000 YAML nodes")),
    CliCase("log-gzip-bomb", "`ragexp evalset queries` on a 0.3 MB gzip log decoding to 300 MiB", _gzip_bomb_log,
            ("<dir>/in/search.log.gz", "gzip bomb")),
]


def render_table(results: dict[str, CaseResult]) -> str:
    """``docs/bad-input.md``: one row per case, the message as printed, the exit code."""
    rows = [
        "# Bad input: what ragexp prints",
        "",
        "Generated from the cases of `tests/helpers/bad_input_cases.py`, each run through the real CLI in a fresh folder",
        "(`<dir>`) by `tests/test_bad_input_suite.py`, which fails when this file differs from a fresh run.",
        "Regenerate: `python -m tests.helpers.bad_input_table > docs/bad-input.md`. Every case prints one line, exits 2,",
        "and leaves no MLflow run, no experiment, no `outputs/` folder and no cache entry behind; secrets are",
        "never shown (the secret cases also check that no written byte holds the key).",
        "",
        "| case | message (stderr, one line) | exit |",
        "|---|---|---|",
    ]
    for case in CASES:
        result = results[case.id]
        message = result.shown.replace("|", "\\|")
        code = f"`` {message} ``" if "`" in message else f"`{message}`"
        rows.append(f"| {case.what} | {code} | {result.returncode} |")
    return "\n".join(rows) + "\n"
