"""An incrementally maintained output equals a fresh one: for random sequences of edits,
deletions, renames, copies, type changes and tool-set changes on a small tree, ``bastion
compare incremental fresh`` finds no difference after every step (texts and sidecars that no
record references any more are removed at the end of each run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs

NAMES = ["a.txt", "b.md", "c.json", "d.csv", "sub/e.txt", "sub/f.html"]
BODIES = [b"alpha beta\n", b"gamma\n", b'{"k": "delta"}\n', b"x,y\n1,2\n",
          b"<p>epsilon</p>\n", b"alpha beta\n"]  # a duplicate on purpose

step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(BODIES)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("copy"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("tools"), st.booleans(), st.none()),
)


def apply(root: Path, op: tuple) -> None:
    kind, a, b = op
    src = root / a if isinstance(a, str) else None
    if kind == "write":
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_bytes(b)
    elif kind == "delete":
        src.unlink(missing_ok=True)
    elif kind in ("rename", "copy") and src.exists() and a != b:
        dest = root / b
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.move if kind == "rename" else shutil.copyfile)(src, dest)


def sweep(m: Path, out: Path, no_external: bool) -> None:
    args = ["sweep", str(m), "--out", str(out), "-q", "-j", "1"]
    assert main(args + (["--no-external"] if no_external else [])) == 0


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=4))
@pytest.mark.slow
def test_incremental_output_equals_a_fresh_one(tmp_path_factory, steps: list) -> None:
    tmp = tmp_path_factory.mktemp("inc")
    root = tmp / "root"
    root.mkdir()
    for name, body in zip(NAMES[:4], BODIES):
        (root / name).write_bytes(body)
    m = tmp / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    inc = tmp / "inc"
    no_external = True
    sweep(m, inc, no_external)
    for n, op in enumerate(steps):
        if op[0] == "tools":
            no_external = op[1]
        else:
            apply(root, op)
        sweep(m, inc, no_external)
        fresh = tmp / f"fresh{n}"
        sweep(m, fresh, no_external)
        assert compare_outputs(inc, fresh) == [], (steps[:n + 1])


@pytest.mark.parametrize("copy_range", [True, False])  # the kernel's copy, or read and write
def test_a_change_plans_only_what_changed(tmp_path, monkeypatch, copy_range) -> None:
    """After a complete run, a sweep that finds one file edited, one deleted and one added
    plans just the two it must read (tasks/extract/table.py); the others' records are copied, and the
    output still equals a fresh run's."""
    import errno
    import os

    import bastion.tasks.extract.plan

    if not copy_range:
        def no_copy_range(*args):
            raise OSError(errno.EXDEV, "no copy_file_range here")

        monkeypatch.setattr(os, "copy_file_range", no_copy_range)

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    for i in range(30):
        (root / f"f{i:02}.txt").write_text(f"file {i}\n")
    (root / "sub" / "same.txt").write_text("file 5\n")  # the bytes of f05.txt
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    out = tmp_path / "out"
    sweep(m, out, True)
    planned: list[int] = []
    real = bastion.tasks.extract.plan.plan

    def counting(walk, *a, **k):
        walk = list(walk)
        planned.append(len(walk))
        return real(walk, *a, **k)

    monkeypatch.setattr(bastion.tasks.extract.plan, "plan", counting)
    (root / "f03.txt").write_text("edited\n")
    (root / "f05.txt").unlink()  # its text stays: sub/same.txt has the same bytes
    (root / "new.txt").write_text("a new file\n")
    sweep(m, out, True)
    assert planned == [2]
    import json

    summary = json.loads((out / "extract.summary.json").read_text())
    assert summary["records"] == 31 and summary["extracted"] == 2 and summary["reused"] == 29
    lines = (out / "extract.jsonl").read_bytes().splitlines()
    by_path = {json.loads(line)["path"]: json.loads(line)["reused"] for line in lines}
    assert len(lines) == 31 and by_path.pop("f03.txt") is False and by_path.pop("new.txt") is False
    assert set(by_path.values()) == {True}  # the copied records were flagged reused
    fresh = tmp_path / "fresh"
    sweep(m, fresh, True)
    assert compare_outputs(out, fresh) == []
    assert json.loads((fresh / "extract.summary.json").read_text())["counts"] == summary["counts"]
    # a second change: now the kept records' flags are sparse (the spans cut around them)
    (root / "f07.txt").write_text("edited later\n")
    sweep(m, out, True)
    flags = {json.loads(line)["path"]: json.loads(line)["reused"]
             for line in (out / "extract.jsonl").read_bytes().splitlines()}
    assert [p for p, reused in flags.items() if not reused] == ["f07.txt"] and len(flags) == 31
    sweep(m, fresh, True)
    assert compare_outputs(out, fresh) == []
