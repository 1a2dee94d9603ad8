"""Qrels are one type with its relevance level, and nothing outside it decides relevance.

The level itself is checked against pytrec_eval's ``relevance_level`` in
tests/test_metrics_trec_eval.py; here: the type's contract, and a scan of ragexp's source for a
grade compared with a number anywhere but :func:`ragexp.datamodel.is_relevant`.
"""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

from ragexp.datamodel import RELEVANCE_LEVEL, Evidence, Qrels, is_relevant

RAGEXP = Path(__file__).resolve().parents[1] / "ragexp"
DECIDER = RAGEXP / "datamodel.py"
GRADED = {"q": {"a": 2, "b": 1, "c": 0, "d": -1}, "none": {"c": 0}, "empty": {}}


def test_a_unit_is_relevant_iff_its_grade_reaches_the_level():
    assert RELEVANCE_LEVEL == 1
    by_level = {level: Qrels(GRADED, level) for level in (1, 2, 3)}
    assert by_level[1].relevant("q") == {"a": 2, "b": 1}
    assert by_level[2].relevant("q") == {"a": 2}
    assert by_level[3].relevant("q") == {}
    assert by_level[1].relevant("none") == by_level[1].relevant("missing") == {}
    assert dict(by_level[2].grades("q")) == GRADED["q"] and dict(by_level[2].grades("missing")) == {}
    grades = np.array([-1, 0, 1, 2, 3])
    assert by_level[2].is_relevant(grades).tolist() == [False, False, False, True, True]
    assert [by_level[1].is_relevant(g) for g in grades.tolist()] == [False, False, True, True, True]
    assert [Evidence("d", grade=g).relevant for g in (0, 1, 2)] == [False, True, True]
    assert is_relevant(1) and not is_relevant(0) and not is_relevant(1, level=2)


def test_qrels_are_read_only_copies():
    source = {"q": {"a": 1}}
    qrels = Qrels(source, 2)
    source["q"]["a"] = 0
    source["r"] = {}
    assert dict(qrels["q"]) == {"a": 1} and list(qrels) == ["q"]
    with pytest.raises(TypeError):
        qrels["q"]["a"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        qrels.grades("q")["b"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError, match="read-only"):
        qrels.relevance_level = 1  # type: ignore[misc]
    for copied in (pickle.loads(pickle.dumps(qrels)), copy.deepcopy(qrels)):
        assert copied == qrels and copied.relevance_level == 2


def test_equality_counts_the_level():
    assert Qrels(GRADED) == GRADED == Qrels(GRADED)  # a plain mapping has the default level
    assert Qrels(GRADED, 2) != Qrels(GRADED) and Qrels(GRADED, 2) != GRADED
    assert Qrels({"q": {"a": 1}}) != Qrels({"q": {"a": 2}})


# --- nothing outside ragexp/datamodel.py compares a grade with a number ---------------------

_JUDGMENT_WORDS = ("grade", "relevant", "qrels", "judged")
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _names_judgments(node: ast.AST) -> bool:
    return any(word in ast.unparse(node).lower() for word in _JUDGMENT_WORDS)


def _loop_grade_names(tree: ast.AST) -> set[str]:
    """Names bound to grades by a loop over a judgments mapping: ``for g in relevant.values()``,
    ``for unit, g in qrels[q].items()`` (comprehensions too)."""
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        call = node.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and _names_judgments(call.func.value)):
            continue
        target = node.target
        if call.func.attr == "values" and isinstance(target, ast.Name):
            names.add(target.id)
        elif call.func.attr == "items" and isinstance(target, ast.Tuple) and isinstance(target.elts[-1], ast.Name):
            names.add(target.elts[-1].id)
    return names


def _is_grade(node: ast.AST, loop_grades: set[str]) -> bool:
    """A grade: a name or attribute called ``*grade*``, a loop name bound to one, ``x["grade"]``,
    ``x.get("grade", ...)``, or a look-up in a judgments mapping (``relevant.get(unit, 0)``)."""
    if isinstance(node, ast.Name):
        return "grade" in node.id.lower() or node.id in loop_grades
    if isinstance(node, ast.Attribute):
        return "grade" in node.attr.lower()
    if isinstance(node, ast.Subscript):
        return _is_grade(node.value, loop_grades) or (isinstance(node.slice, ast.Constant) and node.slice.value == "grade")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        first = node.args[0] if node.args else None
        return (isinstance(first, ast.Constant) and first.value == "grade") or _names_judgments(node.func.value)
    return False


def _is_default_level(node: ast.AST) -> bool:
    """``RELEVANCE_LEVEL`` by name: whatever it is compared with, that decides relevance."""
    return isinstance(node, (ast.Name, ast.Attribute)) and ast.unparse(node).endswith("RELEVANCE_LEVEL")


def _is_level(node: ast.AST) -> bool:
    """A number written in the code (``1``, ``-1``, ``0.5``)."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _is_domain_check(op: ast.cmpop, grade_left: bool, number: ast.AST) -> bool:
    """``grade >= 0`` / ``grade < 0`` (and mirrored): whether a value is a grade at all (an
    integer >= 0, the eval-set schema's rule), not whether it is relevant."""
    if not (isinstance(number, ast.Constant) and number.value == 0):
        return False
    if not grade_left:
        op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE(), ast.Lt: ast.Gt(), ast.LtE: ast.GtE()}[type(op)]
    return isinstance(op, (ast.GtE, ast.Lt))


def grade_comparisons(source: str) -> list[str]:
    """Each ordering comparison of a grade with a number, or of anything with ``RELEVANCE_LEVEL``, in
    ``source``, as ``line: code``; grade domain checks (:func:`_is_domain_check`) left out."""
    tree = ast.parse(source)
    loop_grades = _loop_grade_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, _ORDER):
                continue
            if any(map(_is_default_level, (left, right))) or any(
                _is_grade(grade, loop_grades) and _is_level(number) and not _is_domain_check(op, grade_left, number)
                for grade, number, grade_left in ((left, right, True), (right, left, False))
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("code", [
    "relevant.get(chunk_id, 0) >= 1",
    "any(e.get('grade', 1) >= 1 for e in evidence)",
    "e.get('grade', 1) < 1",
    "evidence.grade > 0",
    "[u for u, grade in qrels[q].items() if grade >= 1]",
    "sum(1 for g in row.relevant.values() if g > 0)",
    "[c for c, g in r.relevant.items() if g > 0]",
    "judged_gain >= RELEVANCE_LEVEL",
    "grade >= metrics.RELEVANCE_LEVEL",
    "0 < grade",
    "grades[unit] >= 2",
    "grade <= 0",
])
def test_the_scan_finds_a_relevance_decision_however_spelled(code):
    assert grade_comparisons(code)


@pytest.mark.parametrize("code", [
    "is_relevant(grade)",
    "type(grade) is int and grade >= 0",
    "grade < 0",
    "0 <= grade",
    "grades.get(key, -1) < grade",
    "evidence.grade != 1",
    "hit_gain > 0",
])
def test_the_scan_leaves_other_comparisons_alone(code):
    assert grade_comparisons(code) == []


def test_no_module_outside_the_qrels_type_compares_a_grade_with_a_number():
    """One place decides relevance (:func:`ragexp.datamodel.is_relevant`, used by
    :class:`~ragexp.datamodel.Qrels`); every other module asks it. Before qrels were a type
    (main at cff9792) this listed 19 comparisons in 14 modules (``relevant.get(chunk_id, 0) >= 1``,
    ``e.get("grade", 1) >= 1``, ``grade > 0``, ``gains >= RELEVANCE_LEVEL``, ...)."""
    found = {
        str(path.relative_to(RAGEXP.parent)): hits
        for path in sorted(RAGEXP.rglob("*.py"))
        if path != DECIDER and (hits := grade_comparisons(path.read_text(encoding="utf-8")))
    }
    assert found == {}
