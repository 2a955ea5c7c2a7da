"""A walk shared with forked helpers: each process walks the share of the tree it owns.

:func:`share` forks one helper per further owner, walks owner 0's share in this process, then
collects each helper's result: plain data (``marshal``-able: counts, the walk table's rows)
sent back over a pipe.  A helper that fails (killed, crashed, garbled) is reported as a
:class:`HelperFailed`, and its owner's share is for the caller to walk again.  Helpers die
with their parent (the parent-death signal), exit without cleanup, and are never forked from
a process that runs threads (the caller checks that).
"""

from __future__ import annotations

import marshal
import os
from typing import Any, Callable, Iterator


class HelperFailed(Exception):
    """A helper did not send back its share (its exit status, or why its data is unusable)."""


def share(owners: int, walk_share: Callable[[int], Any]) -> Iterator[tuple[int, Any]]:
    """Run ``walk_share(owner)`` for every owner in ``0 .. owners - 1``: owners 1 and up in
    forked helpers, at the same time as owner 0 here.  Yields ``(owner, result)`` in owner
    order, the result being what ``walk_share`` returned (through marshal, for a helper) or a
    :class:`HelperFailed`."""
    helpers = [(owner, *_fork(walk_share, owner)) for owner in range(1, owners)]
    yield 0, walk_share(0)
    for owner, pid, fd in helpers:
        yield owner, _collect(pid, fd)


def _fork(walk_share: Callable[[int], Any], owner: int) -> tuple[int, int]:
    """Fork the helper of ``owner``; (its pid, the read end of its pipe), through the
    runtime's process helper (readers/runtime/procs.py: the only place processes start)."""
    from bastion.readers.runtime.procs import fork_helper

    return fork_helper(lambda: marshal.dumps(walk_share(owner)))


def _collect(pid: int, fd: int) -> Any:
    """A helper's result once it has exited, or a HelperFailed."""
    with open(fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return HelperFailed(f"walk helper exited with status {status}")
    try:
        return marshal.loads(data)
    except (ValueError, EOFError, TypeError) as e:
        return HelperFailed(str(e))
