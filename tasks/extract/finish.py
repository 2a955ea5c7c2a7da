"""The end of an extract run: drain the workers, write the records (the ``records`` table and
its export extract.jsonl: tasks/extract/table.py), remove the store files no record
references, add the run's row to ``runs`` and export it as extract.summary.json
(tasks/runs.py), trim the forgotten list, and stamp a complete run, naming its row
(tasks/extract/stamp.py), so that the next one with nothing to do costs nothing.

:func:`finish` is a function of what it reads and changes: the run's frozen values (its
inputs, what its steps returned: :class:`~bastion.tasks.extract.values.Outcomes`, its
:class:`~bastion.tasks.extract.values.Clock`) and its resources (:class:`Resources`: the
output, the store, the session, the progress display, the tools' cache); it returns the
run's :class:`~bastion.tasks.extract.values.RunEnd`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from bastion.readers.runtime.verdict import Status

from . import backoff, stamp
from .. import runs
from .records import ExtractSummary, Tally, build_records, summarize
from ..forgotten import trim_forgotten
from ..output.atomic import STATE_DIR
from ..output.directory import OutputDir
from ..progress import Progress
from .plan import Plan
from .runplan import Keys
from .store import Store
from .table import Change, Records, walk_gen
from .toolcache import ToolCache
from .values import Clock, Outcomes, RunEnd, RunInputs

if TYPE_CHECKING:
    from .session import Session

# the files beside the exports before the records table: the line indexes, the walk's delta
LEGACY = ("walk.jsonl.lines", "extract.jsonl.lines", "walk-delta")


@dataclass(frozen=True)
class Resources:
    """The state the end of a run changes, handed in: the output (``lock()``: locked at the
    first use), the store, the session (None when no document was handed out), the progress
    display (None likewise), the tools' cache (saved when it changed)."""

    lock: Callable[[], OutputDir]
    store: Store
    session: Session | None
    progress: Progress | None
    toolcache: ToolCache | None


def finish(given: RunInputs, done: Outcomes, res: Resources, *, keys: Keys, clock: Clock,
           more_slices: bool) -> RunEnd | None:
    """Drain the workers, write extract.jsonl and extract.summary.json, remove the texts
    no record references: the run's end; or None between doit slices (``more_slices``:
    only a commit).  ``done`` holds the decision and the plan (made before: the run's
    :meth:`~bastion.tasks.extract.run.Run.finish` sees to it)."""
    noop_from = done.decision.noop_from if done.decision is not None else None
    if noop_from is None and more_slices:  # a slice done, more to come: commit what is done
        if res.session is not None:
            res.session.drain()
        return None
    if noop_from is not None:
        return _finish_noop(given, done, res, noop_from, keys=keys, clock=clock)
    planned = done.planned
    assert planned is not None  # (the run planned before it finishes)
    if planned.change is not None:
        return _finish_merge(given, done, res, planned.plan, planned.change,
                             planned.change_from or {}, keys=keys, clock=clock)
    plan, store = planned.plan, res.store
    try:
        od = _drained(res)
        # every verdict of this run is committed: the records read them back from the store
        tally = Tally()
        table = Records(store.db, od)
        table.write_all(build_records(plan, store.verdicts_for, store.made, tally,
                                      backoff.retries(store), store.run),
                        walk_gen(store.db))
        for name in LEGACY:  # an output of the layout before the records table
            od.unlink(f"{STATE_DIR}/{name}")
        # the records are durable (OutputDir.write fsyncs): texts they dropped can go
        removed = store.remove_unreferenced(table.stems, table.markdown_stems)
        summary = _summary(given, done, res, od, clock, tally, store.made_count(), removed)
        row = runs.record_extract(store.db, od, summary.to_json())
        if res.toolcache is not None:
            res.toolcache.save(od)
        if planned.forgotten:
            trim_forgotten(od, set(planned.forgotten), plan.items, store.made)
    finally:
        store.close()
        if res.progress is not None:
            res.progress.close()
    complete = not given.cfg.all_tasks and not tally.error_kinds and \
        summary.counts.get(Status.ERROR.value, 0) == 0
    if complete:
        stamp.save(od, keys.digest(_tools(res)), row, keys.readers)
    else:
        stamp.drop(od)
    return RunEnd(summary, not_yet=tally.not_yet)


def _drained(res: Resources) -> OutputDir:
    """Wait for the documents in flight, stop the workers, lock the output (the verdicts this
    run made are then all in the store: :meth:`~bastion.tasks.extract.store.Store.made`)."""
    if res.session is not None:
        try:
            res.session.drain()
        finally:
            res.session.close()
    return res.lock()


def _finish_noop(given: RunInputs, done: Outcomes, res: Resources,
                 noop_from: Mapping[str, Any], *, keys: Keys, clock: Clock) -> RunEnd:
    """The summary of a run with nothing to do: the stamped run's counts (its row), this run's
    times and tools; every verdict was kept, so every record says ``reused`` (the first such
    run after one with work flags the rows that run extracted, and their lines are spliced
    into extract.jsonl; later ones write nothing), and the store is left as it is."""
    if res.session is not None:
        res.session.close()
    od = res.lock()
    store = res.store
    flipped = Records(store.db, od).flip(int(noop_from.get("records", 0)), store.run)
    tally = Tally.of_summary(dict(noop_from))
    tally.reused = tally.records  # what the records now say
    summary = _summary(given, done, res, od, clock, tally, 0, 0)
    row = runs.record_extract(store.db, od, summary.to_json())
    fingerprint = keys.fingerprint
    if flipped or (fingerprint is not None and stamp.cached_registry(od, fingerprint) is None):
        # extract.jsonl changed (the stamp follows it), or the readers' fingerprint did (the
        # next no-op takes the registry's digest from the stamp again): this run's row named
        stamp.save(od, keys.digest(_tools(res)), row, keys.readers)
    # (else the stamp still names the run it was made by: the same counts as this one's)
    return RunEnd(summary, noop=True)


def _tools(res: Resources) -> Mapping[str, Any]:
    """The tools the run probed (before it decided: they are in the keys)."""
    return res.toolcache.tools if res.toolcache is not None else {}


def _summary(given: RunInputs, done: Outcomes, res: Resources, od: OutputDir, clock: Clock,
             tally: Tally, extracted: int, removed: int) -> ExtractSummary:
    session = res.session
    counts = session.counts() if session is not None else None
    cfg = given.cfg
    return dataclasses.replace(summarize(
        given.manifest, done.walk_read.get("manifest_digest"), tally, extracted=extracted,
        removed=removed, tools=dict(_tools(res)),
        workers=session.workers if session is not None else cfg.workers,
        started=counts.started if counts else 0, killed=counts.killed if counts else 0,
        no_external=cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1",
        started_at=clock.started, duration_s=clock.elapsed()),
        tightened=od.tightened,
        cluster=session.describe() if session is not None else None,
        worker_identity=counts.identity if counts else None)


def _finish_merge(given: RunInputs, done: Outcomes, res: Resources, plan: Plan, change: Change,
                  merged_into: Mapping[str, Any], *, keys: Keys, clock: Clock) -> RunEnd:
    """The end of a run that planned only the walk's ``change`` (tasks/extract/table.py):
    the changed keys' rows replaced, the lines spliced into extract.jsonl, the counts of the
    run it is ``merged_into`` adjusted."""
    store = res.store
    try:
        od = _drained(res)
        fresh = Tally()
        table = Records(store.db, od)
        count = int(merged_into.get("records", 0))
        dropped = table.apply(change, build_records(plan, store.verdicts_for, store.made, fresh),
                              count, store.run)
        tally = Tally.of_summary(dict(merged_into))
        for rec in dropped:
            tally.remove(rec)
        tally.merge(fresh)
        # every kept record now says reused (flagged in the table): the count follows
        tally.reused = tally.records - fresh.records + fresh.reused
        removed = _remove_dropped_texts(store, od, table, dropped)
        summary = _summary(given, done, res, od, clock, tally, store.made_count(), removed)
        row = runs.record_extract(store.db, od, summary.to_json())
        if res.toolcache is not None:
            res.toolcache.save(od)
    finally:
        store.close()
        if res.progress is not None:
            res.progress.close()
    if summary.counts.get(Status.ERROR.value, 0) == 0:
        stamp.save(od, keys.digest(_tools(res)), row, keys.readers)
    else:
        stamp.drop(od)
    return RunEnd(summary)


def _remove_dropped_texts(store: Store, od: OutputDir, table: Records,
                          dropped: list[dict]) -> int:
    """The store files of the records that went, unless a record still names them (a
    fresh one, or a kept record of a file with the same bytes: an indexed query on the
    rows, the fresh ones in)."""
    stems = set()
    for rec in dropped:
        text = rec.get("text")
        if isinstance(text, str) and text.endswith(".txt"):
            stems.add(text.rsplit("/", 1)[-1][:-4])
    removed = 0
    for stem in sorted(stems):
        if table.names(stem):
            continue
        for rel in (store._rel(stem, ".txt"), store._rel(stem, ".md"),
                    store._rel(stem, ".meta.json")):
            if od.unlink(rel):  # through the output's descriptor
                removed += 1
    return removed
