"""Fingerprint quality: precision, recall and F1 of "distance <= k" against the exact Jaccard similarity of
the documents' n-token shingles (3 by default), distances from numpy popcounts, without Redis."""

from __future__ import annotations

from .corpus import Doc, detect_lang, load_corpus, load_pairs
from .scoring import (
    Report,
    brute_force_join,
    evaluate,
    format_report,
    hamming_pairs,
    jaccard_join,
    shingle_sets,
)
from .settings import Setting, jieba_settings, scheme_setting, standard_settings

__all__ = [
    "Doc",
    "Report",
    "Setting",
    "brute_force_join",
    "detect_lang",
    "evaluate",
    "format_report",
    "hamming_pairs",
    "jaccard_join",
    "jieba_settings",
    "load_corpus",
    "load_pairs",
    "scheme_setting",
    "shingle_sets",
    "standard_settings",
]
