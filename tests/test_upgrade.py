"""An output of the earlier layout (walk.jsonl + the packed stat cache ``.bastion/walk-cache``,
a verdict database of version 2) upgraded on first use: the walk imported into the table
reading no file again (tasks/walk/upgrade.py), the verdicts kept (tasks/database.py)."""

from __future__ import annotations

import json
import marshal
import os
import sqlite3
import sys
from array import array
from pathlib import Path

import pytest

from bastion.tasks.database import DB_NAME, SCHEMA_VERSION
from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk import stage as walk_module
from bastion.tasks.walk.stage import Walker, run_walk
from bastion.tasks.walk.upgrade import LEGACY_CACHE


def tree(root: Path) -> None:
    for i in range(30):
        d = root / f"d{i % 4}" / ("deep" if i % 3 == 0 else "")
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.txt").write_text(f"file {i}\n")
    (root / "d1" / os.fsdecode(b"odd-\xff.txt")).write_bytes(b"not utf-8 name\n")
    os.symlink("d1", root / "link")


def manifest(tmp: Path, roots: dict[str, Path], **extra) -> Path:
    m = tmp / "m.yaml"
    lines = ["version: 1", "roots:"]
    for name, path in roots.items():
        lines += [f"  - name: {name}", f"    path: {path}"]
        if name in extra:
            lines.append(f"    exclude: {json.dumps(extra[name])}")
    m.write_text("\n".join(lines + ["stages: [walk]", ""]))
    return m


def le(code: str, values) -> bytes:
    a = array(code, values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def earlier_layout(out: Path, m: Path, fmt: int, settings: list | None = None,
                   root_changed: str | None = None) -> None:
    """Turn a walked output into the earlier layout: no database; beside walk.jsonl the stat
    cache the earlier walk wrote (format 2: packed directories; format 1: dicts of tuples),
    each file's identity taken from an lstat now."""
    man = load_manifest(m)
    walk_jsonl = out / "walk.jsonl"
    lines = walk_jsonl.read_bytes().splitlines(keepends=True)
    roots = {r.name: r for r in man.roots}
    cached: dict[str, list] = {
        r.name: [[str(r.path), list(r.include), list(r.exclude), r.follow_symlinks,
                  r.one_file_system] if r.name != root_changed else ["elsewhere"], {}]
        for r in man.roots}
    numbers: dict[tuple[str, str], int] = {}
    line_dirs = []
    for i, line in enumerate(lines):
        d = json.loads(line)
        rel, _, name = d["path"].rpartition("/")
        dirs = cached[d["root"]][1]
        if rel not in dirs:
            dirs[rel] = ([], [], {})
            numbers[(d["root"], rel)] = len(numbers)
        names, entries, others = dirs[rel]
        names.append(name)
        if d["kind"] == "file" and not d["error"]:
            st = os.lstat(roots[d["root"]].path / os.fsencode(d["path"]).decode(
                "utf-8", "surrogateescape"))
            entries.append((i, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns))
        else:
            entries.append((i, -1, 0, 0, 0))
            others[name] = line
        line_dirs.append(numbers[(d["root"], rel)])
    st = os.stat(walk_jsonl)
    blob: dict = {"settings": settings or [walk_module.WALK_VERSION, man.max_file_bytes, False],
                  "walk": [st.st_size, st.st_mtime_ns], "count": len(lines)}
    if fmt == 2:
        blob["roots"] = {root: [rs, {rel: ["\0".join(names),
                                           le("q", [x for e in entries for x in e]), others]
                                     for rel, (names, entries, others) in dirs.items()}]
                         for root, (rs, dirs) in cached.items()}
        blob["format"] = 2
        blob["lines"] = le("I", line_dirs)
    else:
        blob["roots"] = {root: [rs, {rel: {n: (e if e[1] >= 0 else (*e, others[n]))
                                           for n, e in zip(names, entries)}
                                     for rel, (names, entries, others) in dirs.items()}]
                         for root, (rs, dirs) in cached.items()}
    for suffix in ("", "-wal", "-shm"):
        (out / (DB_NAME + suffix)).unlink(missing_ok=True)
    (out / LEGACY_CACHE).write_bytes(marshal.dumps(blob))


def walk(m: Path, out: Path, read: list[str] | None = None) -> dict:
    with open_output(out) as od:
        return run_walk(load_manifest(m), od)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the walk reads (hashes)."""
    seen: list[str] = []
    real = Walker._hash

    def spy(self, path, relpath, st):
        seen.append(relpath)
        return real(self, path, relpath, st)

    monkeypatch.setattr(Walker, "_hash", spy)
    return seen


@pytest.mark.parametrize("fmt", [2, 1])
def test_an_earlier_output_is_imported_reading_nothing(tmp_path: Path, fmt: int,
                                                       reads: list[str]) -> None:
    root = tmp_path / "root"
    tree(root)
    m = manifest(tmp_path, {"r": root})
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    before = (out / "walk.jsonl").read_bytes()
    earlier_layout(out, m, fmt)
    identity = os.stat(out / "walk.jsonl")
    reads.clear()
    summary = walk(m, out)
    assert reads == [] and summary["hashed"] == 0 and summary["reused"] == 30 + 1
    assert summary["records"] == 32
    # walk.jsonl is the table's export as it was: not even rewritten
    after = os.stat(out / "walk.jsonl")
    assert (after.st_ino, after.st_mtime_ns) == (identity.st_ino, identity.st_mtime_ns)
    assert (out / "walk.jsonl").read_bytes() == before
    assert not (out / LEGACY_CACHE).exists()
    # and the walks after it are a fresh walk's
    (root / "d2" / "f002.txt").write_text("edited\n")
    (root / "d3" / "deep" / "f003.txt").unlink()
    walk(m, out)
    assert reads == ["d2/f002.txt"]
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()


def test_an_earlier_cache_that_does_not_hold_is_not_imported(tmp_path: Path,
                                                             reads: list[str]) -> None:
    root = tmp_path / "root"
    tree(root)
    m = manifest(tmp_path, {"r": root})
    out = tmp_path / "out"
    walk(m, out)
    before = (out / "walk.jsonl").read_bytes()
    for spoil in ("settings", "walk.jsonl", "garbage", "garbled"):
        earlier_layout(out, m, 2, settings=[0, 1, False] if spoil == "settings" else None)
        if spoil == "walk.jsonl":  # not the file the cache describes
            os.utime(out / "walk.jsonl", ns=(1, 1))
        if spoil == "garbled":  # the file the cache describes by size and time, not JSON
            st = os.stat(out / "walk.jsonl")
            (out / "walk.jsonl").write_bytes(b"x" * st.st_size)
            os.utime(out / "walk.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns))
        if spoil == "garbage":
            (out / LEGACY_CACHE).write_bytes(b"\x00garbage")
        reads.clear()
        summary = walk(m, out)
        assert summary["hashed"] == 31 and len(reads) == 31, spoil
        assert (out / "walk.jsonl").read_bytes() == before
        assert not (out / LEGACY_CACHE).exists()


def test_a_root_whose_settings_changed_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    tree(one)
    tree(two)
    m = manifest(tmp_path, {"one": one, "two": two})
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    walk(m, out)
    earlier_layout(out, m, 2, root_changed="two")
    reads.clear()
    summary = walk(m, out)
    assert summary["reused"] == 31 and summary["hashed"] == 31
    walk(m, fresh)
    assert (out / "walk.jsonl").read_bytes() == (fresh / "walk.jsonl").read_bytes()


def test_a_verdict_database_of_version_2_keeps_its_verdicts(tmp_path: Path) -> None:
    from bastion.tasks.extract.store import Store

    out = tmp_path / "out"
    (out / ".bastion").mkdir(parents=True)
    db = sqlite3.connect(out / DB_NAME)
    db.execute("CREATE TABLE verdicts (sha256 TEXT NOT NULL, key TEXT NOT NULL, status TEXT "
               "NOT NULL, body TEXT NOT NULL, PRIMARY KEY (sha256, key)) WITHOUT ROWID")
    body = json.dumps({"status": "ok", "chars": 3})
    db.execute("INSERT INTO verdicts VALUES ('ab', 'k', 'ok', ?)", (body,))
    db.execute("PRAGMA user_version=2")
    db.commit()
    db.close()
    od = open_output(out)
    store = Store(out, lambda: od)
    assert list(store.verdicts()) == [("ab", "k")]
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.db.execute("SELECT count(*) FROM walk").fetchone()[0] == 0
    store.close()
    # a database of an older layout (version 1) held keys of another kind: dropped
    db = sqlite3.connect(out / DB_NAME)
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    store = Store(out, lambda: od)
    assert store.verdicts() == {}
    store.close()
    od.close()


def test_a_version_5_database_names_the_owner_of_each_plain_text_it_can_know(
        tmp_path: Path) -> None:
    """Version 5 did not say whose text a plain-named file holds: where a sha256 has one
    ``ok`` verdict, that key's; where several keys read the same bytes, nobody's (each is
    read again once rather than one given another's text)."""
    from bastion.tasks.extract.owners import owners
    from bastion.tasks.extract.store import Store

    out = tmp_path / "out"
    od = open_output(out)
    Store(out, lambda: od).db.close()  # today's layout, then made version 5 again
    db = sqlite3.connect(out / DB_NAME)
    db.execute("DROP TABLE plain")
    body = json.dumps({"status": "ok", "chars": 3})
    db.executemany("INSERT INTO verdicts (sha256, key, status, body) VALUES (?, ?, ?, ?)",
                   [("aa", "k1", "ok", body), ("bb", "k1", "ok", body),
                    ("bb", "k2", "ok", body), ("cc", "k1", "error", body),
                    ("dd", "k1", "error", body), ("dd", "k2", "ok", body)])
    db.execute("PRAGMA user_version=5")
    db.commit()
    db.close()
    store = Store(out, lambda: od)
    assert owners(store.db, ["aa", "bb", "cc", "dd"]) == {"aa": "k1", "dd": "k2"}
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()
    od.close()


def test_a_database_without_walk_dirs_is_walked_again_reading_nothing(
        tmp_path: Path, reads: list[str]) -> None:
    """A database of the layout before ``walk_dirs`` (version 3 without that table or
    ``walk_state.dirs``): the re-walk compares with the rows, reads no file and leaves
    walk.jsonl as it was, and makes each directory's walk_dirs row for the next."""
    root = tmp_path / "root"
    tree(root)
    m = manifest(tmp_path, {"r": root})
    out = tmp_path / "out"
    walk(m, out)
    db = sqlite3.connect(out / DB_NAME)
    with db:
        db.execute("DROP TABLE walk_dirs")
        db.execute("DELETE FROM walk_state WHERE name = 'dirs'")
    db.close()
    identity = os.stat(out / "walk.jsonl")
    reads.clear()
    summary = walk(m, out)
    assert reads == [] and summary["hashed"] == 0 and summary["reused"] == 30 + 1
    after = os.stat(out / "walk.jsonl")
    assert (after.st_ino, after.st_mtime_ns) == (identity.st_ino, identity.st_mtime_ns)
    db = sqlite3.connect(out / DB_NAME)
    try:
        dirs = {(r, bytes(d)) for r, d in db.execute("SELECT root, dir FROM walk_dirs")}
        assert {(r, bytes(d)) for r, d in db.execute("SELECT DISTINCT root, dir FROM walk")} <= dirs
    finally:
        db.close()
