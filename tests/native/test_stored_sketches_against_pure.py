"""A verified load's fingerprints and stored sketches made together by the compiled core, against the
pure engine's separate calls: the same fingerprints, sketches and errors for any text and scheme.

The compiled core normalises and tokenises a text once for both where the scheme's tokens are the
sketches' (no stopwords, one chunk, tokens hashed in one 64-bit lane with the sketches' seed: the
default scheme and sketcher), and makes each as on its own elsewhere; both ways are drawn here, for texts
given as str and bytes and for runs of JSON lines as a load's workers read them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_redis.fingerprinting import BandedOddSketcher, Scheme, engine_choice, tokens
from simhash_redis.fingerprinting.banded_odd import fingerprints_and_sketches, storing
from simhash_redis.jobs.fingerprinter import Fingerprinted, fingerprinted
from simhash_redis.jobs.jsonlines import JsonLines
from simhash_redis.jobs.records import ReadOptions
from tests.native.conftest import pure_engine
from tests.native.test_native_equivalence import CHECK, FEW, MASK, SCHEMES, TEXTS, same
from tests.native.test_odd_sketch_against_pure import EDGES, long_docs
from tests.native.test_text_lines_against_pure import lines

#: Schemes that share the sketches' tokens (seed 0, no stopwords, not "chars", 32 or 64 bits), and any.
SHARING = st.builds(
    Scheme,
    features=st.sampled_from(["shingles", "words"]),
    n=st.integers(1, 5),
    f=st.sampled_from([32, 64]),
    weighting=st.sampled_from(["tf", "binary"]),
)
ANY_SCHEME = st.one_of(st.just(Scheme()), SHARING, SCHEMES)
SKETCHERS = st.builds(
    BandedOddSketcher,
    n=st.one_of(st.just(3), st.integers(1, 5)),
    seed=st.one_of(st.just(0), st.sampled_from([1, MASK]), st.integers(0, MASK)),
)
LONG = long_docs().filter(lambda doc: isinstance(doc, str))
DOCS = st.one_of(
    TEXTS, TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40), EDGES
)


def separately(
    scheme: Scheme, sketcher: BandedOddSketcher, texts: list[Any]
) -> tuple[list[int], list[bytes]]:
    """The pure engine's fingerprints and stored sketches, each made on its own."""
    with pure_engine():
        return scheme.fingerprint_many(texts), storing(sketcher).sketch_many(texts)


@CHECK
@given(scheme=ANY_SCHEME, sketcher=SKETCHERS, texts=st.lists(DOCS, max_size=5))
def test_texts(scheme: Scheme, sketcher: BandedOddSketcher, texts: list[Any]) -> None:
    assert engine_choice.native is not None, "the compiled core is not in use"
    got = fingerprints_and_sketches(scheme, storing(sketcher), texts)
    assert got == separately(scheme, sketcher, texts)


@FEW
@given(scheme=st.one_of(st.just(Scheme()), SHARING), doc=LONG)
def test_long_texts(scheme: Scheme, doc: str) -> None:
    sketcher = BandedOddSketcher()
    got = fingerprints_and_sketches(scheme, storing(sketcher), [doc, doc.encode()])
    assert got == separately(scheme, sketcher, [doc, doc.encode()])


@FEW
@given(texts=st.lists(st.one_of(TEXTS, LONG), min_size=1, max_size=3))
def test_texts_of_several_chunks(texts: list[str]) -> None:
    # Past the chunk size the fingerprint is made chunk by chunk, the sketches of the whole text.
    sketcher = BandedOddSketcher()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "CHUNK_CHARS", 40)
        got = fingerprints_and_sketches(Scheme(), storing(sketcher), texts)
        assert got == separately(Scheme(), sketcher, texts)


@pytest.mark.parametrize("other", [5, None, ["a", "b"], ("a",), bytearray(b"a")], ids=repr)
def test_other_documents_as_each_call_takes_them(other: Any) -> None:
    texts = ["ok", other]
    sketcher = BandedOddSketcher()
    same(lambda docs: separately(Scheme(), sketcher, docs), lambda docs: both(sketcher, docs), texts)


def both(sketcher: BandedOddSketcher, texts: list[Any]) -> tuple[list[int], list[bytes]]:
    return fingerprints_and_sketches(Scheme(), storing(sketcher), texts)


def worker(run: JsonLines, scheme: Scheme, sketcher: BandedOddSketcher) -> object:
    """What a load's worker gives for a run of lines: ids, fingerprints, errors and sketches."""
    done: Fingerprinted = fingerprinted(run, scheme, storing(sketcher), scheme.f, "auto")
    errors = [(at, (e.source, e.line, e.reason, e.fatal)) for at, e in done.errors]
    return done.ids, done.fps, errors, done.sketches


@CHECK
@given(
    raws=st.lists(lines(), max_size=10),
    scheme=ANY_SCHEME,
    sketcher=SKETCHERS,
    first=st.integers(min_value=1, max_value=10**6),
)
def test_lines(raws: list[bytes], scheme: Scheme, sketcher: BandedOddSketcher, first: int) -> None:
    run = JsonLines("in.jsonl", first, raws, ReadOptions())
    native = worker(run, scheme, sketcher)
    with pure_engine():
        assert worker(run, scheme, sketcher) == native


def test_lines_are_read_fingerprinted_and_sketched_by_the_core() -> None:
    scheme, sketcher = Scheme(), storing(BandedOddSketcher())
    raws = [
        b'{"id": "a", "text": "Caf\\u00e9 \\"au\\" lait\\n"}\n',
        b'{"id": "c", "text": "\\ud83d"}\n',  # a lone surrogate: the pure reader's
        b'{"id": 42, "text": "\xe6\x96\xb0\xe9\x97\xbb \\ud83d\\ude00"}\n',
        b'{"id": "d", "text": " \\u3000 "}\n',  # blank: an error, from the pure reader
    ]
    run = JsonLines("in.jsonl", 7, raws, ReadOptions())
    done = run.fingerprints(scheme, sketcher, 64, "auto")
    assert done is not None
    texts = ['Café "au" lait\n', "\ufffd", "新闻 \U0001f600"]
    fps, sketches = separately(scheme, BandedOddSketcher(), texts)
    assert done[0] == ["a", "c", "42"] and done[1] == fps and done[3] == sketches
    assert [(at, error.line, error.reason) for at, error in done[2]] == [(3, 10, "empty text")]
    # A query sketcher, a fingerprint field, the pure engine: not this path.
    assert run.fingerprints(scheme, BandedOddSketcher(), 64, "auto") is None
    assert (
        JsonLines("in", 1, [], ReadOptions(fingerprint_field="fp")).fingerprints(scheme, sketcher, 64, "auto")
        is None
    )
    with pure_engine():
        assert run.fingerprints(scheme, sketcher, 64, "auto") is None


def test_real_texts() -> None:
    corpus = pytest.importorskip("benchmarks.corpus")
    texts = [*corpus.documents("en", 30, 3500), *corpus.documents("zh", 30, 3500)]
    for scheme in (Scheme(), Scheme(stopwords=["the"])):
        got = fingerprints_and_sketches(scheme, storing(BandedOddSketcher()), texts)
        assert got == separately(scheme, BandedOddSketcher(), texts)
