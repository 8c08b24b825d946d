"""The fingerprinting floor: text to normalised, weighted features to SimHash fingerprints and sketches.

Pure computation, no Redis: the scheme (a value), normalisation and tokens, the pure numpy engine and
the optional compiled one (`engine_choice.engine()` says which runs; both give the same bits).
"""

from __future__ import annotations

from .banded_odd import BandedOddSketcher, Sketcher
from .engine_choice import ENGINE_ENV, engine
from .minhash import MinHasher
from .odd_sketch import OddSketcher
from .simhash import DEFAULT_SCHEME, Document, Scheme, distance, fingerprint, fingerprint_many

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
