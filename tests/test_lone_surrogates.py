"""Issue #52 (low): a lone surrogate in an input is a one-line refusal before any work, and leaves
no output folder behind.

A lone surrogate reaches Python two ways: command-line bytes that are not UTF-8 (decoded with
``surrogateescape``) and a JSON or YAML escape of half a pair (``"\\ud800"``). No UTF-8 file,
database or terminal can hold one, so it failed far away (a traceback while writing the config,
with the run's output folder left behind). Fails before (``bd8562d``): every case (accepted).
"""

from __future__ import annotations

import os

import pytest

from ragexp.errors import RagexpInputError


@pytest.mark.parametrize("argv", [["run", "dataset=scifact", "eval.name=\udcff"], ["run", "retrieval=bm\udce9"],
                                  ["evalset", "lint", "set\udcff.jsonl", "--corpus", "c"], ["judge", "agreement", "\udc80"]])
def test_a_command_line_that_is_not_utf8_is_refused_first(tmp_path, monkeypatch, capsys, argv):
    from ragexp.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid UTF-8" in err
    err.encode("utf-8")  # printable anywhere
    assert os.listdir(tmp_path) == []  # no output folder, no store


JSON_LINES = ['{"id": "q1", "query": "\\ud800"}', '{"id": "\\udfff", "query": "q"}', '{"id": "q1", "query": "q", "\\udbff": 1}',
              '{"id": "q1", "query": "q", "tags": ["a\\udc00"]}']


@pytest.mark.parametrize("line", JSON_LINES)
@pytest.mark.parametrize("reader", ["evalset", "jsonl objects", "recorded"])
def test_a_lone_surrogate_escape_in_json_is_refused(tmp_path, line, reader):
    path = tmp_path / "x.jsonl"
    path.write_text(line.replace('"id"', '"query_id"') if reader == "recorded" else line, encoding="utf-8")
    with pytest.raises(RagexpInputError, match="surrogate") as raised:
        if reader == "evalset":
            from ragexp.data.evalset_schema import read_file
            read_file(path)
        elif reader == "jsonl objects":
            from ragexp.data.loaders.jsonl import iter_jsonl_objects
            list(iter_jsonl_objects(path))
        else:
            from ragexp.systems.recorded import RecordedSystem
            from ragexp.systems.response import ResponseFields
            RecordedSystem(str(path), ResponseFields())
    assert raised.value.line == 1 and "\n" not in str(raised.value)


@pytest.mark.parametrize("text", ['items:\n  - {id: q1, query: "\\ud800"}\n', 'name: "a\\udfffb"\nitems: []\n'])
def test_a_lone_surrogate_escape_in_yaml_is_refused(tmp_path, text):
    from ragexp.data.evalset_schema import read_file

    path = tmp_path / "set.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RagexpInputError, match="surrogate"):
        read_file(path)


def test_a_pair_is_a_character(tmp_path):
    from ragexp.data.evalset_schema import read_file

    path = tmp_path / "set.jsonl"
    path.write_text('{"id": "q1", "query": "smile \\ud83d\\ude00", "answerable": false}\n', encoding="utf-8")
    [(_, item)] = read_file(path).items
    assert item.query == "smile \U0001F600"
