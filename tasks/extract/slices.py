"""The stale items of a run handed to doit a slice at a time (``RunConfig.slice``), and the
garbage collector kept off what a slice makes while the slice lives.

A slice's tasks and doit's nodes for them are hundreds of thousands of objects that live until
the slice ends, and every full collection while they pile up walks them all: ≈ 1 s of a
20,000-file sweep's parent, a fifth of its CPU (docs/performance.md, issue 40).  So the
collector is paused while a slice's tasks are made and run (:meth:`Slices.pause_gc`), and at
the slice's finish what it made is left out of collections (``gc.freeze``) until the slice's
doit run is over (:meth:`Slices.done`).  The walk runs before, with the collector on.
"""

from __future__ import annotations

import gc
from typing import Sequence, TypeVar

__all__ = ["Slices"]

T = TypeVar("T")


class Slices:
    """How many stale items were handed to doit, and the collector's state across a slice."""

    def __init__(self) -> None:
        self.cursor = 0  # stale items handed out so far
        self._gc_was: bool | None = None  # while paused (pause_gc): whether it was enabled
        self._frozen = False  # the slice's objects left out of collections (resume_gc)

    def take(self, stale: Sequence[T], size: int) -> Sequence[T]:
        """The next ``size`` items of ``stale`` (all that remain when ``size`` is 0)."""
        batch = stale[self.cursor:] if not size else stale[self.cursor:self.cursor + size]
        self.cursor += len(batch)
        return batch

    def remain(self, stale: Sequence[object]) -> bool:
        """Whether items of ``stale`` remain for another slice."""
        return self.cursor < len(stale)

    def pause_gc(self) -> None:
        """No cyclic garbage collection while a slice's tasks are made and run (until
        :meth:`resume_gc`, at the slice's finish)."""
        if self._gc_was is None:
            self._gc_was = gc.isenabled()
            gc.disable()

    def resume_gc(self) -> None:
        """The collector on again (as it was before :meth:`pause_gc`), what the slice made
        left out of its collections while the slice's doit run holds it (``gc.freeze``:
        until :meth:`done`), so the finish pays no collection of it either."""
        if self._gc_was is not None:
            gc.freeze()
            self._frozen = True
            if self._gc_was:
                gc.enable()
            self._gc_was = None

    def done(self, more: bool) -> None:
        """A slice's doit run is over: what it made is garbage the collector may take, at
        once when another slice follows (so that no two slices' garbage is ever held), else
        whenever it next runs (idempotent)."""
        self.resume_gc()
        if self._frozen:
            self._frozen = False
            gc.unfreeze()
            if more:
                gc.collect()
