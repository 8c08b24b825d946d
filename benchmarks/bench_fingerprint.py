# ruff: noqa: RUF001  (the Chinese fallback text has full-width punctuation on purpose)
"""Fingerprinting speed of simhash-redis against the `simhash` PyPI package, on one core.

Run from the repository root::

    pip install simhash==2.1.2      # the comparison only; simhash-redis does not depend on it
    python benchmarks/bench_fingerprint.py [--docs 2000] [--size 3500] [--repeat 5]

The corpus is real text read from the machine in a fixed order: English from the licence texts and
package copyright files under /usr/share, Chinese from the zh_CN message catalogues (.mo files) of
installed packages. Where those are missing it falls back to the docstrings of Python's standard
library (English) and to a few paragraphs embedded below (Chinese). Texts are cut into documents of
``--size`` UTF-8 bytes. The process is pinned to one CPU, so figures are per core.
"""

from __future__ import annotations

import argparse
import ast
import gettext
import os
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_redis.fingerprint import fingerprint, fingerprint_many

_SHARE = Path("/usr/share")
_FALLBACK_CHINESE = (
    "近似重复检测是搜索引擎、网页抓取和数据清洗中的常见任务。两篇文档只要大部分内容相同，"
    "就应当被视为重复，即使其中有少量文字被修改、增加或删除。SimHash 把一篇文档映射为一个"
    "固定长度的指纹，相似的文档得到相似的指纹，它们之间的汉明距离很小。",
    "索引把每个指纹切成若干段，存放在 Redis 中；查询时只需要比较至少有一段完全相同的候选，"
    "因此即使库中有上亿篇文档，也能在几毫秒内找到所有距离不超过三位的近似重复。",
    "中文没有空格分词，所以每个汉字、平假名、片假名和谚文字符都被当作一个独立的词元；"
    "英文单词和数字仍然按连续的字母和数字切分，这样中英文混排的文本也能正确处理。",
)


def _read(path: Path) -> str:
    """Read a text file, or return "" when it is not UTF-8 text.

    Args:
        path: the file.

    Returns:
        Its text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def english_text() -> str:
    """Gather English text: licences and copyright files, else standard-library docstrings.

    Returns:
        The text.
    """
    files = sorted((_SHARE / "common-licenses").glob("*")) + sorted((_SHARE / "doc").glob("*/copyright"))
    text = "\n".join(_read(p) for p in files if p.is_file() and not p.is_symlink())
    if len(text) > 1_000_000:
        return text
    parts = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            tree = ast.parse(_read(path))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    parts.append(doc)
    return "\n".join(parts)


def chinese_text() -> str:
    """Gather Chinese text: the translations in installed zh_CN message catalogues, else a fallback.

    Returns:
        The text.
    """
    parts: list[str] = []
    for path in sorted((_SHARE / "locale" / "zh_CN" / "LC_MESSAGES").glob("*.mo")):
        try:
            with path.open("rb") as handle:
                catalog = gettext.GNUTranslations(handle)
        except (OSError, ValueError, LookupError):  # not a catalogue this gettext reads
            continue
        messages = catalog._catalog  # type: ignore[attr-defined]
        parts.extend(str(messages[key]) for key in sorted(messages, key=str) if messages[key])
    text = "\n".join(parts)
    return text if len(text) > 200_000 else "\n".join(_FALLBACK_CHINESE * 400)


def cut(text: str, size: int, limit: int) -> list[str]:
    """Cut a text into documents of about `size` UTF-8 bytes, at character boundaries.

    Args:
        text: the text.
        size: bytes per document.
        limit: most documents returned.

    Returns:
        The documents.
    """
    data = text.encode("utf-8")
    docs: list[str] = []
    start = 0
    while start + size <= len(data) and len(docs) < limit:
        end = start + size
        while end < len(data) and data[end] & 0xC0 == 0x80:
            end += 1
        docs.append(data[start:end].decode("utf-8"))
        start = end
    return docs


def seconds(run: Callable[[], object]) -> float:
    """Time one run in CPU seconds of this process.

    Args:
        run: the work.

    Returns:
        The CPU time it took.
    """
    start = time.process_time()
    run()
    return time.process_time() - start


def bench(label: str, docs: Sequence[str], repeat: int, theirs_docs: int) -> None:
    """Measure and print the rates for one corpus.

    Args:
        label: the corpus name.
        docs: its documents.
        repeat: timing rounds; the best of each contender counts.
        theirs_docs: documents given to the slower `simhash` package.
    """
    fingerprint_many(docs[:50])  # builds lookup tables and warms the token cache outside the timing
    runs: dict[str, tuple[Callable[[], object], int]] = {
        "many": (lambda: fingerprint_many(docs), len(docs)),
        "single": (lambda: [fingerprint(doc) for doc in docs], len(docs)),
    }
    try:
        from simhash import Simhash  # type: ignore[import-untyped]
    except ImportError:
        Simhash = None
    else:
        subset = docs[:theirs_docs]
        runs["simhash"] = (lambda: [Simhash(doc).value for doc in subset], len(subset))
    best = dict.fromkeys(runs, float("inf"))
    # Rounds interleave the contenders, so that a change of load on a shared machine hits them alike.
    for _ in range(repeat):
        for name, (run, _count) in runs.items():
            best[name] = min(best[name], seconds(run))
    rate = {name: count / best[name] for name, (_run, count) in runs.items()}
    line = f"{label:8} {len(docs):5} docs  many {rate['many']:9.0f} docs/s"
    line += f"  single {rate['single']:9.0f} docs/s"
    if Simhash is None:
        print(line + "  simhash: not installed (pip install simhash==2.1.2)")
        return
    theirs = rate["simhash"]
    ratios = f"ratio many {rate['many'] / theirs:5.1f}x single {rate['single'] / theirs:5.1f}x"
    print(f"{line}  simhash {theirs:7.0f} docs/s  {ratios}")


def main() -> None:
    """Parse arguments, pin to one CPU and run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000, help="documents per corpus")
    parser.add_argument("--size", type=int, default=3500, help="UTF-8 bytes per document")
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds; the best counts")
    parser.add_argument("--theirs", type=int, default=300, help="documents given to the simhash package")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"python {sys.version.split()[0]}, one CPU, documents of {args.size} UTF-8 bytes")
    for label, text in (("english", english_text()), ("chinese", chinese_text())):
        docs = cut(text, args.size, args.docs)
        bench(label, docs, args.repeat, min(args.theirs, len(docs)))


if __name__ == "__main__":
    main()
