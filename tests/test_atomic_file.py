"""ragexp's one whole-or-nothing file write (:mod:`ragexp.runtime.atomic_file`), and that every
module that replaces a file goes through it instead of a hand-written temporary-file rename."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

import ragexp
from ragexp.evaluation.results import RunResults
from ragexp.runtime import atomic_file
from ragexp.runtime.atomic_file import atomic_write, replacing

PACKAGE = Path(ragexp.__file__).resolve().parent


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "x.json"
    atomic_write(path, "one")
    atomic_write(path, b"\xc3\xa9")
    assert path.read_text(encoding="utf-8") == "é"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), replacing(path) as partial:
        partial.write_text("half", encoding="utf-8")
        raise RuntimeError("killed mid-write")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_the_partial_file_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    order = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(atomic_file.os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(atomic_file.os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1])
    atomic_write(tmp_path / "f", "x")
    assert order == ["fsync", "replace"]


def test_concurrent_writers_of_one_file_never_share_a_partial_file(tmp_path):
    """Two threads writing the same results file (a sweep's workers): each its own partial name,
    so the file ends as one writer's whole text, never an interleaving."""
    path = tmp_path / "ragexp_results.json"
    texts = ["a" * 200_000, "b" * 200_000]
    errors = []

    def write(text):
        try:
            for _ in range(20):
                atomic_write(path, text)
        except Exception as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert path.read_text() in texts
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_results_save_goes_through_the_helper_not_a_fixed_tmp_name(tmp_path):
    """``RunResults.save`` wrote ``<name>.tmp`` (one name for every writer) without fsync."""
    (tmp_path / "ragexp_results.json.tmp").mkdir()  # the old fixed name, taken
    saved = RunResults(meta={}, aggregates={}).save(tmp_path / "ragexp_results.json")
    assert RunResults.load(saved).per_query == []


def _renames(tree: ast.AST) -> list[int]:
    """Lines calling ``os.replace``/``os.rename`` or ``<path>.replace(target)``/``.rename(target)`` (one
    argument: ``str.replace`` takes two)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("replace", "rename"):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "os":
                lines.append(node.lineno)
            elif len(node.args) == 1 and not node.keywords and not isinstance(owner, ast.Constant):
                lines.append(node.lineno)
    return lines


#: Renames that publish a whole folder or a file built elsewhere, not a write of a file's content.
PUBLISHERS = {"runtime/atomic_file.py", "runtime/stage_cache.py", "tracking/store_template.py"}


def test_no_module_hand_writes_its_own_temporary_file_rename():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in PUBLISHERS:
            continue
        offenders += [f"{relative}:{line}" for line in _renames(ast.parse(path.read_text(encoding="utf-8")))]
    assert offenders == [], "use ragexp.runtime.atomic_file instead of a hand-written rename: " + ", ".join(offenders)
