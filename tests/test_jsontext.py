"""The JSON Lines parser: orjson where installed, with exactly the stdlib's values and errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.jobs import jsontext

pytest.importorskip("orjson")

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**130), 2**130)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except ValueError as exc:
        return "error", str(exc)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_values_are_the_stdlibs(value: Any) -> None:
    text = json.dumps(value)
    assert _same(jsontext.loads(text), json.loads(text))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=40), _VALUES.map(json.dumps).map(lambda text: text[: len(text) // 2])))
def test_any_text_gives_the_stdlibs_value_or_error(text: str) -> None:
    mine, theirs = _outcome(jsontext.loads, text), _outcome(json.loads, text)
    assert mine[0] == theirs[0]
    assert _same(mine[1], theirs[1]) if mine[0] == "value" else mine[1] == theirs[1]


@pytest.mark.parametrize(
    "text",
    [
        '{"fp": 340282366920938463463374607431768211455}',  # 128 bits: orjson would give a float
        '{"a": NaN}',
        '{"a": 1e400}',
        '{"x": "\\ud800"}',
        '{"a": 1, "a": 2}',
        '{"a": -0.0}',
    ],
)
def test_where_orjson_differs_the_stdlib_decides(text: str) -> None:
    assert _same(jsontext.loads(text), json.loads(text))


def test_without_orjson_the_stdlib_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsontext, "_ORJSON", None)
    assert jsontext.loads('{"id": "a", "fp": 5}') == {"id": "a", "fp": 5}
    with pytest.raises(ValueError, match="Expecting"):
        jsontext.loads("{")


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        _VALUES.map(json.dumps).map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.dictionaries(st.text(max_size=5), _VALUES, max_size=4).map(lambda obj: json.dumps(obj).encode()),
        st.binary(max_size=40),
    ),
    st.sampled_from([b"", b"\n", b"\r\n"]),
    st.booleans(),
)
def test_line_bytes_give_the_general_ways_object(body: bytes, end: bytes, bom: bool) -> None:
    """A line's bytes read by orjson directly: an object only where decoding the line and reading it
    with the stdlib gives that very object."""
    from simhash_redis.jobs.jsonlines import _json_object

    raw = (b"\xef\xbb\xbf" if bom else b"") + body + end
    fast = jsontext.loads_object(raw)
    if fast is not None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(jsontext, "_ORJSON", None)
            assert _same(fast, _json_object(raw, 1, "in.jsonl"))
