"""The output directory as a value (issue 33, "a run is plain values"): a run holds its lock
and the lock's :class:`OutputDir` and passes the ``OutputDir`` to what writes; nothing is
registered per process, a name outside the output is refused by the ``OutputDir`` itself, and
a file outside any output is written by :func:`write_file_atomically`, which never looks for
an output."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import bastion.tasks.output.atomic as atomic
import bastion.tasks.output.directory as directory
from bastion.errors import LockedError
from bastion.tasks.extract import stamp
from bastion.tasks.extract.toolcache import TOOLS_CACHE, ToolCache
from bastion.tasks.forgotten import FORGOTTEN, set_forgotten
from bastion.tasks.output.atomic import STATE_DIR, OutputLock, write_file_atomically
from bastion.tasks.output.directory import GROUP, open_output

REPO = Path(__file__).resolve().parent.parent


def test_no_registry_of_open_outputs_is_left() -> None:
    """Nothing in tasks/output keeps the outputs or locks a process has open."""
    for name in ("held", "find", "close_all", "_held"):
        assert not hasattr(directory, name), name
    assert not hasattr(OutputLock, "_held") and not hasattr(OutputLock, "release_all")
    for name in ("atomic_write", "read_json", "read_bytes", "open_read", "unlink", "rmtree",
                 "output", "makedirs", "remove_stale_temps", "stat"):
        assert not hasattr(atomic, name), name  # the writers and readers chosen by path
    found = subprocess.run(["grep", "-rn", "_held", str(REPO / "tasks" / "output")],
                           capture_output=True, text=True)
    assert found.stdout == ""


def test_a_second_lock_in_the_same_process_waits_for_the_first_release(tmp_path: Path) -> None:
    """A lock is its taker's value, not a per-process one handed out again: a second taker in
    the same process is refused until the first releases it."""
    first = OutputLock.acquire(tmp_path / "out")
    with pytest.raises(LockedError, match="another bastion run"):
        OutputLock.acquire(tmp_path / "out")
    first.release()
    first.release()  # idempotent
    with OutputLock.acquire(tmp_path / "out") as second:
        assert second.dir.path == tmp_path / "out"
    with OutputLock.acquire(tmp_path / "out"):
        pass


@pytest.mark.parametrize("name", ["/etc/x", "/x", "a/../../x", "..", "a//b", "./a", "a/."])
def test_a_path_is_not_a_name_inside_the_output(tmp_path: Path, name: str) -> None:
    """The OutputDir writes, reads and removes only names under it: a path given where such
    a name is meant (absolute, or climbing out) is a ValueError, and nothing is written."""
    with open_output(tmp_path / "out") as od:
        before = sorted(p.name for p in (tmp_path / "out").iterdir())
        with pytest.raises(ValueError, match="not a name inside the output"):
            od.write(name, b"x\n")
        with pytest.raises(ValueError):
            od.unlink(name)
        with pytest.raises(ValueError):
            od.read(name)
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before
    assert not Path("/x").exists()


def test_a_file_outside_an_output_is_written_by_path_without_looking_for_one(
        tmp_path: Path) -> None:
    """``write_file_atomically`` never consults an output: with a group-mode output locked,
    a file named by a path inside it is still written as a plain file, owner-only (the
    output's writes give 0640), and through no descriptor of the lock."""
    with OutputLock.acquire(tmp_path / "out", GROUP) as lock:
        lock.dir.write("through.txt", b"through the descriptor\n")
        write_file_atomically(tmp_path / "out" / "by-path.txt", b"by its path\n")
        assert stat.S_IMODE(os.stat(tmp_path / "out" / "through.txt").st_mode) == 0o640
        assert stat.S_IMODE(os.stat(tmp_path / "out" / "by-path.txt").st_mode) == 0o600


def test_writes_follow_the_descriptor_after_the_output_path_is_swapped(tmp_path: Path) -> None:
    """The output moved away and a symlink to another directory put at its path after the
    lock was taken: the stamp, the forgotten list, the tools cache and a record all land in
    the directory the lock checked, none in the other."""
    out, moved, elsewhere = tmp_path / "out", tmp_path / "moved", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with OutputLock.acquire(out) as lock:
        od = lock.dir
        os.rename(out, moved)
        os.symlink(elsewhere, out)
        stamp.save(od, "inputs", 1)
        set_forgotten(od, {"extract:r/a.txt"})
        cache = ToolCache(tmp_path / "nowhere", no_external=True)
        cache.known["x"] = [1]
        cache.save(od)
        od.write("notes/a.txt", b"a note\n")
        od.write_json("notes.json", {"records": 1})
        assert stamp.has_stamp(od)
    assert list(elsewhere.iterdir()) == []
    for rel in (stamp.STAMP, f"{STATE_DIR}/{FORGOTTEN}", TOOLS_CACHE, "notes/a.txt",
                "notes.json"):
        assert (moved / rel).is_file(), rel


TYPED = '''
from pathlib import Path
from bastion.tasks.extract import stamp
from bastion.tasks.extract.store import Store
from bastion.tasks.extract.toolcache import ToolCache
from bastion.tasks.forgotten import set_forgotten
from bastion.tasks.manifest import load_manifest
from bastion.tasks.walk.stage import run_walk

out = Path("/tmp/out")
stamp.save(out, "x", 1)
set_forgotten(out, set())
ToolCache(out, True).save(out)
run_walk(load_manifest(Path("m.yaml")), out)
Store(out)
'''


@pytest.mark.slow
def test_a_path_given_where_the_output_is_meant_is_a_type_error(tmp_path: Path) -> None:
    """What writes inside the output takes its OutputDir: handing it a path instead is a
    mypy error at every one of these calls, not a write by path at run time."""
    pytest.importorskip("mypy")
    from tests.test_types import installed_shape

    shape = installed_shape(tmp_path / "shape")
    (tmp_path / "calls.py").write_text(TYPED)
    env = {**os.environ, "MYPYPATH": str(shape)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--follow-imports", "silent",
         str(tmp_path / "calls.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    errors = [ln for ln in done.stdout.splitlines() if "calls.py:" in ln and ": error:" in ln]
    lines = {int(ln.split("calls.py:")[1].split(":")[0]) for ln in errors}
    assert lines == {11, 12, 13, 14, 15}, done.stdout
