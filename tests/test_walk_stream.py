"""The walk's rewrite as a stream (tasks/walk/stage.py ``Walker.write``): new records spilled in sorted
runs to scratch files and merged with the records kept, give walk.jsonl, the stat cache and the
delta byte for byte as holding every row does — on a first walk, on a re-walk with changes,
additions and removals, and from a stat cache of the earlier format."""

from __future__ import annotations

import marshal
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.tasks.walk import stage as walk_module
from bastion.tasks.extract.delta import DELTA
from bastion.tasks.manifest import load_manifest
from bastion.tasks.walk.statcache import CACHE_NAME
from bastion.tasks.walk.stage import run_walk


def tree(root: Path, n: int) -> None:
    for i in range(n):
        d = root / f"d{i % 7}" / ("deep" if i % 3 == 0 else "")
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:04d}.txt").write_text(f"file {i}\n")
    (root / "d1" / "odd-\udcff.txt".encode("utf-8", "surrogateescape").decode(
        "utf-8", "surrogateescape")).write_bytes(b"not utf-8 name\n")
    os.symlink("d1", root / "link")  # a record that depends on more than the stat


def manifest(tmp: Path, root: Path) -> Path:
    m = tmp / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk]\n")
    return m


def outputs(out: Path) -> dict[str, bytes]:
    got = {"walk.jsonl": (out / "walk.jsonl").read_bytes()}
    cache = marshal.loads((out / CACHE_NAME).read_bytes())
    cache.pop("walk")  # the walk.jsonl's mtime
    got["cache"] = marshal.dumps(cache)
    if (out / DELTA).exists():
        delta = marshal.loads((out / DELTA).read_bytes())
        got["delta"] = marshal.dumps({k: v for k, v in delta.items() if k not in ("from", "to")})
    return got


def walk(m: Path, out: Path) -> dict:
    return run_walk(load_manifest(m), out)


@pytest.mark.parametrize("spill", [1, 7, 1000])
def test_spilled_runs_write_what_one_sort_writes(tmp_path: Path, spill: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    tree(root, 120)
    m = manifest(tmp_path, root)
    plain, spilled = tmp_path / "plain", tmp_path / "spilled"
    walk(m, plain)  # SPILL_ROWS is 100,000: one sort in memory
    monkeypatch.setattr(walk_module, "SPILL_ROWS", spill)
    assert walk(m, spilled)["records"] == 122  # 120 files, the odd name, the link
    assert outputs(spilled) == outputs(plain)
    # a re-walk with edits, additions and removals, spilled or not, and a fresh walk agree
    (root / "d2" / "f0002.txt").write_text("edited\n")
    (root / "d3" / "new.txt").write_text("new\n")
    (root / "d4" / "f0004.txt").unlink()
    fresh = tmp_path / "fresh"
    walk(m, spilled)
    monkeypatch.setattr(walk_module, "SPILL_ROWS", 100_000)
    walk(m, plain)
    walk(m, fresh)
    assert outputs(spilled) == outputs(plain)
    assert outputs(spilled)["walk.jsonl"] == outputs(fresh)["walk.jsonl"]
    assert outputs(spilled)["cache"] == outputs(fresh)["cache"]
    assert not list((spilled / ".bastion").glob("*tmp*")), "a scratch file was left"


def test_a_rewalk_from_a_cache_of_the_earlier_format(tmp_path: Path) -> None:
    """A cache written before the packed format is read (no file hashed again) and the
    changed walk it leads to is the one a fresh walk makes."""
    root = tmp_path / "root"
    tree(root, 40)
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    walk(m, out)
    from bastion.tasks.walk.statcache import StatCache

    new = StatCache.load(out, walk_module.Walker(load_manifest(m), out).settings,
                         load_manifest(m).roots)
    old = marshal.loads((out / CACHE_NAME).read_bytes())
    old.pop("format"), old.pop("lines")
    old["roots"] = {name: [settings, {rel: dict(new.roots[name][rel].items())
                                      for rel in dirs}]
                    for name, (settings, dirs) in old["roots"].items()}
    (out / CACHE_NAME).write_bytes(marshal.dumps(old))
    (root / "d5" / "late.txt").write_text("late\n")
    summary = walk(m, out)
    assert summary["reused"] == 41 and summary["hashed"] == 1
    fresh = tmp_path / "fresh"
    walk(m, fresh)
    assert outputs(out)["walk.jsonl"] == outputs(fresh)["walk.jsonl"]
    assert outputs(out)["cache"] == outputs(fresh)["cache"]


def decoded(out: Path) -> dict:
    """The cache as its answers: every entry by (root, directory, name), and each line's
    (root, directory): what a patched cache must share with a rewritten one."""
    from bastion.tasks.walk.statcache import PackedDir, _unpacked

    data = marshal.loads((out / CACHE_NAME).read_bytes())
    entries, numbered = {}, []
    for root, (settings, dirs) in data["roots"].items():
        for rel, (names, packed, others) in dirs.items():
            numbered.append((root, rel))
            for name, c in PackedDir(names, _unpacked(packed, "q"), others).items():
                entries[(root, rel, name)] = c
    lines = [numbered[d] for d in _unpacked(data["lines"], "I")]
    return {"entries": entries, "lines": lines, "count": data["count"],
            "settings": data["settings"], "roots": list(data["roots"])}


def two_roots(tmp: Path) -> Path:
    for name in ("one", "two"):
        tree(tmp / name, 60)
    m = tmp / "m2.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: one\n    path: {tmp / 'one'}\n"
                 f"  - name: two\n    path: {tmp / 'two'}\nstages: [walk]\n")
    return m


@pytest.mark.parametrize("copy_range", [True, False])  # the kernel's copy, or read and write
@pytest.mark.parametrize("change", ["edit", "add", "add-new-dir", "remove", "mixed", "link"])
def test_a_small_change_is_patched_as_a_rewrite_writes_it(tmp_path: Path, change: str,
                                                         copy_range: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from bastion.tasks.walk import patch as walkpatch

    if not copy_range:
        def no_copy_range(*args):
            raise OSError(errno.EXDEV, "no copy_file_range here")

        monkeypatch.setattr(os, "copy_file_range", no_copy_range)

    m = two_roots(tmp_path)
    patched, streamed, fresh = tmp_path / "patched", tmp_path / "streamed", tmp_path / "fresh"
    walk(m, patched)
    walk(m, streamed)
    one, two = tmp_path / "one", tmp_path / "two"
    if change in ("edit", "mixed"):
        (one / "d2" / "f0002.txt").write_text("edited\n")
        (two / "d3" / "deep" / "f0003.txt").write_text("edited too\n")
    if change in ("add", "mixed"):
        (one / "d4" / "aaa-first.txt").write_text("new\n")
        (two / "d6" / "zzz-last.txt").write_text("new\n")
        (one / "d0" / "deep" / "f0000.txt.bak").write_text("between\n")
    if change in ("add-new-dir", "mixed"):
        (one / "brand" / "new").mkdir(parents=True)
        (one / "brand" / "new" / "x.txt").write_text("in a new directory of the first root\n")
        (two / "zz").mkdir()
        (two / "zz" / "y.txt").write_text("last of all\n")
    if change in ("remove", "mixed"):
        (one / "d5" / "f0005.txt").unlink()
        (two / "d1" / "f0001.txt").unlink()
        (two / "d0" / "deep" / "f0000.txt").unlink()
    if change == "link":
        (one / "link").unlink()
        os.symlink("d2", one / "link")
    used = []
    real_plan = walkpatch.Patch.plan
    def plan(cls, *a):
        used.append(real_plan.__func__(cls, *a))
        return used[-1]

    monkeypatch.setattr(walkpatch.Patch, "plan", classmethod(plan))
    walk(m, patched)
    assert used and used[-1] is not None, "the change was not patched"
    monkeypatch.setattr(walkpatch.Patch, "plan", classmethod(lambda cls, *a: None))
    walk(m, streamed)
    walk(m, fresh)
    assert outputs(patched)["walk.jsonl"] == outputs(fresh)["walk.jsonl"]
    assert outputs(patched)["delta"] == outputs(streamed)["delta"]
    assert decoded(patched) == decoded(fresh)
    # and the patched cache carries the next walk: unchanged, then another change
    monkeypatch.setattr(walkpatch.Patch, "plan", real_plan)
    assert walk(m, patched)["hashed"] == 0
    (two / "d2" / "later.txt").write_text("later\n")
    (one / "d1" / "f0001.txt").unlink()
    walk(m, patched)
    walk(m, fresh)
    assert outputs(patched)["walk.jsonl"] == outputs(fresh)["walk.jsonl"]
    assert decoded(patched) == decoded(fresh)


def test_a_big_change_is_not_patched(tmp_path: Path) -> None:
    from bastion.tasks.walk.statcache import StatCache
    from bastion.tasks.walk.patch import Patch

    cache = StatCache(count=1000, dirs=[], lines=None)
    assert Patch.plan(cache, bytearray(1000), []) is None  # not streamable
    root = tmp_path / "root"
    tree(root, 200)
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    walk(m, out)
    w = walk_module.Walker(load_manifest(m), out)
    marks = bytearray(b"\1" * w.cache.count)
    assert Patch.plan(w.cache, marks, []) is not None
    marks[:100] = bytes(100)  # 100 of 202 lines gone: more than MIN_CHANGES, > 1%
    assert Patch.plan(w.cache, marks, []) is None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(values=st.lists(st.integers(0, 2**62), max_size=40), by=st.integers(-2**20, 2**20))
def test_a_constant_shift_of_line_numbers_is_an_addition(values: list[int], by: int) -> None:
    """walkpatch.shifted (one big-integer addition) against adding to each number."""
    from array import array

    from bastion.tasks.walk.patch import shifted

    values = [max(v, -by) for v in values]  # line numbers stay >= 0
    assert list(shifted(array("q", values), by)) == [v + by for v in values]
