"""Progress for long runs: a live line on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Files done of total, rate, ETA and errors so far; silent when ``quiet``."""

    def __init__(self, label: str, total: int, *, quiet: bool = False,
                 stream: TextIO | None = None, interval: float | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.errors = 0
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.tty else 10.0)
        self.t0 = time.monotonic()
        self._last = self.t0
        self._shown = False

    def update(self, n: int = 1, errors: int = 0) -> None:
        self.done += n
        self.errors += errors
        if self.quiet:
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._show(now)

    def _show(self, now: float) -> None:
        elapsed = max(now - self.t0, 1e-6)
        rate = self.done / elapsed
        if self.total:
            left = max(self.total - self.done, 0)
            eta = f"{left / rate:.0f}s" if rate > 0 else "?"
            pct = 100.0 * self.done / self.total
            line = (f"{self.label}: {self.done}/{self.total} ({pct:.0f}%) {rate:.0f} files/s "
                    f"ETA {eta} errors {self.errors}")
        else:  # the walk does not know its total in advance
            line = f"{self.label}: {self.done} files, {rate:.0f} files/s"
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.quiet:
            return
        if self.tty and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
