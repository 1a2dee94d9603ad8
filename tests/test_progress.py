"""``progress=false`` silences every bar of a run: BM25's, the encoders', sentence-transformers' own.

tqdm reads ``TQDM_DISABLE`` only at import, so setting it when the config is known (as before)
left the BM25 and encoder bars on. The same hybrid run (BM25 + MiniLM on ONNX Runtime, batch size
2 so the encoder draws its bar) is run with bars on, to show they exist, and off.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from ragexp.runtime import progress
from tests.helpers.configs import compose_run_config

pytestmark = pytest.mark.slow
BARS = ("bm25: tokenising", "onnx: encoding")  # the last is the ONNX encoder's bar


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


@pytest.mark.parametrize(("steps", "drawn"), [(0, False), (1, False), (2, True), (5, True), (None, True)],
                         ids=["empty", "one step", "two steps", "five steps", "unsized"])
def test_a_bar_is_drawn_for_more_than_one_step_only(steps, drawn):
    """A search of one query batch drew a bar per call (966 in the demo's latency probe): a sized
    iterable of one step or none gets no bar; an unsized one (a file's lines) always gets its bar."""
    out = io.StringIO()
    iterable = (i for i in range(3)) if steps is None else range(steps)
    assert list(progress.bar(iterable, desc="stage", file=out)) == list(range(3 if steps is None else steps))
    assert ("stage:" in out.getvalue()) == drawn, out.getvalue()


def bar_starts(err: str) -> Counter:
    """How many bars each description started: tqdm's first frame of a bar shows ``0%|``."""
    return Counter(match.group(1) for match in re.finditer(r"([\w:() .-]+?):\s+0%\|", err))


def test_the_latency_probe_draws_one_bar_and_none_inside_its_passes(tiny_dataset, tmp_path, capfd):
    """One progress line per stage: the probe (3 queries, 3 timed passes, each query alone through
    BM25) draws its own bar once; the searches it times draw none (each drew a ``bm25: searching``
    bar before, inside the timed call). The bars of the run's other stages start once each."""
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "retrieval=bm25", "cost.latency_queries=3",
                             "progress=true")
    try:
        run_job(job_spec(cfg), output_dir=tmp_path / "out", log_to=None)
    finally:
        progress.set_enabled(True)
    starts = bar_starts(capfd.readouterr().err)
    assert starts["cost: served latency"] == 1, starts
    assert starts["bm25: tokenising"] == 1, starts  # the run's own bars are still drawn
    assert max(starts.values()) == 1, starts
    assert progress.enabled()  # the probe restored the setting
