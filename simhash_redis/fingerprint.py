"""SimHash fingerprints (Charikar): `fingerprint`, the vectorised `fingerprint_many`, and `distance`.

Each feature is hashed to f bits; bit j's counter gains the feature's weight where the hash has a 1 and
loses it where it has a 0; the fingerprint has bit j set where the counter is > 0. Token hashes come
from xxh3 (cached per process, or for 64-bit word tokens of large batches computed in numpy, bit for
bit as xxhash does: `simhash_redis.xxh3`); shingle hashes combine them with a fixed 64-bit mixer in
numpy, and the counters are summed as bit-sliced counters (byte lanes of uint64 words for small
batches: `simhash_redis.bitsums`). docs/fingerprints.md defines every bit.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from . import features as _features
from .bitsums import bit_sums
from .checks import is_int
from .errors import InvalidArgument, InvalidType
from .features import (
    ascii_word_spans,
    classified_code_points,
    collapse_whitespace,
    has_token,
    normalize,
    split_chunks,
    token_parts,
    token_parts_at,
    token_parts_of,
    token_spans_of,
)
from .scheme import DEFAULT_SCHEME, Scheme
from .xxh3 import VECTOR_MAX, digest, hash_spans

__all__ = ["DEFAULT_SCHEME", "Document", "Scheme", "distance", "fingerprint", "fingerprint_many"]

#: A document: text, UTF-8 bytes, a sequence of tokens, or weighted features (mapping or pairs).
Document = str | bytes | bytearray | Iterable[str] | Mapping[str, float] | Iterable[tuple[str, float]]

#: Multiplier of the shingle combiner (2**64 / golden ratio).
MIX_K = 0x9E3779B97F4A7C15
#: Multipliers of the splitmix64 finaliser.
MIX_C1 = 0xBF58476D1CE4E5B9
MIX_C2 = 0x94D049BB133111EB
#: Token hashes kept per (seed, width) before the cache is cleared; bounds memory in long-running processes.
CACHE_MAX = 1 << 18
#: Tokens gathered into one vectorised batch of `fingerprint_many`.
BATCH_TOKENS = 1 << 18
#: Documents gathered into one vectorised batch at most.
BATCH_DOCS = 4096
# Spans of `_span_keys` cut one by one below this count, else from the text decoded once.
_FEW_SPANS = 64
#: Fewest characters of texts for which the vectorised xxh3 hashes word tokens: it makes about a
#: hundred numpy calls, slower than the token cache on a text or two.
VECTOR_MIN_CHARS = 1 << 14
#: Weighted features whose counters are summed per block; bounds memory of huge weighted documents.
WEIGHT_BLOCK = 1 << 15

_U64 = npt.NDArray[np.uint64]
_Key = str | bytes
# The mixing constants and shifts as numpy scalars, made once.
_K, _C1, _C2 = np.uint64(MIX_K), np.uint64(MIX_C1), np.uint64(MIX_C2)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)
# Tokens mixed per chunk: 256 KiB per array, which stays in the CPU cache.
_MIX_CHUNK = 1 << 15


class _HashTable(dict[_Key, int]):
    """Token → row of `hashes`, the token's xxh3 hash (one uint64 lane, or two for f=128)."""

    def __init__(self, seed: int, lanes: int) -> None:
        super().__init__()
        self.seed = seed
        self.lanes = lanes
        self.hashes: _U64 = np.zeros((1024, lanes), dtype=np.uint64)
        self.pending: list[_Key] = []
        self.lock = threading.Lock()

    def __missing__(self, key: _Key) -> int:
        row = len(self)
        self[key] = row
        self.pending.append(key)
        return row

    def _flush(self) -> None:
        """Hash the tokens met since the last flush into `hashes`."""
        start = len(self) - len(self.pending)
        data = [key.encode("utf-8") if isinstance(key, str) else key for key in self.pending]
        self.pending = []
        rows = digest(data, self.seed, self.lanes)
        if len(self) > len(self.hashes):
            grown = np.zeros((max(len(self), 2 * len(self.hashes)), self.lanes), dtype=np.uint64)
            grown[:start] = self.hashes[:start]
            self.hashes = grown
        self.hashes[start : len(self)] = rows

    def lookup(self, keys: Iterable[_Key], count: int) -> _U64:
        """Return the hashes of some tokens, hashing the ones not cached yet.

        Args:
            keys: tokens (str, or their UTF-8 bytes).
            count: how many.

        Returns:
            A (len(keys), lanes) uint64 array.
        """
        with self.lock:
            if len(self) > CACHE_MAX:
                self.clear()
            rows = np.fromiter(map(self.__getitem__, keys), dtype=np.intp, count=count)
            if self.pending:
                self._flush()
            return self.hashes[rows]


class _CodePointTable:
    """Code point → xxh3 hash of its UTF-8, for CJK single-character tokens, filled on first sight."""

    def __init__(self, seed: int, lanes: int) -> None:
        self.seed = seed
        self.lanes = lanes
        self.hashes: _U64 = np.zeros((_features.CJK_RANGES[-1][1] + 1, lanes), dtype=np.uint64)
        self.known = np.zeros(len(self.hashes), dtype=bool)
        self.lock = threading.Lock()

    def filled(self, cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32]) -> _U64:
        """Hash the CJK code points not hashed yet, and return the whole table.

        Args:
            cps: code points, each within `features.CJK_RANGES`.

        Returns:
            The (code points, lanes) uint64 table, filled at least for cps.
        """
        with self.lock:
            if not np.take(self.known, cps).all():
                missing = np.unique(cps[~np.take(self.known, cps)])
                data = [chr(cp).encode("utf-8") for cp in missing.tolist()]
                self.hashes[missing] = digest(data, self.seed, self.lanes)
                self.known[missing] = True
            return self.hashes

    def lookup(self, cps: npt.NDArray[np.uint32]) -> _U64:
        """Return the hashes of CJK code points.

        Args:
            cps: code points, each within `features.CJK_RANGES`.

        Returns:
            A (len(cps), lanes) uint64 array.
        """
        with self.lock:
            known = self.known[cps]
            missing = _NO_CPS if known.all() else np.unique(cps[~known])
            if len(missing):
                data = [chr(cp).encode("utf-8") for cp in missing.tolist()]
                self.hashes[missing] = digest(data, self.seed, self.lanes)
                self.known[missing] = True
            return self.hashes[cps]


_NO_CPS = np.zeros(0, dtype=np.uint32)
_tables: dict[tuple[int, int], _HashTable] = {}
_cp_tables: dict[tuple[int, int], _CodePointTable] = {}
_tables_lock = threading.Lock()


_T = TypeVar("_T")


def _shared(registry: dict[tuple[int, int], _T], factory: Callable[[int, int], _T], scheme: Scheme) -> _T:
    """Return the process-wide hash table of one kind for a scheme's seed and width, made once.

    Args:
        registry: the tables of that kind made so far.
        factory: makes one from (seed, lanes).
        scheme: the scheme.

    Returns:
        The table.
    """
    key = (scheme.seed, 2 if scheme.f == 128 else 1)
    table = registry.get(key)
    if table is None:
        with _tables_lock:
            table = registry.setdefault(key, factory(*key))
    return table


def _mix(z: _U64, scratch: _U64) -> _U64:
    """Apply the splitmix64 finaliser in place.

    Args:
        z: uint64 values.
        scratch: a uint64 array of the same shape, overwritten.

    Returns:
        z, mixed.
    """
    # In place with a scratch array: no temporary allocated per step.
    for shift, multiplier in ((_S30, _C1), (_S27, _C2)):
        np.right_shift(z, shift, out=scratch)
        z ^= scratch
        z *= multiplier
    np.right_shift(z, _S31, out=scratch)
    z ^= scratch
    return z


def _combine_windows(column: _U64, n: int) -> _U64:
    """Combine every window of n consecutive token hashes of one lane, as if zeros followed the last.

    Args:
        column: one lane of the token hashes, 1-D.
        n: window length, at least 2.

    Returns:
        For each token, the combined hash of the window starting there.
    """
    size = len(column)
    out = np.empty(size, dtype=np.uint64)
    scratch = np.empty(min(size, _MIX_CHUNK), dtype=np.uint64)
    # Chunks small enough to stay in the CPU cache through all n-1 rounds: about twice as fast.
    for start in range(0, size, _MIX_CHUNK):
        stop = min(size, start + _MIX_CHUNK)
        state = out[start:stop]
        state[:] = column[start:stop]
        for j in range(1, n):
            state *= _K
            # Windows running past the last token add nothing for the missing tokens.
            inside = max(0, min(size, stop + j) - start - j)
            state[:inside] += column[start + j : start + j + inside]
            _mix(state, scratch[: stop - start])
    return out


def _combine_short(column: _U64, firsts: npt.NDArray[np.intp], length: int) -> _U64:
    """Combine all the tokens of short units of one length, one lane.

    Args:
        column: one lane of the token hashes, 1-D.
        firsts: the index of each unit's first token.
        length: their token count, at least 1.

    Returns:
        Each unit's combined hash.
    """
    state = column[firsts]
    scratch = np.empty_like(state)
    for j in range(1, length):
        state *= _K
        state += column[firsts + j]
        _mix(state, scratch)
    return state


def _features_of(
    hashes: _U64, lengths: npt.NDArray[np.intp], short: npt.NDArray[np.bool_], n: int
) -> tuple[_U64, npt.NDArray[np.intp]]:
    """Build the feature hashes of consecutive token units: every window of n tokens.

    A short unit (a whole document with fewer than n tokens) gives one feature of all its tokens.

    Args:
        hashes: the token hashes of all units, concatenated, shape (T, lanes).
        lengths: tokens per unit.
        short: per unit, whether the short-document rule applies.
        n: window length.

    Returns:
        The feature hashes (M, lanes), each unit's contiguously, and the feature count of each unit.
    """
    counts = np.where(short, lengths > 0, np.maximum(lengths - n + 1, 0)).astype(np.intp)
    total = int(counts.sum())
    firsts = np.cumsum(counts) - counts
    starts = np.cumsum(lengths) - lengths
    windows = np.repeat(starts - firsts, counts) + np.arange(total, dtype=np.intp)
    if n == 1:
        return hashes[windows], counts
    lanes = hashes.shape[1]
    feats = np.empty((total, lanes), dtype=np.uint64)
    for lane in range(lanes):
        column = np.ascontiguousarray(hashes[:, lane])
        feats[:, lane] = np.take(_combine_windows(column, n), windows)
        for j in range(1, n):
            wanted = np.flatnonzero(short & (lengths == j))
            if len(wanted):
                feats[firsts[wanted], lane] = _combine_short(column, starts[wanted], j)
    return feats, counts


def _to_ints(bits: npt.NDArray[np.bool_], f: int) -> list[int]:
    """Pack rows of f booleans (bit j in column j) into ints.

    Args:
        bits: a (documents, f) boolean array.
        f: fingerprint width.

    Returns:
        One int per row.
    """
    packed = np.ascontiguousarray(np.packbits(bits, axis=1, bitorder="little"))
    if f == 32:
        return [int(v) for v in packed.view("<u4").ravel().tolist()]
    words = packed.view("<u8").reshape(len(bits), f // 64).tolist()
    if f == 64:
        return [int(row[0]) for row in words]
    return [int(lo) | int(hi) << 64 for lo, hi in words]


def _dedupe(feats: _U64, per_doc: npt.NDArray[np.intp]) -> tuple[_U64, npt.NDArray[np.intp]]:
    """Keep each document's distinct features once (binary weighting).

    Args:
        feats: feature hashes (M, lanes), each document's contiguously.
        per_doc: features per document.

    Returns:
        The distinct features, each document's contiguously, and their count per document.
    """
    if not len(feats):
        return feats, per_doc
    owner = np.repeat(np.arange(len(per_doc), dtype=np.intp), per_doc)
    order = np.lexsort([feats[:, lane] for lane in range(feats.shape[1])] + [owner])
    feats, owner = feats[order], owner[order]
    first = np.ones(len(feats), dtype=bool)
    first[1:] = (owner[1:] != owner[:-1]) | (feats[1:] != feats[:-1]).any(axis=1)
    return feats[first], np.bincount(owner[first], minlength=len(per_doc)).astype(np.intp)


def _span_keys(
    cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32],
    starts: npt.NDArray[np.intp],
    ends: npt.NDArray[np.intp],
) -> list[_Key]:
    """Return the UTF-8 of some spans of a text given as code points.

    Args:
        cps: the text's code points.
        starts: each span's first index.
        ends: each span's past-the-end index.

    Returns:
        The spans' UTF-8 bytes.
    """
    if len(starts) <= _FEW_SPANS:
        return [
            cps[a:b].astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
    # Many spans: decoding the whole text once is cheaper than a few numpy calls per span.
    text = cps.astype("<u4").tobytes().decode("utf-32-le")
    return [text[a:b].encode("utf-8") for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _counts_between(starts: npt.NDArray[np.intp], cuts: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Count the tokens of each text of a joined text.

    Args:
        starts: each token's first index in the joined text, ascending.
        cuts: the index of each separator between two texts, ascending.

    Returns:
        The number of tokens of each text: len(cuts) + 1 counts.
    """
    before = np.searchsorted(starts, cuts)
    return np.diff(before, prepend=0, append=len(starts)).astype(np.intp)


class _Engine:
    """Fingerprints batches of token units for one scheme; a unit is the token hashes of a text."""

    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme
        self.lanes = 2 if scheme.f == 128 else 1
        self.table = _shared(_tables, _HashTable, scheme)
        self.n = 1 if scheme.features == "words" else scheme.n
        self.stop: frozenset[bytes] = frozenset(word.encode("utf-8") for word in scheme.stopwords)
        single = [ord(word) for word in scheme.stopwords if len(word) == 1]
        self.stop_cps = np.array(single, dtype=np.uint32)
        # Word tokens are hashed by the vectorised xxh3 when the hashes are 64-bit and none is dropped.
        self.vector_words = self.lanes == 1 and not self.stop

    def hashes(self, keys: list[_Key]) -> _U64:
        """Look up the hashes of tokens.

        Args:
            keys: the tokens, str or UTF-8 bytes.

        Returns:
            A (len(keys), lanes) uint64 array.
        """
        return self.table.lookup(keys, len(keys))

    def features(
        self, units: list[_U64], short: list[bool], owners: list[int], ndocs: int
    ) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Return the features of token units, grouped by document.

        Args:
            units: token hash arrays; the units of one document are consecutive.
            short: per unit, whether the short-document rule applies.
            owners: per unit, its document's index in [0, ndocs).
            ndocs: number of documents.

        Returns:
            The feature hashes, each document's contiguously, and their count per document.
        """
        lengths = np.fromiter(map(len, units), dtype=np.intp, count=len(units))
        hashes = units[0] if len(units) == 1 else np.concatenate(units)
        feats, counts = _features_of(hashes, lengths, np.array(short, dtype=bool), self.n)
        per_doc = np.bincount(np.array(owners, dtype=np.intp), weights=counts, minlength=ndocs)
        return feats, per_doc.astype(np.intp)

    def finish(self, sums: npt.NDArray[np.int64], totals: npt.NDArray[np.int64]) -> list[int]:
        """Turn bit counts into fingerprints: bit j is set where 2 * sums[j] > total.

        Args:
            sums: (documents, f) counts of features with each bit set.
            totals: features per document.

        Returns:
            The fingerprints.
        """
        return _to_ints(2 * sums > totals[:, None], self.scheme.f)

    def run_joined(self, hashes: _U64, lengths: npt.NDArray[np.intp]) -> list[int]:
        """Fingerprint whole documents given as one token unit each, their units concatenated.

        Args:
            hashes: the token hashes of all documents, one after the other.
            lengths: tokens per document.

        Returns:
            The fingerprints, in order.
        """
        feats, per_doc = _features_of(hashes, lengths, lengths < self.n, self.n)
        return self._count(feats, per_doc)

    def _count(self, feats: _U64, per_doc: npt.NDArray[np.intp]) -> list[int]:
        """Fingerprint documents from their features.

        Args:
            feats: the feature hashes, each document's contiguously.
            per_doc: features per document.

        Returns:
            The fingerprints, by document index.
        """
        if self.scheme.weighting == "binary":
            feats, per_doc = _dedupe(feats, per_doc)
        sums = bit_sums(feats, per_doc, self.scheme.f)
        return self.finish(sums, per_doc.astype(np.int64))

    def text_tokens(self, norm: str) -> _U64:
        """Tokenise a normalised text, drop stopwords and hash the tokens.

        Args:
            norm: the normalised text.

        Returns:
            The token hashes in text order.
        """
        return self._hash_parts(*token_parts(norm))[0]

    def span_hashes(
        self, buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], ends: npt.NDArray[np.intp]
    ) -> _U64:
        """Hash tokens given as spans of a byte buffer (for `vector_words` engines only).

        Args:
            buf: the bytes.
            starts: each token's first byte index.
            ends: each token's past-the-end byte index; tokens are not empty.

        Returns:
            A (len(starts), 1) uint64 array.
        """
        lengths = ends - starts
        out = hash_spans(buf, starts, lengths, self.scheme.seed)
        longer = np.flatnonzero(lengths > VECTOR_MAX)
        if len(longer):
            keys: list[_Key] = [buf[starts[i] : ends[i]].tobytes() for i in longer.tolist()]
            out[longer] = self.hashes(keys)[:, 0]
        return out.reshape(-1, 1)

    def ascii_tokens(self, texts: list[str]) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Normalise, tokenise and hash many ASCII texts in one pass (for `vector_words` engines only).

        Args:
            texts: the raw texts, all ASCII.

        Returns:
            The token hashes of all texts, one after the other, and the number of tokens of each.
        """
        # A space separates tokens, so the texts joined by spaces tokenise as each would alone.
        buf, starts, ends = ascii_word_spans(" ".join(texts))
        lengths = np.fromiter(map(len, texts), dtype=np.intp, count=len(texts)) + 1
        return self.span_hashes(buf, starts, ends), _counts_between(starts, np.cumsum(lengths)[:-1] - 1)

    def texts_tokens(self, texts: list[str], vector: bool = True) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Normalise and tokenise many raw texts in one pass, drop stopwords and hash the tokens.

        Args:
            texts: the raw texts.
            vector: whether word tokens may be hashed by the vectorised xxh3 (see `vector_words`).

        Returns:
            The token hashes of all texts, one after the other, and the number of tokens of each.
        """
        # NUL separates tokens, never composes under NFKC and is never made or removed by it, so the
        # texts joined by NUL normalise and tokenise exactly as each would alone.
        joined = "\x00".join(texts)
        if joined.count("\x00") == len(texts) - 1:
            cps, classes = classified_code_points(joined)
            ends = np.flatnonzero(cps == 0)
            firsts = np.concatenate([[0], ends + 1])
            if vector and self.vector_words:
                found = self._vector_text(cps, classes)
                if found is not None:
                    return found[0], _counts_between(found[1], ends)
            words, cjk, is_cjk, starts = token_parts_of(cps, classes)
        else:
            norms = [normalize(text) for text in texts]
            norm = "\n".join(norms)
            lengths = np.fromiter(map(len, norms), dtype=np.intp, count=len(norms)) + 1
            firsts = np.cumsum(lengths) - lengths
            ends = firsts[1:] - 1
            words, cjk, is_cjk, starts = token_parts_at(norm)
        hashes, keep = self._hash_parts(words, cjk, is_cjk)
        if keep is not None:
            owner = np.searchsorted(firsts, starts[keep], side="right") - 1
            return hashes, np.bincount(owner, minlength=len(texts)).astype(np.intp)
        return hashes, _counts_between(starts, ends)

    def _vector_text(
        self, cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32], classes: npt.NDArray[np.uint8] | None
    ) -> tuple[_U64, npt.NDArray[np.intp]] | None:
        """Tokenise a normalised text and hash its tokens, word tokens by the vectorised xxh3.

        Args:
            cps: the text's code points.
            classes: their classes, if known already.

        Returns:
            The token hashes in text order and each token's first code point index; None when more
            than a quarter of the word tokens are not ASCII, which the bytes path does faster.
        """
        word_starts, word_ends, wide, firsts, is_cjk, starts = token_spans_of(cps, classes)
        wide_at = np.flatnonzero(wide)
        if 4 * len(wide_at) > len(wide):
            return None
        # Below 128 a code point is its own UTF-8 byte; the bytes of wider ones are never read.
        word_hashes = self.span_hashes(cps.astype(np.uint8), word_starts, word_ends)
        if len(wide_at):
            word_hashes[wide_at] = self.hashes(_span_keys(cps, word_starts[wide_at], word_ends[wide_at]))
        if len(word_starts) == len(starts):
            return word_hashes, starts
        table = _shared(_cp_tables, _CodePointTable, self.scheme).filled(firsts[is_cjk])
        # Every token looked up by its first code point, the words' rows then overwritten: fewer passes
        # than putting CJK and word hashes in place each through a mask.
        out = np.take(table[:, 0], firsts, mode="clip")
        out[np.flatnonzero(~is_cjk)] = word_hashes[:, 0]
        return out.reshape(-1, 1), starts

    def _hash_parts(
        self, words: list[bytes], cjk: npt.NDArray[np.uint32], is_cjk: npt.NDArray[np.bool_]
    ) -> tuple[_U64, npt.NDArray[np.bool_] | None]:
        """Drop stopwords from tokens given as `features.token_parts` returns them, and hash the rest.

        Args:
            words: word tokens.
            cjk: CJK tokens' code points.
            is_cjk: per token in text order, whether it is CJK.

        Returns:
            The token hashes in text order, and which tokens were kept (None: all).
        """
        keep = None
        if self.stop:
            kept_words = [word not in self.stop for word in words]
            kept_cjk = ~np.isin(cjk, self.stop_cps)
            words = [word for word, kept in zip(words, kept_words, strict=True) if kept]
            cjk = cjk[kept_cjk]
            keep = np.empty(len(is_cjk), dtype=bool)
            keep[~is_cjk] = kept_words
            keep[is_cjk] = kept_cjk
            is_cjk = is_cjk[keep]
        if not len(cjk):
            return self.hashes(list(words)), keep
        out = np.empty((len(is_cjk), self.lanes), dtype=np.uint64)
        out[~is_cjk] = self.hashes(list(words))
        out[is_cjk] = _shared(_cp_tables, _CodePointTable, self.scheme).lookup(cjk)
        return out, keep

    def given_tokens(self, tokens: list[str], name: str) -> _U64:
        """Normalise caller-given tokens, drop empty ones and stopwords, and hash them.

        Args:
            tokens: the tokens.
            name: the argument's name, for messages.

        Returns:
            The token hashes.

        Raises:
            InvalidType: a token is not a str.
        """
        try:
            joined = "\x00".join(tokens)
        except TypeError:
            bad = next(token for token in tokens if not isinstance(token, str))
            raise InvalidType(f"{name} must hold str tokens only, got {type(bad).__name__}") from None
        # NUL never composes under NFKC, so normalising the joined tokens normalises each on its own.
        if joined.count("\x00") == len(tokens) - 1:
            parts = normalize(joined).encode("utf-8").split(b"\x00")
        else:
            parts = [normalize(token).encode("utf-8") for token in tokens]
        return self.hashes([part for part in parts if part and part not in self.stop])

    def text_unit(self, norm: str) -> _U64:
        """Return the token hashes of a normalised text under the scheme's feature kind.

        Args:
            norm: the normalised text.

        Returns:
            Token hashes, or for "chars" the hashes of the whitespace-collapsed text's characters
            (none when the text has no token).
        """
        if self.scheme.features != "chars":
            return self.text_tokens(norm)
        return self.hashes(list(collapse_whitespace(norm)) if has_token(norm) else [])


def _weights_of(doc: Iterable[object], name: str) -> dict[str, float]:
    """Validate weighted features, normalise them and sum duplicates, keeping first-seen order.

    Args:
        doc: a mapping of feature → weight, or an iterable of (feature, weight) pairs.
        name: the argument's name, for messages.

    Returns:
        Normalised feature → total weight; empty features are dropped.

    Raises:
        InvalidType: a feature is not a str, a weight not a real number, or an item not a pair.
        InvalidArgument: a weight is NaN or infinite.
    """
    items = doc.items() if isinstance(doc, Mapping) else doc
    totals: dict[str, float] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidType(f"{name} must hold (feature, weight) pairs, got {type(item).__name__}")
        key, weight = item
        if not isinstance(key, str):
            raise InvalidType(f"{name} feature must be a str, got {type(key).__name__}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise InvalidType(f"{name} weight must be a real number, got {type(weight).__name__}")
        value = float(weight)
        if not math.isfinite(value):
            raise InvalidArgument(f"{name} weight must be finite, got {value} for {key!r}")
        norm = normalize(key)
        if norm:
            totals[norm] = totals.get(norm, 0.0) + value
    return totals


def _weighted(totals: dict[str, float], engine: _Engine) -> int:
    """Fingerprint weighted features: counters are float64 sums taken in feature order.

    Args:
        totals: normalised feature → weight, in first-seen order.
        engine: the scheme's engine.

    Returns:
        The fingerprint.
    """
    f = engine.scheme.f
    counter = np.zeros((1, f), dtype=np.float64)
    keys: list[_Key] = list(totals)
    weights = np.fromiter(totals.values(), dtype=np.float64, count=len(totals))
    for start in range(0, len(keys), WEIGHT_BLOCK):
        hashes = engine.hashes(keys[start : start + WEIGHT_BLOCK])
        octets = hashes.astype("<u8", copy=False).view(np.uint8).reshape(len(hashes), -1)[:, : f // 8]
        bits = np.unpackbits(octets, axis=1, bitorder="little").astype(bool)
        block = weights[start : start + WEIGHT_BLOCK, None]
        # Reducing along axis 0 adds row after row, so the sum is the same in any block size.
        signed = np.concatenate([counter, np.where(bits, block, -block)])
        counter = np.add.reduce(signed, axis=0, keepdims=True)
    return _to_ints(counter > 0, f)[0]


def _stream(engine: _Engine, pieces: Iterator[_U64]) -> int:
    """Fingerprint one long document from consecutive token pieces, in bounded memory.

    Windows spanning two pieces are kept by carrying the last n-1 tokens into the next unit; term
    frequencies add up, so the result equals that of the whole document in one unit.

    Args:
        engine: the scheme's engine.
        pieces: the document's tokens, piece by piece.

    Returns:
        The fingerprint.
    """
    n = engine.n
    f = engine.scheme.f
    carry = np.zeros((0, engine.lanes), dtype=np.uint64)
    seen = 0
    sums = np.zeros((1, f), dtype=np.int64)
    total = 0
    distinct: list[_U64] = []
    for piece in pieces:
        if not len(piece):
            continue
        seen += len(piece)
        unit = np.concatenate([carry, piece])
        feats, per_doc = engine.features([unit], [False], [0], 1)
        if engine.scheme.weighting == "binary":
            distinct.append(np.unique(feats, axis=0))
        else:
            sums += bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
        carry = unit[max(0, len(unit) - n + 1) :] if n > 1 else carry
    if 0 < seen < n:
        feats, per_doc = engine.features([carry], [True], [0], 1)
        distinct.append(feats)
        if engine.scheme.weighting != "binary":
            sums += bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
    if engine.scheme.weighting == "binary" and distinct:
        feats = np.unique(np.concatenate(distinct), axis=0)
        sums = bit_sums(feats, np.array([len(feats)], dtype=np.intp), f)
        total = len(feats)
    return engine.finish(sums, np.array([total], dtype=np.int64))[0]


def _long_text(engine: _Engine, text: str) -> int:
    """Fingerprint a text longer than `features.CHUNK_CHARS`, chunk by chunk.

    Args:
        engine: the scheme's engine.
        text: the raw text.

    Returns:
        The fingerprint.
    """
    if engine.scheme.features != "chars":
        return _stream(engine, (engine.text_tokens(normalize(chunk)) for chunk in split_chunks(text)))
    state = {"any": False, "started": False, "space": False}

    def pieces() -> Iterator[_U64]:
        for chunk in split_chunks(text):
            norm = normalize(chunk)
            state["any"] = state["any"] or has_token(norm)
            collapsed = collapse_whitespace(norm)
            # A whitespace run cut by a chunk boundary still collapses to one space between the pieces.
            lead = " " if state["started"] and (state["space"] or norm[:1].isspace()) and collapsed else ""
            state["space"] = norm[-1:].isspace() or (state["space"] and not collapsed)
            state["started"] = state["started"] or bool(collapsed)
            yield engine.hashes(list(lead + collapsed))

    result = _stream(engine, pieces())
    return result if state["any"] else 0


def _check_scheme(scheme: object) -> Scheme:
    """Resolve the scheme argument.

    Args:
        scheme: a Scheme or None (the default scheme).

    Returns:
        The scheme.

    Raises:
        InvalidType: scheme is neither.
    """
    if scheme is None:
        return DEFAULT_SCHEME
    if not isinstance(scheme, Scheme):
        raise InvalidType(f"scheme must be a Scheme, got {type(scheme).__name__}")
    return scheme


def _join_tokens(tokens: Sequence[object], name: str) -> str:
    """Join caller-given tokens with spaces, the text that "chars" features are taken from.

    Args:
        tokens: the tokens.
        name: the argument's name, for messages.

    Returns:
        The joined text.

    Raises:
        InvalidType: a token is not a str.
    """
    for token in tokens:
        if not isinstance(token, str):
            raise InvalidType(f"{name} must hold str tokens only, got {type(token).__name__}")
    return " ".join(tokens)  # type: ignore[arg-type]


class _Batch:
    """Documents gathered for one vectorised pass; long and weighted documents are done on the spot."""

    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.results: list[int] = []
        self.units: list[_U64] = []
        self.slots: list[int] = []
        self.texts: list[str] = []
        self.text_slots: list[int] = []
        self.ascii_texts: list[str] = []
        self.ascii_slots: list[int] = []
        self.tokens = 0

    def add(self, doc: object, name: str) -> None:
        """Take one document.

        Args:
            doc: the document.
            name: its name in messages.

        Raises:
            InvalidType: doc is of no accepted form.
            InvalidArgument: a weight is not finite.
        """
        engine = self.engine
        if isinstance(doc, (bytes, bytearray, memoryview)):
            doc = bytes(doc).decode("utf-8", errors="replace")
        if isinstance(doc, str):
            if len(doc) > _features.CHUNK_CHARS:
                self.results.append(_long_text(engine, doc))
                return
            ascii_text = doc.isascii()
            if engine.scheme.features == "chars" or (ascii_text and not engine.vector_words):
                self._unit(engine.text_unit(normalize(doc)))
                return
            # Other texts are normalised and tokenised together at run time: numpy's per-call cost
            # would dominate on texts of a few kilobytes. ASCII ones have a faster way of their own.
            (self.ascii_slots if ascii_text else self.text_slots).append(len(self.results))
            (self.ascii_texts if ascii_text else self.texts).append(doc)
            self.results.append(0)
            self.tokens += len(doc)
            return
        if isinstance(doc, Mapping):
            self.results.append(_weighted(_weights_of(doc, name), engine))
            return
        if not isinstance(doc, Iterable):
            raise InvalidType(
                f"{name} must be str, bytes, a sequence of str tokens or (feature, weight) pairs, "
                f"got {type(doc).__name__}"
            )
        items = doc if isinstance(doc, (list, tuple)) else list(doc)
        if items and not isinstance(items[0], str):
            self.results.append(_weighted(_weights_of(items, name), engine))
            return
        if engine.scheme.features == "chars":
            self._unit(engine.text_unit(normalize(_join_tokens(items, name))))
            return
        if len(items) > _features.CHUNK_CHARS:
            step = _features.CHUNK_CHARS
            slices = (
                engine.given_tokens(list(items[i : i + step]), name) for i in range(0, len(items), step)
            )
            self.results.append(_stream(engine, slices))
            return
        self._unit(engine.given_tokens(list(items), name))

    def _unit(self, unit: _U64, slot: int | None = None) -> None:
        """Queue a document made of one token unit.

        Args:
            unit: its token hashes.
            slot: its place in the results, if already reserved.
        """
        if slot is None:
            slot = len(self.results)
            self.results.append(0)
        self.slots.append(slot)
        self.units.append(unit)
        self.tokens += len(unit)

    def full(self) -> bool:
        """Tell whether the batch should be run now.

        Returns:
            True when it holds enough tokens or documents.
        """
        return self.tokens >= BATCH_TOKENS or len(self.results) >= BATCH_DOCS

    def run(self) -> list[int]:
        """Fingerprint the queued documents.

        Returns:
            The fingerprints of every document taken, in order.
        """
        engine = self.engine
        vector = sum(map(len, self.texts)) >= VECTOR_MIN_CHARS
        if sum(map(len, self.ascii_texts)) < VECTOR_MIN_CHARS:
            for slot, text in zip(self.ascii_slots, self.ascii_texts, strict=True):
                self._unit(engine.text_unit(normalize(text)), slot)
            self.ascii_texts = []
        # Every queued document is one token unit: units and tokenised texts are fingerprinted together,
        # their token hashes concatenated once.
        blocks = list(self.units)
        lengths = [np.fromiter(map(len, self.units), dtype=np.intp, count=len(self.units))]
        slots = list(self.slots)
        for texts, text_slots, tokenizer in (
            (self.ascii_texts, self.ascii_slots, engine.ascii_tokens),
            (self.texts, self.text_slots, lambda texts: engine.texts_tokens(texts, vector)),
        ):
            if texts:
                hashes, counts = tokenizer(texts)
                blocks.append(hashes)
                lengths.append(counts)
                slots += text_slots
        if blocks:
            joined = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            for slot, value in zip(slots, engine.run_joined(joined, np.concatenate(lengths)), strict=True):
                self.results[slot] = value
        return self.results


def fingerprint(doc: Document, scheme: Scheme | None = None) -> int:
    """Fingerprint one document.

    Args:
        doc: a text (str); UTF-8 bytes (invalid bytes become U+FFFD); a sequence of str tokens
            (already segmented: normalised, stopwords dropped, then made into the scheme's features);
            or weighted features, a mapping feature → weight or an iterable of (feature, weight) pairs
            (normalised, duplicates summed, hashed as given).
        scheme: the scheme; None for `DEFAULT_SCHEME`.

    Returns:
        The fingerprint, an int in [0, 2**scheme.f); 0 for a document without any token.

    Raises:
        InvalidType: doc or scheme is of no accepted type; the message names it.
        InvalidArgument: a weight is NaN or infinite.
    """
    batch = _Batch(_Engine(_check_scheme(scheme)))
    batch.add(doc, "doc")
    return batch.run()[0]


def fingerprint_many(docs: Iterable[Document], scheme: Scheme | None = None) -> list[int]:
    """Fingerprint many documents, vectorised; equal to ``[fingerprint(d, scheme) for d in docs]``.

    Args:
        docs: documents, each in any form `fingerprint` accepts; any iterable, consumed once.
        scheme: the scheme; None for `DEFAULT_SCHEME`.

    Returns:
        The fingerprints, in the order of docs.

    Raises:
        InvalidType: docs is not an iterable of documents, or a document's type is wrong; the message
            names it (``docs[i]``).
        InvalidArgument: a weight is NaN or infinite.
    """
    engine = _Engine(_check_scheme(scheme))
    if isinstance(docs, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(docs, Iterable):
        raise InvalidType(f"docs must be an iterable of documents, got {type(docs).__name__}")
    out: list[int] = []
    batch = _Batch(engine)
    for index, doc in enumerate(docs):
        batch.add(doc, f"docs[{index}]")
        if batch.full():
            out.extend(batch.run())
            batch = _Batch(engine)
    out.extend(batch.run())
    return out


def distance(a: int, b: int) -> int:
    """Return the Hamming distance between two fingerprints.

    Args:
        a: a fingerprint, a non-negative int.
        b: another.

    Returns:
        The number of bits in which they differ.

    Raises:
        InvalidType: a or b is not an int (bools are refused).
        InvalidArgument: a or b is negative.
    """
    for name, value in (("a", a), ("b", b)):
        if not is_int(value):
            raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise InvalidArgument(f"{name} must be a non-negative fingerprint, got {value}")
    return (a ^ b).bit_count()
