"""The extract runs in the database (tasks/runs.py): each run that finishes adds its row to
``runs``; extract.summary.json is that row's export; the counts a later run starts from are
the row's, whatever became of the file.  And what a no-op no longer does: import the readers
while the stamp's fingerprint of them holds (tasks/extract/stamp.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bastion.tasks.cli import main
from bastion.tasks.database import DB_NAME


def sweep(m: Path, out: Path) -> None:
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) == 0


def setup(tmp_path: Path, n: int = 12) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(n):
        (root / f"f{i:02}.txt").write_text(f"file {i}\n")
    (root / "run.bin").write_bytes(b"\x00\x01\x02 not text")  # a skipped or unsupported one
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    return root, m, tmp_path / "out"


def rows(out: Path) -> list[tuple[int, str, dict]]:
    db = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
    try:
        return [(r, s, json.loads(j)) for r, s, j in
                db.execute("SELECT run, stage, summary FROM runs ORDER BY run")]
    finally:
        db.close()


def summary(out: Path) -> dict:
    return json.loads((out / "extract.summary.json").read_text())


def exported(row: dict) -> bytes:
    return (json.dumps(row, sort_keys=True, ensure_ascii=True, indent=2) + "\n").encode()


COUNTS = ("records", "counts", "chars", "error_kinds", "limits_hit", "pages_ocr")


def test_every_extract_run_adds_its_row_and_the_summary_is_its_export(tmp_path: Path) -> None:
    """A full run, a no-op and a change-only run: each adds one ``extract`` row after its
    walk's, what it extracted, kept and removed in it; extract.summary.json is exactly that
    row, and the stamp names the run whose counts the next run starts from."""
    root, m, out = setup(tmp_path)
    sweep(m, out)
    sweep(m, out)  # nothing to do
    texts = {p for p in (out / "extract").rglob("*") if p.is_file()}
    (root / "f03.txt").write_text("changed\n")
    (root / "f07.txt").unlink()
    sweep(m, out)  # the change only
    got = rows(out)
    assert [s for _, s, _ in got] == ["walk", "extract"] * 3
    full, noop, change = (r for _, s, r in got if s == "extract")
    assert (full["records"], full["extracted"], full["reused"], full["removed"]) == (13, 13, 0, 0)
    assert (noop["records"], noop["extracted"], noop["reused"], noop["removed"]) == (13, 0, 13, 0)
    assert (change["records"], change["extracted"], change["reused"]) == (12, 1, 11)
    gone = texts - {p for p in (out / "extract").rglob("*") if p.is_file()}
    assert change["removed"] == len(gone) >= 2  # f07's text and f03's old one, at least
    assert (out / "extract.summary.json").read_bytes() == exported(change)
    stamp = json.loads((out / ".bastion" / "extract-stamp.json").read_text())
    assert stamp["run"] == got[-1][0]


def test_an_edited_or_lost_summary_is_exported_again_from_the_row(tmp_path: Path) -> None:
    """extract.summary.json edited or removed by hand is not what the next run counts from:
    a no-op writes it again from the row (extract.jsonl untouched: nothing planned), and a
    change-only run after an edit counts what a fresh run counts."""
    root, m, out = setup(tmp_path)
    sweep(m, out)
    sweep(m, out)  # the no-op that flags every record reused; the next writes no record
    want = summary(out)
    records = out / "extract.jsonl"
    before = records.stat()
    edited = dict(want, records=want["records"] + 100,
                  counts={**want["counts"], "ok": want["counts"]["ok"] + 100})
    (out / "extract.summary.json").write_text(json.dumps(edited))
    sweep(m, out)
    again = summary(out)
    assert {k: again[k] for k in COUNTS} == {k: want[k] for k in COUNTS}
    (out / "extract.summary.json").unlink()
    sweep(m, out)
    again = summary(out)
    assert {k: again[k] for k in COUNTS} == {k: want[k] for k in COUNTS}
    after = records.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (out / "extract.summary.json").read_bytes() == exported(rows(out)[-1][2])

    (out / "extract.summary.json").write_text(json.dumps(edited))
    (root / "new.txt").write_text("a new file\n")
    sweep(m, out)
    changed = summary(out)
    assert changed["extracted"] == 1
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert {k: changed[k] for k in COUNTS} == {k: summary(fresh)[k] for k in COUNTS}


# -- what a no-op run does not do -------------------------------------------------------------

NOOP = r"""
import json, sys
from bastion.tasks.cli import main
rc = main(sys.argv[1:])
from bastion.readers.dispatch import MODULES
imported = [f"bastion.readers.{m}" in sys.modules for m in MODULES.values()]
print(json.dumps([rc, all(imported), any(imported)]))
"""


@pytest.mark.slow
def test_a_noop_imports_no_reader_while_the_readers_fingerprint_holds(tmp_path: Path) -> None:
    """The registry's digest (in the task keys' inputs) is taken from the stamp while the
    readers' sources and the import path's directories are as they were: a no-op imports no
    reader module.  A distribution installed on the import path (a file added to one of its
    directories) changes the fingerprint: the readers are imported again, and the run is
    still a no-op (the digest is the same)."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    site = tmp_path / "site"
    site.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{site}", "BASTION_NO_EXTERNAL": "1"}
    _, m, out = setup(tmp_path)

    def run() -> tuple[int, bool, bool, dict]:
        proc = subprocess.run([sys.executable, "-c", NOOP, "sweep", str(m), "--out", str(out),
                               "-q", "-j", "1"], cwd=str(tmp_path), env=env,
                              capture_output=True, text=True, timeout=120)
        rc, every, some = json.loads(proc.stdout.strip().splitlines()[-1])
        return rc, every, some, summary(out)

    assert run()[:3] == (0, True, True)  # the first sweep plans: every reader imported
    run()  # the first no-op (flags the records reused)
    rc, every, some, s = run()
    assert (rc, every, some, s["extracted"]) == (0, False, False, 0)
    (site / "newdist-1.0.dist-info").mkdir()  # the import path changed
    rc, every, some, s = run()
    assert (rc, every, some, s["extracted"]) == (0, True, True, 0)
    rc, every, some, s = run()  # that no-op stamped the new fingerprint
    assert (rc, every, some, s["extracted"]) == (0, False, False, 0)
