"""The end of an extract run: drain the workers, write extract.jsonl and the summary, remove
the store files no record references, trim the forgotten list, and stamp a complete run
(tasks/extract/stamp.py) so that the next one with nothing to do costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Container, Mapping

from bastion.readers.runtime.verdict import Status

from ..output import lineindex
from . import backoff, stamp
from .records import ExtractSummary, Tally, summarize, write_records
from ..forgotten import trim_forgotten
from .plan import IndexSet
from ..output.directory import OutputDir
from .values import RunEnd

# ``run`` below is a bastion.tasks.extract.run.Run (not imported: run.py calls into this module)
Run = Any


def finish(run: Run) -> RunEnd | None:
    """Drain the workers, write extract.jsonl and extract.summary.json, remove the texts
    no record references; the run's end (None between doit slices: only a commit)."""
    noop_from = run.decision.noop_from if run.decision is not None else None
    if noop_from is None and run.more_slices:  # a slice done, more to come: commit what is done
        if run.session is not None:
            run.session.drain()
        return None
    if noop_from is not None:
        return _finish_noop(run, noop_from)
    if run.merge is not None:
        return _finish_merge(run)
    plan = run.plan()
    assert run.store is not None
    try:
        produced = _drained(run)
        od = run.lock()
        # every verdict of this run is committed: the records read them back from the store
        tally = write_records(od, plan, run.store.verdicts_for, produced,
                              backoff.retries(run.store), run.store.run)
        # the records are durable (OutputDir.write fsyncs): texts they dropped can go
        removed = run.store.remove_unreferenced(tally.referenced)
        summary = _summary(run, tally, len(produced), removed)
        od.write_json("extract.summary.json", summary.to_json())
        if run.toolcache is not None:
            run.toolcache.save(od)
        if run.forgotten:
            trim_forgotten(od, run.forgotten, plan.items, produced)
    finally:
        run.store.close()
        if run.progress is not None:
            run.progress.close()
    complete = not run.cfg.all_tasks and not tally.error_kinds and \
        summary.counts.get(Status.ERROR.value, 0) == 0
    if complete:
        stamp.save(od, run.inputs())
    else:
        stamp.drop(od)
    return RunEnd(summary, not_yet=tally.not_yet)


def _drained(run: Run) -> IndexSet:
    """Wait for the documents in flight, stop the workers, lock the output; the verdicts this
    run made."""
    if run.session is not None:
        try:
            run.session.drain()
        finally:
            run.session.close()
    run.lock()
    return run.session.produced if run.session is not None else IndexSet()


def _finish_noop(run: Run, noop_from: Mapping[str, Any]) -> RunEnd:
    """The summary of a run with nothing to do: the last run's counts, this run's
    times and tools; every verdict was kept, so every record says ``reused`` (the first such
    run after one with work flips the flags that run wrote; later ones write nothing), and
    the store is left as it is."""
    if run.session is not None:
        run.session.close()
    od = run.lock()
    flipped = _all_reused(od, int(noop_from.get("records", 0)))
    tally = Tally.of_summary(dict(noop_from))
    tally.reused = tally.records  # what the records now say
    summary = _summary(run, tally, 0, 0)
    od.write_json("extract.summary.json", summary.to_json())
    if flipped:  # extract.jsonl changed: the stamp follows it
        stamp.save(od, run.inputs())
    return RunEnd(summary, noop=True)


def _all_reused(od: OutputDir, count: int) -> bool:
    """Flip every ``"reused":false`` of extract.jsonl to true (the kept records of a merge
    with no change, tasks/extract/delta.py); whether the file was rewritten.  Its line index
    says where the flags are: none, and nothing is read."""
    from array import array

    from .delta import Merge

    index = lineindex.load(od, "extract.jsonl")
    if index is not None and not len(index.flagged):
        return False
    merge = Merge({"fresh": array("q"), "removed": array("q"), "new_count": count})
    try:
        od.write("extract.jsonl", merge.lines(od, "extract.jsonl", iter(())))
    except ValueError:  # not the records the summary counts: the next run plans in full
        stamp.drop(od)
        return False
    lineindex.save_built(od, "extract.jsonl", merge.index)
    return True


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


def _finish_merge(run: Run) -> RunEnd | None:
    """The end of a run that planned only the walk's change (tasks/extract/delta.py): the kept
    records are copied, the fresh ones put in their places, the counts adjusted."""
    from .records import build_records

    plan = run.plan()
    assert run.store is not None
    try:
        produced = _drained(run)
        od = run.lock()
        fresh = Tally()
        lines = build_records(plan, run.store.verdicts_for, produced, fresh)
        try:
            od.write("extract.jsonl", run.merge.lines(od, "extract.jsonl", lines))
            lineindex.save_built(od, "extract.jsonl", run.merge.index)
        except ValueError:  # extract.jsonl is not what the delta says: write it in full
            done = {(i.sha256, i.key) for i in plan.items if i.canonical in produced}
            run.merge, run._plan = None, None
            if run.session is not None:  # what this run made, by the full plan's indices
                run.session.produced = IndexSet()
                for item in run.plan().items:
                    if (item.sha256, item.key) in done:
                        run.session.produced.add(item.canonical)
            return finish(run)
        tally = Tally.of_summary(run.merge_from or {})
        for rec in run.merge.dropped:
            tally.remove(rec)
        tally.merge(fresh)
        # every kept record now says reused (the merge flipped them): the count follows
        tally.reused = tally.records - fresh.records + fresh.reused
        removed = _remove_dropped_texts(run, fresh.referenced)
        summary = _summary(run, tally, len(produced), removed)
        od.write_json("extract.summary.json", summary.to_json())
        if run.toolcache is not None:
            run.toolcache.save(od)
    finally:
        run.store.close()
        if run.progress is not None:
            run.progress.close()
    if summary.counts.get(Status.ERROR.value, 0) == 0:
        stamp.save(od, run.inputs())
    else:
        stamp.drop(od)
    return RunEnd(summary)


def _remove_dropped_texts(run: Run, fresh_referenced: Container[str]) -> int:
    """The store files of the records that went, unless a record still names them (a
    fresh one, or a kept record of a file with the same bytes: found by one scan of the new
    extract.jsonl for their names)."""
    candidates = {}
    for rec in run.merge.dropped:
        text = rec.get("text")
        if isinstance(text, str) and text.endswith(".txt"):
            stem = text.rsplit("/", 1)[-1][:-4]
            if stem not in fresh_referenced:
                candidates[stem] = f'"text":"{text}"'.encode()
    if not candidates:
        return 0
    still = set()
    od = run.lock()
    with od.open_read("extract.jsonl") as f:
        tail = b""
        buf = bytearray(1 << 22)  # read into one buffer, searched in place (not mapped:
        while n := f.readinto(buf):  # a mapping's pages would count as this process's)
            seam = tail + buf[:min(n, 512)]  # a name across two reads is found whole
            for stem, needle in candidates.items():
                if stem not in still and (needle in seam or buf.find(needle, 0, n) >= 0):
                    still.add(stem)
            tail = bytes(buf[max(0, n - 512):n])
    removed = 0
    store = run.store
    assert store is not None  # (a merge ran: its store is open)
    for stem in candidates.keys() - still:
        for rel in (store._rel(stem, ".txt"), store._rel(stem, ".meta.json")):
            if od.unlink(rel):  # through the output's descriptor
                removed += 1
    return removed

