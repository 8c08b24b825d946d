"""The fingerprinting floor, no Redis: text to normalised, weighted features to SimHash fingerprints and
sketches, by the pure numpy engine or the compiled one (the same bits)."""

from __future__ import annotations

from .banded_odd import BandedOddSketcher, Sketcher
from .engine_choice import ENGINE_ENV, engine
from .minhash import MinHasher
from .odd_sketch import OddSketcher
from .scheme import DEFAULT_SCHEME, Document, Scheme, distance, fingerprint, fingerprint_many

__all__ = [
    "DEFAULT_SCHEME",
    "ENGINE_ENV",
    "BandedOddSketcher",
    "Document",
    "MinHasher",
    "OddSketcher",
    "Scheme",
    "Sketcher",
    "distance",
    "engine",
    "fingerprint",
    "fingerprint_many",
]
