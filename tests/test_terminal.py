"""What a newcomer's terminal shows: help that does not load the models, and a refused sweep that
prints ragexp's one line and nothing of Hydra's.

``ragexp --help`` and ``ragexp run --help`` are read before anything runs: they import neither
torch, MLflow nor sentence-transformers (checked in ``sys.modules`` of a fresh interpreter, not
timed). A sweep whose store cannot be reached was turned by Hydra into ``UserWarning: Callback
MlflowSweepCallback.on_multirun_start raised ...`` and ``Launching 2 jobs locally`` before each job
failed on its own; it is refused before any job, with one line on stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.cli import ENV, ragexp

HEAVY = ("torch", "mlflow", "sentence_transformers", "transformers", "onnxruntime", "faiss")

IMPORTED_BY_HELP = """
import contextlib, io, json, sys
from ragexp import cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
print(json.dumps({"code": code, "printed": out.getvalue(), "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


@pytest.mark.parametrize("argv", [["--help"], [], ["run", "--help"], ["ui", "--help"], ["upload", "--help"]],
                         ids=["--help", "no command", "run --help", "ui --help", "upload --help"])
def test_help_imports_no_model_or_tracking_library(argv):
    done = subprocess.run([sys.executable, "-c", IMPORTED_BY_HELP, *argv], capture_output=True, text=True,
                          timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = json.loads(done.stdout.splitlines()[-1])
    assert "ragexp" in shown["printed"] and shown["code"] in (0, 2), shown  # the help was printed
    assert shown["heavy"] == [], f"ragexp {' '.join(argv)} imported {shown['heavy']}"


@pytest.mark.parametrize("uri", ["ftp://x", "nosuchscheme://store"])
def test_a_sweep_whose_store_is_refused_prints_ragexps_line_only(tmp_path, tiny_dataset, uri):
    corpus, evalset = tiny_dataset
    done = ragexp(tmp_path, "run", "-m", "retrieval=bm25,dense", "dataset=evalset", f"dataset.corpus={corpus}",
                  f"dataset.evalset={evalset}", f"tracking.uri={uri}", "progress=false", check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragexp run: error: field 'tracking.uri':"), done.stderr
    assert "Launching" not in done.stdout + done.stderr and done.stdout.strip() == "", done.stdout
