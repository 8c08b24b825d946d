"""The pure (numpy) fingerprint engine of one scheme: tokens of texts hashed into features, summed to bits."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import InvalidType
from .bit_votes import bit_sums
from .hashing import (
    U64,
    CodePointTable,
    HashTable,
    Key,
    _cp_token_tables,
    _token_tables,
    counts_between,
    dedupe,
    features_of,
    shared,
    to_ints,
)
from .normalize import PINNED, code_points, normalize
from .params import SchemeParams
from .tokens import (
    collapse_whitespace,
    has_token,
    token_parts,
    token_parts_of,
)

__all__ = ["Engine"]


class Engine:
    """Fingerprints batches of token units for one scheme; a unit is the token hashes of a text."""

    def __init__(self, scheme: SchemeParams) -> None:
        self.scheme = scheme
        self.lanes = 2 if scheme.f == 128 else 1
        self.table = shared(_token_tables, HashTable, scheme)
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

    def text_tokens(self, norm: str) -> U64:
        """The token hashes of a normalised text, stopwords dropped, in text order."""
        return self._hash_parts(*token_parts(norm))[0]

    def texts_tokens(self, texts: list[str]) -> tuple[U64, npt.NDArray[np.intp]]:
        """Normalise, tokenise and hash raw texts in one pass, stopwords dropped: the token hashes of all
        texts, one after the other, and the number of tokens of each."""
        # NUL separates tokens and is untouched by NFKC: the joined texts tokenise as each would alone.
        joined = "\x00".join(texts)
        if joined.count("\x00") == len(texts) - 1:
            cps, classes = PINNED.classified_code_points(joined)
            ends = np.flatnonzero(cps == 0)
            firsts = np.concatenate([[0], ends + 1])
            words, cjk, is_cjk, starts = token_parts_of(cps, classes)
        else:
            norms = [normalize(text) for text in texts]
            norm = "\n".join(norms)
            lengths = np.fromiter(map(len, norms), dtype=np.intp, count=len(norms)) + 1
            firsts = np.cumsum(lengths) - lengths
            ends = firsts[1:] - 1
            words, cjk, is_cjk, starts = token_parts_of(code_points(norm), None)
        hashes, keep = self._hash_parts(words, cjk, is_cjk)
        if keep is not None:
            owner = np.searchsorted(firsts, starts[keep], side="right") - 1
            return hashes, np.bincount(owner, minlength=len(texts)).astype(np.intp)
        return hashes, counts_between(starts, ends)

    def _hash_parts(
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
        out[is_cjk] = shared(_cp_token_tables, CodePointTable, self.scheme).lookup(cjk)
        return out, keep

    def given_tokens(self, tokens: list[str], name: str) -> U64:
        """Normalise caller-given tokens, drop empty ones and stopwords, and hash them.

        Raises:
            InvalidType: a token is not a str (the message names the argument).
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

    def chars_unit(self, norm: str) -> U64:
        """The hashes of a normalised text's whitespace-collapsed characters ("chars" features; none when
        the text has no token)."""
        return self.hashes(list(collapse_whitespace(norm)) if has_token(norm) else [])
