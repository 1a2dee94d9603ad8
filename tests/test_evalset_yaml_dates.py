"""Issue #52 (low): a YAML eval set whose values look like timestamps is read as text, never a traceback.

The eval-set reader walked a second parse with PyYAML's own safe loader, which resolves YAML 1.1
timestamps (``2001-13-45`` raised ``ValueError`` from ``datetime.date`` in ``evalset lint`` and
``run``). It now walks the gate's loader (:func:`ragexp.stored.limits.yaml_loader`): a date is the
text it is, wherever it stands. Fails before (``bd8562d``): every impossible date (a traceback),
and every possible one in a text field (a ``datetime.date``, refused as not a string).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ragexp
from ragexp.data.evalset_schema import read_file
from ragexp.errors import RagexpInputError

DATES = ["2001-13-45", "2024-02-30", "2002-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
         "2024-02-30 25:61:61"]


@pytest.mark.parametrize("date", DATES)
@pytest.mark.parametrize("where", ["query", "id", "gold answer", "tag", "header name"])
def test_a_date_in_a_yaml_eval_set_is_its_text(tmp_path, date, where):
    item = {"id": "q1", "query": "what", "gold_answer": "x", "tags": ["t"]}
    key = {"query": "query", "id": "id", "gold answer": "gold_answer", "tag": "tags"}.get(where)
    if key == "tags":
        item["tags"] = [date]
    elif key:
        item[key] = date
    header = f"name: {date}\n" if where == "header name" else ""
    body = "".join(f"    {k}: {v if not isinstance(v, list) else '[' + ', '.join(v) + ']'}\n" for k, v in item.items())
    path = tmp_path / "set.yaml"
    path.write_text(header + "items:\n  - " + body.lstrip(), encoding="utf-8")
    if where == "tag" and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", date):  # no tag may hold ':' or ' '
        with pytest.raises(RagexpInputError, match="a tag is"):
            read_file(path)
        return
    read = read_file(path)
    [(_, record)] = read.items
    shown = {"query": record.query, "id": record.id, "gold answer": record.gold_answer, "tag": record.tags[0] if record.tags else None,
             "header name": read.header.name}[where]
    assert shown == date


def test_evalset_lint_reads_an_impossible_date_as_text(tmp_path, capsys):
    from ragexp.cli import main

    path = tmp_path / "set.yaml"
    path.write_text("items:\n  - id: q1\n    query: 2001-13-45\n    answerable: false\n", encoding="utf-8")
    code = main(["evalset", "lint", str(path), "--corpus",
                 str(Path(ragexp.__file__).parent / "data" / "datasets" / "demo" / "corpus")])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and code in (0, 1), out
