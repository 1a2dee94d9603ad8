"""The bounds every stored-file reader applies first (ragexp.stored.limits), tried as a hostile
file would: devices, FIFOs, folders, oversize files, deep nesting, alias bombs, duplicate keys,
numbers beyond a float."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.errors import RagexpInputError
from ragexp.stored import limits


def test_regular_file_read_whole(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a": 1}\n')
    assert limits.read_bytes(path) == b'{"a": 1}\n'


def test_device_refused_without_reading():
    with pytest.raises(RagexpInputError, match="not a regular file"):
        limits.read_bytes("/dev/zero")


def test_fifo_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = []
    reader = threading.Thread(target=lambda: result.append(pytest.raises(RagexpInputError, limits.read_bytes, fifo)))
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert "not a regular file" in str(result[0].value)


def test_folder_and_missing_file_refused(tmp_path):
    with pytest.raises(RagexpInputError, match="folder"):
        limits.read_bytes(tmp_path)
    with pytest.raises(RagexpInputError, match="no such file"):
        limits.read_bytes(tmp_path / "missing")


def test_oversize_refused_before_reading(tmp_path):
    path = tmp_path / "big.md"
    with open(path, "wb") as out:  # sparse: 1 GiB that costs no disk
        out.truncate(1 << 30)
    with pytest.raises(RagexpInputError, match="more than the 1,024 allowed"):
        limits.read_bytes(path, max_bytes=1024)


def test_text_names_line_of_bad_byte(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\nok\nbad \xff\n")
    with pytest.raises(RagexpInputError) as err:
        limits.read_text(path)
    assert err.value.line == 3


@pytest.mark.parametrize("depth,refused", [(64, False), (65, True), (2000, True)])
def test_json_depth(depth, refused):
    text = "[" * depth + "]" * depth
    if refused:
        with pytest.raises(RagexpInputError, match="nested more than 64"):
            limits.parse_json(text, source="f.jsonl", line=7)
    else:
        assert limits.parse_json(text) is not None


def test_json_many_brackets_but_shallow_kept():
    assert limits.parse_json("[" + ",".join(["[]"] * 100) + "]") == [[]] * 100


def test_json_depth_ignores_brackets_in_strings():
    assert limits.parse_json(json.dumps({"q": "[" * 500})) == {"q": "[" * 500}


def _depth_char_by_char(text: str) -> int:
    """The reference: a character-by-character walk that tracks strings and escapes."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ ab,:'),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"\\ k'), inner, max_size=4),
    max_leaves=40)


@given(_JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_json_depth_matches_a_character_by_character_walk(value):
    """The depth pre-scan (regular expressions in C) agrees with a walk over every character,
    on JSON whose strings are full of brackets, quotes and backslashes."""
    text = json.dumps(value)
    assert limits._bracket_depth(text) == _depth_char_by_char(text)


@given(st.text(alphabet='[]{}"\\ a\n', max_size=80))
@settings(max_examples=500, deadline=None)
def test_json_depth_matches_the_walk_on_malformed_text_too(text):
    """Unterminated strings, stray backslashes and quotes: the pre-scan still agrees with the walk."""
    assert limits._bracket_depth(text) == _depth_char_by_char(text)


def test_json_depth_scan_is_linear_on_a_hostile_unterminated_string():
    """``"\\"\\"\\"…`` with no closing quote and many brackets: a string pattern that must end in a
    quote retries from every escaped quote (quadratic: 40,000 of them took 18 s); this one makes
    one pass. 400,000 of them: milliseconds when linear, about half an hour when quadratic."""
    text = '"' + '\\"' * 400_000 + "[" * 70
    started = time.perf_counter()
    with pytest.raises(RagexpInputError, match="Unterminated string"):
        limits.parse_json(text)
    assert time.perf_counter() - started < 10


def test_json_depth_of_strings_with_escaped_quotes_and_backslashes():
    text = json.dumps(['a"[[[', ["b\\"], '{{"', "\\"])
    assert limits._bracket_depth(text) == _depth_char_by_char(text) == 2


def test_json_duplicate_key_named():
    with pytest.raises(RagexpInputError) as err:
        limits.parse_json('{"a": {"b": 1, "b": 2}}', source="f", line=3)
    assert err.value.field == "b" and err.value.line == 3


@pytest.mark.parametrize("text", ['{"grade": ' + "9" * 400 + "}", '{"grade": 1e400}', '{"x": NaN}',
                                  '{"x": -Infinity}'])
def test_json_numbers_beyond_float_refused(text):
    with pytest.raises(RagexpInputError, match="out of range|not a number"):
        limits.parse_json(text)


def test_json_large_but_finite_numbers_kept():
    assert limits.parse_json('{"a": 123456789012345678901234567890, "b": 1e300}') == {
        "a": 123456789012345678901234567890, "b": 1e300}


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))


def test_yaml_alias_bomb_refused_at_first_alias():
    assert len(ALIAS_BOMB) < 600
    with pytest.raises(RagexpInputError, match=r"aliases \(\*a\) are not allowed"):
        limits.parse_yaml(ALIAS_BOMB, source="resolved.yaml")


def test_yaml_plain_config_read():
    assert limits.parse_yaml("a: 1\nb: {c: [1, 2]}\n") == {"a": 1, "b": {"c": [1, 2]}}


def test_yaml_deep_nesting_refused():
    with pytest.raises(RagexpInputError, match="nested more than 64"):
        limits.parse_yaml("[" * 200 + "]" * 200)


def test_yaml_duplicate_key_refused():
    with pytest.raises(RagexpInputError) as err:
        limits.parse_yaml("a: 1\nb: 2\na: 3\n")
    assert err.value.field == "a"


def test_yaml_python_tags_refused():
    with pytest.raises(RagexpInputError, match="not valid YAML"):
        limits.parse_yaml("a: !!python/object/apply:os.system ['true']\n")


def test_yaml_huge_int_refused():
    with pytest.raises(RagexpInputError, match="out of range"):
        limits.parse_yaml("grade: " + "9" * 400 + "\n")
