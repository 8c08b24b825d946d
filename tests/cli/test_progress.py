"""The progress reporter: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

from simhash_redis.cli.progress import Progress, format_duration


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress(100, stream=out, interval=0)
    progress.update(50)
    progress.close()
    assert out.getvalue().startswith("progress: 50/100 docs, ") and "ETA" in out.getvalue()


def test_bar_on_a_terminal() -> None:
    out = _Tty()
    progress = Progress(None, stream=out)
    progress.update(10, force=True)
    progress.close()
    assert "\r" in out.getvalue() and "10 docs" in out.getvalue() and "ETA" not in out.getvalue()
    with_total = _Tty()
    Progress(40, stream=with_total).update(10, force=True)
    assert "[######" in with_total.getvalue() and " 25.0%" in with_total.getvalue()


def test_quiet_and_durations() -> None:
    out = io.StringIO()
    Progress(10, enabled=False, stream=out).update(5, force=True)
    assert out.getvalue() == ""
    assert format_duration(65) == "1:05" and format_duration(3725) == "1:02:05"
