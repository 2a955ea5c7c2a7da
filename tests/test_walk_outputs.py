"""The walk never walks a bastion output, and says what it could not read (partial walks).

Real trees and the real ``bastion`` command (a subprocess); as root, the unreadable tree is
walked by an unprivileged user (``setpriv``), so permission bits stop it as they stop anyone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from bastion.tasks.output.atomic import OUTPUT_TAG, OUTPUT_TAG_TEXT
from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk.stage import WalkStats, describe_problems, run_walk

REPO = Path(__file__).resolve().parent.parent
BASTION = [sys.executable, "-m", "bastion"]


def write_manifest(directory: Path, roots: list[dict[str, Any]], name: str = "m.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump({"version": 1, "roots": roots}, sort_keys=False))
    return path


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "walk.jsonl").read_bytes().splitlines()]


def bastion(*argv: str, user: list[str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([*(user or []), *BASTION, *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def tree(root: Path) -> None:
    for rel in ("a.txt", "sub/b.txt", "sub/deeper/c.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode() + b"\n")


# -- outputs -------------------------------------------------------------------------------


def test_the_output_directory_gets_its_tag(tmp_path: Path) -> None:
    tree(tmp_path / "root")
    out = tmp_path / "out"
    run_walk(load_manifest(write_manifest(tmp_path, [{"name": "r", "path": "root"}])),
             open_output(out))
    tag = (out / OUTPUT_TAG).read_bytes()
    assert tag == OUTPUT_TAG_TEXT
    # the cache directory tag standard: the file starts with this exact signature
    assert tag.startswith(b"Signature: 8a477f597d28d172789f06886806bc55")


@pytest.mark.slow
def test_readme_first_command_then_another_out_walks_a_clean_tree(tmp_path: Path) -> None:
    """README's first command writes examples/docs/.agent/ inside the root; a run with another
    --out then walks exactly what a run on a clean copy of the tree walks."""
    clean, used = tmp_path / "clean", tmp_path / "used"
    for copy in (clean, used):
        shutil.copytree(REPO / "examples", copy)
    r = bastion("sweep", str(used / "manifest.yaml"), "-q", "-j", "1", "--no-external")
    assert r.returncode == 0, r.stderr
    agent = used / "docs" / ".agent"
    assert (agent / "walk.jsonl").is_file() and (agent / OUTPUT_TAG).is_file()
    for copy in (clean, used):
        r = bastion("walk", str(copy / "manifest.yaml"), "--out",
                    str(tmp_path / f"out-{copy.name}"), "-q")
        assert r.returncode == 0, r.stderr
    c, u = records(tmp_path / "out-clean"), records(tmp_path / "out-used")
    assert len(u) == len(c) == 16
    assert [r["path"] for r in u] == [r["path"] for r in c]
    assert not any(r["path"].startswith(".agent") for r in u)
    summary = json.loads((tmp_path / "out-used" / "walk.summary.json").read_text())
    assert summary["files"] == 16 and summary["outputs_skipped"] == 1
    assert summary["partial"] is False
    assert any("docs/.agent: a bastion output" in w for w in summary["warning_samples"])
    # and README's first command again, in the other order: its own output is not walked
    r = bastion("sweep", str(used / "manifest.yaml"), "-q", "-j", "1", "--no-external")
    assert r.returncode == 0, r.stderr
    assert [r["path"] for r in records(agent)] == [r["path"] for r in c]


def test_tagged_directories_anywhere_are_pruned(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree(root)
    old = root / "sub" / "old-output"
    old.mkdir()
    (old / OUTPUT_TAG).write_bytes(OUTPUT_TAG_TEXT)
    (old / "walk.jsonl").write_bytes(b"{}\n")
    (old / "extract").mkdir()
    (old / "extract" / "x.txt").write_bytes(b"text\n")
    os.symlink("sub/old-output", root / "link-to-output")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root", "follow_symlinks": True}])
    summary = run_walk(load_manifest(m), open_output(tmp_path / "out"))
    assert sorted(r["path"] for r in records(tmp_path / "out")) == [
        "a.txt", "sub/b.txt", "sub/deeper/c.txt"]
    # the directory and the followed link to it: each a skip the summary counts
    assert summary["outputs_skipped"] == 2 and summary["warnings"] == 2
    assert summary["partial"] is False
    # a root that is itself a bastion output records nothing
    (root / OUTPUT_TAG).write_bytes(OUTPUT_TAG_TEXT)
    summary = run_walk(load_manifest(m), open_output(tmp_path / "out2"))
    assert records(tmp_path / "out2") == [] and summary["outputs_skipped"] == 1


def test_other_tags_and_lookalikes_are_walked(tmp_path: Path) -> None:
    """Only bastion's own tag marks an output: another program's cache tag, a tag that is a
    symlink, a FIFO or a directory are files like any other (and a FIFO is never opened)."""
    root = tmp_path / "root"
    for name, make in (
        ("cargo", lambda p: p.write_bytes(b"Signature: 8a477f597d28d172789f06886806bc55\n"
                                          b"# This file is a cache directory tag created by "
                                          b"cargo.\n")),
        ("link", lambda p: os.symlink(tmp_path / "real-tag", p)),
        ("fifo", lambda p: os.mkfifo(p)),
        ("dir", lambda p: p.mkdir()),
        ("short", lambda p: p.write_bytes(OUTPUT_TAG_TEXT[:30])),
    ):
        (root / name).mkdir(parents=True)
        (root / name / "kept.txt").write_bytes(name.encode())
        make(root / name / OUTPUT_TAG)
    (tmp_path / "real-tag").write_bytes(OUTPUT_TAG_TEXT)
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    summary = run_walk(load_manifest(m), open_output(tmp_path / "out"))
    paths = {r["path"] for r in records(tmp_path / "out")}
    for name in ("cargo", "link", "fifo", "dir", "short"):
        assert f"{name}/kept.txt" in paths, name
    assert summary["outputs_skipped"] == 0 and summary["warnings"] == 0


# -- partial walks -------------------------------------------------------------------------


@pytest.fixture()
def shared_tmp() -> Iterator[Path]:
    """A directory another user can enter (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="bastion-walk-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in d.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(d)


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permission bits cannot be tested")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_unreadable_directory_and_file_make_a_partial_walk(shared_tmp: Path) -> None:
    root = shared_tmp / "root"
    tree(root)
    (root / "locked").mkdir()
    (root / "locked" / "x.txt").write_bytes(b"x\n")
    (root / "secret.txt").write_bytes(b"s\n")
    (root / "locked").chmod(0)
    (root / "secret.txt").chmod(0)
    out = shared_tmp / "out"
    out.mkdir(mode=0o700)
    user = _unprivileged()
    if user:  # the output is the runner's own (docs/security.md: a loose one is refused)
        os.chown(out, 65534, 65534)
    m = write_manifest(shared_tmp, [{"name": "r", "path": "root"}])
    r = bastion("walk", str(m), "--out", str(out), "-q", user=user)
    assert r.returncode == 3, r.stderr  # completed, but partial (docs/architecture.md)
    summary = json.loads((out / "walk.summary.json").read_text())
    assert summary["partial"] is True
    assert summary["unreadable"] == 1 and summary["errors"] == 1 and summary["vanished"] == 0
    assert "locked" in summary["warning_samples"][0]
    line = describe_problems(summary, out)
    assert line is not None and "\n" not in line
    assert line == (f"walk: 1 warning (1 unreadable), 1 file with a read error; first: "
                    f"r/locked: cannot read directory: Permission denied; details in "
                    f"{out / 'walk.summary.json'} and {out / 'walk.jsonl'}")
    err = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
    assert line in err.splitlines(), err  # printed under -q too


DESCRIBED = [
    # summary counters, the line (OUT for the output directory)
    ({"warnings": 2, "vanished": 1, "outputs_skipped": 1, "warning_samples": ["r/x: gone"]},
     "walk: 2 warnings (1 vanished, 1 bastion output skipped); first: r/x: gone; "
     "details in OUT/walk.summary.json"),
    ({"warnings": 3, "unreadable": 3}, "walk: 3 warnings (3 unreadable); "
                                       "details in OUT/walk.summary.json"),
    ({"errors": 2}, "walk: 2 files with a read error; details in OUT/walk.summary.json and "
                    "OUT/walk.jsonl"),
    ({"warnings": 1, "warning_samples": ["walk helper 1 failed (…): its share walked again"]},
     "walk: 1 warning; first: walk helper 1 failed (…): its share walked again; "
     "details in OUT/walk.summary.json"),
]


@pytest.mark.parametrize("counters,line", DESCRIBED)
def test_describe_problems(counters: dict[str, Any], line: str) -> None:
    assert describe_problems(counters, Path("OUT")) == line


def test_clean_walk_has_nothing_to_describe(tmp_path: Path) -> None:
    tree(tmp_path / "root")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    summary = run_walk(load_manifest(m), open_output(tmp_path / "out"))
    assert summary["partial"] is False and summary["unreadable"] == 0
    assert describe_problems(summary, tmp_path / "out") is None


PARTIAL = [
    # counters, partial
    ({}, False),
    ({"vanished": 2, "warnings": 2}, False),  # gone before it was read: nothing left to read
    ({"outputs_skipped": 1, "warnings": 1}, False),  # pruned on purpose
    ({"warnings": 1}, False),  # a walk helper failed: its share was walked again
    ({"unreadable": 1, "warnings": 1}, True),
    ({"errors": 1}, True),
]


@pytest.mark.parametrize("counters,partial", PARTIAL)
def test_what_makes_a_walk_partial(counters: dict[str, int], partial: bool) -> None:
    assert WalkStats(**counters).partial is partial


def test_helper_counts_round_trip() -> None:
    a = WalkStats(files=3, unreadable=1, vanished=2, outputs_skipped=1)
    a.warn("one")
    b = WalkStats()
    b.add(a.counts(), a.warning_samples)
    assert b == a
    with pytest.raises(ValueError):
        b.add([1, 2], [])



def test_a_hostile_name_in_a_walk_problem_prints_escaped(shared_tmp: Path) -> None:
    """A real directory named with a clear-screen, a title-setting OSC, a bell and a newline
    followed by a fake error line, unreadable to the user running the walk: the problem line
    (printed under -q) shows the name escaped, on one line; nothing reaches the terminal raw."""
    root = shared_tmp / "root"
    tree(root)
    hostile = "x\x1b[2J\x1b]0;owned\x07\nbastion: error: fake \u202eline"
    (root / hostile).mkdir()
    (root / hostile / "y.txt").write_bytes(b"y\n")
    (root / hostile).chmod(0)
    out = shared_tmp / "out"
    out.mkdir(mode=0o700)
    user = _unprivileged()
    if user:
        os.chown(out, 65534, 65534)
    m = write_manifest(shared_tmp, [{"name": "r", "path": "root"}])
    r = bastion("walk", str(m), "--out", str(out), "-q", user=user)
    assert r.returncode == 3, r.stderr
    err = r.stderr
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err, repr(err)
    assert "fake" not in "".join(ln for ln in err.splitlines() if ln.startswith("bastion:"))
    problem = [ln for ln in err.splitlines() if ln.startswith("walk: 1 warning")]
    assert len(problem) == 1, err
    assert ("r/x\\x1b[2J\\x1b]0;owned\\x07\\x0abastion: error: fake \\u202eline: cannot read "
            "directory: Permission denied") in problem[0]


def test_error_records_and_a_partial_walk_exit_4_and_say_both(shared_tmp: Path) -> None:
    """A sweep whose walk could not read a directory and whose extract made error records
    (a broken PDF and DOCX): exit 4, "both 2 and 3" (it was 3, hiding the errors), and both
    the walk's problem line and the extract's error count are printed."""
    root = shared_tmp / "root"
    tree(root)
    (root / "locked").mkdir()
    (root / "locked" / "x.txt").write_bytes(b"x\n")
    (root / "locked").chmod(0)
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\ngarbage\n")
    (root / "broken.docx").write_bytes(b"PK\x03\x04garbage")
    out = shared_tmp / "out"
    out.mkdir(mode=0o700)
    user = _unprivileged()
    if user:
        os.chown(out, 65534, 65534)
    m = write_manifest(shared_tmp, [{"name": "r", "path": "root"}])
    r = bastion("sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external",
                user=user)
    assert r.returncode == 4, r.stderr
    assert "walk: 1 warning (1 unreadable)" in r.stderr
    errors = json.loads((out / "extract.summary.json").read_text())["counts"]["error"]
    assert errors >= 2 and f"{errors} errors" in r.stderr, r.stderr
