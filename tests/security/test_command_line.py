"""Root 1 of issue #40: ragexp owns its command line; no spelling reaches Hydra's parser unchecked.

``config/untrusted.py`` used to match ``--config-path`` literally and pass the rest to Hydra's
argparse, which takes prefixes (``--config-pa`` is ``--config-path``: a handed folder's
``hydra.callbacks`` ran), resolves ``--config-name ../x`` outside the config folder (a
``@package _global_`` file ran) and unpickles ``--experimental-rerun FILE``. Now ``ragexp run`` is
parsed by :mod:`ragexp.config.command_line` and Hydra gets the canonical argv built from it; every
other command's parser takes whole option names only.

Fails before (``a39e7ac``): :mod:`ragexp.config.command_line` did not exist (the grammar tests);
through the CLI, every prefix variant truncated the victim (exit 0), the ``../`` and absolute
names ran the outside file's callback, the rerun pickle truncated the victim, a ``--config-di``
folder's secret reached the run folder unscreened; every command's prefix (``--trac``) was taken
as the whole option.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.utils import get_args_parser
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp import cli
from ragexp.config.command_line import (CFG_CHOICES, FLAGS, HYDRA_HELP_OVERRIDE, INFO_CHOICES, RunCommandLine,
                                        parse_run_command_line)
from ragexp.errors import RagexpInputError
from tests.helpers.bad_input_cases import ENV

VICTIM_TEXT = "do not overwrite me\n"
#: Hydra's flags ragexp documents (conf/config.yaml's help footer, README) and passes on.
DOCUMENTED_HYDRA = {"-m", "--multirun", "--cfg", "-c", "--resolve", "--info", "-i", "-h", "--help", "--hydra-help",
                    "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd"}


def hydra_flags() -> set[str]:
    """Every option string Hydra's own argparse parser knows (read from Hydra, not listed here)."""
    return {option for action in get_args_parser()._actions for option in action.option_strings}


def refused(argv: list[str]) -> str:
    with pytest.raises(RagexpInputError) as caught:
        parse_run_command_line(argv)
    return str(caught.value)


# --- the grammar -----------------------------------------------------------------------------------------


def test_every_hydra_flag_ragexp_does_not_document_is_refused():
    undocumented = hydra_flags() - DOCUMENTED_HYDRA
    assert {"--experimental-rerun", "--shell-completion", "-sc", "--version", "--package", "-p", "--run", "-r"} <= undocumented
    for flag in sorted(undocumented):
        for argv in ([flag], [flag, "x"], [f"{flag}=x"]):
            assert "unknown option" in refused(argv), argv


def test_every_documented_hydra_flag_is_one_ragexp_knows():
    assert DOCUMENTED_HYDRA - {"-i"} <= set(FLAGS) and "-i" not in FLAGS  # -i: only --info=WHAT, spelled whole


@pytest.mark.parametrize("flag", sorted(hydra_flags() | set(FLAGS)))
def test_no_prefix_of_a_flag_is_taken_for_it(flag):
    """Every proper prefix of every ragexp and Hydra flag (``--config-pa``, ``--exp``, ``-c`` of ``-cp``
    excepted where the prefix is itself a flag) is refused, with and without a value."""
    for end in range(2, len(flag)):
        prefix = flag[:end]
        if prefix in FLAGS or prefix in ("-", "--"):
            continue
        for argv in ([prefix, "/tmp"], [f"{prefix}=/tmp"]):
            assert "unknown option" in refused(argv), argv


@pytest.mark.parametrize("name", ["../x", "../../etc/passwd", "/abs/x", "a/b", "..", "x/../y", "", "a\\b", " x",
                                  "x\n", "~/x", "./x", "-x", "x..yaml"])
def test_a_config_name_is_a_plain_name_inside_the_folder(name):
    for argv in (["--config-name", name], [f"-cn={name}"], ["--config-path", "/tmp", "--config-name", name]):
        line = refused(argv)
        assert "plain config name" in line or "unknown option" in line or "needs" in line, (argv, line)


@pytest.mark.parametrize("argv", [
    ["-m", "-m"], ["--config-path", "/a", "-cp", "/b"], ["-cd", "/a", "--config-dir=/b"], ["--cfg", "job", "-c", "all"],
    ["--cfg", "yaml"], ["--info=everything"], ["-m=true"], ["--resolve=1"], ["-cpDIR"], ["-cp/tmp"], ["--config-path="],
    ["--"], ["-"], ["--cfg"], ["x=1", "\x00"],
])
def test_repeats_values_and_attached_short_values_are_refused(argv):
    refused(argv)


def test_a_command_line_is_parsed_into_its_closed_type():
    command = parse_run_command_line(["-m", "retrieval=bm25,dense", "--config-dir", "conf2", "--cfg", "job", "--resolve",
                                      "--allow-endpoint", "http://127.0.0.1:8080/v1=KEY", "--allow-endpoint=http://x/v1",
                                      "~judge", "+x=-1", "--info"])
    assert command == RunCommandLine(overrides=("retrieval=bm25,dense", "~judge", "+x=-1"), multirun=True, cfg="job",
                                     resolve=True, info="all", config_dir=Path("conf2").absolute(),
                                     allowed_endpoints=("http://127.0.0.1:8080/v1=KEY", "http://x/v1"))


_override = st.from_regex(r"(\+{0,2}|~)[a-z_][a-z0-9_.]{0,8}=[a-z0-9_./,:\[\]-]{0,10}", fullmatch=True).filter(
    lambda s: "=" in s and not s.startswith("~")) | st.from_regex(r"~[a-z_][a-z0-9_.]{0,8}", fullmatch=True)


def _parses(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        OverridesParser.create().parse_overrides([override])
    except Exception:  # noqa: BLE001 - only overrides Hydra's grammar takes are a command line's
        return False
    return True


_override = _override.filter(_parses)
_path = st.builds(lambda parts: Path("/" + "/".join(parts)),
                  st.lists(st.text("abc-_.=x y", min_size=1, max_size=6).filter(lambda p: p not in (".", "..")),
                           min_size=1, max_size=3))
_commands = st.builds(
    RunCommandLine, overrides=st.lists(_override, max_size=4).map(tuple), multirun=st.booleans(),
    cfg=st.none() | st.sampled_from(CFG_CHOICES), resolve=st.booleans(), info=st.none() | st.sampled_from(INFO_CHOICES),
    help=st.booleans(), hydra_help=st.booleans(), config_path=st.none() | _path,
    config_name=st.none() | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,8}(\.yaml)?", fullmatch=True),
    config_dir=st.none() | _path)


@settings(max_examples=300, deadline=None)
@given(_commands)
def test_hydra_reads_the_canonical_argv_as_ragexp_built_it(command):
    """Differential: Hydra's own argparse parser, given :meth:`RunCommandLine.hydra_argv`, sees
    exactly the values ragexp parsed (no override read as a flag, no flag lost), and ragexp's
    grammar reads the canonical argv back to the same command."""
    argv = command.hydra_argv()
    hydra = get_args_parser().parse_args(argv)
    if command.hydra_help:  # ragexp's flags as Hydra's help, composed without a primary config
        assert hydra.hydra_help and hydra.overrides == [*command.overrides, HYDRA_HELP_OVERRIDE]
        assert not (hydra.multirun or hydra.cfg or hydra.help or hydra.info or hydra.config_path or hydra.config_dir)
        assert parse_run_command_line(argv) == RunCommandLine(overrides=(*command.overrides, HYDRA_HELP_OVERRIDE),
                                                              hydra_help=True)
        return
    assert hydra.overrides == list(command.overrides)
    assert (hydra.multirun, hydra.cfg, hydra.resolve, hydra.help, hydra.hydra_help) == (
        command.multirun, command.cfg, command.resolve, command.help, command.hydra_help)
    assert hydra.info == command.info and hydra.experimental_rerun is None and hydra.package is None
    assert hydra.config_path == (None if command.config_path is None else str(command.config_path))
    assert hydra.config_dir == (None if command.config_dir is None else str(command.config_dir))
    assert hydra.config_name == command.config_name
    assert parse_run_command_line(argv) == command


def test_hydra_help_lists_the_flags_ragexp_accepts_and_no_other():
    """``--hydra-help`` is ragexp's flag list (conf/hydra/hydra_help/ragexp.yaml), not Hydra's, which
    names flags the grammar refuses (``--experimental-rerun``, ``--package``, ``-sc``, ``--version``)."""
    import re

    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "run", "--hydra-help"], capture_output=True, text=True,
                          timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flags_part = proc.stdout.split("== Configuration groups ==")[0]
    listed = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", flags_part))
    assert listed == set(FLAGS), listed ^ set(FLAGS)
    for refused in ("--experimental-rerun", "--package", "--shell-completion", "--version", "--run"):
        assert refused not in proc.stdout
        with pytest.raises(RagexpInputError):
            parse_run_command_line([refused])


# --- every other command: whole option names only ------------------------------------------------------------


def _parsers() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """``(words after ragexp, parser)`` of every command and sub-command parser."""
    found = []
    for name in cli.COMMANDS:
        todo = [([], cli.build_parser(name))]
        while todo:
            words, parser = todo.pop()
            found.append((words, parser))
            todo += [([*words, sub], child) for action in parser._actions
                     if isinstance(action, argparse._SubParsersAction) for sub, child in action.choices.items()
                     if not words or words[0] == name]
    return found


def test_no_parser_of_any_command_takes_an_abbreviation():
    parsers = _parsers()
    assert len({tuple(w) for w, _ in parsers}) > 2 * len(cli.COMMANDS)
    assert all(not parser.allow_abbrev for _, parser in parsers)


def _matched(parser: argparse.ArgumentParser, arg: str) -> list[str]:
    """The options argparse's own option matching reads ``arg`` as (``[]``: none, an unknown argument)."""
    found = parser._parse_optional(arg)
    found = found if isinstance(found, list) else [found]  # one tuple before Python 3.12, a list after
    return [action.option_strings[0] for action, *_ in filter(None, found) if action is not None]


def test_an_option_prefix_is_refused_by_every_command():
    """Each option of each (sub-)command, cut short, with and without ``=value``: argparse's
    default read ``--trac`` as ``--tracking-uri``; now it matches nothing (an unrecognised
    argument, exit 2), while the whole option still matches itself."""
    checked = 0
    for words, parser in _parsers():
        options = {o for a in parser._actions for o in a.option_strings}
        for option in sorted(o for o in options if o.startswith("--")):
            assert _matched(parser, option) and _matched(parser, option + "=1"), (words, option)
            for end in range(3, len(option)):
                prefix = option[:end]
                if prefix not in options:
                    assert _matched(parser, prefix) == [] and _matched(parser, prefix + "=1") == [], (words, prefix)
                    checked += 1
    assert checked > 200


def test_the_cli_exits_2_on_a_prefix(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["compare", "--trac", "sqlite:///x.db"])
    assert exit_.value.code == 2 and "unrecognized arguments: --trac" in capsys.readouterr().err


# --- through the real CLI: the attacks of the red team, as families ---------------------------------------------


def ragexp(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env=ENV)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def _callback_file(victim: Path, header: str = "") -> str:
    return (f"{header}retrieval: {{name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}}\n"
            f"hydra:\n  callbacks:\n    evil: {{_target_: logging.FileHandler, filename: {victim}, mode: w}}\n")


class _Truncate:
    """A pickle that truncates a file when it is loaded."""

    def __init__(self, victim: Path) -> None:
        self.victim = str(victim)

    def __reduce__(self):
        return open, (self.victim, "w")


def _attack(tmp_path: Path, variant: str) -> list[str]:
    victim = tmp_path / "victim.txt"
    handed = tmp_path / "handed"
    handed.mkdir()
    (handed / "config.yaml").write_text(_callback_file(victim), encoding="utf-8")
    outside = tmp_path / "outside.yaml"
    outside.write_text(_callback_file(victim, "# @package _global_\n"), encoding="utf-8")
    rerun = tmp_path / "config.pickle"
    rerun.write_bytes(pickle.dumps(_Truncate(victim)))
    flag, _, form = variant.partition(" ")
    if flag.startswith("--config-p"):
        return [f"{flag}={handed}", "--config-name=config"] if form == "=" else [flag, str(handed), "-cn", "config"]
    if flag == "../":
        conf = Path(cli.__file__).resolve().parents[1] / "conf"
        return ["--config-name", str(Path("..", *[".."] * (len(conf.parts) - 1), *outside.parts[1:]).with_suffix(""))]
    if flag == "abs":
        return ["--config-name", str(outside.with_suffix(""))]
    return [flag, str(rerun)]


VARIANTS = ["--config-p", "--config-p =", "--config-pa", "--config-pa =", "--config-pat", "--config-pat =", "../", "abs",
            "--experimental-rerun", "--experimental", "--exp"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_no_spelling_of_the_command_line_runs_a_handed_file(tmp_path, variant):
    (tmp_path / "victim.txt").write_text(VICTIM_TEXT, encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "run", *_attack(tmp_path, variant)))  # no override: the file composes
    assert "unknown option" in line or "plain config name" in line, line
    assert (tmp_path / "victim.txt").read_text(encoding="utf-8") == VICTIM_TEXT
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--config-d", "--config-di"])
def test_a_prefix_of_config_dir_does_not_skip_the_secret_screen(tmp_path, flag):
    conf = tmp_path / "conf2"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "leaky.yaml").write_text(
        "# @package _global_\ntracking:\n  note: Bearer abcdefgh12345678abcdefgh\n", encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "run", flag, str(conf), "experiment=leaky", "retrieval=bm25",
                                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"))
    assert "unknown option" in line, line
    assert not (tmp_path / "outputs").exists()
