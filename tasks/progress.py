"""Progress for long runs: a live display on a terminal, plain periodic lines otherwise.

Three modes, chosen once, when the :class:`Progress` is made:

- **live** (stderr is a terminal, and ``$TERM`` is not ``dumb``): a bar with files done/total,
  percent, rate, ETA and errors so far, redrawn 5 times a second by ``rich``; under it, the file
  being read when one has been in flight longer than ``slow_after`` (2 s).  The display is
  cleared at the end and one final line stays.
- **plain** (stderr is a pipe or a file, e.g. a CI log, or a dumb terminal): the same facts as
  one plain line every ``interval`` (10 s), then the final line; no control characters.
- **quiet**: nothing (the caller still prints errors and its summary).

It draws on the *real* stderr: the file descriptor 2 duplicated when the ``Progress`` is made.
Inside a doit action ``sys.stderr`` is doit's capture buffer (shown only if the task fails), but
file descriptor 2 is still the terminal or the log, so the display reaches the screen for
``bastion`` and for ``doit extract`` alike.  :meth:`Progress.print` writes a line there too,
above the live display.

Counting is cheap and the drawing is not tied to it: :meth:`update` adds to two integers (and,
given the file's name, takes it off the in-flight list); a background thread draws at the
display's own pace, so a million updates cost what a million integer additions do, and a single
file that takes minutes still shows as being read.  docs/performance.md has the measured costs.
"""

from __future__ import annotations

import atexit
import collections
import locale
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, TextIO

from .names import escape

LIVE_INTERVAL_S = 0.2  # redraws per second on a terminal: 5
PLAIN_INTERVAL_S = 10.0  # one line per 10 s in a log
SLOW_AFTER_S = 2.0  # a file in flight this long is shown by name
RATE_WINDOW_S = 30.0  # the rate (and so the ETA) is measured over the last 30 s


def real_stderr() -> TextIO:
    """A text stream on a duplicate of file descriptor 2, the process's real stderr (not
    whatever ``sys.stderr`` is at the moment), line-buffered; names that the terminal's
    encoding cannot show are written with backslash escapes."""
    fd = os.dup(2)
    return open(fd, "w", encoding=locale.getpreferredencoding(False), errors="backslashreplace",
                buffering=1, closefd=True)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one drawing shows."""

    label: str
    done: int
    total: int
    errors: int
    elapsed: float
    rate: float  # files per second, over the last RATE_WINDOW_S
    slow: tuple[str, float] | None  # (the longest file in flight, seconds) past slow_after
    slow_more: int  # how many other files are past slow_after

    @property
    def eta(self) -> str:
        if self.total <= 0:
            return "?"
        left = max(self.total - self.done, 0)
        if left == 0:
            return _clock(0)
        return _clock(left / self.rate) if self.rate > 0 else "?"

    def counts(self) -> str:
        """``1234/3000 (41%) 152 files/s ETA 0:00:12 errors 2`` (without a total: ``1234
        files, 2500 files/s``)."""
        if self.total <= 0:
            errors = f", errors {self.errors}" if self.errors else ""
            return f"{_files(self.done)}, {self.rate:.0f} files/s{errors}"
        pct = 100.0 * self.done / self.total
        return (f"{self.done}/{self.total} ({pct:.0f}%) {self.rate:.0f} files/s "
                f"ETA {self.eta} errors {self.errors}")

    def reading(self, width: int | None = None) -> str | None:
        """``reading docs/big.pdf (14 s)``, ``reading docs/big.pdf (14 s) and 2 more``; None
        when no file is slow.  ``width``: the cells available (a long name shows its end)."""
        if self.slow is None:
            return None
        name, age = self.slow
        more = f" and {self.slow_more} more" if self.slow_more else ""
        rest = f" ({age:.0f} s){more}"
        if width is not None:
            name = _left_crop(name, width - len("reading ") - len(rest))
        return f"reading {name}{rest}"

    def line(self) -> str:
        """The plain periodic line."""
        reading = self.reading()
        return f"{self.label}: {self.counts()}" + (f"; {reading}" if reading else "")

    def final(self) -> str:
        """The line that stays at the end."""
        rate = self.done / self.elapsed if self.elapsed > 0 else 0.0
        errors = f", errors {self.errors}" if self.total > 0 or self.errors else ""
        of = f"{self.done}/{self.total} files" if self.total > 0 else _files(self.done)
        return f"{self.label}: {of} in {_seconds(self.elapsed)}, {rate:.0f} files/s{errors}"


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else _clock(seconds)


_open: weakref.WeakSet[Progress] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # a run that died before close(): restore the terminal's cursor
    for p in list(_open):
        p.close()


class Progress:
    """Files done of total, rate, ETA and errors so far, and the file in flight when slow.

    ``total`` 0 means unknown (the walk): count and rate only.  ``stream`` defaults to
    :func:`real_stderr`; the mode is live when it is a terminal that can move its cursor
    (``$TERM`` not ``dumb``), plain otherwise.  ``interval`` is the time between drawings
    (default 0.2 s live, 10 s plain).  ``leave`` keeps a final line (done, time, rate,
    errors) after :meth:`close`.  Making one never fails a run: a display that cannot start
    falls back to plain lines.

    Usage::

        p = Progress("extract", len(todo), quiet=cfg.quiet)
        p.start(name)                  # a file handed to a reader (optional)
        p.update(1, errors=0, name=name)  # it is done: counted, no longer in flight
        p.close()
    """

    def __init__(self, label: str, total: int, *, quiet: bool = False,
                 stream: TextIO | None = None, interval: float | None = None,
                 slow_after: float = SLOW_AFTER_S, leave: bool = True) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.errors = 0
        self.quiet = quiet
        self.leave = leave
        self._window = _Window(time.monotonic())
        self._inflight = _InFlight(slow_after)
        self._lock = threading.Lock()
        self._closed = False
        self._owned = stream is None
        self.stream = real_stderr() if stream is None else stream
        self.tty = _isatty(self.stream) and \
            os.environ.get("TERM", "").lower() not in ("dumb", "unknown")
        default = LIVE_INTERVAL_S if self.tty else PLAIN_INTERVAL_S
        self.interval = max(interval if interval is not None else default, 0.01)
        self._drawer = _Drawer()
        if quiet:
            return
        if self.tty:
            try:
                self._drawer.live = self._start_live()
            except (ImportError, OSError, ValueError):  # no rich, or the terminal is gone
                self.tty = False
                self.interval = max(interval or PLAIN_INTERVAL_S, 0.01)
        _open.add(self)

    def _begin(self) -> None:
        """Start the drawing thread, at the first :meth:`start` or :meth:`update` rather than
        when made: the walk forks its re-walk helpers only while the process has one thread
        (tasks/walk/stage.py), and it decides that after making its Progress, before counting."""
        if self._drawer.thread is None and not self.quiet and not self._closed:
            self._drawer.start(self._run, f"progress-{self.label}")

    # -- the caller's side: cheap --------------------------------------------------------------

    def update(self, n: int = 1, errors: int = 0, *, name: str | None = None) -> None:
        """``n`` more files done, ``errors`` of them errors; ``name``: the file that finished
        (as given to :meth:`start`), no longer in flight."""
        self.done += n
        self.errors += errors
        if self._drawer.thread is None:
            self._begin()
        if name is not None and self._inflight.names:
            with self._lock:
                self._inflight.names.pop(name, None)

    def start(self, name: str) -> None:
        """``name`` is being read from now on (shown if still in flight after ``slow_after``).
        Names are shown escaped (tasks/names.py): no control character reaches the terminal."""
        if self.quiet:
            return
        if self._drawer.thread is None:
            self._begin()
        with self._lock:
            self._inflight.names[name] = time.monotonic()

    def current(self, name: str | None) -> None:
        """For a caller that reads one file at a time: ``name`` is the one in flight now
        (``None``: none)."""
        if self.quiet:
            return
        if self._drawer.thread is None:
            self._begin()
        with self._lock:
            self._inflight.names.clear()
            if name is not None:
                self._inflight.names[name] = time.monotonic()

    def print(self, line: str) -> None:
        """Write one line to the real stderr (above the live display), even when quiet: for
        errors and summaries that must not be lost in doit's capture."""
        if self._drawer.live is not None and not self._closed:
            from rich.text import Text

            self._drawer.live.console.print(Text(line), soft_wrap=True)
            return
        if self._closed and self._owned:  # its duplicate of fd 2 is closed: a new one
            with real_stderr() as stream:
                stream.write(line + "\n")
            return
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Stop drawing; clear the live display; leave the final line (if ``leave``)."""
        if self._closed:
            return
        self._closed = True
        _open.discard(self)
        self._drawer.stop()
        try:
            if self._drawer.live is not None:
                self._drawer.live.stop()  # transient: the live lines are erased
            if not self.quiet and self.leave:
                self.stream.write(self.snapshot().final() + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # the terminal went away: nothing to show it on
        finally:
            if self._owned:
                try:
                    self.stream.close()
                except OSError:
                    pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the drawing side: the background thread ------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:  # (the thread draws; print() may draw too)
            now = time.monotonic()
            done = self.done
            rate = self._window.rate(now, done)
            slow, more = self._inflight.slow(now)
        return Snapshot(self.label, done, self.total, self.errors, now - self._window.t0, rate,
                        slow, more)

    def _run(self) -> None:
        while not self._drawer.stopping.wait(self.interval):
            try:
                if self._drawer.live is not None:
                    self._draw_live()
                else:
                    line = self.snapshot().line()
                    with self._lock:
                        self.stream.write(line + "\n")
                        self.stream.flush()
            except (OSError, ValueError):
                return  # the terminal or the log went away: stop drawing, keep counting

    def _start_live(self) -> Any:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, force_terminal=True, highlight=False,
                          markup=False, emoji=False, soft_wrap=False)
        live = Live(console=console, auto_refresh=False, transient=True,
                    redirect_stdout=False, redirect_stderr=False,
                    get_renderable=self._renderable)
        self._fit(console)
        live.start()
        return live

    def _fit(self, console: Any) -> None:
        """Follow the size of the terminal actually drawn on (rich asks fds 0, 1 and 2); a
        pseudo-terminal may report 0 x 0: then ``$COLUMNS``/``$LINES``, else 80 x 25."""
        try:
            width, height = os.get_terminal_size(self.stream.fileno())
        except (AttributeError, ValueError, OSError):
            width = height = 0
        env = os.environ
        if width <= 0:
            width = int(env["COLUMNS"]) if env.get("COLUMNS", "").isdigit() else 80
        if height <= 0:
            height = int(env["LINES"]) if env.get("LINES", "").isdigit() else 25
        console.size = (max(width, 20), max(height, 2))

    def _draw_live(self) -> None:
        self._fit(self._drawer.live.console)
        self._drawer.live.refresh()

    def _renderable(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        snap = self.snapshot()
        width = self._drawer.live.console.width if self._drawer.live is not None else 80
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)  # the label
        counts = Text(snap.counts(), no_wrap=True, overflow="ellipsis")
        if snap.errors:
            counts.highlight_words([f"errors {snap.errors}"], style="bold red")
        if snap.total > 0:  # the bar takes what the numbers leave, 10 to 40 cells
            room = width - len(snap.label) - counts.cell_len - 2
            bar = ProgressBar(total=snap.total, completed=snap.done,
                              width=max(10, min(40, room)))
            grid.add_row(Text(snap.label, style="bold"), bar, counts)
        else:
            grid.add_row(Text(snap.label, style="bold"), counts)
        if snap.slow is None:
            return grid
        return Group(grid, Text("  " + (snap.reading(width - 2) or ""), no_wrap=True,
                                overflow="ellipsis", style="dim"))


class _Window:
    """The rate's window: the run's start, and ``(time, done)`` samples of about the last
    :data:`RATE_WINDOW_S`."""

    __slots__ = ("t0", "samples")

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.samples: collections.deque[tuple[float, int]] = collections.deque()

    def rate(self, now: float, done: int) -> float:
        """Files a second over the window (a window under a second: the whole run so far)."""
        samples = self.samples
        samples.append((now, done))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.popleft()
        t_then, done_then = samples[0]
        if now - t_then < 1.0:  # too short a window: the whole run so far
            t_then, done_then = self.t0, 0
        return (done - done_then) / max(now - t_then, 1e-6)


class _InFlight:
    """The files being read: name -> monotonic start, oldest first; one is slow once in
    flight ``slow_after`` seconds."""

    __slots__ = ("names", "slow_after")

    def __init__(self, slow_after: float) -> None:
        self.names: dict[str, float] = {}
        self.slow_after = slow_after

    def slow(self, now: float) -> tuple[tuple[str, float] | None, int]:
        """The oldest slow file (escaped name, age) and how many more are slow."""
        slow: tuple[str, float] | None = None
        more = 0
        for name, since in self.names.items():  # oldest first
            age = now - since
            if age < self.slow_after:
                break
            if slow is None:
                slow = (escape(name), age)
            else:
                more += 1
        return slow, more


class _Drawer:
    """What draws: the drawing thread (started at the first count, not when the display is
    made), the event that stops it, and on a terminal rich's live display (else None)."""

    __slots__ = ("thread", "stopping", "live")

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.live: Any = None

    def start(self, draw: Any, name: str) -> None:
        self.thread = threading.Thread(target=draw, name=name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread is not None:
            self.stopping.set()
            self.thread.join()


def _left_crop(text: str, width: int) -> str:
    """``text`` cut from the left to ``width`` cells (a long path shows its end)."""
    from rich.cells import cell_len

    width = max(width, 8)
    if cell_len(text) <= width:
        return text
    text = text[-width:]  # a character takes at least one cell
    while text and cell_len(text) > width - 1:
        text = text[1:]
    return "…" + text


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
