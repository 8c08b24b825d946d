"""The pure (numpy) fingerprint engine: tokens of texts hashed into features and summed to bits (`Engine`),
and documents of every form (detection, weights, long texts, batches) fed to it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgument, InvalidType
from . import tokens
from .hashing import (
    U64,
    CodePointTable,
    HashTable,
    Key,
    SchemeParams,
    bit_sums,
    dedupe,
    features_of,
    shared,
    to_ints,
)
from .normalize import code_points, normalize
from .tokens import collapse_whitespace, has_token, split_chunks, token_parts, token_parts_of

__all__ = [
    "BATCH_DOCS",
    "BATCH_TOKENS",
    "WEIGHT_BLOCK",
    "Document",
    "Engine",
    "document_form",
    "fingerprint",
    "fingerprint_many",
    "weighted",
    "weights_of",
]

#: A document: text, UTF-8 bytes, a sequence of tokens, or weighted features (mapping or pairs).
Document = str | bytes | bytearray | Iterable[str] | Mapping[str, float] | Iterable[tuple[str, float]]
#: Documents gathered into one vectorised batch at most.
BATCH_DOCS = 4096
#: Tokens gathered into one vectorised batch of `fingerprint_many`.
BATCH_TOKENS = 1 << 18
#: Weighted features whose counters are summed per block; bounds memory of huge weighted documents.
WEIGHT_BLOCK = 1 << 15


class Engine:
    """Fingerprints batches of token units for one scheme; a unit is the token hashes of a text."""

    def __init__(self, scheme: SchemeParams) -> None:
        self.scheme = scheme
        self.lanes = 2 if scheme.f == 128 else 1
        self.table = shared(HashTable, scheme)
        self.n = 1 if scheme.features == "words" else scheme.n
        self.stop: frozenset[bytes] = frozenset(word.encode("utf-8") for word in scheme.stopwords)
        single = [ord(word) for word in scheme.stopwords if len(word) == 1]
        self.stop_cps = np.array(single, dtype=np.uint32)

    def hashes(self, keys: list[Key]) -> U64:
        """The (len(keys), lanes) hashes of tokens (str or UTF-8)."""
        return self.table.lookup(keys, len(keys))

    def features(self, unit: U64, short: bool) -> tuple[U64, npt.NDArray[np.intp]]:
        """The feature hashes of one document's token unit, and their count (as a 1-element array)."""
        return features_of(unit, np.array([len(unit)], dtype=np.intp), np.array([short]), self.n)

    def finish(self, sums: npt.NDArray[np.int64], totals: npt.NDArray[np.int64]) -> list[int]:
        """Fingerprints from (documents, f) bit counts and totals: bit j is set where 2 * sums[j] > total."""
        return to_ints(2 * sums > totals[:, None], self.scheme.f)

    def run_joined(self, hashes: U64, lengths: npt.NDArray[np.intp]) -> list[int]:
        """Fingerprint whole documents given as one token unit each (lengths tokens), concatenated."""
        feats, per_doc = features_of(hashes, lengths, lengths < self.n, self.n)
        if self.scheme.weighting == "binary":
            feats, per_doc = dedupe(feats, per_doc)
        return self.finish(bit_sums(feats, per_doc, self.scheme.f), per_doc.astype(np.int64))

    def texts_tokens(self, texts: list[str]) -> tuple[U64, npt.NDArray[np.intp]]:
        """Normalise, tokenise and hash raw texts in one pass, stopwords dropped: the token hashes of all
        texts, one after the other, and the number of tokens of each."""
        norms = [normalize(text) for text in texts]
        lengths = np.fromiter(map(len, norms), dtype=np.intp, count=len(norms)) + 1
        firsts = np.cumsum(lengths) - lengths
        # A newline separates tokens: the joined texts tokenise as each would alone.
        words, cjk, is_cjk, starts = token_parts_of(code_points("\n".join(norms)))
        hashes, keep = self.hash_parts(words, cjk, is_cjk)
        owner = np.searchsorted(firsts, starts if keep is None else starts[keep], side="right") - 1
        return hashes, np.bincount(owner, minlength=len(texts)).astype(np.intp)

    def hash_parts(
        self, words: list[bytes], cjk: npt.NDArray[np.uint32], is_cjk: npt.NDArray[np.bool_]
    ) -> tuple[U64, npt.NDArray[np.bool_] | None]:
        """Drop stopwords from tokens given as `tokens.token_parts` returns them, and hash the rest; the
        hashes in text order, and which tokens were kept (None: all)."""
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
        out[is_cjk] = shared(CodePointTable, self.scheme).lookup(cjk)
        return out, keep

    def given_tokens(self, tokens: Sequence[Any], name: str) -> U64:
        """Normalise caller-given tokens, drop empty ones and stopwords, and hash them (InvalidType, naming
        the argument, for a token that is not a str)."""
        joined = _joined(tokens, "\x00", name)
        # NUL never composes under NFKC, so normalising the joined tokens normalises each on its own.
        if joined.count("\x00") == len(tokens) - 1:
            parts = normalize(joined).encode("utf-8").split(b"\x00")
        else:
            parts = [normalize(token).encode("utf-8") for token in tokens]
        return self.hashes([part for part in parts if part and part not in self.stop])

    def chars_unit(self, norm: str) -> U64:
        """The hashes of a normalised text's whitespace-collapsed characters ("chars" features; none when
        the text has no token)."""
        return self.hashes(list(collapse_whitespace(norm)) if has_token(norm) else [])


def weights_of(doc: Iterable[object], name: str) -> dict[str, float]:
    """Validate weighted features, a mapping or (feature, weight) pairs (InvalidType for a wrong item,
    feature or weight, InvalidArgument for a weight NaN or infinite, naming `name`), normalise them, sum
    duplicates in first-seen order and drop empty ones."""
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
        try:
            value = float(weight)
        except OverflowError:  # an int or Fraction past a float's range
            value = math.inf
        if not math.isfinite(value):
            raise InvalidArgument(f"{name} weight must be finite, got {value} for {key!r}")
        norm = normalize(key)
        if norm:
            totals[norm] = totals.get(norm, 0.0) + value
    return totals


def document_form(
    doc: object, name: str
) -> str | bytes | dict[str, float] | list[object] | tuple[object, ...]:
    """A document as a text (str, or bytes), its weighted features (`weights_of`), or its tokens (unchecked);
    InvalidType (naming `name`) for no accepted form."""
    if isinstance(doc, (bytes, bytearray, memoryview)):
        return doc if type(doc) is bytes else bytes(doc)
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Mapping):
        return weights_of(doc, name)
    if not isinstance(doc, Iterable):
        raise InvalidType(
            f"{name} must be str, bytes, a sequence of str tokens or (feature, weight) pairs, "
            f"got {type(doc).__name__}"
        )
    items = doc if isinstance(doc, (list, tuple)) else list(doc)
    return weights_of(items, name) if items and not isinstance(items[0], str) else items


def weighted(totals: dict[str, float], engine: Engine) -> int:
    """Fingerprint normalised feature → weight: counters are float64 sums taken in first-seen order."""
    f = engine.scheme.f
    counter = np.zeros((1, f), dtype=np.float64)
    keys: list[Key] = list(totals)
    weights = np.fromiter(totals.values(), dtype=np.float64, count=len(totals))
    for start in range(0, len(keys), WEIGHT_BLOCK):
        hashes = engine.hashes(keys[start : start + WEIGHT_BLOCK])
        octets = hashes.astype("<u8", copy=False).view(np.uint8).reshape(len(hashes), -1)[:, : f // 8]
        bits = np.unpackbits(octets, axis=1, bitorder="little").astype(bool)
        block = weights[start : start + WEIGHT_BLOCK, None]
        # Reducing along axis 0 adds row after row, so the sum is the same in any block size. Sums past
        # float64's range saturate to +-inf, as IEEE 754 says (inf - inf is NaN: the bit is 0); that is the
        # documented result, not a warning to print (docs/fingerprints.md, "Edge cases").
        signed = np.concatenate([counter, np.where(bits, block, -block)])
        with np.errstate(over="ignore", invalid="ignore"):
            counter = np.add.reduce(signed, axis=0, keepdims=True)
    return to_ints(counter > 0, f)[0]


def _stream(engine: Engine, pieces: Iterator[U64]) -> int:
    """Fingerprint one long document from consecutive token pieces, in bounded memory (the last n-1 tokens
    of a piece carried into the next, so the result is the whole document's)."""
    n, f, binary = engine.n, engine.scheme.f, engine.scheme.weighting == "binary"

    def feature_sets() -> Iterator[tuple[U64, npt.NDArray[np.intp]]]:
        carry: U64 = np.zeros((0, engine.lanes), dtype=np.uint64)
        seen = 0
        for piece in pieces:
            if len(piece):
                seen += len(piece)
                unit = np.concatenate([carry, piece])
                yield engine.features(unit, False)
                carry = unit[max(0, len(unit) - n + 1) :] if n > 1 else carry
        if 0 < seen < n:
            yield engine.features(carry, True)

    sums: npt.NDArray[np.int64] = np.zeros((1, f), dtype=np.int64)
    total = 0
    distinct: list[U64] = []
    for feats, per_doc in feature_sets():
        if binary:
            distinct.append(np.unique(feats, axis=0))
        else:
            sums += bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
    if binary and distinct:
        feats = np.unique(np.concatenate(distinct), axis=0)
        sums = bit_sums(feats, np.array([len(feats)], dtype=np.intp), f)
        total = len(feats)
    return engine.finish(sums, np.array([total], dtype=np.int64))[0]


def _long_text(engine: Engine, text: str) -> int:
    """Fingerprint a text longer than `tokens.CHUNK_CHARS`, chunk by chunk."""
    if engine.scheme.features != "chars":
        hashes = (engine.hash_parts(*token_parts(normalize(chunk)))[0] for chunk in split_chunks(text))
        return _stream(engine, hashes)
    state = {"any": False, "started": False, "space": False}

    def pieces() -> Iterator[U64]:
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


def _joined(tokens: Sequence[object], separator: str, name: str) -> str:
    """Caller-given tokens joined (InvalidType, naming the argument, for a token that is not a str)."""
    try:
        return separator.join(tokens)  # type: ignore[arg-type]
    except TypeError:
        bad = next(token for token in tokens if not isinstance(token, str))
        raise InvalidType(f"{name} must hold str tokens only, got {type(bad).__name__}") from None


class _Batch:
    """Documents gathered for one vectorised pass; long and weighted documents are done on the spot."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.results: list[int] = []
        self.units: list[U64] = []
        self.slots: list[int] = []
        self.texts: list[str] = []
        self.text_slots: list[int] = []
        self.tokens = 0

    def add(self, doc: object, name: str) -> None:
        """Take one document (name: its name in messages); raises as `fingerprint`."""
        engine = self.engine
        if not isinstance(doc, (str, bytes)):
            doc = document_form(doc, name)
        if isinstance(doc, bytes):
            doc = doc.decode("utf-8", errors="replace")
        if isinstance(doc, str):
            if len(doc) > tokens.CHUNK_CHARS:
                self.results.append(_long_text(engine, doc))
                return
            if engine.scheme.features == "chars":
                self._unit(engine.chars_unit(normalize(doc)))
                return
            # Other texts are normalised and tokenised together at run time: numpy's per-call cost
            # would dominate on texts of a few kilobytes.
            self.text_slots.append(len(self.results))
            self.texts.append(doc)
            self.results.append(0)
            self.tokens += len(doc)
            return
        if isinstance(doc, dict):
            self.results.append(weighted(doc, engine))
            return
        if engine.scheme.features == "chars":
            self._unit(engine.chars_unit(normalize(_joined(doc, " ", name))))
            return
        if len(doc) > tokens.CHUNK_CHARS:
            step = tokens.CHUNK_CHARS
            slices = (engine.given_tokens(doc[i : i + step], name) for i in range(0, len(doc), step))
            self.results.append(_stream(engine, slices))
            return
        self._unit(engine.given_tokens(doc, name))

    def _unit(self, unit: U64) -> None:
        """Queue a document made of one token unit."""
        self.slots.append(len(self.results))
        self.results.append(0)
        self.units.append(unit)
        self.tokens += len(unit)

    def full(self) -> bool:
        """Tell whether the batch holds enough tokens or documents to be run now."""
        return self.tokens >= BATCH_TOKENS or len(self.results) >= BATCH_DOCS

    def run(self) -> list[int]:
        """The fingerprints of every document taken, in order."""
        engine = self.engine
        # Every queued document is one token unit: units and tokenised texts are fingerprinted together,
        # their token hashes concatenated once.
        blocks = list(self.units)
        lengths = [np.fromiter(map(len, self.units), dtype=np.intp, count=len(self.units))]
        slots = list(self.slots)
        if self.texts:
            hashes, counts = engine.texts_tokens(self.texts)
            blocks.append(hashes)
            lengths.append(counts)
            slots += self.text_slots
        if blocks:
            joined = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            for slot, value in zip(slots, engine.run_joined(joined, np.concatenate(lengths)), strict=True):
                self.results[slot] = value
        return self.results


def fingerprint(doc: Document, scheme: SchemeParams) -> int:
    """The pure engine's `scheme.fingerprint` (scheme validated)."""
    batch = _Batch(Engine(scheme))
    batch.add(doc, "doc")
    return batch.run()[0]


def fingerprint_many(docs: Iterable[Document], scheme: SchemeParams) -> list[int]:
    """The pure engine's `scheme.fingerprint_many`, vectorised (scheme validated, docs an iterable)."""
    engine = Engine(scheme)
    out: list[int] = []
    batch = _Batch(engine)
    for index, doc in enumerate(docs):
        batch.add(doc, f"docs[{index}]")
        if batch.full():
            out.extend(batch.run())
            batch = _Batch(engine)
    out.extend(batch.run())
    return out
