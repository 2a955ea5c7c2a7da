"""The end of an extract run: drain the workers, write the records (the ``records`` table and
its export extract.jsonl: tasks/extract/table.py), remove the store files no record
references, add the run's row to ``runs`` and export it as extract.summary.json
(tasks/runs.py), trim the forgotten list, and stamp a complete run, naming its row
(tasks/extract/stamp.py), so that the next one with nothing to do costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping

from bastion.readers.runtime.verdict import Status

from . import backoff, stamp
from .. import runs
from .records import ExtractSummary, Tally, build_records, summarize
from ..forgotten import trim_forgotten
from ..output.atomic import STATE_DIR
from .store import Store
from .table import Change, Records, walk_gen
from .run import Run
from .values import RunEnd

# the files beside the exports before the records table: the line indexes, the walk's delta
LEGACY = ("walk.jsonl.lines", "extract.jsonl.lines", "walk-delta")



def finish(run: Run) -> RunEnd | None:
    """Drain the workers, write extract.jsonl and extract.summary.json, remove the texts
    no record references: the run's end, once per run (later calls return the same value,
    :attr:`Run.end`), or None between doit slices (only a commit)."""
    if run.end is None:
        run.end = _finish(run)
    return run.end


def _finish(run: Run) -> RunEnd | None:
    noop_from = run.decision.noop_from if run.decision is not None else None
    if noop_from is None and run.more_slices:  # a slice done, more to come: commit what is done
        if run.session is not None:
            run.session.drain()
        return None
    if noop_from is not None:
        return _finish_noop(run, noop_from)
    planned = run.planned
    if planned is not None and planned.change is not None:
        return _finish_merge(run, planned.change, planned.change_from or {})
    plan = run.plan()
    assert run.store is not None
    try:
        _drained(run)
        od = run.lock()
        # every verdict of this run is committed: the records read them back from the store
        tally = Tally()
        table = Records(run.store.db, od)
        table.write_all(build_records(plan, run.store.verdicts_for, run.store.made, tally,
                                      backoff.retries(run.store), run.store.run),
                        walk_gen(run.store.db))
        for name in LEGACY:  # an output of the layout before the records table
            od.unlink(f"{STATE_DIR}/{name}")
        # the records are durable (OutputDir.write fsyncs): texts they dropped can go
        removed = run.store.remove_unreferenced(table.stems, table.markdown_stems)
        summary = _summary(run, tally, run.store.made_count(), removed)
        row = runs.record_extract(run.store.db, od, summary.to_json())
        if run.toolcache is not None:
            run.toolcache.save(od)
        forgot = run.planned.forgotten if run.planned is not None else frozenset()
        if forgot:
            trim_forgotten(od, set(forgot), plan.items, run.store.made)
    finally:
        run.store.close()
        if run.progress is not None:
            run.progress.close()
    complete = not run.cfg.all_tasks and not tally.error_kinds and \
        summary.counts.get(Status.ERROR.value, 0) == 0
    if complete:
        stamp.save(od, run.inputs(), row, run.readers_digest)
    else:
        stamp.drop(od)
    return RunEnd(summary, not_yet=tally.not_yet)


def _drained(run: Run) -> None:
    """Wait for the documents in flight, stop the workers, lock the output (the verdicts this
    run made are then all in the store: :meth:`~bastion.tasks.extract.store.Store.made`)."""
    if run.session is not None:
        try:
            run.session.drain()
        finally:
            run.session.close()
    run.lock()


def _finish_noop(run: Run, noop_from: Mapping[str, Any]) -> RunEnd:
    """The summary of a run with nothing to do: the stamped run's counts (its row), this run's
    times and tools; every verdict was kept, so every record says ``reused`` (the first such
    run after one with work flags the rows that run extracted, and their lines are spliced
    into extract.jsonl; later ones write nothing), and the store is left as it is."""
    if run.session is not None:
        run.session.close()
    od = run.lock()
    store = run.store if run.store is not None else Store(run.out, run.store_dir)
    try:
        flipped = Records(store.db, od).flip(int(noop_from.get("records", 0)), store.run)
        tally = Tally.of_summary(dict(noop_from))
        tally.reused = tally.records  # what the records now say
        summary = _summary(run, tally, 0, 0)
        row = runs.record_extract(store.db, od, summary.to_json())
    finally:
        if store is not run.store:
            store.close()
    fingerprint = run.readers_digest[0]
    if flipped or (fingerprint is not None and stamp.cached_registry(od, fingerprint) is None):
        # extract.jsonl changed (the stamp follows it), or the readers' fingerprint did (the
        # next no-op takes the registry's digest from the stamp again): this run's row named
        stamp.save(od, run.inputs(), row, run.readers_digest)
    # (else the stamp still names the run it was made by: the same counts as this one's)
    return RunEnd(summary, noop=True)


def _summary(run: Run, tally: Tally, extracted: int, removed: int) -> ExtractSummary:
    pool = run.session.pool if run.session is not None else None
    return dataclasses.replace(summarize(
        run.manifest, run.walk_read.get("manifest_digest"), tally, extracted=extracted,
        removed=removed, tools=run.tools,
        workers=run.session.workers if run.session is not None else run.cfg.workers,
        started=pool.spawned if pool else 0, killed=pool.killed if pool else 0,
        no_external=run.cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1",
        started_at=run.started, duration_s=time.monotonic() - run.t0),
        tightened=run.tightened,
        cluster=run.session.describe() if hasattr(run.session, "describe") else None,
        worker_identity=getattr(pool, "identity", None))


def _finish_merge(run: Run, change: Change, merged_into: Mapping[str, Any]) -> RunEnd | None:
    """The end of a run that planned only the walk's ``change`` (tasks/extract/table.py):
    the changed keys' rows replaced, the lines spliced into extract.jsonl, the counts of the
    run it is ``merged_into`` adjusted."""
    plan = run.plan()
    assert run.store is not None  # (finish() comes here with a plan)
    try:
        _drained(run)
        od = run.lock()
        fresh = Tally()
        table = Records(run.store.db, od)
        count = int(merged_into.get("records", 0))
        dropped = table.apply(change, build_records(plan, run.store.verdicts_for,
                                                       run.store.made, fresh),
                              count, run.store.run)
        tally = Tally.of_summary(dict(merged_into))
        for rec in dropped:
            tally.remove(rec)
        tally.merge(fresh)
        # every kept record now says reused (flagged in the table): the count follows
        tally.reused = tally.records - fresh.records + fresh.reused
        removed = _remove_dropped_texts(run, table, dropped)
        summary = _summary(run, tally, run.store.made_count(), removed)
        row = runs.record_extract(run.store.db, od, summary.to_json())
        if run.toolcache is not None:
            run.toolcache.save(od)
    finally:
        run.store.close()
        if run.progress is not None:
            run.progress.close()
    if summary.counts.get(Status.ERROR.value, 0) == 0:
        stamp.save(od, run.inputs(), row, run.readers_digest)
    else:
        stamp.drop(od)
    return RunEnd(summary)


def _remove_dropped_texts(run: Run, table: Records, dropped: list[dict]) -> int:
    """The store files of the records that went, unless a record still names them (a
    fresh one, or a kept record of a file with the same bytes: an indexed query on the
    rows, the fresh ones in)."""
    stems = set()
    for rec in dropped:
        text = rec.get("text")
        if isinstance(text, str) and text.endswith(".txt"):
            stems.add(text.rsplit("/", 1)[-1][:-4])
    removed = 0
    store = run.store
    assert store is not None  # (a merge ran: its store is open)
    od = run.lock()
    for stem in sorted(stems):
        if table.names(stem):
            continue
        for rel in (store._rel(stem, ".txt"), store._rel(stem, ".md"),
                    store._rel(stem, ".meta.json")):
            if od.unlink(rel):  # through the output's descriptor
                removed += 1
    return removed
