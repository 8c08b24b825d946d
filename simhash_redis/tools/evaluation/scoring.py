"""Scoring "distance <= k" against the truth (exact Jaccard similarity of shingle sets, from all-pairs
joins), each language group on its own, and the report of it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import InvalidArgument
from ...fingerprinting.tokens import tokenize
from .corpus import Doc
from .settings import Setting, standard_settings

__all__ = [
    "JACCARD_BANDS",
    "LENGTH_BANDS",
    "LanguageTruth",
    "Report",
    "Scores",
    "SettingReport",
    "brute_force_join",
    "evaluate",
    "format_report",
    "hamming_pairs",
    "jaccard_join",
    "shingle_sets",
]

_EPS = 1e-9


def shingle_sets(token_lists: Sequence[Sequence[str]], n: int) -> list[npt.NDArray[np.int64]]:
    """Each document's sorted distinct n-token shingles, interned to ints (a document of 1..n-1 tokens is
    one shingle of all of them); InvalidArgument if n < 1."""
    if n < 1:
        raise InvalidArgument(f"n must be >= 1, got {n}")
    ids: dict[tuple[str, ...], int] = {}
    out = []
    for tokens in token_lists:
        width = min(n, len(tokens))
        shingles = {tuple(tokens[i : i + width]) for i in range(len(tokens) - width + 1)} if tokens else set()
        row = [ids.setdefault(s, len(ids)) for s in shingles]
        out.append(np.array(sorted(row), dtype=np.int64))
    return out


@dataclasses.dataclass(frozen=True)
class Join:
    """Pairs (i < j) of similarity >= a threshold, with their Jaccard similarities, sorted by (i, j)."""

    i: npt.NDArray[np.int64]
    j: npt.NDArray[np.int64]
    sim: npt.NDArray[np.float64]


def _make_join(rows: list[tuple[int, int, float]]) -> Join:
    rows.sort()
    columns = np.array(rows, dtype=np.float64).reshape(-1, 3).T
    return Join(columns[0].astype(np.int64), columns[1].astype(np.int64), columns[2].copy())


def jaccard(a: AbstractSet[int], b: AbstractSet[int]) -> float:
    """The Jaccard similarity of two sets (0.0 for two empty ones)."""
    inter = len(a & b)
    return inter / max(1, len(a) + len(b) - inter)


def check_threshold(threshold: float) -> None:
    """Raise InvalidArgument unless a Jaccard threshold is in (0, 1]."""
    if not 0.0 < threshold <= 1.0:
        raise InvalidArgument(f"threshold must be in (0, 1], got {threshold}")


def jaccard_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """All pairs of non-empty sets (of distinct ints >= 0) with Jaccard similarity >= threshold, exactly
    (a prefix-filtered join, Bayardo et al., WWW 2007); InvalidArgument for a threshold out of range."""
    check_threshold(threshold)
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    if not len(sets) or not sizes.any():
        return _make_join([])
    # np.max, not the method: numpy 2.5's stubs match no overload of ndarray.max() for Python 3.10.
    vocab = int(max(int(np.max(s)) for s in sets if len(s))) + 1
    freq = np.bincount(np.concatenate([s for s in sets if len(s)]), minlength=vocab)
    rank = np.empty(vocab, dtype=np.int64)
    rank[np.lexsort((np.arange(vocab), freq))] = np.arange(vocab)
    records = [np.sort(rank[s]).tolist() for s in sets]
    members = [frozenset(r) for r in records]
    index: dict[int, list[int]] = {}
    rows: list[tuple[int, int, float]] = []
    for x in np.argsort(sizes, kind="stable").tolist():
        size = len(records[x])
        if not size:
            continue
        # The epsilon only lengthens the prefix and loosens the size bound: never loses a pair.
        prefix = size - math.ceil(threshold * size - _EPS) + 1
        least = threshold * size - _EPS
        candidates: set[int] = set()
        for token in records[x][:prefix]:
            bucket = index.get(token)
            if bucket is None:
                index[token] = [x]
                continue
            candidates.update(y for y in bucket if len(records[y]) >= least)
            bucket.append(x)
        for y in candidates:
            sim = jaccard(members[x], members[y])
            if sim >= threshold:
                rows.append((min(x, y), max(x, y), sim))
    return _make_join(rows)


def brute_force_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """`jaccard_join` by comparing every pair (for tests and tiny inputs)."""
    check_threshold(threshold)
    py = [set(s.tolist()) for s in sets]
    pairs = ((x, y, jaccard(py[x], py[y])) for x in range(len(py)) for y in range(x + 1, len(py)))
    return _make_join([(x, y, sim) for x, y, sim in pairs if py[x] and py[y] and sim >= threshold])


def fingerprint_words(fps: Sequence[int], f: int) -> npt.NDArray[np.uint64]:
    """Fingerprints of f bits as an (N, f/64 rounded up) uint64 array, least significant word first."""
    width = max(1, f // 64)
    out = np.zeros((len(fps), width), dtype=np.uint64)
    for w in range(width):
        out[:, w] = np.fromiter(((fp >> (64 * w)) & ((1 << 64) - 1) for fp in fps), np.uint64, len(fps))
    return out


def pair_distances(
    words: npt.NDArray[np.uint64], i: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The Hamming distances of pairs (i, j) of fingerprints, as `fingerprint_words` gives them."""
    distances: npt.NDArray[np.int64] = np.bitwise_count(words[i] ^ words[j]).sum(axis=1).astype(np.int64)
    return distances


def hamming_pairs(
    fps: Sequence[int], f: int, max_k: int, block: int = 512
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Arrays i, j and distance of every pair (i < j) of fingerprints of f bits within max_k, sorted,
    comparing `block` rows at a time (memory: block * N * f/8 bytes)."""
    words = fingerprint_words(fps, f)
    empty = np.zeros(0, dtype=np.int64)
    found = [(empty, empty, empty)]
    for start in range(0, len(fps), block):
        dist = np.bitwise_count(words[start : start + block, None, :] ^ words[None, :, :]).sum(
            axis=2, dtype=np.int64
        )
        ii, jj = np.nonzero(dist <= max_k)
        keep = jj > ii + start
        found.append((ii[keep] + start, jj[keep], dist[ii[keep], jj[keep]]))
    i, j, d = (np.concatenate(column).astype(np.int64) for column in zip(*found, strict=True))
    return i, j, d


#: Lower edges of the Jaccard bands recall is reported for (the last band includes 1.0).
JACCARD_BANDS = (0.80, 0.85, 0.90, 0.95)
#: Lower edges of the length bands (tokens of the shorter document of a pair).
LENGTH_BANDS = (0, 10, 20, 50, 100, 200, 500, 1000)

_Ints = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class Scores:
    """Confusion counts and scores of "distance <= k" at one k."""

    k: int
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        """TP / (TP + FP); 1.0 when nothing is predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """TP / (TP + FN); 1.0 when there is no positive."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        """The harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclasses.dataclass(frozen=True)
class LanguageTruth:
    """The ground truth of one language group."""

    lang: str
    docs: int
    empty_docs: int
    pairs: int
    positives: int
    mode: str


@dataclasses.dataclass(frozen=True)
class SettingReport:
    """One setting's results on one language group: recall at each k and positives by Jaccard band, and
    (band, positives, predicted and true positives at each k) by the shorter document's tokens."""

    lang: str
    setting: str
    f: int
    scores: tuple[Scores, ...]
    band_recall: dict[str, list[float]]
    band_counts: dict[str, int]
    length_rows: tuple[tuple[str, int, list[int], list[int]], ...]


@dataclasses.dataclass(frozen=True)
class Report:
    """An evaluation's ground truth summary and per-setting results."""

    threshold: float
    max_k: int
    truth_n: int
    truths: tuple[LanguageTruth, ...]
    results: tuple[SettingReport, ...]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data, with precision, recall and F1 spelled out."""
        data = dataclasses.asdict(self)
        for result, out in zip(self.results, data["results"], strict=True):
            out["scores"] = [
                {**dataclasses.asdict(s), "precision": s.precision, "recall": s.recall, "f1": s.f1}
                for s in result.scores
            ]
            del out["length_rows"]
            out["length"] = [
                {"band": b, "positives": p, "predicted": pred, "tp": tp}
                for b, p, pred, tp in result.length_rows
            ]
        return data


def format_report(report: Report, ks: Sequence[int] | None = None) -> str:
    """A report as Markdown tables: the ground truth, then P/R/F1 per setting at each k (default 0..max_k)."""
    ks = list(ks if ks is not None else range(report.max_k + 1))
    lines = ["| lang | docs | empty | pairs scored | positives | truth |", "|---|---|---|---|---|---|"]
    for t in report.truths:
        lines.append(f"| {t.lang} | {t.docs} | {t.empty_docs} | {t.pairs} | {t.positives} | {t.mode} |")
    for lang in [t.lang for t in report.truths]:
        lines += ["", f"**{lang}**: precision / recall / F1 at each k", ""]
        lines.append("| setting | " + " | ".join(f"k={k}" for k in ks) + " |")
        lines.append("|---|" + "---|" * len(ks))
        for r in (r for r in report.results if r.lang == lang):
            cells = [f"{r.scores[k].precision:.2f}/{r.scores[k].recall:.2f}/{r.scores[k].f1:.2f}" for k in ks]
            lines.append(f"| {r.setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _bands(edges: Sequence[float], top: float, values: npt.NDArray[Any]) -> tuple[list[str], _Ints]:
    """The labels of the bands with these lower edges, and the band of each value."""
    bounds = [*edges, top]
    labels = [f"{bounds[i]:g}-{bounds[i + 1]:g}" for i in range(len(edges))]
    return labels, np.searchsorted(np.array(edges), values, side="right") - 1


@dataclasses.dataclass
class _Group:
    """One language group prepared for scoring: texts, token counts and the truth."""

    lang: str
    texts: list[str]
    lengths: _Ints
    pos_i: _Ints
    pos_j: _Ints
    pos_sim: npt.NDArray[np.float64]
    # Labelled mode: the only pairs scored, with their labels; None scores all pairs.
    universe: tuple[_Ints, _Ints, _Ints] | None
    mode: str


def _prepare(
    docs: Sequence[Doc], threshold: float, truth_n: int, pairs: Sequence[tuple[str, str, int | None]] | None
) -> _Group:
    tokens = [tokenize(d.text) for d in docs]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    sets = shingle_sets(tokens, truth_n)
    lang, texts = docs[0].lang, [d.text for d in docs]
    if pairs is None:
        join = jaccard_join(sets, threshold)
        return _Group(
            lang, texts, lengths, join.i, join.j, join.sim, None, f"all pairs, Jaccard >= {threshold:g}"
        )
    where = {d.id: i for i, d in enumerate(docs)}
    rows = [(where[a], where[b], label) for a, b, label in pairs if a in where and b in where and a != b]
    ii = np.array([min(a, b) for a, b, _ in rows], dtype=np.int64)
    jj = np.array([max(a, b) for a, b, _ in rows], dtype=np.int64)
    py = [set(s.tolist()) for s in sets]
    sims = np.array([jaccard(py[a], py[b]) for a, b in zip(ii.tolist(), jj.tolist(), strict=True)])
    if any(label is not None for _, _, label in rows):
        labels = np.array([1 if label is None else label for _, _, label in rows], dtype=np.int64)
        pos = labels == 1
        return _Group(lang, texts, lengths, ii[pos], jj[pos], sims[pos], (ii, jj, labels), "labelled pairs")
    return _Group(lang, texts, lengths, ii, jj, sims, None, "listed pairs positive, all others negative")


def _score(group: _Group, setting: Setting, max_k: int) -> SettingReport:
    fps = list(setting.fingerprint_many(group.texts))
    words = fingerprint_words(fps, setting.f)
    pos_d = pair_distances(words, group.pos_i, group.pos_j)
    if group.universe is None:
        pi, pj, pd = hamming_pairs(fps, setting.f, max_k)
    else:
        ui, uj, _ = group.universe
        ud = pair_distances(words, ui, uj)
        pi, pj, pd = ui[ud <= max_k], uj[ud <= max_k], ud[ud <= max_k]
    # A document without any token has fingerprint 0 and no shingle: it is never a near-duplicate.
    real = (group.lengths[pi] > 0) & (group.lengths[pj] > 0)
    pi, pj, pd = pi[real], pj[real], pd[real]
    ks = range(max_k + 1)
    scores = []
    for k in ks:
        tp = int((pos_d <= k).sum())
        scores.append(Scores(k, tp, int((pd <= k).sum()) - tp, len(pos_d) - tp))
    band_recall: dict[str, list[float]] = {}
    band_counts: dict[str, int] = {}
    labels, band_of = _bands(JACCARD_BANDS, 1.0, group.pos_sim)
    for b, label in enumerate(labels):
        d = pos_d[band_of == b]
        band_counts[label] = len(d)
        band_recall[label] = [float((d <= k).mean()) if len(d) else float("nan") for k in ks]
    # A predicted pair is a true positive iff it is among the positives: match by pair code.
    count = len(group.texts)
    pred_true = np.isin(pi * count + pj, group.pos_i * count + group.pos_j)
    labels, pos_band = _bands(
        LENGTH_BANDS, math.inf, np.minimum(group.lengths[group.pos_i], group.lengths[group.pos_j])
    )
    _, pred_band = _bands(LENGTH_BANDS, math.inf, np.minimum(group.lengths[pi], group.lengths[pj]))
    rows = []
    for b, label in enumerate(labels):
        pb = pred_band == b
        predicted = [int((pb & (pd <= k)).sum()) for k in ks]
        true = [int((pb & pred_true & (pd <= k)).sum()) for k in ks]
        rows.append((label, int((pos_band == b).sum()), predicted, true))
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
        langs: the language groups to evaluate (default: all present).
        progress: called with a short message as each step starts.

    Raises:
        InvalidArgument: an argument out of range, or a language group of langs without documents.
    """
    check_threshold(threshold)
    if not 0 <= max_k <= 64:
        raise InvalidArgument(f"max_k must be in 0..64, got {max_k}")
    if truth_n < 1:
        raise InvalidArgument(f"truth_n must be >= 1, got {truth_n}")
    wanted = set(langs) if langs is not None else None
    present = {doc.lang for doc in docs}
    if wanted is not None and wanted - present:
        missing = ", ".join(sorted(wanted - present))
        raise InvalidArgument(
            f"no document of language group {missing}; the corpus has {', '.join(sorted(present)) or 'none'}"
        )
    groups: dict[str, list[Doc]] = {}
    for doc in docs:
        if wanted is None or doc.lang in wanted:
            groups.setdefault(doc.lang, []).append(doc)
    say = progress or (lambda message: None)
    truths, results = [], []
    for lang, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        say(f"{lang}: ground truth for {len(members)} documents")
        group = _prepare(members, threshold, truth_n, pairs)
        total = len(members) * (len(members) - 1) // 2 if group.universe is None else len(group.universe[0])
        empty = int((group.lengths == 0).sum())
        truths.append(LanguageTruth(lang, len(members), empty, total, len(group.pos_i), group.mode))
        for setting in settings(lang) if callable(settings) else settings or standard_settings(lang):
            say(f"{lang}: {setting.name}")
            results.append(_score(group, setting, max_k))
    return Report(threshold, max_k, truth_n, tuple(truths), tuple(results))
