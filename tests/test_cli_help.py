"""Every command's ``--help`` says what it does and shows examples, in plain text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragexp.cli import COMMANDS, EXAMPLES, main
from tests.helpers.cli import ENV


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_has_examples_and_no_markup(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"] if command else ["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:\n  ragexp " in text and "``" not in text
    for example in EXAMPLES[command] if command else [EXAMPLES[name][0] for name in ("run", *COMMANDS)]:
        assert example in text


def test_run_help_opens_with_ragexp_and_examples_not_hydra():
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "run", "--help"], env=ENV, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0
    assert proc.stdout.startswith("ragexp run: evaluate RAG pipeline variants")
    assert "powered by Hydra" not in proc.stdout
    assert "ragexp run -m chunking=fixed,recursive,markdown retrieval=bm25,dense,hybrid_rrf" in proc.stdout
    assert "--config-name resolved" in proc.stdout and "chunking: fixed, markdown, none, recursive, sentence" in proc.stdout
