"""The two label files a person fills (claims: ``judging.calibration.labels``; whole answers:
``judging.answer_labels``) are written by one CSV writer: pinned here byte for byte against fixed
expected text, for the file writers and for the text logged to MLflow as an artifact.

The cells hold what breaks a naive writer: a comma, a double quote, a newline (CRLF inside a cell
stays as it was), leading and trailing spaces, and a spreadsheet formula (``=cmd|...``). The
writer is the csv module's ``excel`` dialect: CRLF row ends, a cell quoted only when it holds a
comma, a quote or a line break, quotes doubled, and a cell that a spreadsheet would run as a
formula (first character ``=``, ``+``, ``-``, ``@``, tab or CR) written with a ``'`` before it, as
OWASP advises (issue #52: ``judge sample`` wrote an answer starting with ``=`` verbatim into a file
the docs tell a person to open in a spreadsheet). The readers take exactly one ``'`` off, so
every value comes back as it was (a value that starts with ``'`` is written with two).

Fails before (``bd8562d``): the pinned bytes (formulas verbatim) and the round trip of values
starting with a formula character once neutralised."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.judging.answer_labels import AnswerLabel, read_answer_labels, write_answer_labels
from ragexp.judging.calibration.labels import LabelledClaim, labels_csv, read_labels, write_labels

HOSTILE = 'a, "quoted"\nnext line\r\nlast'
FORMULA = "=cmd|' /C calc'!A0"

CLAIMS = [
    LabelledClaim(id="r1/q1#0", context=HOSTILE, claim=FORMULA, human_label="supported", context_doc_id="doc,1",
                  note="  spaced  ", judge_label="not_supported", judge_score="0.25", judge_raw='{"a": 1}'),
    LabelledClaim(id="q2#1", context="plain", claim="+1 then -1", human_label="", context_doc_id=""),
]
CLAIMS_CSV = (
    "id,context_doc_id,context,claim,human_label,note,judge_label,judge_score,judge_raw\r\n"
    '''r1/q1#0,"doc,1","a, ""quoted""\nnext line\r\nlast",'=cmd|' /C calc'!A0,supported,  spaced  ,not_supported,0.25,"{""a"": 1}"\r\n'''
    "q2#1,,plain,'+1 then -1,,,,,\r\n"
)

ANSWERS = [
    AnswerLabel(id="r1/q1", answer=HOSTILE, query=FORMULA, judge_class="ok", human_class="generation_failure",
                note='said "no"'),
    AnswerLabel(id="q2", answer="@SUM(A1:A2)", query="", judge_class="", human_class=""),
]
ANSWERS_CSV = (
    "id,query,answer,judge_class,human_class,note\r\n"
    '''r1/q1,'=cmd|' /C calc'!A0,"a, ""quoted""\nnext line\r\nlast",ok,generation_failure,"said ""no"""\r\n'''
    "q2,,'@SUM(A1:A2),,,\r\n"
)


def test_the_claim_labels_file_and_artifact_are_the_fixed_bytes(tmp_path: Path) -> None:
    assert labels_csv(CLAIMS) == CLAIMS_CSV  # judge review's file and the MLflow artifact
    path = write_labels(tmp_path / "labels.csv", CLAIMS)
    assert path.read_bytes() == CLAIMS_CSV.encode("utf-8")
    back = read_labels(path)
    assert [(r.context, r.claim) for r in back] == [(HOSTILE, FORMULA), ("plain", "+1 then -1")]


def test_the_answer_labels_file_and_artifact_are_the_fixed_bytes(tmp_path: Path) -> None:
    assert labels_csv(ANSWERS, columns=("id", "query", "answer", "judge_class", "human_class", "note")) == ANSWERS_CSV
    path = write_answer_labels(tmp_path / "answers.csv", ANSWERS)
    assert path.read_bytes() == ANSWERS_CSV.encode("utf-8")
    back = read_answer_labels(path)
    assert [(r.answer, r.query) for r in back] == [(HOSTILE, FORMULA), ("@SUM(A1:A2)", "")]


def test_judge_ppi_logs_the_runs_answer_labels_as_the_fixed_bytes(tmp_path: Path, monkeypatch) -> None:
    """``judge ppi RUN_ID --answer-labels`` logs the rows that labelled the run (the ones whose
    answer is the run's), written by the same writer: a quoted, multi-line answer and a formula
    query arrive in MLflow byte for byte."""
    from mlflow.tracking import MlflowClient

    from ragexp.cli import main
    from ragexp.evaluation import corrected
    from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults
    from ragexp.tracking import store

    monkeypatch.chdir(tmp_path)  # a bare sqlite store puts artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(store.ensure_experiment(client, "answers")).info.run_id
    answers = [HOSTILE, "plain answer", "another"]
    run = RunResults(meta={"run_id": run_id, "evalset_fingerprint": "e"}, aggregates={}, per_query=[
        QueryResult(query_id=f"q{i}", answer=answer, failure_class="ok", answerable=True) for i, answer in enumerate(answers)])
    client.log_artifact(run_id, str(run.save(tmp_path / "run" / ARTIFACT_NAME)))
    write_answer_labels(tmp_path / "answers.csv", [
        AnswerLabel(f"{run_id}/q0", HOSTILE, query=FORMULA, judge_class="ok", human_class="generation_failure"),
        AnswerLabel("q1", "plain answer", human_class="ok", note='said "fine", twice'),
        AnswerLabel("q2", "not the run's answer", human_class="ok"),  # no label of this run: not logged
    ])
    assert main(["judge", "ppi", run_id, "--answer-labels", str(tmp_path / "answers.csv"), "--tracking-uri", uri]) == 0
    logged = Path(client.download_artifacts(run_id, corrected.ANSWER_LABELS_ARTIFACT, str(tmp_path / "logged")))
    assert logged.read_bytes() == (
        "id,query,answer,judge_class,human_class,note\r\n"
        f'''{run_id}/q0,'=cmd|' /C calc'!A0,"a, ""quoted""\nnext line\r\nlast",ok,generation_failure,\r\n'''
        '''q1,,plain answer,,ok,"said ""fine"", twice"\r\n'''
    ).encode("utf-8")


CELL_START = st.sampled_from(["=", "+", "-", "@", "\t", "\r", "'", "''", "a", " ", "\n", ""])


@settings(max_examples=200, deadline=None)
@given(start=CELL_START, rest=st.text(max_size=20))
def test_every_value_round_trips_and_no_cell_starts_a_formula(start, rest):
    """Each cell written starts with no formula character (a spreadsheet shows it as text), and
    the readers give back every value exactly: the answer verbatim, the other columns as the
    reader has always kept them (stripped)."""
    import csv
    import io
    import tempfile

    from ragexp.judging.calibration.labels import FORMULA_START

    value = (start + rest).replace("\x00", "")
    claim = LabelledClaim(id="q1#0", context="ctx", claim=value.strip() or "c", note=value)
    answer = AnswerLabel(id="q1", answer=value, query=value, note=value)
    with tempfile.TemporaryDirectory() as folder:
        claims_path = write_labels(Path(folder) / "labels.csv", [claim])
        answers_path = write_answer_labels(Path(folder) / "answers.csv", [answer])
        for path in (claims_path, answers_path):
            for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")):
                assert not any(cell.startswith(FORMULA_START) for cell in row), row
        [back] = read_labels(claims_path)
        [answer_back] = read_answer_labels(answers_path)
    assert (back.claim, back.note) == (claim.claim.strip(), value.strip())
    assert (answer_back.answer, answer_back.query, answer_back.note) == (value, value.strip(), value.strip())


def test_a_cell_longer_than_the_csv_module_reads_is_one_line(tmp_path: Path) -> None:
    import pytest

    from ragexp.errors import RagexpInputError

    for name, reader in (("labels.csv", read_labels), ("answers.csv", read_answer_labels)):
        path = tmp_path / name
        path.write_text("id,context,claim,human_label,answer,human_class\r\nq1,ctx," + "x" * 200_000 + ",,a,\r\n",
                        encoding="utf-8")
        with pytest.raises(RagexpInputError, match="at most 131,072 characters") as raised:
            reader(path)
        assert raised.value.line == 2 and "\n" not in str(raised.value)
