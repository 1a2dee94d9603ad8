"""Issue #52 (low): a failure threshold that is not a number in [0, 1] (NaN, infinity, a boolean in
a handed config) and a negative sample seed are refused at the gate, one line naming the field.

Before (``bd8562d``) ``eval.failure.min_f1=nan`` was accepted (no answer reaches NaN: every
answer silently classed a failure), and so was ``eval.sample_seed=-1`` (the red team saw it end
in a traceback; the seed is now refused before any work).
"""

from __future__ import annotations

import pytest

from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import job_spec
from tests.helpers.configs import compose_run_config


@pytest.mark.parametrize("field", ["min_f1", "min_key_fact_recall", "min_faithfulness"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.1", "1.5"])
def test_a_failure_threshold_outside_zero_to_one_is_refused(tiny_dataset, tmp_path, field, value):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", f"eval.failure.{field}={value}")
    with pytest.raises(RagexpInputError, match=rf"field 'eval.failure.{field}': must be a number in \[0, 1\]"):
        job_spec(cfg)


@pytest.mark.parametrize("field", ["min_f1", "min_faithfulness"])
@pytest.mark.parametrize("value", [True, "0.5"])
def test_a_handed_threshold_that_is_no_number_is_refused(tiny_dataset, tmp_path, field, value):
    """A config given whole (not through the typed schema) may hold any YAML value."""
    from omegaconf import OmegaConf

    from ragexp.config.schema import validate

    cfg = OmegaConf.to_container(compose_run_config(tiny_dataset, tmp_path / "cache"), resolve=True)
    cfg["eval"]["failure"][field] = value
    with pytest.raises(RagexpInputError, match=f"eval.failure.{field}"):
        validate(OmegaConf.create(cfg))


@pytest.mark.parametrize("seed", ["-1", "-2147483648"])
def test_a_negative_sample_seed_is_refused(tiny_dataset, tmp_path, seed):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "eval.sample=2", f"eval.sample_seed={seed}")
    with pytest.raises(RagexpInputError, match="field 'eval.sample_seed': must be an integer >= 0"):
        job_spec(cfg)


def test_thresholds_at_the_ends_are_kept(tiny_dataset, tmp_path):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "eval.failure.min_f1=0", "eval.failure.min_faithfulness=1",
                             "eval.sample_seed=0")
    assert job_spec(cfg).eval.failure.min_f1 == 0.0
