"""``progress=false`` silences every bar of a run: BM25's, the encoders', sentence-transformers' own.

tqdm reads ``TQDM_DISABLE`` only at import, so setting it when the config is known (as before)
left the BM25 and encoder bars on. The same hybrid run (BM25 + MiniLM on ONNX Runtime, batch size
2 so the encoder draws its bar) is run with bars on, to show they exist, and off.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from ragexp.runtime import progress
from tests.helpers.configs import compose_run_config

pytestmark = pytest.mark.slow
BARS = ("bm25: tokenising", "bm25: searching", "onnx: encoding")  # the last is the ONNX encoder's bar


@pytest.mark.parametrize("shown", [True, False], ids=["progress=true", "progress=false"])
def test_progress_false_silences_bm25_encoder_and_library_bars(tiny_dataset, tmp_path, capfd, shown):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "retrieval=hybrid_rrf", "embedding.batch_size=2",
                             f"progress={str(shown).lower()}")
    try:
        run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None)
    finally:
        progress.set_enabled(True)
    err = capfd.readouterr().err
    for bar in BARS:
        assert (bar in err) == shown, (bar, err[-2000:])


SWITCH_THEN_LOAD = """
import sys
from ragexp.runtime import progress
from reference_pipelines.encoders import build_encoder
progress.set_enabled(False)
print("transformers imported by set_enabled:", "transformers" in sys.modules)
build_encoder({"model": "minilm"}).encode_queries(["warm up"])
from transformers.utils import logging as hf_logging
print("transformers bars after the model loaded:", hf_logging.is_progress_bar_enabled())
"""


def test_progress_false_reaches_transformers_without_importing_it_early():
    """``set_enabled`` does not import transformers (~1.5 s of a cached sweep's first job), and a
    model loaded afterwards still finds its bars off: the loader applies the setting on import."""
    done = subprocess.run([sys.executable, "-c", SWITCH_THEN_LOAD], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "transformers imported by set_enabled: False" in done.stdout, done.stdout
    assert "transformers bars after the model loaded: False" in done.stdout, done.stdout
