"""The checks of :mod:`ragexp.config.untrusted` on hand-given config files, without the CLI: which
values land in Hydra's node (``hydra:``, a ``# @package`` header, a package in ``defaults``), when a
value equal to this machine's defaults still differs after interpolation, and which values may read
the environment. The CLI-level attacks are in tests/test_untrusted_config.py.

Fails before: on main before these checks 11 of the 16 fail; the 5 that passed guard what the
old check already refused (a ``hydra:`` key under ``# @package _global_``, ``hydra/`` groups in
``defaults``, a ``.hydra`` group) and that ordinary ``defaults`` entries stay allowed. On the
pre-trust main the module did not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragexp.config import untrusted
from ragexp.config.untrusted import check_hydra_node, check_run_arguments, file_package
from ragexp.errors import RagexpInputError


def handed(tmp_path: Path, config: dict, files: dict[str, str] | None = None) -> list[str]:
    folder = tmp_path / "handed"
    folder.mkdir(parents=True)
    (folder / "resolved.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    for name, text in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return ["--config-path", str(folder), "--config-name", "resolved"]


def refusal(argv: list[str]) -> RagexpInputError:
    with pytest.raises(RagexpInputError) as caught:
        check_run_arguments(argv)
    return caught.value


def test_the_local_hydra_defaults_repeated_by_hand_pass(tmp_path):
    """Equal to conf/config.yaml's own node: nothing is changed, so nothing is refused."""
    check_run_arguments(handed(tmp_path, {"hydra": untrusted.local_hydra_defaults(), "retrieval": {"k1": 1.2}}))


@pytest.mark.parametrize("package, data, field", [
    ("hydra.callbacks", {"cb": {"_target_": "logging.FileHandler"}}, "hydra.callbacks.cb._target_"),
    ("hydra", {"run": {"dir": "${oc.env:HOME}"}}, "hydra.run.dir"),
    ("_global_.hydra.job", {"name": "x"}, "hydra.job.name"),
    ("_global_", {"hydra": {"job": {"name": "x"}}}, "hydra.job.name"),
])
def test_a_package_header_placing_values_in_hydras_node_is_checked_like_a_hydra_key(tmp_path, package, data, field):
    text = f"# a colleague's group file\n# @package {package}\n" + yaml.safe_dump(data)
    assert file_package(text) == package
    error = refusal(handed(tmp_path, {"defaults": [{"evil": "x"}, "_self_"]}, {"evil/x.yaml": text}))
    assert error.field.startswith(field) and str(error.file).endswith("evil/x.yaml"), error


@pytest.mark.parametrize("entry", [{"evil@hydra.callbacks": "x"}, {"evil@_global_.hydra.job": "x"}, "evil/x@hydra",
                                   {"optional evil@hydra.run": "x"}, {"override hydra/launcher": "basic"},
                                   {"/hydra/callbacks@x": "y"}, {".hydra": "hydra"}, {"sub/.hidden": "x"}])
def test_a_defaults_entry_loading_into_hydra_or_from_a_hidden_folder_is_refused(tmp_path, entry):
    error = refusal(handed(tmp_path, {"defaults": [entry, "_self_"]}))
    assert error.field == "defaults", error


def test_ordinary_defaults_entries_pass(tmp_path):
    check_run_arguments(handed(tmp_path, {"defaults": ["_self_", {"retrieval": "bm25"}, {"override chunking": "fixed"},
                                                       {"mine@retrieval": "hydrangea"}]}))


def test_a_value_equal_to_the_local_default_that_refers_outside_hydras_node_is_refused(tmp_path, monkeypatch):
    """Equal text resolves equal only if it refers to nothing a hand-given config sets: were a
    local default ``${tracking.experiment}``, the hand-given value would choose the job name."""
    local = {"job": {"name": "${tracking.experiment}"}, "sweep": {"subdir": "${hydra.job.num}"}}
    monkeypatch.setattr(untrusted, "local_hydra_defaults", lambda: local)
    check_hydra_node({"hydra": {"sweep": {"subdir": "${hydra.job.num}"}}}, Path("x.yaml"))
    with pytest.raises(RagexpInputError) as caught:
        check_hydra_node({"hydra": {"job": {"name": "${tracking.experiment}"}}}, Path("x.yaml"))
    assert caught.value.field == "hydra.job.name"


def test_environment_reads_are_refused_unless_the_local_conf_has_the_same_value(tmp_path):
    error = refusal(handed(tmp_path, {"tracking": {"note": "${oc.env:HOME}"}}))
    assert error.field == "tracking.note" and "environment" in error.message
    error = refusal(handed(tmp_path / "list", {"eval": {"ks": [1, "${env:HOME}"]}}))
    assert error.field == "eval.ks[1]"
    local = yaml.safe_load((untrusted.CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))
    check_run_arguments(handed(tmp_path / "same", {"cache_dir": local["cache_dir"]}))  # conf/config.yaml's own
    openai = (untrusted.CONFIG_DIR / "generator" / "openai.yaml").read_text(encoding="utf-8")
    (tmp_path / "dir" / "generator").mkdir(parents=True)
    (tmp_path / "dir" / "generator" / "openai.yaml").write_text(openai, encoding="utf-8")
    check_run_arguments(["--config-dir", str(tmp_path / "dir"), "generator=openai"])  # a copy of a local group file
    (tmp_path / "dir" / "generator" / "openai.yaml").write_text(openai.replace("OPENAI_BASE_URL", "AWS_SECRET_ACCESS_KEY"),
                                                              encoding="utf-8")
    assert refusal(["--config-dir", str(tmp_path / "dir"), "generator=openai"]).field == "model.base_url"


def test_a_hand_given_primary_config_gets_this_machines_run_settings_except_those_typed():
    local = yaml.safe_load((untrusted.CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))["hydra"]
    given = ["--config-path", "/somewhere", "--config-name", "resolved", "retrieval.k1=1.2", "hydra.sweep.dir=mine"]
    overrides = untrusted.local_hydra_overrides(given)
    assert f"++hydra.run.dir='{local['run']['dir']}'" in overrides
    assert "++hydra.callbacks.mlflow_sweep._target_='ragexp.tracking.sweep.MlflowSweepCallback'" in overrides
    assert "++hydra.job.chdir=false" in overrides
    assert not any(o.startswith("++hydra.sweep.dir=") for o in overrides)  # typed here: the typed value stands
    assert untrusted.local_hydra_overrides(["retrieval=bm25", "-m"]) == []  # the local primary config has them
