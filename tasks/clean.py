"""``doit clean`` on bastion's tasks: remove what a task made.

The extract group removes the records, the summary, the store and the verdicts (the
database's extract tables); a file's
task its text, sidecar and verdict (its record becomes ``skipped``, not extracted yet), unless
another file's record names the same text (a copy of the same bytes): then only its record is
reset, and the text and verdict the other record needs stay (which records name a text is a
query of the ``records`` table).  The walk's task removes its
export and its rows in the database (tasks/database.py; the file goes once it holds neither).  doit's own database stays (``doit forget`` is for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .database import EXTRACT_TABLES, WALK_TABLES, clear
from .output.atomic import STATE_DIR, output, rmtree, unlink
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
    for name in ("forgotten.json", "tools.json", "extract-stamp.json", "extract.jsonl.lines"):
        unlink(out / STATE_DIR / name)
    clear(output(out), EXTRACT_TABLES)  # the verdicts; the walk's rows stay
    run.cleaned_all = True
    run.say(f"removed the extract stage's outputs in {out}")


def clean_item(run: Run, item: Item) -> None:
    """One file's text, sidecar and verdict; its record becomes skipped."""
    if run.cleaned_all:
        return  # the group was cleaned first: nothing of this file is left
    from .extract.table import Records

    run.lock()
    store = run.store or Store(run.out)
    table = Records(store.db, run.out)
    others = table.names(item.stem, besides=(item.root, item.path))  # an indexed query
    if not others:
        store.remove_text(item.stem)
        store.forget([(item.sha256, item.key)])
    if (run.out / "extract.jsonl").exists():
        table.reset(item, store.run)
    if others:
        run.say(f"reset the record of {item.root}/{item.path}; its text and verdict stay: "
                f"{others} other record(s) name them")
    else:
        run.say(f"removed the text and verdict of {item.root}/{item.path}")


def clean_walk(run: Run) -> None:
    out = run.out
    run.lock()
    for name in ("walk.jsonl", "walk.summary.json", f"{STATE_DIR}/walk.jsonl.lines",
                 f"{STATE_DIR}/walk-delta"):
        unlink(out / name)
    clear(output(out), WALK_TABLES)  # the walk's rows; the verdicts stay
    run.say(f"removed the walk's outputs in {out}")
