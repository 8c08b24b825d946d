"""Scoring "distance <= k" against the truth: each language group's truth, then each setting's scores."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ...errors import InvalidArgument
from ...fingerprinting.tokens import tokenize
from .corpus import Doc
from .joins import (
    check_threshold,
    fingerprint_words,
    hamming_pairs,
    jaccard_join,
    pair_distances,
    shingle_sets,
)
from .report import LanguageTruth, Report, Scores, SettingReport
from .settings import Setting, standard_settings

__all__ = ["JACCARD_BANDS", "LENGTH_BANDS", "evaluate"]

#: Lower edges of the Jaccard bands recall is reported for (the last band includes 1.0).
JACCARD_BANDS = (0.80, 0.85, 0.90, 0.95)
#: Lower edges of the length bands (tokens of the shorter document of a pair).
LENGTH_BANDS = (0, 10, 20, 50, 100, 200, 500, 1000)


def _band_labels(edges: Sequence[float], top: float) -> list[str]:
    bounds = [*edges, top]
    return [f"{bounds[i]:g}-{bounds[i + 1]:g}" for i in range(len(edges))]


@dataclasses.dataclass
class _Group:
    """One language group prepared for scoring: texts, token counts and the truth."""

    lang: str
    texts: list[str]
    lengths: npt.NDArray[np.int64]
    empty: int
    pos_i: npt.NDArray[np.int64]
    pos_j: npt.NDArray[np.int64]
    pos_sim: npt.NDArray[np.float64]
    # Labelled mode: the only pairs scored, with their labels; None scores all pairs.
    universe: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None
    mode: str


def _prepare(
    docs: Sequence[Doc],
    lang: str,
    threshold: float,
    truth_n: int,
    pairs: Sequence[tuple[str, str, int | None]] | None,
) -> _Group:
    tokens = [tokenize(d.text) for d in docs]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    sets = shingle_sets(tokens, truth_n)
    group = functools.partial(_Group, lang, [d.text for d in docs], lengths, int((lengths == 0).sum()))
    if pairs is None:
        join = jaccard_join(sets, threshold)
        return group(join.i, join.j, join.sim, None, f"all pairs, Jaccard >= {threshold:g}")
    where = {d.id: i for i, d in enumerate(docs)}
    rows = [(where[a], where[b], label) for a, b, label in pairs if a in where and b in where and a != b]
    labelled = any(label is not None for _, _, label in rows)
    ii = np.array([min(a, b) for a, b, _ in rows], dtype=np.int64)
    jj = np.array([max(a, b) for a, b, _ in rows], dtype=np.int64)
    py = [set(s.tolist()) for s in sets]
    sims = np.array(
        [
            len(py[a] & py[b]) / max(1, len(py[a] | py[b]))
            for a, b in zip(ii.tolist(), jj.tolist(), strict=True)
        ],
        dtype=np.float64,
    )
    if labelled:
        labels = np.array([1 if label is None else label for _, _, label in rows], dtype=np.int64)
        pos = labels == 1
        return group(ii[pos], jj[pos], sims[pos], (ii, jj, labels), "labelled pairs")
    return group(ii, jj, sims, None, "listed pairs positive, all others negative")


def _score(group: _Group, setting: Setting, max_k: int) -> SettingReport:
    fps = list(setting.fingerprint_many(group.texts))
    words = fingerprint_words(fps, setting.f)
    pos_d = pair_distances(words, group.pos_i, group.pos_j)
    if group.universe is None:
        pi, pj, pd = hamming_pairs(fps, setting.f, max_k)
    else:
        ui, uj, _ = group.universe
        ud = pair_distances(words, ui, uj)
        keep = ud <= max_k
        pi, pj, pd = ui[keep], uj[keep], ud[keep]
    # A document without any token has fingerprint 0 and no shingle: it is never a near-duplicate.
    real = (group.lengths[pi] > 0) & (group.lengths[pj] > 0)
    pi, pj, pd = pi[real], pj[real], pd[real]
    n_pos = len(pos_d)
    scores = []
    for k in range(max_k + 1):
        tp = int((pos_d <= k).sum())
        scores.append(Scores(k, tp, int((pd <= k).sum()) - tp, n_pos - tp))
    labels = _band_labels(JACCARD_BANDS, 1.0)
    band_of = np.searchsorted(np.array(JACCARD_BANDS), group.pos_sim, side="right") - 1
    band_recall: dict[str, list[float]] = {}
    band_counts: dict[str, int] = {}
    for b, label in enumerate(labels):
        in_band = band_of == b
        band_counts[label] = int(in_band.sum())
        d = pos_d[in_band]
        band_recall[label] = [float((d <= k).mean()) if len(d) else float("nan") for k in range(max_k + 1)]
    len_labels = _band_labels(LENGTH_BANDS, math.inf)
    pos_len = np.minimum(group.lengths[group.pos_i], group.lengths[group.pos_j])
    pred_len = np.minimum(group.lengths[pi], group.lengths[pj])
    # A predicted pair is a true positive iff it is among the positives: match by pair code.
    count = len(group.texts)
    pos_codes = group.pos_i * count + group.pos_j
    pred_true = np.isin(pi * count + pj, pos_codes)
    pos_band = np.searchsorted(np.array(LENGTH_BANDS), pos_len, side="right") - 1
    pred_band = np.searchsorted(np.array(LENGTH_BANDS), pred_len, side="right") - 1
    rows = []
    for b, label in enumerate(len_labels):
        pb = pred_band == b
        rows.append(
            (
                label,
                int((pos_band == b).sum()),
                [int((pb & (pd <= k)).sum()) for k in range(max_k + 1)],
                [int((pb & pred_true & (pd <= k)).sum()) for k in range(max_k + 1)],
            )
        )
    return SettingReport(
        group.lang, setting.name, setting.f, tuple(scores), band_recall, band_counts, tuple(rows)
    )


def evaluate(
    docs: Sequence[Doc],
    settings: Callable[[str], Sequence[Setting]] | Sequence[Setting] | None = None,
    *,
    threshold: float = 0.8,
    pairs: Sequence[tuple[str, str, int | None]] | None = None,
    max_k: int = 8,
    truth_n: int = 3,
    langs: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Score fingerprint settings against exact Jaccard ground truth, each language group on its own.

    Args:
        settings: the settings to score, or a function lang -> settings (default `standard_settings`).
        threshold: pairs with Jaccard >= threshold are near-duplicates (when no pairs are given).
        pairs: (id_a, id_b, label) triples: with labels, only these pairs are scored; without, they are the
            positives and every other pair within a language is a negative.
        max_k: scores are given for k = 0..max_k.
        truth_n: tokens per ground-truth shingle.
        langs: the language groups to evaluate (default: all present).
        progress: called with a short message as each step starts.

    Raises:
        InvalidArgument: threshold, max_k or truth_n is out of range.
    """
    check_threshold(threshold)
    if not 0 <= max_k <= 64:
        raise InvalidArgument(f"max_k must be in 0..64, got {max_k}")
    if truth_n < 1:
        raise InvalidArgument(f"truth_n must be >= 1, got {truth_n}")
    wanted = set(langs) if langs is not None else None
    groups: dict[str, list[Doc]] = {}
    for doc in docs:
        if wanted is None or doc.lang in wanted:
            groups.setdefault(doc.lang, []).append(doc)
    truths = []
    results = []
    for lang in sorted(groups):
        members = groups[lang]
        if len(members) < 2:
            continue
        if progress:
            progress(f"{lang}: ground truth for {len(members)} documents")
        group = _prepare(members, lang, threshold, truth_n, pairs)
        total = len(members) * (len(members) - 1) // 2 if group.universe is None else len(group.universe[0])
        truths.append(LanguageTruth(lang, len(members), group.empty, total, len(group.pos_i), group.mode))
        chosen = settings(lang) if callable(settings) else settings or standard_settings(lang)
        for setting in chosen:
            if progress:
                progress(f"{lang}: {setting.name}")
            results.append(_score(group, setting, max_k))
    return Report(threshold, max_k, truth_n, tuple(truths), tuple(results))
