"""Ctrl-C and SIGTERM during a run: raised in the main thread, but never inside a section that
must finish whole (a verdict's text placed and its verdict queued, a commit).

:func:`install` makes SIGINT raise ``KeyboardInterrupt`` and SIGTERM raise :class:`Terminated`
(a ``KeyboardInterrupt``, so every clean-up that Ctrl-C runs, SIGTERM runs too).  Inside
``with critical():`` a signal is only noted, and raised when the outermost section ends: a
text is never left in the store without its verdict queued because Ctrl-C fell between the
two.  Without :func:`install` (bastion used as a library) :func:`critical` changes nothing.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["Terminated", "critical", "install"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises: the run stops the same way (the verdicts it
    finished committed, the workers stopped, the lock released) and exits 143."""


_depth = 0
_deferred: type[BaseException] | None = None


def _raise(kind: type[BaseException]) -> None:
    global _deferred
    if _depth > 0:
        _deferred = _deferred or kind  # the first signal decides what is raised
        return
    raise kind()


def _on_sigint(signum: int, frame: object) -> None:
    _raise(KeyboardInterrupt)


def _on_sigterm(signum: int, frame: object) -> None:
    _raise(Terminated)


def install() -> Callable[[], None]:
    """Take SIGINT and SIGTERM for this run (main thread only: elsewhere nothing is done);
    returns what puts the previous handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved: list[tuple[int, Any]] = [(signal.SIGINT, signal.signal(signal.SIGINT, _on_sigint)),
                                    (signal.SIGTERM, signal.signal(signal.SIGTERM,
                                                                   _on_sigterm))]

    def restore() -> None:
        global _deferred
        for signum, handler in saved:
            signal.signal(signum, handler)
        _deferred = None

    return restore


@contextmanager
def critical() -> Iterator[None]:
    """A section a signal does not cut in two: one that arrives inside is raised at its end
    (at the end of the outermost one, when they nest)."""
    global _depth, _deferred
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _deferred is not None:
            kind, _deferred = _deferred, None
            raise kind()
