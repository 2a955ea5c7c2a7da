"""``doit clean`` on bastion's tasks: remove what a task made.

The extract group removes the records, the summary, the store and the verdicts (the
database's extract tables); a file's
task its text, sidecar and verdict (its record becomes ``skipped``, not extracted yet), unless
another file's record names the same text (a copy of the same bytes): then only its record is
reset, and the text and verdict the other record needs stay (which records name a text is a
query of the ``records`` table; while its rows are not whole, not known: the verdict goes, the
text stays).  The walk's task removes its
export and its rows in the database (tasks/database.py; the file goes once it holds neither).  doit's own database stays (``doit forget`` is for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .database import EXTRACT_TABLES, WALK_TABLES, clear
from .output.atomic import STATE_DIR
from .output.directory import OutputDir
from .extract.store import Store

if TYPE_CHECKING:
    from .extract.plan import Item
    from .extract.run import Run


def clean_extract(run: Run) -> None:
    """Everything the extract stage made: records, summary, store, verdicts."""
    out = run.out
    od = run.lock()
    if run.store is not None:
        run.store.close()
    for name in ("extract.jsonl", "extract.summary.json"):  # through the output's descriptor
        od.unlink(name)
    od.rmtree("extract")
    for name in ("forgotten.json", "tools.json", "extract-stamp.json", "extract.jsonl.lines"):
        od.unlink(f"{STATE_DIR}/{name}")
    clear(od, EXTRACT_TABLES)  # the verdicts; the walk's rows stay
    run.say(f"removed the extract stage's outputs in {out}")


def clean_item(run: Run, item: Item) -> None:
    """One file's text, sidecar and verdict; its record becomes skipped."""
    from .extract.table import Records

    od = run.lock()
    if not _extracted(od):
        return  # no records and no store (the group was cleaned first): nothing of it is left
    store = run.store or Store(run.out, run.store_dir)
    table = Records(store.db, od)
    # which records name the text is an indexed query, while the rows are whole (their export
    # matches them); else (a run killed while writing them, an output of an earlier layout)
    # it is not known: the verdict goes (the next run reads the bytes again), the text stays
    others = table.names(item.stem, besides=(item.root, item.path)) if table.matches() else None
    if others == 0:
        store.remove_text(item.stem)
    if not others:
        store.forget([(item.sha256, item.key)])
    try:
        od.stat("extract.jsonl")
    except FileNotFoundError:
        pass
    else:
        table.reset(item, store.run)
    if others is None:
        run.say(f"removed the verdict of {item.root}/{item.path}; its text stays (the records "
                "are not whole: which others name it is known after the next run)")
    elif others:
        run.say(f"reset the record of {item.root}/{item.path}; its text and verdict stay: "
                f"{others} other record(s) name them")
    else:
        run.say(f"removed the text and verdict of {item.root}/{item.path}")


def _extracted(od: OutputDir) -> bool:
    """Whether the output holds anything of the extract stage: its records or its store."""
    for rel in ("extract.jsonl", "extract"):
        try:
            od.stat(rel)
            return True
        except FileNotFoundError:
            continue
    return False


def clean_walk(run: Run) -> None:
    out = run.out
    od = run.lock()
    for name in ("walk.jsonl", "walk.summary.json", f"{STATE_DIR}/walk.jsonl.lines",
                 f"{STATE_DIR}/walk-delta"):
        od.unlink(name)
    clear(od, WALK_TABLES)  # the walk's rows; the verdicts stay
    run.say(f"removed the walk's outputs in {out}")
