"""Root 5 of issue #40: every parse error is the gate's.

Random YAML, JSON, argv and URLs go to the gate's readers; each returns a value of its closed type
or raises :class:`~ragexp.errors.RagexpInputError` (one line), never another exception: before,
YAML integers over Python's 4,300-digit limit and explicit ``!!int`` text raised ``ValueError``,
impossible timestamps (``2024-13-45``) ``ValueError``, ``!!binary`` built ``bytes`` that the
schema then failed on, a 5,000-digit override a Hydra traceback, and the run left an ``outputs/``
folder behind. Through the real CLI, the family of such stored configs and overrides exits 2 in one
line and leaves no ``outputs/``.

Fails before (``a39e7ac``): the YAML and run-config properties (falsified at once by a big integer
or an impossible date), the argv property (``ragexp.config.command_line`` did not exist), and
every CLI case (tracebacks, exit 1, an ``outputs/`` folder left).
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragexp.config.command_line import HYDRA_HELP_OVERRIDE, RunCommandLine, parse_run_command_line
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import RunResults
from ragexp.judging.calibration.record import read_calibration
from ragexp.stored.limits import parse_json, parse_yaml
from ragexp.config.run_config import parse_run_config
from tests.helpers.bad_input_cases import ENV

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CLOSED = (str, int, float, bool, type(None), list, dict)

#: Scalars that YAML 1.1 resolves to other types, or that break Python's constructors.
HOSTILE_SCALARS = ["1" * 5000, "-" + "9" * 4400, "0x" + "f" * 4000, "1:" * 2000 + "1", "2024-13-45", "2024-02-30 25:61:61",
                   "!!timestamp 2024-01-01", "!!timestamp 99999-01-01", "!!binary aGVsbG8=", "!!binary '!!!'",
                   "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]", "!!int abc", "!!float xyz", "!!int " + "7" * 5000,
                   ".nan", "-.inf", "1e400", "!!python/name:os.system", "!!str 5", "~", "0o777", "0b1111", "1_000",
                   "!!null x", "!!bool maybe", "!!map 5", "!!seq 5", "&a x", "*a", "? x", "'unterminated", '"\\x"',
                   "\t", "{", "]", "%TAG ! x", "--- !x y"]


def _closed(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, (str, int, float, bool, type(None))) and _closed(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_closed(v) for v in value)
    return isinstance(value, CLOSED) and not (isinstance(value, float) and math.isinf(value))


_scalar = st.sampled_from(HOSTILE_SCALARS) | st.text(max_size=12) | st.integers().map(str)
_yaml_docs = st.recursive(
    _scalar, lambda inner: st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
    | st.dictionaries(st.sampled_from(["a", "eval", "ks", "retrieval", "tracking", "k"]), inner, max_size=3).map(
        lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"), max_leaves=8)
_yaml_text = _yaml_docs | st.text(alphabet=st.sampled_from(list("ab1:-[]{},!&*?'\"#\n\t .x")), max_size=60) | \
    st.builds(lambda k, v: f"{k}: {v}\n", st.sampled_from(["a", "b"]), st.sampled_from(HOSTILE_SCALARS))


@SETTINGS
@given(_yaml_text)
def test_random_yaml_is_a_closed_value_or_the_gates_error(text):
    try:
        value = parse_yaml(text, source="f.yaml")
    except RagexpInputError as err:
        assert "\n" not in str(err)
        return
    assert _closed(value), value


@SETTINGS
@given(st.text(alphabet=st.sampled_from(list('[]{}",:0123456789eE+-.tfnaluNI \\x"')), max_size=80)
       | st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                      max_leaves=10).map(lambda v: __import__("json").dumps(v)))
def test_random_json_is_a_closed_value_or_the_gates_error(text):
    try:
        value = parse_json(text, source="f.json")
    except RagexpInputError as err:
        assert "\n" not in str(err)
        return
    assert _closed(value), value


@SETTINGS
@given(_yaml_text | _yaml_docs.map(lambda body: f"eval: {body}\n") | st.sampled_from(HOSTILE_SCALARS).map(
    lambda v: f"eval:\n  bootstrap_resamples: {v}\n") | st.sampled_from(HOSTILE_SCALARS).map(
    lambda v: f"tracking:\n  note: {v}\n") | st.sampled_from(HOSTILE_SCALARS).map(lambda v: f"eval:\n  ks: [1, {v}]\n"))
def test_a_random_saved_config_is_a_config_or_the_gates_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "resolved.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        cfg = parse_run_config(path)
    except RagexpInputError as err:
        assert "\n" not in str(err) and str(path) in str(err)
        return
    assert cfg.eval.ks is not None


_flags = st.sampled_from(["-m", "--multirun", "--cfg", "-c", "--resolve", "--info", "--info=plugins", "-h", "--hydra-help",
                          "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "--allow-endpoint",
                          "--config-pa", "--experimental-rerun", "--", "-", "-x", "--cfg=job", "--version", "-p"])
_args = _flags | st.text(max_size=15) | st.sampled_from(["eval.ks=[1,", "a=" + "1" * 5000, "x=${oc.env:HOME}", "~judge",
                                                           "++hydra.run.dir=x", "retrieval=bm25,dense", "../x", "job"])


@SETTINGS
@given(st.lists(_args, max_size=6))
def test_a_random_command_line_is_parsed_or_refused_by_the_gate(argv):
    try:
        command = parse_run_command_line(argv)
    except RagexpInputError as err:
        assert "\n" not in str(err)
        return
    assert isinstance(command, RunCommandLine)  # Hydra's argv leaves out ragexp's own --allow-endpoint
    expected = (RunCommandLine(overrides=(*command.overrides, HYDRA_HELP_OVERRIDE), hydra_help=True) if command.hydra_help
                else replace(command, allowed_endpoints=()))  # --hydra-help: ragexp's flag list, no primary config
    assert parse_run_command_line(command.hydra_argv()) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yaml_text.map(lambda t: t) | st.sampled_from(HOSTILE_SCALARS).map(lambda v: f'{{"format": "ragexp-results/1", "per_query": [{v}]}}'))
def test_a_random_results_or_calibration_file_is_read_or_refused_by_the_gate(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("f") / "file.json"
    path.write_text(text, encoding="utf-8")
    for read in (RunResults.load, read_calibration):
        try:
            read(path)
        except RagexpInputError as err:
            assert "\n" not in str(err)


# --- through the real CLI: no traceback, no outputs/ -------------------------------------------------------------

STORED = {
    "int-over-digit-limit": "eval:\n  bootstrap_resamples: " + "1" * 5000 + "\n",
    "explicit-int-text": "eval:\n  bootstrap_resamples: !!int abc\n",
    "impossible-timestamp": "tracking:\n  note: !!timestamp 2024-13-45\n",
    "timestamp": "tracking:\n  note: !!timestamp 2024-01-01\n",
    "binary": "tracking:\n  note: !!binary aGVsbG8=\n",
    "set": "tracking:\n  note: !!set {a}\n",
    "sexagesimal-bomb": "eval:\n  context_k: " + "1:" * 3000 + "1\n",
}
OVERRIDES = {"override-int-over-digit-limit": ["eval.bootstrap_resamples=" + "1" * 5000],
             "sweep-int-over-digit-limit": ["-m", "eval.bootstrap_resamples=1," + "2" * 5000]}


def _ragexp(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env=ENV)


@pytest.mark.slow
@pytest.mark.parametrize("case", [*STORED, *OVERRIDES])
def test_a_parse_error_is_one_line_and_leaves_no_outputs_folder(tmp_path, case):
    if case in STORED:
        (tmp_path / "handed").mkdir()
        base = {"retrieval": {"name": "bm25", "_target_": "reference_pipelines.bm25.BM25Retriever"}}
        (tmp_path / "handed" / "resolved.yaml").write_text(yaml.safe_dump(base) + STORED[case], encoding="utf-8")
        args = ["--config-path", str(tmp_path / "handed"), "--config-name", "resolved"]
    else:
        args = [*OVERRIDES[case], "retrieval=bm25"]
    proc = _ragexp(tmp_path, "run", *args, f"tracking.uri=sqlite:///{tmp_path / 'm.db'}")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith("ragexp run: error: "), lines
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()
