"""The measure identity (ragexp.metrics.measure): one parse of a metric key that compare, reproduce,
the gate and the MLflow logger share, checked against keys the runner writes; its inverse,
:func:`metric_key`, and a scan of ragexp/ that no other module spells a key's grammar itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.comparison.gate import GateSpec
from ragexp.metrics.measure import (
    CHUNK, CI_HIGH, CI_LOW, DOC, GENERATION, HIGHER, LOWER, RUN, SOURCE, TAG, at, ci_bounds, grouped, measure, metric_key,
)
from ragexp.tracking.metric_names import from_mlflow, to_mlflow


@pytest.mark.parametrize(("key", "name", "k", "level", "direction", "group", "bound"), [
    ("hit_rate_at_5", "hit_rate", 5, CHUNK, HIGHER, "", ""),
    ("doc_ndcg_at_10", "ndcg", 10, DOC, HIGHER, "", ""),
    ("mrr", "mrr", None, CHUNK, HIGHER, "", ""),
    ("context_hit_rate", "context_hit_rate", None, CHUNK, HIGHER, "", ""),
    ("judged_at_5", "judged", 5, CHUNK, HIGHER, "", ""),
    ("tag.synonym.mrr", "mrr", None, CHUNK, HIGHER, "tag.synonym", ""),
    ("source.draft.hit_rate_at_5", "hit_rate", 5, CHUNK, HIGHER, "source.draft", ""),
    ("recall_at_5_ci_low", "recall", 5, CHUNK, HIGHER, "", "ci_low"),
    ("faithfulness", "faithfulness", None, GENERATION, HIGHER, "", ""),
    ("retrieval_failure_rate", "retrieval_failure_rate", None, GENERATION, LOWER, "", ""),
    ("tag.t.hallucinated_rate", "hallucinated_rate", None, GENERATION, LOWER, "tag.t", ""),
    ("judge_failures", "judge_failures", None, GENERATION, LOWER, "", ""),
    ("time.retrieval_s", "time.retrieval_s", None, RUN, LOWER, "", ""),
    ("gen.latency_s", "gen.latency_s", None, GENERATION, LOWER, "", ""),
    ("gen.repeating_answers", "gen.repeating_answers", None, GENERATION, LOWER, "", ""),
    ("gen.length_capped", "gen.length_capped", None, GENERATION, LOWER, "", ""),
    ("retrieval_depth", "retrieval_depth", None, RUN, HIGHER, "", ""),
])
def test_a_key_names_one_measure(key, name, k, level, direction, group, bound):
    identity = measure(key)
    assert (identity.name, identity.k, identity.level, identity.direction, identity.group, identity.bound) == (
        name, k, level, direction, group, bound)


@pytest.mark.parametrize(("key", "mlflow_key"), [
    ("hit_rate_at_10", "retrieval/hit_rate_at_10"), ("doc_mrr", "doc/mrr"), ("refusal_accuracy", "generation/refusal_accuracy"),
    ("retrieval_depth", "other/retrieval_depth"), ("judged_at_5", "retrieval/judged_at_5"),
])
def test_the_mlflow_section_is_the_measures_level(key, mlflow_key):
    assert to_mlflow(key) == mlflow_key and from_mlflow(mlflow_key) == key


def test_the_gate_gates_a_lower_is_better_measure_downwards_unless_the_spec_says_otherwise():
    spec = GateSpec.from_mapping({"defaults": {"direction": "higher"},
                                  "metrics": {"retrieval_failure_rate": {}, "mrr": {}, "latency": {"direction": "lower"}}})
    assert {rule.metric: rule.direction for rule in spec.rules} == {
        "retrieval_failure_rate": "lower", "mrr": "higher", "latency": "lower"}
    assert [rule.direction for rule in spec.select(["generation_failure_rate", "f1"]).rules] == ["lower", "higher"]


# --- building keys: metric_key is the inverse of measure -------------------------------------------

RETRIEVAL_NAMES = ("hit_rate", "recall", "mrr", "context_precision", "ndcg")
_WORDS = st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=4).map("_".join)
#: A name the grammar can carry (module docstring of ragexp.metrics.measure): no cutoff or CI suffix of
#: its own, no ``doc_`` prefix, no ``cost.``; with ``.`` only outside a group.
PLAIN_NAMES = _WORDS.filter(lambda n: not re.search(r"_ci_(low|high)$", n) and not n.startswith("doc_") and n != "doc")
DOTTED_NAMES = st.builds("{}.{}".format, st.sampled_from(["ppi", "gen", "judge", "time", "black_box"]), PLAIN_NAMES)
GROUPS = st.builds("{}.{}".format, st.sampled_from([TAG, SOURCE]), st.from_regex(r"[\w-]{1,64}", fullmatch=True))
BOUNDS = st.sampled_from(["", CI_LOW, CI_HIGH])
CUTOFFS = st.integers(0, 10**9)


@st.composite
def key_parts(draw):
    """``(name, k, doc, group, bound)`` the grammar carries: a cutoff on a retrieval name (``judged``
    only with one) or any plain name under ``doc``; dotted names only ungrouped."""
    doc, group, bound = draw(st.booleans()), draw(st.one_of(st.just(""), GROUPS)), draw(BOUNDS)
    retrieval = draw(st.sampled_from([*RETRIEVAL_NAMES, "judged"]))
    if retrieval == "judged":
        name, k = retrieval, draw(CUTOFFS)
    elif draw(st.booleans()):
        name, k = retrieval, draw(st.none() | CUTOFFS)
    else:
        name = draw(PLAIN_NAMES if group else PLAIN_NAMES | DOTTED_NAMES)
        k = draw(st.none() | CUTOFFS) if doc else None
    return name, k, doc, group, bound


@settings(max_examples=500, deadline=None)
@given(parts=key_parts())
def test_measure_reads_back_the_parts_metric_key_built(parts):
    name, k, doc, group, bound = parts
    key = metric_key(name, k, doc=doc, group=group, bound=bound)
    identity = measure(key)
    assert (identity.key, identity.name, identity.k, identity.level == DOC, identity.group, identity.bound) == (
        key, name, k, doc, group, bound)


#: Pieces of keys, glued at random: what measure may be handed by a store, a gate spec or a user.
_PIECES = ["hit_rate", "recall", "mrr", "ndcg", "judged", "context_precision", "context_", "faithfulness", "x", "n_",
           "_at_", "_at_1", "0", "7", "12", "_ci_low", "_ci_high", "_ci", "doc_", "tag.", "source.", "ppi.", "gen.",
           "time.", ".", "_", "rate", "s"]


@settings(max_examples=1000, deadline=None)
@given(key=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8).map("".join))
def test_metric_key_of_any_parsed_key_gives_back_the_key(key):
    """Every key :func:`measure` parses (except ``cost.`` keys, whole names outside the grammar, and a
    cutoff written with a leading zero, which reads as the same k) is rebuilt byte for byte."""
    if key.startswith("cost.") or re.search(r"_at_0\d", key):
        return
    identity = measure(key)
    assert metric_key(identity.name, identity.k, doc=identity.level == DOC, group=identity.group,
                      bound=identity.bound) == key


def test_the_shorthands_spell_the_keys_the_runner_logs():
    assert at("hit_rate", 5) == "hit_rate_at_5" and metric_key("ndcg", 10, doc=True) == "doc_ndcg_at_10"
    assert ci_bounds("recall_at_5") == ("recall_at_5_ci_low", "recall_at_5_ci_high")
    assert ci_bounds("ppi.faithfulness") == ("ppi.faithfulness_ci_low", "ppi.faithfulness_ci_high")
    assert grouped(TAG, "synonym", "mrr") == "tag.synonym.mrr" and grouped(SOURCE, "draft", at("hit_rate", 5)) == (
        "source.draft.hit_rate_at_5")
    assert metric_key("mrr", group="tag.t", bound=CI_LOW) == "tag.t.mrr_ci_low"
    assert metric_key("n_queries", doc=True) == "doc_n_queries"


# --- no module but measure.py spells a key's grammar -----------------------------------------------

RAGEXP = Path(__file__).resolve().parent.parent / "ragexp"
#: The one module allowed to spell the grammar.
BUILDER = Path("metrics") / "measure.py"
_CUTOFF_TEMPLATE = re.compile(r"_at_(\{|%)")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that stand alone as a statement (docstrings, bare strings)."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def _spells_a_key(node: ast.AST, docstrings: set[int]) -> bool:
    """Whether ``node`` builds a metric key by hand: an f-string with ``_at_{...}``, ``doc_{...}``
    or a ``{...}_ci_low``/``_ci_high`` suffix; ``+`` with a ``doc_``, ``_at_`` or CI-suffix literal;
    or a template literal ``..._at_{k}`` / ``_at_%d`` for ``.format``/``%``."""
    if isinstance(node, ast.JoinedStr):
        parts = node.values
        for i, part in enumerate(parts):
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                continue
            before = i > 0 and isinstance(parts[i - 1], ast.FormattedValue)
            after = i + 1 < len(parts) and isinstance(parts[i + 1], ast.FormattedValue)
            text = part.value
            if after and (text.endswith(("_at_", "_ci_")) or (i == 0 and text.endswith("doc_"))):
                return True
            if before and text.startswith(("_at_", f"_{CI_LOW}", f"_{CI_HIGH}")):
                return True
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant) and isinstance(side.value, str) and (
                    side.value in ("doc_", "_at_") or side.value.startswith((f"_{CI_LOW}", f"_{CI_HIGH}"))):
                return True
        return False
    return (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _CUTOFF_TEMPLATE.search(node.value) is not None)


def hand_built_keys(root: Path = RAGEXP) -> list[str]:
    """``path:line`` of every place under ``root`` but ``metrics/measure.py`` that builds a metric key
    itself instead of calling :func:`ragexp.metrics.measure.metric_key` (or its shorthands)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) == BUILDER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docstrings = _docstrings(tree)
        found += [f"{path.relative_to(root)}:{node.lineno}" for node in ast.walk(tree) if _spells_a_key(node, docstrings)]
    return found


def test_no_module_but_measure_builds_a_metric_key():
    """Keys come from :func:`metric_key` only, so each key has one spelling. Fails on cff9792: 41
    places in 13 modules (runner, corrected, evaluate, judged, table, per_query_diff, trace_content,
    sweep_summary, metric_names, experiments, recall_plot, run_logger, compare) spelled keys by hand."""
    assert hand_built_keys() == [], "build metric keys with ragexp.metrics.measure.metric_key / at / ci_bounds / grouped"


@pytest.mark.parametrize("line", [
    'key = f"{name}_at_{k}"', 'key = f"hit_rate_at_{k}"', "key = f'{prefix}ndcg_at_{k}'", 'key = f"doc_{rest}"',
    'key = f"{name}_ci_low"', 'key = f"{name}_ci_high"', 'low, high = f"{m}_ci_low", f"{m}_ci_high"',
    'key = f"{metric}_ci_{bound}"', 'key = name + "_ci_low"', 'key = "doc_" + name', 'key = name + "_at_" + str(k)',
    'TEMPLATES = ("hit_rate_at_{k}", "mrr")', 'key = "recall_at_%d" % k',
    'values = [m.get(f"{name}_at_{k}") for k in ks]',
])
def test_the_scan_finds_each_way_of_spelling_a_key(tmp_path, line):
    (tmp_path / "module.py").write_text(f'"""A module; its docstring may say ``recall_at_{{k}}``."""\n{line}\n')
    assert set(hand_built_keys(tmp_path)) == {"module.py:2"}


def test_the_scan_leaves_prose_labels_and_the_builder_alone(tmp_path):
    (tmp_path / "module.py").write_text(
        '"""Keys ``hit_rate_at_{k}``, ``<m>_ci_low``."""\n'
        'def f(k, name, rest):\n'
        '    """``doc_ndcg_at_{k}``: the document-level nDCG."""\n'
        '    return f"hit@{k}", f"nDCG@{k}", f"cost.{name}", f"time.{rest}", f"tag.{name}", "judge_review/kappa_ci_low"\n')
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "measure.py").write_text('def at(name, k):\n    return f"{name}_at_{k}"\n')
    assert hand_built_keys(tmp_path) == []
