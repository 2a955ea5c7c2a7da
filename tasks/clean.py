"""``doit clean`` on bastion's tasks: remove what a task made.

The extract group removes the records, the summary, the store and the verdict index; a file's
task its text, sidecar and verdict (its record becomes ``skipped``, not extracted yet); the
walk its records and its stat cache.  doit's own database stays (``doit forget`` is for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .output.atomic import STATE_DIR, rmtree, unlink
from .extract.store import Store

if TYPE_CHECKING:
    from .extract.plan import Item
    from .extract.run import Run


def clean_extract(run: Run) -> None:
    """Everything the extract stage made: records, summary, store, verdicts."""
    out = run.out
    run.lock()
    if run.store is not None:
        run.store.close()
    for name in ("extract.jsonl", "extract.summary.json"):  # through the output's descriptor
        unlink(out / name)
    rmtree(out / "extract")
    for name in ("verdicts.sqlite", "verdicts.sqlite-wal", "verdicts.sqlite-shm",
                 "forgotten.json", "tools.json", "extract-stamp.json", "extract.jsonl.lines"):
        unlink(out / STATE_DIR / name)
    run.cleaned_all = True
    run.say(f"removed the extract stage's outputs in {out}")


def clean_item(run: Run, item: Item) -> None:
    """One file's text, sidecar and verdict; its record becomes skipped."""
    if run.cleaned_all:
        return  # the group was cleaned first: nothing of this file is left
    from .extract.records import rewrite_record

    run.lock()
    store = run.store or Store(run.out)
    store.remove_text(item.stem)
    store.forget([(item.sha256, item.key)])
    rewrite_record(run.out / "extract.jsonl", item)
    run.say(f"removed the text and verdict of {item.root}/{item.path}")


def clean_walk(run: Run) -> None:
    out = run.out
    run.lock()
    for name in ("walk.jsonl", "walk.summary.json", f"{STATE_DIR}/walk-cache",
                 f"{STATE_DIR}/walk.jsonl.lines"):
        unlink(out / name)
    run.say(f"removed the walk's outputs in {out}")
