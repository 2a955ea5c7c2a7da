"""walk.jsonl as the export of the walk table (tasks/walk/export.py, tasks/walk/table.py): a
small change spliced into the previous export, a big one and an export that is not the
table's written in full, rows committed in batches — each the bytes a fresh walk writes, with
the change log (``walk_log``) whichever way the export was written."""

from __future__ import annotations

import marshal
import os
import sqlite3
from pathlib import Path

import pytest

from bastion.tasks.database import DB_NAME
from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk import export as export_module
from bastion.tasks.walk import table as table_module
from bastion.tasks.walk.stage import run_walk


def tree(root: Path, n: int) -> None:
    for i in range(n):
        d = root / f"d{i % 7}" / ("deep" if i % 3 == 0 else "")
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:04d}.txt").write_text(f"file {i}\n")
    (root / "d1" / os.fsdecode(b"odd-\xff.txt")).write_bytes(b"not utf-8 name\n")
    (root / "d1" / "odd-\u00e9.txt").write_bytes(b"utf-8 name after it in bytes\n")
    os.symlink("d1", root / "link")  # a record that depends on more than the stat


def manifest(tmp: Path, root: Path) -> Path:
    m = tmp / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk]\n")
    return m


def two_roots(tmp: Path) -> Path:
    for name in ("one", "two"):
        tree(tmp / name, 60)
    m = tmp / "m2.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: one\n    path: {tmp / 'one'}\n"
                 f"  - name: two\n    path: {tmp / 'two'}\nstages: [walk]\n")
    return m


def walk(m: Path, out: Path) -> dict:
    with open_output(out) as od:
        return run_walk(load_manifest(m), od)


def log(out: Path) -> list[tuple]:
    """The walk's change log: the keys each generation changed."""
    db = sqlite3.connect(out / DB_NAME)
    try:
        return db.execute("SELECT root, dir, name, gen FROM walk_log "
                          "ORDER BY root, dir, name").fetchall()
    finally:
        db.close()


def rows(out: Path) -> list[tuple]:
    """The table's rows but the walk generation that made each."""
    db = sqlite3.connect(out / DB_NAME)
    try:
        return db.execute("SELECT root, dir, name, path, kind, size, mtime_ns, ctime_ns, inode, "
                          "device, sha256, reason, mime, error, stat_only FROM walk "
                          "ORDER BY root, path").fetchall()
    finally:
        db.close()


def change(tmp: Path, how: str) -> None:
    one, two = tmp / "one", tmp / "two"
    if how in ("edit", "mixed"):
        (one / "d2" / "f0002.txt").write_text("edited\n")
        (two / "d3" / "deep" / "f0003.txt").write_text("edited too\n")
    if how in ("add", "mixed"):
        (one / "d4" / "aaa-first.txt").write_text("new\n")
        (two / "d6" / "zzz-last.txt").write_text("new\n")
        (one / "d0" / "deep" / "f0000.txt.bak").write_text("between\n")
    if how in ("add-new-dir", "mixed"):
        (one / "brand" / "new").mkdir(parents=True)
        (one / "brand" / "new" / "x.txt").write_text("in a new directory of the first root\n")
        (two / "zz").mkdir()
        (two / "zz" / "y.txt").write_text("last of all\n")
    if how in ("remove", "mixed"):
        (one / "d5" / "f0005.txt").unlink()
        (two / "d1" / "f0001.txt").unlink()
        (two / "d0" / "deep" / "f0000.txt").unlink()
    if how == "remove-dir":
        for f in (one / "d3" / "deep").iterdir():
            f.unlink()
        (one / "d3" / "deep").rmdir()
    if how == "link":
        (one / "link").unlink()
        os.symlink("d2", one / "link")


@pytest.mark.parametrize("copy_range", [True, False])  # the kernel's copy, or read and write
@pytest.mark.parametrize("how", ["edit", "add", "add-new-dir", "remove", "remove-dir", "mixed",
                                 "link"])
def test_a_small_change_is_spliced_as_a_full_export_writes_it(
        tmp_path: Path, how: str, copy_range: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    if not copy_range:
        def no_copy_range(*args):
            raise OSError(errno.EXDEV, "no copy_file_range here")

        monkeypatch.setattr(os, "copy_file_range", no_copy_range)
    m = two_roots(tmp_path)
    spliced, full, fresh = tmp_path / "spliced", tmp_path / "full", tmp_path / "fresh"
    walk(m, spliced)
    walk(m, full)
    change(tmp_path, how)
    used: list[bool] = []
    real_splice = export_module.splice

    def splice(*a):
        used.append(True)
        return real_splice(*a)

    monkeypatch.setattr(export_module, "splice", splice)
    walk(m, spliced)
    assert used, "the change was not spliced"
    monkeypatch.setattr(export_module, "MIN_CHANGES", 0)  # every change written in full
    monkeypatch.setattr(export_module, "MAX_SHARE", 0)
    used.clear()
    walk(m, full)
    assert not used
    walk(m, fresh)
    assert (spliced / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert (full / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert log(spliced) == log(full) != [] and log(fresh) == []  # a first walk logs nothing
    assert rows(spliced) == rows(full) == rows(fresh)
    # and the next walk goes on from the spliced export: unchanged, then another change
    assert walk(m, spliced)["hashed"] == 0
    (tmp_path / "two" / "d2" / "later.txt").write_text("later\n")
    (tmp_path / "one" / "d1" / "f0001.txt").unlink()
    walk(m, spliced)
    walk(m, fresh)
    assert (spliced / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert rows(spliced) == rows(fresh)


def test_a_big_change_is_written_in_full(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    tree(root, 200)
    m = manifest(tmp_path, root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    called: list[bool] = []
    monkeypatch.setattr(export_module, "splice", lambda *a: called.append(True))
    for f in root.rglob("f00[0-9][0-9].txt"):
        f.unlink()  # 100 of 203 records gone: more than MIN_CHANGES and 1 %
    assert walk(m, out)["records"] == walk(m, fresh)["records"]
    assert not called
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert len(log(out)) == 100 and {gen for *_, gen in log(out)} == {2}


def test_rows_in_batches_give_what_one_batch_gives(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    tree(root, 120)
    m = manifest(tmp_path, root)
    one, many = tmp_path / "one", tmp_path / "many"
    walk(m, one)
    monkeypatch.setattr(table_module, "BATCH_ROWS", 7)
    assert walk(m, many)["records"] == 123  # 120 files, the two odd names, the link
    assert (many / "walk.jsonl").read_bytes() == (one / "walk.jsonl").read_bytes()
    assert rows(many) == rows(one)
    (root / "d2" / "f0002.txt").write_text("edited\n")
    (root / "d3" / "new.txt").write_text("new\n")
    (root / "d4" / "f0004.txt").unlink()
    walk(m, many)
    monkeypatch.setattr(table_module, "BATCH_ROWS", 5000)
    walk(m, one)
    assert (many / "walk.jsonl").read_bytes() == (one / "walk.jsonl").read_bytes()
    assert rows(many) == rows(one) and log(many) == log(one) != []


def test_an_export_that_is_not_the_tables_is_written_in_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk that committed its rows but died before its export (or an export edited since):
    the next walk writes walk.jsonl in full from the table, reading no file again; the change
    the killed walk committed stays in the log (the extract stage still learns of it)."""
    root = tmp_path / "root"
    tree(root, 60)
    m = manifest(tmp_path, root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    (root / "d2" / "f0002.txt").write_text("edited\n")

    def dies(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr("bastion.tasks.walk.stage.export_walk", dies)
    with pytest.raises(KeyboardInterrupt):
        walk(m, out)
    monkeypatch.undo()
    summary = walk(m, out)
    assert summary["hashed"] == 0 and summary["reused"] == summary["files"]
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert [(d, n) for _, d, n, _ in log(out)] == [(b"d2", b"f0002.txt")]
    # an export edited by hand is not the table's either
    with open(out / "walk.jsonl", "ab") as f:
        f.write(b'{"junk":1}\n')
    walk(m, out)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()


def test_the_runs_are_recorded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree(root, 10)
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    walk(m, out)
    (root / "d2" / "f0002.txt").write_text("edited\n")
    walk(m, out)
    db = sqlite3.connect(out / DB_NAME)
    got = [(stage, s) for stage, s in db.execute("SELECT stage, summary FROM runs ORDER BY run")]
    db.close()
    import json

    assert [stage for stage, _ in got] == ["walk", "walk"]
    assert [json.loads(s)["hashed"] for _, s in got] == [12, 1]


def test_a_walk_killed_after_a_batch_leaves_an_exact_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row count is committed with each batch: after a walk that died once its new rows
    were committed, the next walk still finds the rows of a directory deleted since (the
    count decides whether rows outside the directories listed are looked for)."""
    root = tmp_path / "root"
    tree(root, 60)
    m = manifest(tmp_path, root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    (root / "new").mkdir()
    for i in range(50):
        (root / "new" / f"n{i:02d}.txt").write_text(f"new {i}\n")
    monkeypatch.setattr(table_module, "BATCH_ROWS", 50)

    def dies(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(table_module.WalkTable, "finish", dies)
    with pytest.raises(KeyboardInterrupt):
        walk(m, out)
    monkeypatch.undo()
    for f in (root / "d5" / "deep").iterdir():
        f.unlink()
    (root / "d5" / "deep").rmdir()
    walk(m, out)
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert rows(out) == rows(fresh)


def dirs_agree(out: Path) -> int:
    """Assert that every directory holding rows has its walk_dirs row and that each walk_dirs
    row is what its directory's rows give; how many walk_dirs rows there are."""
    db = sqlite3.connect(out / DB_NAME)
    try:
        held = {(root, d): marshal.loads(b)
                for root, d, b in db.execute("SELECT root, dir, rows FROM walk_dirs")}
        for key in db.execute("SELECT DISTINCT root, dir FROM walk").fetchall():
            assert key in held, key
        for key, got in held.items():
            assert got == table_module._fetch(db, key), key
        return len(held)
    finally:
        db.close()


@pytest.mark.parametrize("how", ["edit", "add", "add-new-dir", "remove", "remove-dir", "mixed",
                                 "link"])
def test_a_rewalk_reads_each_directory_from_walk_dirs(
        tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-walk fetches no row of ``walk`` for a directory that has its walk_dirs row, and
    after any change each walk_dirs row is again what its directory's rows give."""
    m = two_roots(tmp_path)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    listed = dirs_agree(out)
    assert listed == 2 * 15  # each root: itself, d0-d6 and their deep/
    fetched: list[tuple] = []
    real_fetch = table_module._fetch

    def fetch(db, key):
        fetched.append(key)
        return real_fetch(db, key)

    monkeypatch.setattr(table_module, "_fetch", fetch)
    assert walk(m, out)["hashed"] == 0
    assert fetched == []
    change(tmp_path, how)
    walk(m, out)
    dirs_agree(out)
    fetched.clear()
    summary = walk(m, out)
    assert summary["hashed"] == 0 and summary["reused"] == summary["files"]
    assert fetched == []
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert rows(out) == rows(fresh)


def test_a_walk_killed_before_walk_dirs_are_made_again_reuses_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch that changes a directory's rows removes its walk_dirs row in the same
    transaction: a walk killed after the batch leaves none that disagrees with its rows."""
    root = tmp_path / "root"
    tree(root, 60)
    m = manifest(tmp_path, root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    (root / "d2" / "f0002.txt").write_text("edited, a size of its own\n")
    (root / "d4" / "f0004.txt").unlink()

    def dies(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(table_module.WalkTable, "_make_dirs", dies)
    with pytest.raises(KeyboardInterrupt):
        walk(m, out)
    monkeypatch.undo()
    summary = walk(m, out)
    assert summary["hashed"] == 0 and summary["reused"] == summary["files"]
    dirs_agree(out)
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
    assert rows(out) == rows(fresh)


def test_walk_dirs_written_by_a_walk_that_ignores_them_are_not_used(tmp_path: Path) -> None:
    """A writer that changes ``walk`` without ``walk_dirs`` (an earlier bastion) moves the
    generation without ``walk_state.dirs``: the next walk drops every walk_dirs row and
    compares with the rows themselves."""
    root = tmp_path / "root"
    tree(root, 30)
    m = manifest(tmp_path, root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    db = sqlite3.connect(out / DB_NAME)
    with db:  # what such a writer does when the file is gone: its row removed, gen moved
        db.execute("DELETE FROM walk WHERE path = ?", (b"d2/f0002.txt",))
        gen = int(db.execute("SELECT value FROM walk_state WHERE name = 'gen'").fetchone()[0])
        db.execute("UPDATE walk_state SET value = ? WHERE name = 'gen'", (str(gen + 1),))
        db.execute("UPDATE walk_state SET value = value - 1 WHERE name = 'count'")
    db.close()
    # the file is still there: the walk must find it has no row and read it
    summary = walk(m, out)
    assert summary["hashed"] == 1
    dirs_agree(out)
    walk(m, fresh)
    assert rows(out) == rows(fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()
