"""Fingerprint quality: precision, recall and F1 of "distance <= k" against exact Jaccard ground truth.

The truth is the exact Jaccard similarity of the documents' sets of n-token shingles (3 by default) of
the library's tokens, every Han character one token; distances come from numpy popcounts, without Redis.
"""

from __future__ import annotations

from .corpus import Doc, detect_lang, load_corpus, load_pairs
from .joins import Join, brute_force_join, hamming_pairs, jaccard_join, shingle_sets
from .report import LanguageTruth, Report, Scores, SettingReport, format_report
from .scoring import JACCARD_BANDS, LENGTH_BANDS, evaluate
from .settings import (
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    Setting,
    jieba_settings,
    scheme_setting,
    standard_settings,
)

__all__ = [
    "CHINESE_STOPWORDS",
    "ENGLISH_STOPWORDS",
    "JACCARD_BANDS",
    "LENGTH_BANDS",
    "Doc",
    "Join",
    "LanguageTruth",
    "Report",
    "Scores",
    "Setting",
    "SettingReport",
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
