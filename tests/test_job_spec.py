"""A job is a typed, frozen spec from one gate (:mod:`ragexp.evaluation.job_spec`): nothing but
:func:`job_spec` makes one, a job takes nothing else, its config cannot change after the checks, a
stored config is checked once on its way to a run or an upload, and the endpoint policy is the
same whoever hands the config over (there is no trust flag to forget)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ReadonlyConfigError

import ragexp.evaluation.job_spec as job_spec_module
from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import ConfigSource, EvalOptions, JobSpec, job_spec
from ragexp.evaluation.results import RunResults
from ragexp.evaluation.saved_config import read_run_config
from ragexp.metrics.relevance import OverlapRule
from ragexp.jobs.job import log_saved_run, run_job
from ragexp.tracking import store
from ragexp.tracking.run_logger import LOCAL_CONFIG
from tests.helpers.configs import compose_run_config


def test_only_the_gate_makes_a_spec(tiny_dataset, tmp_path):
    spec = job_spec(compose_run_config(tiny_dataset, tmp_path / "cache"))
    with pytest.raises(TypeError, match="job_spec"):
        JobSpec(config=spec.config, overrides=(), eval=spec.eval, cost=spec.cost, source=ConfigSource.library,
                allowed_endpoints=())
    with pytest.raises(TypeError, match="job_spec"):
        JobSpec(spec.config, (), spec.eval, spec.cost, ConfigSource.library, (), object())


@pytest.mark.parametrize("call", ["run_job", "log_saved_run"])
def test_a_job_takes_a_spec_not_a_config(tiny_dataset, tmp_path, call):
    """A config that did not pass the gate does not run: before, ``run_job(cfg, untrusted=False)``
    skipped the endpoint check."""
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache")
    with pytest.raises(TypeError, match="JobSpec"):
        if call == "run_job":
            run_job(cfg, output_dir=tmp_path / "out", log_to=None)
        else:
            log_saved_run(cfg, None, tmp_path, tags={})
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_the_spec_is_read_only_and_the_callers_config_is_not(tiny_dataset, tmp_path):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "eval.ks=[10,1,5,5]", "eval.context_k=3")
    spec = job_spec(cfg, ["retrieval=bm25"])
    for edit in (lambda c: setattr(c.retrieval, "k1", 9.0), lambda c: setattr(c, "cache_dir", "/tmp/x"),
                 lambda c: setattr(c.eval, "ks", [1]), lambda c: setattr(c, "judge", {"_target_": "x"})):
        with pytest.raises(ReadonlyConfigError):
            edit(spec.config)
    with pytest.raises(AttributeError):
        spec.overrides = ()  # frozen
    cfg.retrieval.k1 = 1.1  # the caller's copy stays editable, and the spec does not follow it
    assert spec.config.retrieval.k1 != 1.1
    assert spec.eval.ks == (1, 5, 10) and spec.eval.context_k == 3 and spec.overrides == ("retrieval=bm25",)
    assert isinstance(spec.eval, EvalOptions) and spec.source is ConfigSource.library
    block = spec.block("retrieval")
    block["k1"] = 5.0  # a plain copy
    assert spec.config.retrieval.k1 != 5.0


def _saved_config(tiny_dataset, tmp_path: Path) -> Path:
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "eval.bootstrap_resamples=20",
                             f"tracking.uri=sqlite:///{tmp_path / 'first.db'}")
    run_job(job_spec(cfg), output_dir=tmp_path / "first", log_to=None)
    return tmp_path / "first"


def test_a_stored_config_is_checked_once_on_its_way_to_a_run(tiny_dataset, tmp_path, monkeypatch):
    """``reproduce`` reads the stored config through the gate and runs it: one check (before the
    spec, the stored config was validated by the reader and again by the job)."""
    folder = _saved_config(tiny_dataset, tmp_path)
    calls = []
    checked = job_spec_module.check_job
    monkeypatch.setattr(job_spec_module, "check_job", lambda *a, **k: (calls.append(a), checked(*a, **k))[1])
    spec = read_run_config(folder / LOCAL_CONFIG, tracking_uri=f"sqlite:///{tmp_path / 'here.db'}",
                           cache_dir=str(tmp_path / "cache2"))
    assert spec.source is ConfigSource.stored_run and spec.config.cache_dir == str(tmp_path / "cache2")
    output = run_job(spec, output_dir=tmp_path / "again", log_to=None).output
    assert len(calls) == 1
    assert output.results.aggregates["hit_rate_at_5"] == RunResults.load(folder / "ragexp_results.json").aggregates["hit_rate_at_5"]


def test_an_upload_is_checked_once_and_tagged_with_its_source(tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a sqlite store's artifacts go to ./mlruns
    folder = _saved_config(tiny_dataset, tmp_path)
    calls = []
    checked = job_spec_module.check_job
    monkeypatch.setattr(job_spec_module, "check_job", lambda *a, **k: (calls.append(a), checked(*a, **k))[1])
    uri = f"sqlite:///{tmp_path / 'here.db'}"
    spec = read_run_config(folder / LOCAL_CONFIG, tracking_uri=uri, cache_dir=str(tmp_path / "cache"),
                           source=ConfigSource.uploaded)
    result = log_saved_run(spec, RunResults.load(folder / "ragexp_results.json"), folder, tags={})
    assert len(calls) == 1
    from mlflow.tracking import MlflowClient

    assert MlflowClient(uri).get_run(result.run_id).data.tags[store.TAG_CONFIG_SOURCE] == "uploaded"


ENDPOINT_OVERRIDES = {
    "generator": ["generator=openai", "generator.model.base_url=http://127.0.0.1:9/v1", "generator.model.model=m"],
    "judge": ["generator=openai", "generator.model.base_url=http://127.0.0.1:9/v1", "generator.model.model=m",
              "judge=openai", "judge.chat_model.base_url=http://127.0.0.1:8/v1", "judge.chat_model.model=m"],
    "system": ["system=http", "system.url=http://127.0.0.1:9/search"],
}


@pytest.mark.parametrize("source", list(ConfigSource))
@pytest.mark.parametrize("where", sorted(ENDPOINT_OVERRIDES))
def test_every_source_gets_the_same_endpoint_policy(tiny_dataset, tmp_path, monkeypatch, source, where):
    """An endpoint this machine does not name is refused before any work, whoever made the config
    (a library caller included: there is no flag that vouches for a config); allowed as the refusal
    advises (in the spec's allow-list), the same config passes."""
    monkeypatch.delenv("RAGEXP_ALLOWED_ENDPOINTS", raising=False)
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", *ENDPOINT_OVERRIDES[where])
    allowed: list[str] = []
    for _ in ENDPOINT_OVERRIDES[where]:
        try:
            spec = job_spec(cfg, source=source, allowed_endpoints=allowed)
            break
        except RagexpInputError as err:
            advice = str(err).rpartition("RAGEXP_ALLOWED_ENDPOINTS=")[2].removesuffix(" or --allow-endpoint")
            assert advice and advice not in allowed, str(err)
            allowed.append(advice)
    assert allowed and spec.source is source and spec.allowed_endpoints == tuple(allowed)
    assert len(allowed) == sum("url=" in value for value in ENDPOINT_OVERRIDES[where])
    assert not (tmp_path / "cache").exists()


def test_eval_options_are_the_checked_values(tiny_dataset, tmp_path):
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "eval.sample=3", "eval.relevance.mode=span",
                             "eval.failure.min_f1=0.25")
    options = job_spec(cfg).eval
    node = OmegaConf.to_container(cfg.eval)
    assert options.sample == 3 and options.relevance == OverlapRule(min_fraction=0.5, mode="span") and options.failure.min_f1 == 0.25
    assert options.bootstrap_resamples == node["bootstrap_resamples"] and options.retrieve_k == node["retrieve_k"]
    with pytest.raises(RagexpInputError, match="eval.sample"):
        job_spec(compose_run_config(tiny_dataset, tmp_path / "cache", "eval.sample=0"))


PATH_FIELDS = {  # field: the overrides that make a run read the file it names
    "judge.calibration": ("judge=lexical", "judge.calibration={}"),
    "dataset.corpus": ("dataset.corpus={}",),
    "dataset.evalset": ("dataset.evalset={}",),
    "system.path": ("system=recorded", "system.path={}"),
    "embedding.model": ("retrieval=dense", "embedding.model={}"),
}


def _hostile(kind: str, tmp_path: Path) -> str:
    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")
        return str(tmp_path / "pipe")
    if kind == "device":
        return "/dev/zero"
    (tmp_path / "folder" / "sub").mkdir(parents=True)  # a folder where a file is read (or no config.json in it)
    return str(tmp_path / "folder" / "sub")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
@pytest.mark.parametrize("field", sorted(set(PATH_FIELDS) - {"dataset.corpus"}))
def test_every_file_a_run_reads_is_checked_in_the_spec(tiny_dataset, tmp_path, field, kind, monkeypatch):
    """Each path field a run reads from, handed a FIFO (would block), a device (would read without
    end) or a folder where a file belongs: refused by the gate, naming the field, before anything is
    built or read (no cache folder, no model constructed). A corpus may be a folder: its FIFO and
    device cases are the same check as the eval set's (``check_path_fields``) and are covered with
    it in :func:`test_a_corpus_that_is_no_file_or_folder_is_refused`."""
    import ragexp.evaluation.pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "build_component", lambda *a, **k: pytest.fail("a model was built"))
    path = _hostile(kind, tmp_path)
    overrides = [value.format(path) for value in PATH_FIELDS[field]]
    with pytest.raises(RagexpInputError) as refused:
        job_spec(compose_run_config(tiny_dataset, tmp_path / "cache", *overrides))
    assert refused.value.field == field, str(refused.value)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_corpus_that_is_no_file_or_folder_is_refused(tiny_dataset, tmp_path, kind):
    path = _hostile(kind, tmp_path)
    with pytest.raises(RagexpInputError) as refused:
        job_spec(compose_run_config(tiny_dataset, tmp_path / "cache", f"dataset.corpus={path}"))
    assert refused.value.field == "dataset.corpus" and "regular file or folder" in refused.value.message
