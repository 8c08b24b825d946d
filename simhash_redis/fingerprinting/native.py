"""The compiled core (`simhash_redis.compiled`) behind the pure engine's API: each function has its pure
twin's semantics, accepted types, exceptions and results, bit for bit; the GIL released for batches."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .. import compiled as _native
from ..codec import decode_fp
from ..compiled import (
    AttachCalls,
    GroupedCommands,
    ScriptRuns,
    column_buckets,
    fingerprint_lines,
    hash_values,
    odd_estimate,
    pack_column,
    unpack_column,
)
from ..errors import InvalidType
from . import tokens
from .documents import Document, Engine, document_form, weighted
from .hashing import MinHashParams, SchemeParams
from .normalize import PINNED

if TYPE_CHECKING:
    from ..compiled import PreparedDoc

__all__ = [
    "AttachCalls",
    "GroupedCommands",
    "ScriptRuns",
    "column_buckets",
    "fingerprint",
    "fingerprint_lines",
    "fingerprint_many",
    "fingerprint_packed_texts",
    "fingerprint_stored_many",
    "fingerprint_text_lines",
    "hash_values",
    "hits",
    "minhash",
    "odd",
    "odd_estimate",
    "pack_column",
    "sketch_doc",
    "sketch_docs",
    "sketch_text_lines",
    "unpack_column",
]

#: Documents, and about the characters, handed to the native engine per call of `fingerprint_many`.
BATCH_DOCS = 4096
BATCH_CHARS = 1 << 22
_ENGINES_MAX = 64
# Weighted documents whose absolute weights add up to more than this may overflow float64 sums: they go
# through the pure engine, so that numpy's own floating point error handling (warnings) applies.
_SAFE_WEIGHTS = 1e300


def _native_unicode() -> _native.Unicode:
    """Hand the pinned Unicode rules to the native engine: their tables and the questions Rust asks back."""

    def load_tables() -> tuple[bytes, bytes, bytes]:
        # The packed raw table, the class of every BMP code point, and 1 per BMP whitespace code point.
        raw, space = PINNED.bmp16_tables[0], PINNED.bmp_spaces.astype(np.uint8).tobytes()
        return raw.astype("<u8").tobytes(), PINNED.bmp_classes.astype(np.uint8).tobytes(), space

    def image_parts(cp: int) -> tuple[list[int], list[int], bool, list[int]] | None:
        # `Normalizer.image_parts` as lists, plus the NFKC image; None where Python normalises instead.
        parts = PINNED.image_parts(cp)
        if parts is None:
            return None
        image = [ord(char) for char in PINNED.nfkc_image(cp)]
        return [int(v) for v in parts[0].tolist()], [int(v) for v in parts[1].tolist()], bool(parts[2]), image

    def char_info(cp: int) -> tuple[int, bool]:  # of a code point outside the BMP
        return PINNED.class_of(cp), PINNED.isspace(cp)

    return _native.Unicode(load_tables, image_parts, PINNED.normalize, char_info, PINNED.is_nfkc)


_UNICODE = _native_unicode()
_lock = threading.Lock()
_sketchers: dict[tuple[int, ...], tuple[object, _native.MinHash]] = {}


def _engine(scheme: SchemeParams) -> _native.Engine:
    """The native engine of a scheme, made once per scheme."""
    binary = scheme.weighting == "binary"
    return _engine_of(scheme.features, scheme.n, scheme.f, binary, scheme.seed, scheme.stopwords)


@functools.lru_cache(maxsize=_ENGINES_MAX)
def _engine_of(
    features: str, n: int, f: int, binary: bool, seed: int, stopwords: tuple[str, ...]
) -> _native.Engine:
    # Keyed by the fields, whose hashing runs no Python code (a call path counts the modules it enters).
    return _native.Engine(_UNICODE, features, n, f, binary, seed, list(stopwords))


def _weighted_doc(totals: dict[str, float], scheme: SchemeParams) -> PreparedDoc | int:
    """Weighted features for the native engine; the pure engine's fingerprint where a sum may overflow."""
    weights = list(totals.values())
    if sum(map(abs, weights)) > _SAFE_WEIGHTS:
        return weighted(totals, Engine(scheme))
    return (_native.WEIGHTED, list(totals), weights)


def _prepare(doc: object, name: str, scheme: SchemeParams) -> PreparedDoc | int:
    """A document checked, in the form the native engine takes (or its fingerprint: see `_weighted_doc`)."""
    if type(doc) is bytes:
        return doc
    items = document_form(doc, name)
    if isinstance(items, (str, bytes)):
        return items
    if isinstance(items, dict):
        return _weighted_doc(items, scheme)
    step = tokens.CHUNK_CHARS
    if scheme.features != "chars" and step <= 0 < len(items):
        # The pure engine streams token lists longer than CHUNK_CHARS in slices of that many: with a
        # step below 1 (only ever set by hand) range() refuses 0 and gives no slice at all below it.
        range(0, len(items), step)
        return (_native.TOKENS, [], name)
    _native.check_tokens(items, name)
    return (_native.TOKENS, items, name)  # type: ignore[return-value]  # checked: str tokens only


def fingerprint(doc: Document, scheme: SchemeParams) -> int:
    """`scheme.fingerprint` natively (scheme validated)."""
    prepared = doc if type(doc) is str else _prepare(doc, "doc", scheme)
    if isinstance(prepared, int):
        return prepared
    return _engine(scheme).fingerprint(prepared, tokens.CHUNK_CHARS)


def fingerprint_many(docs: Iterable[Document], scheme: SchemeParams) -> list[int]:
    """`scheme.fingerprint_many` natively (scheme validated, docs an iterable)."""
    engine = _engine(scheme)
    out: list[int] = []
    batch: list[PreparedDoc] = []
    done: dict[int, int] = {}  # fingerprints known already (`_weighted_doc`), by position
    chars = 0
    for index, doc in enumerate(docs):
        if type(doc) is str:
            batch.append(doc)
            chars += len(doc)
        else:
            prepared = _prepare(doc, f"docs[{index}]", scheme)
            if isinstance(prepared, int):
                done[index] = prepared
                prepared = ""
            batch.append(prepared)
            chars += len(prepared[1]) if isinstance(prepared, tuple) else len(prepared)
        if len(batch) >= BATCH_DOCS or chars >= BATCH_CHARS:
            out += engine.fingerprint_many(batch, tokens.CHUNK_CHARS)
            batch, chars = [], 0
    if batch:
        out += engine.fingerprint_many(batch, tokens.CHUNK_CHARS)
    for at, value in done.items():
        out[at] = value
    return out


def minhash(hasher: MinHashParams) -> _native.MinHash:
    """The native sketcher of a MinHasher, made once per hasher (and its current parameters)."""
    params = (hasher.num_perm, hasher.bits, hasher.n, hasher.seed)
    # Keyed by the identities of objects its entry keeps alive (so never reused), and the parameters.
    key = (id(hasher), id(hasher.a), id(hasher.b), *params)
    entry = _sketchers.get(key)
    if entry is not None:
        return entry[1]
    a, b = hasher.a.astype("<u8").tobytes(), hasher.b.astype("<u8").tobytes()
    made = _native.MinHash(_UNICODE, *params, a, b)
    with _lock:
        if len(_sketchers) >= _ENGINES_MAX:
            _sketchers.clear()
        _sketchers[key] = ((hasher, hasher.a, hasher.b), made)
    return made


@functools.lru_cache(maxsize=_ENGINES_MAX)
def odd(n: int, seed: int) -> _native.OddSketch:
    """The native odd sketcher of `OddSketcher(n, seed)`, made once."""
    return _native.OddSketch(_UNICODE, n, seed)


def sketch_doc(doc: object, name: str) -> str | bytes | list[str] | tuple[str, ...]:
    """A sketcher's document checked (naming it `name`), in the form the native sketchers take."""
    if isinstance(doc, (bytes, bytearray, memoryview)):
        return doc if type(doc) is bytes else bytes(doc)
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Sequence):
        tokens = doc if isinstance(doc, (list, tuple)) else list(doc)
        _native.check_tokens(tokens, name)
        return tokens  # checked: str tokens only
    raise InvalidType(f"{name} must be a str, bytes or a sequence of str tokens, got {type(doc).__name__}")


def sketch_docs(
    docs: Sequence[str | bytes | Sequence[str]],
) -> list[str | bytes | list[str] | tuple[str, ...]]:
    """`sketch_doc` of a batch's documents, each named ``docs[i]``."""
    return [sketch_doc(doc, f"docs[{index}]") for index, doc in enumerate(docs)]


def fingerprint_stored_many(
    scheme: SchemeParams, n: int, seed: int, bands: MinHashParams, texts: Sequence[str | bytes]
) -> tuple[list[int], list[bytes]]:
    """`fingerprint_many(texts, scheme)` and the stored sketches of `BandedOddSketcher(n, seed)` (`bands`
    its band MinHash), a pass a text."""
    return _native.fingerprint_stored_many(
        _engine(scheme), odd(n, seed), minhash(bands), list(texts), tokens.CHUNK_CHARS
    )


def sketch_text_lines(
    raws: list[bytes],
    scheme: SchemeParams,
    n: int,
    seed: int,
    bands: MinHashParams,
    id_field: str,
    text_field: str,
    max_id: int,
) -> tuple[list[str], list[int], list[bytes], list[int]]:
    """`fingerprint_text_lines` with the texts' stored sketches: `(ids, fingerprints, sketches, others)`."""
    return _native.sketch_text_lines(
        _engine(scheme), odd(n, seed), minhash(bands), raws, id_field, text_field, max_id, tokens.CHUNK_CHARS
    )


def fingerprint_text_lines(
    raws: list[bytes], scheme: SchemeParams, id_field: str, text_field: str, max_id: int
) -> tuple[list[str], list[int], list[int]]:
    """The ids and text fingerprints of the JSON lines of the plain shape (a flat object, its id and text
    read as the pure reader reads them), and the positions of the others (InvalidType: a line not bytes)."""
    engine = _engine(scheme)
    return _native.fingerprint_text_lines(engine, raws, id_field, text_field, max_id, tokens.CHUNK_CHARS)


def fingerprint_packed_texts(
    data: bytes, offsets: bytes, wide: bool, scheme: SchemeParams
) -> tuple[list[int], list[int]]:
    """The fingerprints of the texts valid in UTF-8 and surely not blank of an Arrow string column (`data` its
    values from the first text's start, `offsets` one more than there are texts, native-endian, of 64 bits if
    `wide` else 32), and the positions of the others, left to the pure reader (`jobs.text_rows`);
    InvalidArgument for offsets that are not those of the texts."""
    return _native.fingerprint_packed_texts(_engine(scheme), data, offsets, wide, tokens.CHUNK_CHARS)


_WIDEST = 1 << 128


def hits(
    fps: list[int], replies: object, tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    """`store.candidates.pure_hits`: for each query, {stored value: (fingerprint, distance)} of its
    candidates within distance k; None for arguments outside the kernel's types (the pure filter answers);
    ValueError for a stored value that is no integer literal, or RESP bytes that are no whole replies."""
    kind = type(replies)
    if (
        (kind is list or kind is bytes)
        and type(fps) is list
        and type(tables) is int
        and tables >= 1
        and type(k) is int
        and all(type(fp) is int and 0 <= fp < _WIDEST for fp in fps)
    ):
        kernel = _native.hits if kind is list else _native.hits_in_sets
        return kernel(fps, replies, tables, min(max(k, -1), 129), k, f == 64, _slow_of(f))  # type: ignore[arg-type]
    return None


@functools.lru_cache(maxsize=8)
def _slow_of(f: int) -> Callable[[object, int], tuple[int, int]]:
    """The (fingerprint, distance) of a stored value other than plain decimal bytes, as `pure_hits`
    decodes it (raising as `codec.decode_fp` does)."""

    def decode(raw: object, fp: int) -> tuple[int, int]:
        candidate = decode_fp(raw, f)  # type: ignore[arg-type]  # any value int() takes, as the pure code
        return candidate, (candidate ^ fp).bit_count()

    return decode
