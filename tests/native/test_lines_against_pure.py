"""The compiled core's reading of precomputed fingerprint lines against the pure reader.

`JsonLines.fingerprints` gives the same ids, fingerprints and errors (line numbers and messages) with the
compiled core as without it, for any lines: the plain shape the core reads itself, and everything near
it that it must hand back (escapes, nested values, integers Python will not read, decimal and negative
fingerprints, white space, duplicate fields, invalid UTF-8, BOMs, blank lines, values too wide for f).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InputError, InvalidArgument, InvalidType
from simhash_redis.fingerprinting import Scheme, engine_choice
from simhash_redis.jobs.fingerprinter import fingerprinted
from simhash_redis.jobs.jsonlines import JsonLines
from simhash_redis.jobs.records import ReadOptions
from tests.native.conftest import pure_engine

SCHEME = Scheme()

Read = tuple[list[str], list[int], list[tuple[int, tuple[str, int | None, str, bool]]]]

hex_text = st.integers(min_value=0, max_value=2**130).map(lambda v: format(v, "x"))
fingerprint_texts = st.one_of(
    hex_text,
    hex_text.map(lambda text: "0x" + text),
    hex_text.map(lambda text: "0X" + text.upper()),
    st.integers(min_value=-(2**129), max_value=2**129).map(str),
    st.integers(min_value=0, max_value=2**64).map(lambda v: "00" + str(v)),
    st.sampled_from(
        ["", " ", "-", "0x", "-0", "-0x1f", " 1f", "1f ", "1_f", "١٢", "12\n", "ff\u00a0", "nan"]
    ),
    st.text(max_size=8),
)
id_texts = st.one_of(
    st.text(alphabet="abcXYZ09-_:/.", min_size=1, max_size=12),
    st.text(max_size=6),
    st.integers(min_value=0, max_value=3).map(lambda n: "x" * (510 + n)),
)
values = st.one_of(
    fingerprint_texts,
    id_texts,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
keys = st.sampled_from(["id", "fp", "text", "other", "ID", "f\u00e9"])
# Numbers as written, some beyond what Python's int() reads by default (4,300 digits) or at its lowest
# setting (640), some not JSON at all.
raw_numbers = st.sampled_from(
    [
        "1" * 639,
        "1" * 640,
        "-" + "1" * 4301,
        "1" * 5000 + ".5",
        "1e400",
        "-0.0",
        "0.5E-3",
        "01",
        "1.",
        "-",
        "+1",
    ]
)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line: usually an object of the fields the reader looks for, sometimes anything."""
    kind = draw(st.integers(min_value=0, max_value=9))
    if kind == 0:
        return draw(st.binary(max_size=40))
    if kind == 1:
        return draw(
            st.sampled_from([b"", b"\n", b"  \r\n", b"[]\n", b'"x"\n', b"{}\n", b"{\n", b"\xef\xbb\xbf{}\n"])
        )
    fields: list[tuple[str, object]] = []
    if draw(st.booleans()):
        fields.append(("id", draw(id_texts)))
    if draw(st.integers(min_value=0, max_value=4)):
        fields.append(("fp", draw(fingerprint_texts)))
    fields += draw(st.lists(st.tuples(keys, values), max_size=3))
    fields = draw(st.permutations(fields))
    texts = [
        f"{json.dumps(key, ensure_ascii=draw(st.booleans()))}:"
        f"{draw(st.sampled_from(['', ' ', chr(9)]))}{json.dumps(value, ensure_ascii=draw(st.booleans()))}"
        for key, value in fields
    ]
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        texts.insert(draw(st.integers(min_value=0, max_value=len(texts))), f'"n": {draw(raw_numbers)}')
    body = ", ".join(texts)
    space = draw(st.sampled_from(["", " ", "\t", "\r"]))
    end = draw(st.sampled_from(["\n", "\r\n", "", " \n", "x\n", ",\n"]))
    return f"{space}{{{body}}}{end}".encode("utf-8", "surrogatepass")


def plain(errors: list[tuple[int, InputError]]) -> list[tuple[int, tuple[str, int | None, str, bool]]]:
    return [(at, (error.source, error.line, error.reason, error.fatal)) for at, error in errors]


def both(run: JsonLines, f: int, base: str) -> tuple[Read, Read]:
    ids, fps, errors, _ = fingerprinted(run, SCHEME, None, f, base)
    with pure_engine():
        pure_ids, pure_fps, pure_errors, _ = fingerprinted(run, SCHEME, None, f, base)
    return (ids, fps, plain(errors)), (pure_ids, pure_fps, plain(pure_errors))


@settings(max_examples=600, deadline=None)
@given(
    raws=st.lists(lines(), max_size=12),
    f=st.sampled_from([64, 32, 128, 8]),
    base=st.sampled_from(["auto", "hex", "dec"]),
    first=st.integers(min_value=1, max_value=10**6),
    text_field=st.booleans(),
)
def test_the_same_records_and_errors(
    raws: list[bytes], f: int, base: str, first: int, text_field: bool
) -> None:
    options = ReadOptions(
        fingerprint_field=None if text_field else "fp", text_field="fp" if text_field else "text"
    )
    native, pure = both(JsonLines("in.jsonl", first, raws, options), f, base)
    assert native == pure


def test_the_plain_shape_is_read_by_the_core() -> None:
    raws = [b'{"id": "a", "fp": "8ffe"}\n', b'{"id": "b", "fp": "-1"}\n', b'{"id": "c", "fp": "1\\u0066"}\n']
    ids, fps, others = engine_choice.native.fingerprint_lines(raws, "id", "fp", 64, "auto", 512)  # type: ignore[union-attr]
    assert (ids, fps, others) == (["a", "b"], [0x8FFE, 2**64 - 1], [2])
    run = JsonLines("in.jsonl", 7, [*raws, b"\n", b"nope\n"], ReadOptions(fingerprint_field="fp"))
    ids, fps, errors, _ = fingerprinted(run, SCHEME, None, 64, "auto")
    assert (ids, fps) == (["a", "b", "c"], [0x8FFE, 2**64 - 1, 0x1F])
    assert [(at, error.line) for at, error in errors] == [(3, 11)]


def test_runs_of_mostly_other_lines_are_left_to_a_worker() -> None:
    options = ReadOptions(fingerprint_field="fp")
    plain = [b'{"id": "p%d", "fp": "1f"}\n' % i for i in range(32)]
    escaped = [b'{"id": "e\\/%d", "fp": "1f"}\n' % i for i in range(32)]
    assert (
        JsonLines("in", 1, plain + escaped[:2], options).fingerprints(SCHEME, None, 64, "auto", 2) is not None
    )
    mostly_other = JsonLines("in", 1, plain + escaped[:3], options)
    assert mostly_other.fingerprints(SCHEME, None, 64, "auto", 2) is None
    assert len(fingerprinted(mostly_other, SCHEME, None, 64, "auto")[0]) == 35
    # A field name no line can hold (a lone surrogate from a command line): the pure reader's errors.
    odd = JsonLines("in", 1, plain[:1], ReadOptions(id_field="\udcff", fingerprint_field="fp"))
    assert odd.fingerprints(SCHEME, None, 64, "auto", 0) is None
    errors = fingerprinted(odd, SCHEME, None, 64, "auto").errors
    assert [error.reason for _, error in errors] == ["no '\\udcff' field"]


def test_bad_arguments_are_typed_errors() -> None:
    core = engine_choice.native
    assert core is not None
    with pytest.raises(InvalidType, match="lines must be bytes, got str"):
        core.fingerprint_lines(["{}"], "id", "fp", 64, "auto", 512)
    with pytest.raises(InvalidArgument, match=r"f must be in 1\.\.128, got 0"):
        core.fingerprint_lines([], "id", "fp", 0, "auto", 512)
    with pytest.raises(InvalidArgument, match="fp_base must be auto, hex or dec"):
        core.fingerprint_lines([], "id", "fp", 64, "oct", 512)


@pytest.mark.parametrize("choice", ["", "native"])
def test_a_compiled_core_older_than_the_package_is_refused(choice: str) -> None:
    # Built from an older checkout: no fingerprint_lines. The pure engine runs, or =native says why.
    code = (
        "import sys, types, simhash_redis_native as core\n"
        "old = types.ModuleType('simhash_redis_native')\n"
        "old.__dict__.update({k: v for k, v in vars(core).items() if k != 'fingerprint_lines'})\n"
        "sys.modules['simhash_redis_native'] = old\n"
        "import simhash_redis\n"
        "print(simhash_redis.engine())\n"
    )
    env = dict(os.environ, SIMHASH_REDIS_ENGINE=choice)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if choice:
        assert done.returncode == 1
        assert "older than this simhash-redis (no fingerprint_lines): upgrade it" in done.stderr
    else:
        assert (done.returncode, done.stdout) == (0, "python\n"), done.stderr
        # Not silently slower: the warning names the cause and the way out.
        assert "RuntimeWarning" in done.stderr and "pip install ./native" in done.stderr
        assert "the pure engine runs meanwhile" in done.stderr
