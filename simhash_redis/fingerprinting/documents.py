"""The pure engine's documents of every form: detection, weights, long texts and batches into `Engine`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgument, InvalidType
from . import tokens
from .bit_votes import bit_sums
from .hashing import U64, Key, to_ints
from .normalize import normalize
from .params import SchemeParams
from .pure_engine import Engine
from .tokens import collapse_whitespace, has_token, split_chunks

__all__ = [
    "BATCH_DOCS",
    "BATCH_TOKENS",
    "WEIGHT_BLOCK",
    "Document",
    "fingerprint",
    "fingerprint_many",
    "not_a_document",
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


def weights_of(doc: Iterable[object], name: str) -> dict[str, float]:
    """Validate weighted features (a mapping or (feature, weight) pairs), normalise them and sum
    duplicates, in first-seen order; empty features are dropped. name: the argument's, for messages.

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


def not_a_document(doc: object, name: str) -> InvalidType:
    """The error for a document of no accepted form."""
    return InvalidType(
        f"{name} must be str, bytes, a sequence of str tokens or (feature, weight) pairs, "
        f"got {type(doc).__name__}"
    )


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
    """Fingerprint one long document from consecutive token pieces, in bounded memory.

    The last n-1 tokens of a piece are carried into the next, so the result is the whole document's.
    """
    n = engine.n
    f = engine.scheme.f
    carry: U64 = np.zeros((0, engine.lanes), dtype=np.uint64)
    seen = 0
    sums: npt.NDArray[np.int64] = np.zeros((1, f), dtype=np.int64)
    total = 0
    distinct: list[U64] = []
    for piece in pieces:
        if not len(piece):
            continue
        seen += len(piece)
        unit = np.concatenate([carry, piece])
        feats, per_doc = engine.features(unit, False)
        if engine.scheme.weighting == "binary":
            distinct.append(np.unique(feats, axis=0))
        else:
            sums += bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
        carry = unit[max(0, len(unit) - n + 1) :] if n > 1 else carry
    if 0 < seen < n:
        feats, per_doc = engine.features(carry, True)
        distinct.append(feats)
        if engine.scheme.weighting != "binary":
            sums += bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
    if engine.scheme.weighting == "binary" and distinct:
        feats = np.unique(np.concatenate(distinct), axis=0)
        sums = bit_sums(feats, np.array([len(feats)], dtype=np.intp), f)
        total = len(feats)
    return engine.finish(sums, np.array([total], dtype=np.int64))[0]


def _long_text(engine: Engine, text: str) -> int:
    """Fingerprint a text longer than `tokens.CHUNK_CHARS`, chunk by chunk."""
    if engine.scheme.features != "chars":
        return _stream(engine, (engine.text_tokens(normalize(chunk)) for chunk in split_chunks(text)))
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


def _join_tokens(tokens: Sequence[object], name: str) -> str:
    """Join caller-given tokens with spaces, the text that "chars" features are taken from."""
    for token in tokens:
        if not isinstance(token, str):
            raise InvalidType(f"{name} must hold str tokens only, got {type(token).__name__}")
    return " ".join(tokens)  # type: ignore[arg-type]


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
        if isinstance(doc, (bytes, bytearray, memoryview)):
            doc = bytes(doc).decode("utf-8", errors="replace")
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
        if isinstance(doc, Mapping):
            self.results.append(weighted(weights_of(doc, name), engine))
            return
        if not isinstance(doc, Iterable):
            raise not_a_document(doc, name)
        items = doc if isinstance(doc, (list, tuple)) else list(doc)
        if items and not isinstance(items[0], str):
            self.results.append(weighted(weights_of(items, name), engine))
            return
        if engine.scheme.features == "chars":
            self._unit(engine.chars_unit(normalize(_join_tokens(items, name))))
            return
        if len(items) > tokens.CHUNK_CHARS:
            step = tokens.CHUNK_CHARS
            slices = (
                engine.given_tokens(list(items[i : i + step]), name) for i in range(0, len(items), step)
            )
            self.results.append(_stream(engine, slices))
            return
        self._unit(engine.given_tokens(list(items), name))

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
    """The pure engine's `simhash.fingerprint` (scheme validated)."""
    batch = _Batch(Engine(scheme))
    batch.add(doc, "doc")
    return batch.run()[0]


def fingerprint_many(docs: Iterable[Document], scheme: SchemeParams) -> list[int]:
    """The pure engine's `simhash.fingerprint_many`, vectorised (scheme validated, docs an iterable)."""
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
