"""Fingerprint quality: precision, recall and F1 of "distance <= k" against exact Jaccard ground truth.

The ground truth is the Jaccard similarity of each document's shingle set: word 3-shingles for
space-separated languages, character 3-shingles for Chinese (the library's tokens, in which every Han
character is one token), computed exactly (`joins`). Fingerprint distances are computed for all pairs
in memory with numpy popcounts; no Redis is involved. The corpus is read by `corpus`, the settings
compared are in `settings`, the scoring in `scoring` and its results in `report`.
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
