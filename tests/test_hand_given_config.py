"""How ``ragexp run`` takes configs handed from elsewhere (:mod:`ragexp.config.untrusted`), without
the CLI: a primary config (``--config-path``/``--config-name``) is read as data through the gate and
Hydra sees only a gated copy of plain values; a ``--config-dir`` folder is code the user chose to
run, screened for secrets only. The CLI-level attacks are in tests/test_untrusted_config.py and
tests/security/.

Fails before: ``gated_primary_config`` did not exist; main scanned the hand-given files for
Hydra's syntax instead (``# @package`` headers, defaults entries, ``${oc.env:...}``), which a
second header or a symlinked group folder got past (issue #30, class 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragexp.config import untrusted
from ragexp.config.command_line import parse_run_command_line
from ragexp.config.untrusted import gated_primary_config, screen_config_dirs
from ragexp.errors import RagexpInputError


def handed(tmp_path: Path, text: str):
    folder = tmp_path / "handed"
    folder.mkdir(parents=True)
    (folder / "resolved.yaml").write_text(text, encoding="utf-8")
    (folder / "evil").mkdir()
    (folder / "evil" / "x.yaml").write_text("# @package hydra.callbacks\ncb: {_target_: logging.FileHandler}\n")
    return parse_run_command_line(["--config-path", str(folder), "--config-name", "resolved", "retrieval.k1=1.2"])


def refusal(argv) -> RagexpInputError:
    with pytest.raises(RagexpInputError) as caught, gated_primary_config(argv):
        pass
    return caught.value


SAVED = "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever, k1: 0.9}\n" \
        "tracking: {uri: 'http://203.0.113.7:5000'}\ncache_dir: /etc\n"


def test_hydra_sees_only_a_gated_copy_of_the_saved_values_with_this_machines_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///here.db")
    monkeypatch.setenv("RAGEXP_CACHE_DIR", str(tmp_path / "cache"))
    argv = handed(tmp_path, "# @package hydra\n" + SAVED)
    with gated_primary_config(argv) as gated:
        folder = gated.config_path
        assert gated.hydra_argv() == [f"--config-path={folder}", "--config-name=resolved", "retrieval.k1=1.2"]
        assert [p.name for p in folder.iterdir()] == ["resolved.yaml"]  # no neighbouring group file
        text = (folder / "resolved.yaml").read_text(encoding="utf-8")
        copy = yaml.safe_load(text)
    assert not folder.exists() and "#" not in text and "${" not in text
    assert copy["defaults"] == ["ragexp_schema", "_self_"] and copy["retrieval"]["k1"] == 0.9
    assert copy["tracking"]["uri"] == "sqlite:///here.db" and copy["cache_dir"] == str(tmp_path / "cache")
    for local in (["retrieval=bm25", "-m"], ["--config-name", "config"]):  # this machine's conf/: unchanged
        local = parse_run_command_line(local)
        with gated_primary_config(local) as unchanged:
            assert unchanged == local


@pytest.mark.parametrize(("text", "field", "words"), [
    ("hydra:\n  callbacks:\n    evil: {_target_: logging.FileHandler}\n", "hydra.callbacks.evil._target_",
     "come from this machine"),
    ("defaults:\n  - override hydra/launcher: basic\n", "defaults", "hydra/"),
    ("tracking:\n  note: ${oc.env:HOME}\n", "tracking.note", "environment"),
    ('tracking:\n  note: ${oc.decode:"\\${oc.${oc.select:nokey,env}:HOME}"}\n', "tracking.note", "interpolation"),
    ("eval:\n  ks: [1, '${env:HOME}']\n", "eval.ks[1]", "interpolation"),
    ("a: &a [x, x]\nb: *a\n", None, "aliases"),
    ("eval:\n  kss: [1]\n", "eval.kss", "unknown key"),
    ("retrieval: {name: x, api_key: sk-ragexp-TEST-0123456789abcdef}\n", "retrieval.api_key", "secret"),
])
def test_a_saved_config_that_could_act_is_refused_before_hydra(tmp_path, text, field, words):
    error = refusal(handed(tmp_path, text))
    line = str(error)
    assert line.startswith(f"{tmp_path}/handed/resolved.yaml: ") and words in line, line
    assert (f"field '{field}'" in line) if field else "field" not in line, line


def test_a_config_dir_is_code_the_user_chose_screened_for_secrets_only(tmp_path):
    """A group folder may hold hydra/ options (documented: like any Hydra app's config folder)."""
    (tmp_path / "dir" / "hydra" / "launcher").mkdir(parents=True)
    (tmp_path / "dir" / "hydra" / "launcher" / "mine.yaml").write_text("_target_: x.Launcher\n", encoding="utf-8")
    screen_config_dirs(parse_run_command_line(["--config-dir", str(tmp_path / "dir")]))
    (tmp_path / "dir" / "leaky.yaml").write_text("generator:\n  note: Bearer abcdefgh12345678\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="bearer token") as caught:
        screen_config_dirs(parse_run_command_line(["--config-dir", str(tmp_path / "dir")]))
    assert caught.value.field == "generator.note"


def test_a_hand_given_primary_config_gets_this_machines_run_settings_except_those_typed():
    local = yaml.safe_load((untrusted.CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))["hydra"]
    given = ["--config-path", "/somewhere", "--config-name", "resolved", "retrieval.k1=1.2", "hydra.sweep.dir=mine"]
    overrides = untrusted.local_hydra_overrides(parse_run_command_line(given))
    assert f"++hydra.run.dir='{local['run']['dir']}'" in overrides
    assert "++hydra.callbacks.mlflow_sweep._target_='ragexp.tracking.sweep.MlflowSweepCallback'" in overrides
    assert "++hydra.job.chdir=false" in overrides
    assert not any(o.startswith("++hydra.sweep.dir=") for o in overrides)  # typed here: the typed value stands
    assert untrusted.local_hydra_overrides(parse_run_command_line(["retrieval=bm25", "-m"])) == []  # the local primary config has them
