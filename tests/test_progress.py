"""The progress display: live line on a terminal, periodic plain lines otherwise, quiet."""

from __future__ import annotations

import io

from tasks.progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_tty() -> None:
    out = io.StringIO()
    p = Progress("extract", 10, stream=out, interval=0.0)
    for _ in range(10):
        p.update(1, errors=1 if _ == 3 else 0)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines and all("\r" not in ln for ln in lines)
    assert lines[-1].startswith("extract: 10/10 (100%)")
    assert "errors 1" in lines[-1] and "ETA" in lines[-1] and "files/s" in lines[-1]


def test_live_line_on_a_tty_is_cleared() -> None:
    out = Tty()
    p = Progress("extract", 4, stream=out, interval=0.0)
    p.update(2)
    p.close()
    text = out.getvalue()
    assert text.startswith("\r\x1b[K") and "2/4 (50%)" in text
    assert text.endswith("\r\x1b[K")  # the live line does not stay behind the summary


def test_quiet_prints_nothing() -> None:
    out = Tty()
    p = Progress("extract", 4, stream=out, quiet=True, interval=0.0)
    p.update(4)
    p.close()
    assert out.getvalue() == ""


def test_unknown_total_shows_count_and_rate() -> None:
    out = io.StringIO()
    p = Progress("walk", 0, stream=out, interval=0.0)
    p.update(5)
    assert out.getvalue().startswith("walk: 5 files, ")


def test_throttled_by_interval() -> None:
    out = io.StringIO()
    p = Progress("extract", 1000, stream=out, interval=3600.0)
    for _ in range(1000):
        p.update()
    assert out.getvalue() == ""
