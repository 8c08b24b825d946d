"""Build simhash_redis/data/unicode-<version>.json.gz: the Unicode data that fingerprint scheme 2 pins.

Run it with the Python whose `unicodedata` has the version to pin (3.13: Unicode 15.1), naming the
other supported interpreters, whose Unicode versions it records as ages::

    python3.13 scripts/gen_unicode_data.py python3.10 python3.11 python3.12

The file holds, for the pinned version: each code point's kind (letter or number, mark, other
assigned, unassigned) as runs, the whitespace set, the decompositions, the canonical combining
classes, the primary composites, the case foldings, and for every older version given, which code
points it had not assigned yet. The script checks the stability rules that the fast paths rely on:
a code point assigned in an older version has the same NFKC image, casefold, whitespace flag and
combining class there as in the pinned version. The same command makes the same file, byte for byte.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

_LAST = 0x10FFFF
_DATA = Path(__file__).resolve().parents[1] / "simhash_redis" / "data"

# Run in each older interpreter: its version, assigned code points (as ranges), and per assigned
# code point (surrogates aside) the NFKC image, casefold, whitespace flag and combining class, for the
# stability check.
_PROBE = r"""
import json, sys, unicodedata
ranges, start = [], None
facts = {}
for cp in range(0x110000):
    assigned = unicodedata.category(chr(cp)) != "Cn"
    if assigned and start is None:
        start = cp
    if not assigned and start is not None:
        ranges.append([start, cp - 1]); start = None
    if assigned and not 0xD800 <= cp <= 0xDFFF:
        c = chr(cp)
        n, f, k = unicodedata.normalize("NFKC", c), c.casefold(), unicodedata.combining(c)
        if n != c or f != c or c.isspace() or k:
            facts[cp] = [n, f, c.isspace(), k]
if start is not None:
    ranges.append([start, 0x10FFFF])
json.dump({"version": unicodedata.unidata_version, "assigned": ranges, "facts": facts}, sys.stdout)
"""


def _kind(cp: int) -> str:
    """Return the code point's kind: L (letter or number), M (mark), O (other assigned), U (unassigned)."""
    category = unicodedata.category(chr(cp))
    if category == "Cn":
        return "U"
    return "L" if category[0] in "LN" else ("M" if category[0] == "M" else "O")


def _runs() -> list[list[object]]:
    """Return the kinds of all code points as [first code point, kind] runs."""
    runs: list[list[object]] = []
    for cp in range(_LAST + 1):
        kind = _kind(cp)
        if not runs or runs[-1][1] != kind:
            runs.append([cp, kind])
    return runs


def _ranges(cps: list[int]) -> list[list[int]]:
    """Collapse ascending code points into inclusive [first, last] ranges."""
    out: list[list[int]] = []
    for cp in cps:
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def _older(python: str, assigned_now: set[int]) -> tuple[str, list[list[int]]]:
    """Probe an older interpreter: its Unicode version and the code points it has not assigned.

    Args:
        python: the interpreter's command.
        assigned_now: the code points assigned in the pinned version.

    Returns:
        Its version and the pinned version's assigned code points it lacks, as ranges.

    Raises:
        SystemExit: a stability rule does not hold.
    """
    probe = json.loads(
        subprocess.run([python, "-c", _PROBE], check=True, capture_output=True, text=True).stdout
    )
    assigned = {cp for lo, hi in probe["assigned"] for cp in range(lo, hi + 1)}
    if not assigned <= assigned_now:
        raise SystemExit(f"{python}: assigns code points the pinned version does not")
    for cp in assigned:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        now = [unicodedata.normalize("NFKC", c), c.casefold(), c.isspace(), unicodedata.combining(c)]
        old = probe["facts"].get(str(cp), [c, c, False, 0])
        if now != old:
            raise SystemExit(f"{python}: U+{cp:04X} changed between versions: {old!r} -> {now!r}")
    return probe["version"], _ranges(sorted(assigned_now - assigned))


def main(others: list[str]) -> None:
    """Write the data file of the running Python's Unicode version.

    Args:
        others: commands of older supported interpreters.
    """
    version = unicodedata.unidata_version
    assigned_now = {cp for cp in range(_LAST + 1) if unicodedata.category(chr(cp)) != "Cn"}
    decompositions, combining, composites, folds = {}, {}, [], {}
    for cp in range(_LAST + 1):
        c = chr(cp)
        if unicodedata.decomposition(c):
            decompositions[cp] = unicodedata.decomposition(c)
            parts = decompositions[cp].split()
            if not parts[0].startswith("<") and len(parts) == 2 and unicodedata.normalize("NFC", c) == c:
                composites.append(cp)
        if unicodedata.combining(c):
            combining[cp] = unicodedata.combining(c)
        if not 0xD800 <= cp <= 0xDFFF and c.casefold() != c:
            folds[cp] = c.casefold()
    data = {
        "version": version,
        "kinds": _runs(),
        "space": [cp for cp in range(_LAST + 1) if chr(cp).isspace()],
        "decompositions": {str(cp): value for cp, value in decompositions.items()},
        "combining": {str(cp): value for cp, value in combining.items()},
        "composites": composites,
        "casefold": {str(cp): value for cp, value in folds.items()},
        "unassigned_in": dict(_older(python, assigned_now) for python in others),
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    path = _DATA / f"unicode-{'.'.join(version.split('.')[:2])}.json.gz"
    path.write_bytes(gzip.compress(text.encode("ascii"), compresslevel=9, mtime=0))
    print(
        f"{path.name}: Unicode {version}, {path.stat().st_size} bytes, "
        f"ages of {sorted(data['unassigned_in'])}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
