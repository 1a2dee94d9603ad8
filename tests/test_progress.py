"""``progress=false`` silences every bar of a run: BM25's, the encoders', sentence-transformers' own.

tqdm reads ``TQDM_DISABLE`` only at import, so setting it when the config is known (as before)
left the BM25 and encoder bars on. The same hybrid run (BM25 + MiniLM, batch size 2 so
sentence-transformers draws its "Batches" bar) is run with bars on, to show they exist, and off.
"""

from __future__ import annotations

import pytest
from test_bad_input_suite import compose_run_config

from ragexp import progress
from ragexp.job import run_job

pytestmark = pytest.mark.slow
BARS = ("bm25: tokenising", "bm25: searching", "Batches")  # the last is sentence-transformers' encode bar


@pytest.mark.parametrize("shown", [True, False], ids=["progress=true", "progress=false"])
def test_progress_false_silences_bm25_encoder_and_library_bars(tiny_dataset, tmp_path, capfd, shown):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "retrieval=hybrid_rrf", "embedding.batch_size=2",
                             f"progress={str(shown).lower()}")
    try:
        run_job(cfg, output_dir=tmp_path / "out", overrides=[], log_to_store=False)
    finally:
        progress.set_enabled(True)
    err = capfd.readouterr().err
    for bar in BARS:
        assert (bar in err) == shown, (bar, err[-2000:])
