"""What an evaluation reports: scores at each k, per setting and language group, and their Markdown form."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

__all__ = ["LanguageTruth", "Report", "Scores", "SettingReport", "format_report"]


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
        """The report as JSON-ready data, with precision, recall and F1 spelled out."""
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


def format_report(report: Report, ks: Sequence[int] | None = None) -> str:
    """A report as Markdown tables: the ground truth, then P/R/F1 per setting at each k of ks (default
    0..max_k)."""
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
