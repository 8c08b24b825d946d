"""docs/service.md's curl examples, run as written against a real service, with the output shown there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.servers import ServerProcess
from tests.service_process import ServiceProcess

pytest.importorskip("starlette")

DOC = Path(__file__).resolve().parent.parent / "docs" / "service.md"


def examples() -> list[tuple[str, str | None]]:
    """Each ```bash block that runs curl, and the ```json block right after it (its output), if any."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(), flags=re.S)
    found: list[tuple[str, str | None]] = []
    for i, (kind, body) in enumerate(blocks):
        if kind == "bash" and "curl " in body:
            after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            found.append((body, after[1] if after[0] == "json" else None))
    return found


def test_the_doc_has_examples() -> None:
    assert len(examples()) >= 8


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_examples_print_what_the_doc_shows(tmp_path: Path) -> None:
    with ServerProcess() as server, ServiceProcess(server.url, tmp_path) as service:
        for command, shown in examples():
            run = command.replace("localhost:8080", f"127.0.0.1:{service.port}")
            done = subprocess.run(
                ["bash", "-c", run], capture_output=True, text=True, timeout=60, check=False
            )
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            got = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
            assert got, command
            if shown is not None:
                assert got == [json.loads(line) for line in shown.splitlines() if line.strip()], command


def test_every_error_code_is_documented() -> None:
    from simhash_redis.service.problems import CODES

    text = DOC.read_text()
    missing = [code for code in CODES if f"`{code}`" not in text]
    assert missing == []
