"""The compiled core's reading and fingerprinting of text lines against the pure reader and engine.

A run of JSON lines fingerprinted for a load gives the same ids, fingerprints and errors (line numbers
and messages) with the compiled core as without it, for any lines: the plain shape the core reads
itself (escapes, surrogate pairs, integer ids, other fields of any scalar), and everything near it that
it must hand back (lone surrogates, blank texts of every kind of white space, ids of the wrong type or
size, escaped ids, duplicate fields, nested values, invalid UTF-8, BOMs, blank lines).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InvalidType
from simhash_redis.fingerprinting import Scheme, engine_choice
from simhash_redis.jobs.fingerprinter import Fingerprinted, fingerprinted
from simhash_redis.jobs.jsonlines import JsonLines
from simhash_redis.jobs.records import ReadOptions
from tests.native.conftest import pure_engine

SCHEMES = [Scheme(), Scheme(f=128, n=2), Scheme(features="chars", n=3), Scheme(features="words", f=32)]

words = st.sampled_from(["near", "Duplicate", "ÉCOLE", "straße", "新闻", "报道", "ﬁve", "①", "x2", "Ⅻ"])
spaces = st.sampled_from([" ", "\n", "\t", "\u3000", "\u00a0", "\x1c", "\x85", "\u180e", "\u2028", "\r\n"])
texts = st.one_of(
    st.lists(st.one_of(words, spaces), max_size=12).map("".join),
    st.lists(spaces, max_size=4).map("".join),
    st.text(max_size=12),
    st.sampled_from(['say "hi"\\', "a/b", "\U0001f600 emoji", "\ud83d", "x\udc00", "\x00\x7f"]),
)
ids = st.one_of(
    st.text(alphabet="abcXYZ09-_:/.", min_size=1, max_size=12),
    st.text(max_size=6),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=0, max_value=3).map(lambda n: "é" * (255 + n)),
    st.sampled_from([1.5, True, None, [], "", 0]),
)
scalars = st.one_of(st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
others = st.one_of(texts, scalars, st.lists(st.integers(), max_size=2))
keys = st.sampled_from(["id", "text", "other", "TEXT", "t\u00e9"])


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line: usually an object of the fields the reader looks for, sometimes anything."""
    kind = draw(st.integers(min_value=0, max_value=12))
    if kind == 0:
        return draw(st.binary(max_size=40))
    if kind == 1:
        return draw(
            st.sampled_from(
                [b"", b"\n", b"  \r\n", b"[]\n", b'"x"\n', b"{}\n", b"{\n", b'\xef\xbb\xbf{"id":"a"}\n']
            )
        )
    fields: list[tuple[str, object]] = []
    if draw(st.integers(min_value=0, max_value=6)):
        fields.append(("id", draw(ids)))
    if draw(st.integers(min_value=0, max_value=6)):
        fields.append(("text", draw(texts)))
    fields += draw(st.lists(st.tuples(keys, others), max_size=2))
    fields = draw(st.permutations(fields))
    parts = [
        f"{json.dumps(key, ensure_ascii=draw(st.booleans()))}:"
        f"{draw(st.sampled_from(['', ' ']))}{json.dumps(value, ensure_ascii=draw(st.booleans()))}"
        for key, value in fields
    ]
    body = ",".join(parts)
    end = draw(st.sampled_from(["\n", "\r\n", "", " \n", "x\n", ",\n"]))
    return f"{{{body}}}{end}".encode("utf-8", "surrogatepass")


def both(run: JsonLines, scheme: Scheme) -> tuple[object, object]:
    def plain(done: Fingerprinted) -> object:
        errors = [(at, (e.source, e.line, e.reason, e.fatal)) for at, e in done.errors]
        return done.ids, done.fps, errors

    native = plain(fingerprinted(run, scheme, None, scheme.f, "auto"))
    with pure_engine():
        pure = plain(fingerprinted(run, scheme, None, scheme.f, "auto"))
    return native, pure


@settings(max_examples=400, deadline=None)
@given(
    raws=st.lists(lines(), max_size=10),
    scheme=st.sampled_from(SCHEMES),
    first=st.integers(min_value=1, max_value=10**6),
)
def test_the_same_records_fingerprints_and_errors(raws: list[bytes], scheme: Scheme, first: int) -> None:
    native, pure = both(JsonLines("in.jsonl", first, raws, ReadOptions()), scheme)
    assert native == pure


def test_the_plain_shape_is_read_by_the_core() -> None:
    scheme = Scheme()
    raws = [
        b'{"id": "a", "text": "Caf\\u00e9 \\"au\\" lait\\n"}\n',
        b'{"id": 42, "n": 1.5, "text": "\xe6\x96\xb0\xe9\x97\xbb \\ud83d\\ude00"}\n',
        b'{"id": "c", "text": "\\ud83d"}\n',  # a lone surrogate: the pure reader's
        b'{"id": "d", "text": " \\u3000 "}\n',  # blank: an error, from the pure reader
    ]
    ids, fps, others = engine_choice.native.fingerprint_text_lines(raws, scheme, "id", "text", 512)  # type: ignore[union-attr]
    assert ids == ["a", "42"]
    assert fps == scheme.fingerprint_many(['Café "au" lait\n', "新闻 \U0001f600"])
    assert others == [2, 3]
    done = fingerprinted(JsonLines("in.jsonl", 7, raws, ReadOptions()), scheme, None, 64, "auto")
    assert done.ids == ["a", "42", "c"]
    assert [(at, error.line, error.reason) for at, error in done.errors] == [(3, 10, "empty text")]


def test_the_core_reads_texts_only_under_the_native_engine_and_without_a_fingerprint_field() -> None:
    scheme = Scheme()
    run = JsonLines("in.jsonl", 1, [b'{"id": "a", "text": "one two three"}\n'], ReadOptions())
    assert run.fingerprints(scheme, None, 64, "auto") is not None
    with pure_engine():
        assert run.fingerprints(scheme, None, 64, "auto") is None
    # With a fingerprint field, the field is read as a fingerprint, not fingerprinted as a text.
    fp_run = JsonLines("in", 1, [b'{"id": "a", "fp": "1f"}\n'], ReadOptions(fingerprint_field="fp"))
    assert fp_run.fingerprints(scheme, None, 64, "auto") == (["a"], [0x1F], [], None)


def test_bad_lines_are_typed_errors() -> None:
    with pytest.raises(InvalidType, match="lines must be bytes, got str"):
        engine_choice.native.fingerprint_text_lines(["{}"], Scheme(), "id", "text", 512)  # type: ignore[union-attr,list-item]
