"""Fingerprint quality: precision, recall and F1 of "distance <= k" against exact Jaccard ground truth.

The ground truth is the Jaccard similarity of each document's shingle set: word 3-shingles for
space-separated languages, character 3-shingles for Chinese (the library's tokens, in which every Han
character is one token). It is computed exactly: an all-pairs similarity join with prefix and size
filtering (Bayardo et al., "Scaling up all pairs similarity search", WWW 2007) whose every candidate is
verified by a set intersection. Fingerprint distances are computed for all pairs in memory with numpy
popcounts; no Redis is involved.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError, InvalidArgument
from ..features import CJK_RANGES, tokenize
from ..scheme import Scheme

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
    "load_corpus",
    "load_pairs",
    "scheme_setting",
    "shingle_sets",
    "standard_settings",
]

#: Lower edges of the Jaccard bands recall is reported for (the last band includes 1.0).
JACCARD_BANDS = (0.80, 0.85, 0.90, 0.95)
#: Lower edges of the length bands (tokens of the shorter document of a pair).
LENGTH_BANDS = (0, 10, 20, 50, 100, 200, 500, 1000)
#: A small English function-word list for the "with stopwords" settings.
_ENGLISH = (
    "a about above after again all also am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has have "
    "having he her here hers him his how i if in into is it its itself just me more most my no nor not "
    "now of off on once only or other our ours out over own same she should so some such than that the "
    "their theirs them then there these they this those through to too under until up very was we were "
    "what when where which while who whom why will with would you your yours "
)
ENGLISH_STOPWORDS = tuple(_ENGLISH.split())
#: A small Chinese function-word list (single characters: the library makes each Han character a token).
_CHINESE = "的 了 是 在 和 与 及 或 也 就 都 而 之 其 这 那 个 为 以 于 被 把 对 从 中 上 下"
CHINESE_STOPWORDS = tuple(_CHINESE.split())

_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class Doc:
    """One corpus document: id, text and language ("en", "zh", ...)."""

    id: str
    text: str
    lang: str


def _is_cjk(cp: int) -> bool:
    return any(low <= cp <= high for low, high in CJK_RANGES)


def detect_lang(text: str) -> str:
    """Guess a document's language group from its script.

    Args:
        text: the text.

    Returns:
        "zh" when CJK characters are at least a fifth of its letters, else "en".
    """
    letters = [ord(c) for c in text if c.isalnum()]
    if not letters:
        return "en"
    cjk = sum(1 for cp in letters if cp >= 0x1100 and _is_cjk(cp))
    return "zh" if cjk * 5 >= len(letters) else "en"


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8")


def load_corpus(path: str | Path) -> list[Doc]:
    """Read a JSON Lines corpus (optionally gzipped): one object per line with id, text and optional lang.

    Args:
        path: the file; a name ending in .gz is read as gzip.

    Returns:
        The documents in file order; a missing lang is guessed with `detect_lang`.

    Raises:
        InputError: the file is malformed, an id repeats, or a field has the wrong type; the message
            names the line.
    """
    docs: list[Doc] = []
    seen: set[str] = set()
    with _open_text(Path(path)) as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(str(path), number, f"not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise InputError(str(path), number, "expected an object")
            doc_id, text, lang = row.get("id"), row.get("text"), row.get("lang")
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                raise InputError(str(path), number, "id must be a string")
            if not isinstance(text, str):
                raise InputError(str(path), number, "text must be a string")
            if lang is not None and not isinstance(lang, str):
                raise InputError(str(path), number, "lang must be a string")
            doc_id = str(doc_id)
            if doc_id in seen:
                raise InputError(str(path), number, f"id {doc_id!r} repeats")
            seen.add(doc_id)
            docs.append(Doc(doc_id, text, lang or detect_lang(text)))
    return docs


def _label(value: object, source: str, line: int) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "dup", "duplicate", "1.0"):
        return 1
    if text in ("0", "false", "no", "0.0"):
        return 0
    raise InputError(source, line, f"label must be 1/0 or true/false, got {value!r}")


def load_pairs(path: str | Path) -> list[tuple[str, str, int | None]]:
    """Read labelled pairs: JSON Lines objects {id_a, id_b, label?}, or CSV rows id_a,id_b[,label].

    A CSV header row naming id_a is skipped.

    Args:
        path: the file; .jsonl/.json(.gz) is read as JSON Lines, anything else as CSV.

    Returns:
        (id_a, id_b, label) triples; label is 1, 0 or None (not given).

    Raises:
        InputError: a row is malformed; the message names it.
    """
    path = Path(path)
    out: list[tuple[str, str, int | None]] = []
    is_json = ".jsonl" in path.suffixes or ".json" in path.suffixes
    with _open_text(path) as stream:
        if is_json:
            for number, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(str(path), number, f"not JSON: {exc}") from None
                if not isinstance(row, dict) or "id_a" not in row or "id_b" not in row:
                    raise InputError(str(path), number, "expected an object with id_a and id_b")
                out.append((str(row["id_a"]), str(row["id_b"]), _label(row.get("label"), str(path), number)))
            return out
        for number, fields in enumerate(csv.reader(stream), 1):
            if not fields or (number == 1 and fields[0].strip() == "id_a"):
                continue
            if len(fields) not in (2, 3):
                raise InputError(str(path), number, "expected id_a,id_b[,label]")
            label = _label(fields[2], str(path), number) if len(fields) == 3 else None
            out.append((fields[0].strip(), fields[1].strip(), label))
    return out


def shingle_sets(token_lists: Sequence[Sequence[str]], n: int) -> list[npt.NDArray[np.int64]]:
    """Exact shingle sets: every distinct n-token shingle interned to an int, per document.

    Args:
        token_lists: each document's tokens.
        n: tokens per shingle; a document with 1..n-1 tokens is one shingle of all of them.

    Returns:
        For each document, its sorted distinct shingle ids (empty for no token).

    Raises:
        InvalidArgument: n < 1.
    """
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
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return Join(empty, empty.copy(), np.zeros(0, dtype=np.float64))
    i, j, s = zip(*rows, strict=True)
    return Join(np.array(i, dtype=np.int64), np.array(j, dtype=np.int64), np.array(s, dtype=np.float64))


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise InvalidArgument(f"threshold must be in (0, 1], got {threshold}")


def jaccard_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """All pairs of sets with Jaccard similarity >= threshold, exactly (prefix-filtered all-pairs join).

    Elements are ordered rarest first; two sets with J >= t must share an element within their first
    |x| - ceil(t|x|) + 1 elements, and |y| >= t|x|, so only those candidates are verified, each by an
    exact intersection. Sets are processed by increasing size, each probing the prefixes indexed so far.
    Empty sets are never paired.

    Args:
        sets: each set's distinct non-negative int elements.
        threshold: the similarity threshold, in (0, 1].

    Returns:
        The pairs, sorted.

    Raises:
        InvalidArgument: threshold is out of range.
    """
    _check_threshold(threshold)
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    if not len(sets) or not sizes.any():
        return _make_join([])
    vocab = int(max(int(s.max()) for s in sets if len(s))) + 1
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
            inter = len(members[x] & members[y])
            sim = inter / (size + len(records[y]) - inter)
            if sim >= threshold:
                rows.append((min(x, y), max(x, y), sim))
    return _make_join(rows)


def brute_force_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """All pairs with Jaccard similarity >= threshold by comparing every pair (for tests and tiny inputs).

    Args:
        sets: each set's distinct int elements.
        threshold: the similarity threshold, in (0, 1].

    Returns:
        The pairs, sorted; empty sets are never paired.

    Raises:
        InvalidArgument: threshold is out of range.
    """
    _check_threshold(threshold)
    py = [set(s.tolist()) for s in sets]
    rows = []
    for x in range(len(py)):
        for y in range(x + 1, len(py)):
            if not py[x] or not py[y]:
                continue
            inter = len(py[x] & py[y])
            sim = inter / (len(py[x]) + len(py[y]) - inter)
            if sim >= threshold:
                rows.append((x, y, sim))
    return _make_join(rows)


def _words(fps: Sequence[int], f: int) -> npt.NDArray[np.uint64]:
    """Fingerprints as an (N, f/64 rounded up) uint64 array, least significant word first."""
    width = max(1, f // 64)
    out = np.zeros((len(fps), width), dtype=np.uint64)
    for w in range(width):
        out[:, w] = np.fromiter(((fp >> (64 * w)) & ((1 << 64) - 1) for fp in fps), np.uint64, len(fps))
    return out


def _distance(words: npt.NDArray[np.uint64], i: npt.NDArray[np.int64], j: npt.NDArray[np.int64]) -> Any:
    return np.bitwise_count(words[i] ^ words[j]).sum(axis=1).astype(np.int64)


def hamming_pairs(
    fps: Sequence[int], f: int, max_k: int, block: int = 512
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every pair (i < j) of fingerprints within Hamming distance max_k, by blocked all-pairs popcounts.

    Args:
        fps: the fingerprints.
        f: their width in bits.
        max_k: the largest distance kept.
        block: rows compared at a time (memory is block * N * f/8 bytes).

    Returns:
        Arrays i, j and distance, sorted by (i, j).
    """
    words = _words(fps, f)
    count = len(fps)
    found_i, found_j, found_d = [], [], []
    for start in range(0, count, block):
        rows = words[start : start + block]
        dist = np.bitwise_count(rows[:, None, :] ^ words[None, :, :]).sum(axis=2, dtype=np.int64)
        ii, jj = np.nonzero(dist <= max_k)
        keep = jj > ii + start
        found_i.append(ii[keep] + start)
        found_j.append(jj[keep])
        found_d.append(dist[ii[keep], jj[keep]])
    if not found_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    return (
        np.concatenate(found_i).astype(np.int64),
        np.concatenate(found_j).astype(np.int64),
        np.concatenate(found_d).astype(np.int64),
    )


@dataclasses.dataclass(frozen=True)
class Setting:
    """A way to fingerprint texts: a name, a batch function texts -> fingerprints, and its width."""

    name: str
    fingerprint_many: Callable[[Sequence[str]], Sequence[int]]
    f: int = 64


def scheme_setting(name: str, scheme: Scheme, tokenizer: Callable[[str], list[str]] | None = None) -> Setting:
    """A setting fingerprinting with a library scheme, optionally on tokens from another tokenizer.

    Args:
        name: the setting's name in reports.
        scheme: the scheme.
        tokenizer: if given, each text is segmented by it and passed as tokens (e.g. jieba.lcut).

    Returns:
        The setting.
    """

    def run(texts: Sequence[str]) -> list[int]:
        if tokenizer is None:
            return scheme.fingerprint_many(texts)
        return scheme.fingerprint_many([tokenizer(text) for text in texts])

    return Setting(name, run, scheme.f)


def standard_settings(lang: str, f: int = 64) -> list[Setting]:
    """The feature settings compared for one language: character n-grams, words and word shingles.

    Args:
        lang: "zh" uses the Chinese stopword list, anything else the English one.
        f: fingerprint width.

    Returns:
        chars n=2..5, words and shingles n=2..4, each with tf and binary weights, plus words and
        3-shingles with stopwords removed (tf).
    """
    stop = CHINESE_STOPWORDS if lang == "zh" else ENGLISH_STOPWORDS
    out = []
    for weighting in ("tf", "binary"):
        for n in (2, 3, 4):
            out.append(scheme_setting(f"shingles-{n}/{weighting}", Scheme("shingles", n, f, weighting)))
        out.append(scheme_setting(f"words/{weighting}", Scheme("words", 1, f, weighting)))
        for n in (2, 3, 4, 5):
            out.append(scheme_setting(f"chars-{n}/{weighting}", Scheme("chars", n, f, weighting)))
    out.append(scheme_setting("shingles-3/tf+stop", Scheme("shingles", 3, f, "tf", stopwords=stop)))
    out.append(scheme_setting("words/tf+stop", Scheme("words", 1, f, "tf", stopwords=stop)))
    return out


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


def jieba_settings() -> list[Setting]:
    """Chinese segmented by jieba and passed to the library as tokens (jieba: evaluation only).

    Returns:
        jieba words and jieba word 2- and 3-shingles, tf weighted.

    Raises:
        ImportError: jieba is not installed.
    """
    import jieba  # type: ignore[import-not-found, import-untyped, unused-ignore]

    jieba.setLogLevel(60)

    def cut(text: str) -> list[str]:
        # Given tokens are hashed as they are: drop jieba's space and punctuation tokens, as the
        # library's own tokenizer does.
        return [t for t in jieba.lcut(text) if any(c.isalnum() for c in t)]

    return [
        scheme_setting("jieba-words/tf", Scheme("words", 1), cut),
        scheme_setting("jieba-shingles-2/tf", Scheme("shingles", 2), cut),
        scheme_setting("jieba-shingles-3/tf", Scheme("shingles", 3), cut),
    ]


@dataclasses.dataclass(frozen=True)
class SettingReport:
    """One setting's results on one language group.

    Attributes:
        band_recall: Jaccard band label -> recall at each k.
        band_counts: Jaccard band label -> positive pairs in it.
        length_rows: (band label, positives, predicted at each k, true positives at each k), by the
            token count of the shorter document of the pair.
    """

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
        """The report as JSON-ready data, with precision, recall and F1 spelled out.

        Returns:
            A dict.
        """
        return {
            "threshold": self.threshold,
            "max_k": self.max_k,
            "truth_n": self.truth_n,
            "truths": [dataclasses.asdict(t) for t in self.truths],
            "results": [
                {
                    "lang": r.lang,
                    "setting": r.setting,
                    "f": r.f,
                    "scores": [
                        {**dataclasses.asdict(s), "precision": s.precision, "recall": s.recall, "f1": s.f1}
                        for s in r.scores
                    ],
                    "band_recall": r.band_recall,
                    "band_counts": r.band_counts,
                    "length": [
                        {"band": b, "positives": p, "predicted": pred, "tp": tp}
                        for b, p, pred, tp in r.length_rows
                    ],
                }
                for r in self.results
            ],
        }


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
    if pairs is None:
        join = jaccard_join(sets, threshold)
        return _Group(
            lang,
            [d.text for d in docs],
            lengths,
            int((lengths == 0).sum()),
            join.i,
            join.j,
            join.sim,
            None,
            f"all pairs, Jaccard >= {threshold:g}",
        )
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
        return _Group(
            lang,
            [d.text for d in docs],
            lengths,
            int((lengths == 0).sum()),
            ii[pos],
            jj[pos],
            sims[pos],
            (ii, jj, labels),
            "labelled pairs",
        )
    return _Group(
        lang,
        [d.text for d in docs],
        lengths,
        int((lengths == 0).sum()),
        ii,
        jj,
        sims,
        None,
        "listed pairs positive, all others negative",
    )


def _score(group: _Group, setting: Setting, max_k: int) -> SettingReport:
    fps = list(setting.fingerprint_many(group.texts))
    words = _words(fps, setting.f)
    pos_d = _distance(words, group.pos_i, group.pos_j)
    if group.universe is None:
        pi, pj, pd = hamming_pairs(fps, setting.f, max_k)
    else:
        ui, uj, _ = group.universe
        ud = _distance(words, ui, uj)
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
        docs: the corpus.
        settings: the settings to score, or a function lang -> settings (default `standard_settings`).
        threshold: pairs with Jaccard >= threshold are near-duplicates (when no pairs are given).
        pairs: (id_a, id_b, label) triples: with labels, only these pairs are scored; without, they are
            the positives and every other pair within a language is a negative.
        max_k: scores are given for k = 0..max_k.
        truth_n: tokens per ground-truth shingle.
        langs: the language groups to evaluate (default: all present).
        progress: called with a short message as each step starts.

    Returns:
        The report.

    Raises:
        InvalidArgument: threshold, max_k or truth_n is out of range.
    """
    _check_threshold(threshold)
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


def format_report(report: Report, ks: Sequence[int] | None = None) -> str:
    """Render a report as Markdown tables: the ground truth, then P/R/F1 per setting and k.

    Args:
        report: the report.
        ks: the k values shown (default 0..max_k).

    Returns:
        The Markdown text.
    """
    ks = list(ks if ks is not None else range(report.max_k + 1))
    lines = ["| lang | docs | empty | pairs scored | positives | truth |", "|---|---|---|---|---|---|"]
    for t in report.truths:
        lines.append(f"| {t.lang} | {t.docs} | {t.empty_docs} | {t.pairs} | {t.positives} | {t.mode} |")
    for lang in [t.lang for t in report.truths]:
        lines += ["", f"**{lang}**: precision / recall / F1 at each k", ""]
        lines.append("| setting | " + " | ".join(f"k={k}" for k in ks) + " |")
        lines.append("|---|" + "---|" * len(ks))
        for r in report.results:
            if r.lang != lang:
                continue
            cells = [f"{r.scores[k].precision:.2f}/{r.scores[k].recall:.2f}/{r.scores[k].f1:.2f}" for k in ks]
            lines.append(f"| {r.setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
