"""Every command the README shows is one ragexp's grammar accepts, and every script it names exists.

The shell blocks of README.md are read line by line: ``bash scripts/X.sh`` names a script of the
repo; ``ragexp run ...`` goes through ragexp's own run grammar (:func:`parse_run_command_line`, the
argv gate ``ragexp run`` applies before Hydra), every other ``ragexp COMMAND ...`` through the
command's argparse parser (:func:`ragexp.cli.build_parser`, exact option names). Placeholders such
as ``RUN_ID`` are run ids to the grammar. Links are checked by tests/test_docs_links.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ragexp import cli
from ragexp.config.command_line import parse_run_command_line

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
SHELL_LINES = [line.strip() for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S)
               for line in block.splitlines() if line.strip()]


def words(line: str) -> list[str]:
    """The line's words without its trailing ``# comment``."""
    return shlex.split(line, comments=True)


def test_the_readme_shows_commands():
    assert sum(line.startswith("ragexp ") for line in SHELL_LINES) >= 10, SHELL_LINES
    assert {"bash scripts/demo.sh", "bash scripts/test.sh"} <= {" ".join(words(line)) for line in SHELL_LINES}


@pytest.mark.parametrize("line", SHELL_LINES)
def test_each_readme_command_parses(line):
    argv = words(line)
    if argv[0] == "bash":
        assert (REPO / argv[1]).is_file(), argv[1]
    elif argv[0] == "source":
        assert argv[1] == ".venv/bin/activate"  # made by scripts/setup.sh
    else:
        assert argv[0] == "ragexp", line
        if argv[1] == "run":
            parse_run_command_line(argv[2:])  # raises RagexpInputError on what ragexp run refuses
        else:
            parsed = cli.build_parser(argv[1]).parse_args(argv[1:])  # exits 2 on what argparse refuses
            assert parsed.command == argv[1]
