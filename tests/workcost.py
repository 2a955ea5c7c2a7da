"""How a reader's work grows with its input, for the tests that say a reader is linear.

The work is this thread's CPU time (``time.thread_time``: other processes on the machine do not
count) and what is asserted is a ratio between two sizes of the same input, so neither the
machine's speed nor its load decides the test; a wall-clock bound did both, and flaked.
Speed itself is measured in bench/, not asserted here.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")
In = TypeVar("In")


def _timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.thread_time()
    result = call()
    return result, time.thread_time() - start


def linear(read: Callable[[In], T], big: In, small: In, by: int = 8) -> T:
    """``read(big)``'s result, once its work is shown to grow linearly: ``big`` is ``by`` times
    ``small`` (``by`` times the work; a quadratic step makes it ``by**2``).  Fails when the
    work grows more than three times as fast as the input (the least of two runs of
    ``big`` and of three of ``small``: a run slowed by the machine counts the least)."""
    result, first = _timed(lambda: read(big))
    big_cost = min(first, _timed(lambda: read(big))[1])
    small_cost = min(_timed(lambda: read(small))[1] for _ in range(3))
    grew = big_cost / max(small_cost, 1e-6)
    assert grew < 3 * by, (f"the work grew {grew:.0f}x for {by}x the input (linear: about "
                           f"{by}x, quadratic: about {by * by}x)")
    return result
