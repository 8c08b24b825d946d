"""Build simhash_redis/data/sample.jsonl.gz, the demo's sample of real documents with real near-duplicates.

Run from the repository root (needs pip and the package index; reads /usr/share/common-licenses, which
Debian's base-files package installs on every Debian and Ubuntu system)::

    python benchmarks/build_sample.py [--out simhash_redis/data/sample.jsonl.gz] [--cache DIR]

The documents (simhash_redis/data/SOURCES.md says where each comes from and under which licence):

* the licence texts of Debian's ``/usr/share/common-licenses`` (GPL, LGPL, GFDL, Apache, MPL, ...);
* for each pinned PyPI project, the README (the long description in the wheel's METADATA) of each
  pinned release, and its licence files (``*.dist-info/LICENSE*``, ``COPYING*``). Successive READMEs of
  one project are real near-duplicates, and so are the MIT, BSD and Apache licences of different
  projects, which differ in their copyright lines. A text identical to the same project's previous
  release is left out, so each project contributes only versions that really changed.

Wheels are fetched with ``pip download --no-deps --only-binary :all: --python-version 3.11`` (pure-Python
wheels only, so the result does not depend on the interpreter or platform) into a cache folder, and the
output is written with a zero gzip timestamp in a fixed order: the same command builds the same file.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import gzip
import io
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_DEFAULT_OUT = _ROOT / "simhash_redis" / "data" / "sample.jsonl.gz"
_DEFAULT_CACHE = _ROOT / "benchmarks" / ".cache" / "sample"
_COMMON_LICENSES = Path("/usr/share/common-licenses")

#: PyPI projects: (releases, oldest first; SPDX licence of the project's texts).
PYPI: dict[str, tuple[tuple[str, ...], str]] = {
    "requests": (("2.28.2", "2.31.0", "2.32.3"), "Apache-2.0"),
    "click": (("8.0.4", "8.1.3", "8.1.7"), "BSD-3-Clause"),
    "flask": (("2.2.5", "2.3.3", "3.0.3"), "BSD-3-Clause"),
    "jinja2": (("3.1.2", "3.1.4"), "BSD-3-Clause"),
    "itsdangerous": (("2.1.2", "2.2.0"), "BSD-3-Clause"),
    "werkzeug": (("2.3.8", "3.0.3"), "BSD-3-Clause"),
    "attrs": (("22.2.0", "23.1.0", "23.2.0"), "MIT"),
    "urllib3": (("1.26.18", "2.0.7", "2.2.1"), "MIT"),
    "idna": (("3.4", "3.6", "3.7"), "BSD-3-Clause"),
    "six": (("1.16.0",), "MIT"),
    "packaging": (("23.1", "23.2", "24.0"), "Apache-2.0 OR BSD-2-Clause"),
    "pluggy": (("1.3.0", "1.4.0", "1.5.0"), "MIT"),
    "iniconfig": (("2.0.0",), "MIT"),
    "tomli": (("2.0.1",), "MIT"),
    "typing-extensions": (("4.9.0", "4.11.0"), "PSF-2.0"),
    "platformdirs": (("3.11.0", "4.2.0", "4.2.2"), "MIT"),
    "rich": (("13.6.0", "13.7.0", "13.7.1"), "MIT"),
    "typer": (("0.9.0", "0.12.3"), "MIT"),
    "redis": (("4.6.0", "5.0.1", "5.0.4"), "MIT"),
    "python-dateutil": (("2.8.2", "2.9.0.post0"), "Apache-2.0 AND BSD-3-Clause"),
    "pyparsing": (("3.1.1", "3.1.2"), "MIT"),
    "sortedcontainers": (("2.4.0",), "Apache-2.0"),
    "more-itertools": (("10.1.0", "10.2.0"), "MIT"),
    "zipp": (("3.17.0", "3.18.1"), "MIT"),
    "importlib-metadata": (("7.0.1", "7.1.0"), "Apache-2.0"),
    "jaraco.functools": (("4.0.0",), "MIT"),
    "jaraco.classes": (("3.3.1",), "MIT"),
    "jaraco.context": (("4.3.0",), "MIT"),
    "pytest": (("7.4.4", "8.0.0", "8.1.1"), "MIT"),
    "exceptiongroup": (("1.2.0",), "MIT"),
    "wheel": (("0.42.0",), "MIT"),
    "toml": (("0.10.2",), "MIT"),
    "certifi": (("2024.2.2",), "MPL-2.0"),
    "mdurl": (("0.1.2",), "MIT"),
    "markdown-it-py": (("3.0.0",), "MIT"),
    "colorama": (("0.4.6",), "BSD-3-Clause"),
    "tqdm": (("4.66.1", "4.66.2"), "MPL-2.0 AND MIT"),
    "decorator": (("5.1.1",), "BSD-2-Clause"),
}
#: Licence files taken from a wheel: at the top of *.dist-info/ or of *.dist-info/licenses/.
_LICENCE_FILE = re.compile(r"^[^/]+\.dist-info/(?:licenses/)?((?:LICEN[CS]E|COPYING)[^/]*)$", re.IGNORECASE)
_FOLDED = re.compile(r"\n {7}\|")
_EXTENSION = re.compile(r"\.(?:txt|md|rst)$", re.IGNORECASE)


def _wheel_name(project: str) -> str:
    return re.sub(r"[-_.]+", "_", project).lower()


def fetch_wheels(cache: Path) -> dict[tuple[str, str], Path]:
    """Download the pinned wheels into the cache (once), one pip call per round of releases.

    Args:
        cache: the cache folder.

    Returns:
        (project, version) -> wheel file.

    Raises:
        SystemExit: pip failed, or a wheel is missing after it ran.
    """
    cache.mkdir(parents=True, exist_ok=True)
    wanted = [(name, version) for name, (versions, _) in PYPI.items() for version in versions]

    def find(name: str, version: str) -> Path | None:
        for wheel in sorted(cache.glob("*.whl")):
            project, release = wheel.name.split("-")[:2]
            if _wheel_name(project) == _wheel_name(name) and release == version:
                return wheel
        return None

    missing = [(name, version) for name, version in wanted if find(name, version) is None]
    rounds: list[list[str]] = []
    seen: dict[str, int] = {}
    for name, version in missing:  # one release per project per pip call: pip cannot pin two at once
        n = seen.get(name, 0)
        seen[name] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(f"{name}=={version}")
    for specs in rounds:
        args = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
        args += ["--python-version", "3.11", "--dest", str(cache), *specs]
        print("+ pip download", " ".join(specs), file=sys.stderr)
        if subprocess.run(args, check=False).returncode != 0:
            raise SystemExit("pip download failed")
    out = {}
    for name, version in wanted:
        found = find(name, version)
        if found is None:
            raise SystemExit(f"no wheel for {name}=={version} in {cache}")
        out[(name, version)] = found
    return out


def _description(metadata: str) -> str:
    """The long description (README) of a wheel's METADATA: its body, or its folded Description header."""
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(metadata)
    body = message.get_payload()
    if isinstance(body, str) and body.strip():
        return body.strip() + "\n"
    folded = message.get("Description", "")
    return _FOLDED.sub("\n", str(folded)).strip() + "\n"


def wheel_texts(wheel: Path) -> Iterator[tuple[str, str]]:
    """The README and the licence files of a wheel.

    Args:
        wheel: the wheel file.

    Yields:
        (kind, text): ("README", description), then ("LICENSE", text) or ("LICENSE.APACHE", ...) per file.
    """
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(archive.namelist())
        meta = next(n for n in names if re.match(r"^[^/]+\.dist-info/METADATA$", n))
        readme = _description(archive.read(meta).decode("utf-8"))
        if readme.strip():
            yield "README", readme
        for name in names:
            match = _LICENCE_FILE.match(name)
            if match:
                text = archive.read(name).decode("utf-8", errors="replace")
                yield _EXTENSION.sub("", match.group(1)).upper(), text


def common_licenses() -> Iterator[dict[str, str]]:
    """The licence texts of /usr/share/common-licenses (regular files; symlinks are aliases).

    Yields:
        Sample records.

    Raises:
        SystemExit: the folder does not exist (not a Debian-based system).
    """
    if not _COMMON_LICENSES.is_dir():
        raise SystemExit(f"{_COMMON_LICENSES} not found: run this on Debian or Ubuntu (package base-files)")
    for path in sorted(_COMMON_LICENSES.iterdir()):
        if path.is_file() and not path.is_symlink():
            yield {
                "id": f"common-licenses/{path.name}",
                "text": path.read_text(encoding="utf-8", errors="replace"),
                "source": "debian:base-files:/usr/share/common-licenses/" + path.name,
                "license": "verbatim copying permitted (see the text)",
            }


def pypi_records(wheels: dict[tuple[str, str], Path]) -> Iterator[dict[str, str]]:
    """README and licence records of the pinned releases, leaving out texts unchanged since the last one.

    Args:
        wheels: (project, version) -> wheel file.

    Yields:
        Sample records.
    """
    for name, (versions, licence) in PYPI.items():
        previous: dict[str, str] = {}
        for version in versions:
            for kind, text in wheel_texts(wheels[(name, version)]):
                if previous.get(kind) == text:
                    continue
                previous[kind] = text
                yield {
                    "id": f"{name}-{version}/{kind}",
                    "text": text,
                    "source": f"https://pypi.org/project/{name}/{version}/ ({wheels[(name, version)].name})",
                    "license": licence,
                }


def write(records: list[dict[str, str]], out: Path) -> None:
    """Write records as gzipped JSON Lines with a zero timestamp, so equal input gives equal bytes.

    Args:
        records: the records.
        out: the output file.
    """
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())
    size = out.stat().st_size
    print(f"wrote {out}: {len(records)} documents, {len(data)} bytes, {size} gzipped", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Build the sample file.

    Args:
        argv: command-line arguments (default sys.argv[1:]).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=_DEFAULT_OUT, help="output file")
    parser.add_argument("--cache", type=Path, default=_DEFAULT_CACHE, help="wheel download folder")
    args = parser.parse_args(argv)
    records = list(common_licenses())
    records += pypi_records(fetch_wheels(args.cache))
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate ids in the sample")
    write(records, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
