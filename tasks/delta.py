"""What changed between two walks, and the extract stage's merge of it: work in proportion to
the change, not to the tree.

The walk (:meth:`bastion.tasks.walk.Walker.write`) records, beside a rewritten ``walk.jsonl``, which of
its lines are new (``fresh``: added or changed files) and which lines of the previous walk it
kept (``hits``), with the identities of the file before and after.  Lines are in (root, path)
order in both walks, so the kept lines keep their relative order.

``extract.jsonl`` has one record per walk line, in the same order.  When the last complete
run's stamp (:mod:`bastion.tasks.stamp`) still holds for everything but the walk, and the delta leads
from the walk that run saw to the one here, the extract stage plans only the fresh lines, and
writes the new ``extract.jsonl`` by copying the kept records' bytes (their ``reused`` now true)
and putting the fresh ones in their places: no record of an unchanged file is parsed, looked up
or encoded (:class:`Merge`).  The summary's counts are the last run's, less the records that
went, plus the new ones.
"""

from __future__ import annotations

import json
import marshal
import os
from array import array
from pathlib import Path
from itertools import islice
from typing import Any, Iterable, Iterator

from .fsio import STATE_DIR, atomic_write, file_identity, read_bytes, unlink

DELTA = f"{STATE_DIR}/walk-delta"
VERSION = 1
BLOCK_LINES = 20_000  # kept records copied at once
_REUSED_FALSE = b'"reused":false'
_REUSED_TRUE = b'"reused":true'


def write_delta(out: Path, before: list[int] | None, after: list[int] | None, old_count: int,
                fresh: list[int], hits: Iterable[int]) -> None:
    """Record a walk's change: ``fresh`` the new line numbers of new records, ``hits`` the
    old line numbers kept.  Written without an fsync of its own: a delta that does not match
    the files it names is simply not used."""
    seen = bytearray(max(old_count, 0))
    kept = 0
    for i in hits:
        seen[i] = 1
        kept += 1
    removed = array("q", (i for i in range(len(seen)) if not seen[i]))
    data = {"version": VERSION, "from": before, "to": after, "old_count": old_count,
            "new_count": len(fresh) + kept, "fresh": array("q", fresh).tobytes(),
            "removed": removed.tobytes()}
    atomic_write(out / DELTA, marshal.dumps(data), sync=False)


def drop_delta(out: Path) -> None:
    try:
        unlink(out / DELTA)
    except OSError:
        pass


def load_delta(out: Path, walk_from: Any, walk_to: Any) -> dict[str, Any] | None:
    """The delta from the walk ``walk_from`` to ``walk_to``, or None."""
    try:
        data = marshal.loads(read_bytes(out / DELTA))  # through the checked descriptor
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if (not isinstance(data, dict) or data.get("version") != VERSION
            or data.get("from") != walk_from or data.get("to") != walk_to
            or walk_from is None or walk_to is None):
        return None
    for name in ("fresh", "removed"):
        a = array("q")
        a.frombytes(data[name])
        data[name] = a
    return data


def lines_at(path: Path, wanted: Iterable[int]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file's lines at the given (sorted) numbers."""
    want = iter(wanted)
    nxt = next(want, None)
    if nxt is None:
        return
    with open(path, "rb") as f:
        for n, line in enumerate(f):
            if n == nxt:
                yield n, line
                nxt = next(want, None)
                if nxt is None:
                    return


class Merge:
    """The new extract.jsonl from the old one and the fresh records (see the module)."""

    def __init__(self, delta: dict[str, Any]) -> None:
        self.delta = delta
        self.fresh = set(delta["fresh"])
        self.removed = set(delta["removed"])
        self.dropped: list[dict[str, Any]] = []  # old records that went (files gone/changed)

    def lines(self, old: Path, fresh_lines: Iterator[bytes]) -> Iterator[bytes]:
        """Kept records' bytes (flagged reused) and the fresh records, in walk order.  The
        old records not kept are parsed into :attr:`dropped` (for the counts and the store's
        clean-up).  Raises ValueError when extract.jsonl does not have the delta's shape.

        The kept records between two changes are copied as blocks of up to
        :data:`BLOCK_LINES` lines (the lines taken and joined in C), and flagged reused by
        one replace per block: ``"reused":false`` with unescaped quotes is only ever the
        key of a record (a string's own quotes are escaped), one per line."""
        fresh = sorted(self.fresh)
        removed = sorted(self.removed)
        new_count = self.delta["new_count"]
        fi = ri = 0
        i = j = 0  # old lines read, new lines given
        with open(old, "rb") as f:
            while j < new_count:
                if fi < len(fresh) and fresh[fi] == j:
                    yield next(fresh_lines)
                    fi += 1
                    j += 1
                    continue
                while ri < len(removed) and removed[ri] == i:
                    line = f.readline()
                    if not line:
                        raise ValueError("extract.jsonl is shorter than the walk it was made from")
                    self.dropped.append(json.loads(line))
                    ri += 1
                    i += 1
                span = new_count - j
                if fi < len(fresh):
                    span = min(span, fresh[fi] - j)
                if ri < len(removed):
                    span = min(span, removed[ri] - i)
                span = max(1, min(span, BLOCK_LINES))
                block = list(islice(f, span))
                if len(block) < span or not block[-1].endswith(b"\n"):
                    raise ValueError("extract.jsonl is shorter than the walk it was made from")
                yield b"".join(block).replace(_REUSED_FALSE, _REUSED_TRUE)
                i += span
                j += span
            for line in f:
                if ri >= len(removed) or removed[ri] != i:
                    raise ValueError("extract.jsonl is longer than the walk it was made from")
                self.dropped.append(json.loads(line))
                ri += 1
                i += 1
        if next(fresh_lines, None) is not None:
            raise ValueError("more fresh records than the delta has places for")


class StoreTexts:
    """``name in texts``: whether the store holds that file (one stat, for the few items a
    change plans; the full plan lists every bucket instead)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and os.path.exists(self.root / name[:2] / name)


def plan_change(run: Any, select: Any) -> tuple[Any, dict, Merge] | None:
    """The plan of only what changed since the last complete run, its verdicts and the
    :class:`Merge` that writes the records; None when that run's stamp does not hold for
    everything but the walk, or the delta does not lead from its walk to this one (then the
    caller plans everything)."""
    from . import stamp
    from .plan import plan
    from .records import WalkRecord

    out = run.out
    previous = stamp.holds_but_walk(out, run.inputs())
    if previous is None:
        return None
    st, summary = previous
    delta = load_delta(out, st["files"]["walk"], file_identity(out / "walk.jsonl"))
    if delta is None or delta["old_count"] != summary.get("records"):
        return None
    records = [WalkRecord(**json.loads(line))
               for _, line in lines_at(out / "walk.jsonl", sorted(delta["fresh"]))]
    shas = sorted({r.sha256 for r in records if r.sha256})
    verdicts = run.store.verdicts_for(shas)
    planned = plan(records, verdicts, select, run.tools, run.manifest.limits,
                   StoreTexts(run.store.root))
    keys: dict[str, set[str]] = {}
    for sha, key in verdicts:
        keys.setdefault(sha, set()).add(key)
    for item in planned.items:
        if keys.get(item.sha256, {item.key}) - {item.key}:
            # these bytes have a verdict under another key: another file of the tree may
            # read them under that key, and the store's names for the two depend on both
            return None
    run.merge_from = summary
    return planned, verdicts, Merge(delta)
