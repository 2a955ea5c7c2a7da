"""bastion.tasks.walk.stage.RootWalk: one root's traversal, and one owner's share of it."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk.stage import HelperShare, RootWalk, Walker
from bastion.tasks.walk.table import decode


def write_manifest(directory: Path, roots: list[dict]) -> Path:
    path = directory / "m.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "roots": roots}, sort_keys=False))
    return path


def tree(root: Path) -> None:
    for rel in ("a.txt", "sub/b.txt", "sub/deeper/c.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode() + b"\n")


def test_owner_shares_partition_a_root(tmp_path: Path) -> None:
    """RootWalk with ``owners`` > 1 records only the entries its owner owns; the shares of
    all owners, walked one after the other in this process, are exactly a serial walk."""
    root = tmp_path / "root"
    tree(root)
    for i in range(30):
        (root / "sub" / f"n{i}.txt").write_bytes(b"%d\n" % i)
    os.symlink("sub", root / "link")
    os.mkfifo(root / "pipe")
    m = load_manifest(write_manifest(tmp_path, [{"name": "r", "path": "root"}]))
    (tmp_path / "out").mkdir()
    serial = collecting(m, tmp_path / "out")
    RootWalk(serial, m.roots[0]).run()
    shared = collecting(m, tmp_path / "out")
    lines = []
    for owner in range(3):
        before = len(fresh(shared))
        RootWalk(shared, m.roots[0], owner, 3).run()
        lines.append({row[3] for row, _ in fresh(shared)[before:]})
    assert all(lines) and not (lines[0] & lines[1] or lines[1] & lines[2] or lines[0] & lines[2])
    assert sorted(fresh(shared)) == sorted(fresh(serial))
    assert shared.stats == serial.stats


def collecting(m, out: Path) -> Walker:
    """A walker whose rows are collected in its share (as a forked helper's are), not written."""
    w = Walker(m, open_output(out))
    assert w.table.count_before == 0
    w.share = HelperShare()
    return w


def fresh(w: Walker) -> list:
    """The rows a collecting walker made: ``(row, replaced)``."""
    assert w.share is not None
    return w.share.fresh


def test_a_root_walk_records_through_its_walker(tmp_path: Path) -> None:
    """Rows found again on a re-walk, new rows on a first walk; the Selector decides."""
    root = tmp_path / "root"
    tree(root)
    (root / "skip.tmp").write_bytes(b"x\n")
    m = load_manifest(write_manifest(tmp_path, [{"name": "r", "path": "root",
                                                 "exclude": ["*.tmp", "sub/deeper/"]}]))
    (tmp_path / "out").mkdir()
    od = open_output(tmp_path / "out")
    w = Walker(m, od)
    RootWalk(w, m.roots[0]).run()
    assert sorted(decode(row[3]) for row in w.table.rows) == ["a.txt", "sub/b.txt"]
    assert w.seen == 0 and w.stats.hashed == 2
    assert w.table.finish(w.listed, w.seen) == 2
    w.write()
    w.close()
    again = Walker(m, od)
    RootWalk(again, m.roots[0]).run()
    assert again.table.rows == [] and again.seen == 2 and again.stats.reused == 2
    assert again.table.finish(again.listed, again.seen) == 2 and again.unchanged()
