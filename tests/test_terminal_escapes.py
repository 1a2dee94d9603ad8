"""Issue #52 (low): untrusted text printed to a terminal shows as text, never as escape sequences.

A system's doc id, a stored field or an answer reaches the terminal through ``print`` in many
commands; :func:`ragexp.runtime.terminal.install` (called first by the command line) escapes every
control character while standard output is a terminal, and refusals on standard error are escaped
by :func:`~ragexp.runtime.terminal.escaped`. Fails before (``bd8562d``): no such module; the
refusal line printed ``ESC`` raw.
"""

from __future__ import annotations

import io
import sys

import pytest

from ragexp.runtime import terminal

#: Every kind the module docstring names: CSI, OSC 8 link and OSC 52 clipboard sequences, a bare
#: C1 CSI, BEL, backspace, carriage return, DEL, right-to-left override and isolate.
HOSTILE = ["\x1b[2J", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "\x1b]52;c;aGk=\x07", "\x9b31m", "\b\b\bok",
           "fake\rreal", "\x7f", "doc\u202etxt.exe", "\u2066x\u2069", "\x00nul"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("text", HOSTILE)
def test_a_terminal_sees_every_control_character_escaped(monkeypatch, text):
    screen = _Tty()
    monkeypatch.setattr(sys, "stdout", screen)
    terminal.install()
    terminal.install()  # idempotent: escaped once, not twice
    print(f"doc id {text}\tcolumn")
    shown = screen.getvalue()
    assert shown.endswith("\tcolumn\n")  # tab and line feed stay
    assert all(ch.isprintable() or ch in "\t\n" for ch in shown), shown
    assert shown == f"doc id {text.encode('unicode_escape').decode('ascii')}\tcolumn\n".replace("\\t", "\t")


def test_a_file_or_pipe_gets_the_text_unchanged(monkeypatch):
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stdout", plain)
    terminal.install()
    print("\x1b[2J")
    assert plain.getvalue() == "\x1b[2J\n"


@pytest.mark.parametrize("text", HOSTILE)
def test_a_refusal_line_escapes_what_the_input_held(monkeypatch, capsys, text):
    """A refusal's message may quote the input (a doc id a system sent): one line, nothing raw."""
    from ragexp import cli
    from ragexp.errors import RagexpInputError

    def refuse(args):
        raise RagexpInputError(f"doc id {text} is not in the corpus", file="responses.jsonl", line=3)

    real = cli._command_module("judge")
    monkeypatch.setattr(real, "run", refuse)
    assert cli.main(["judge", "agreement", "labels.csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(ch.isprintable() for ch in err.rstrip("\n")), err
