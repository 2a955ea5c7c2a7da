"""A co-user racing the walk (issue 32): another uid, who can write the swept tree, swaps its
directories for symlinks to a root-only directory outside the tree, and its files for symlinks
to a root-only secret and for FIFOs, in a loop, while root walks it.  Every directory and file
is opened beneath the root's descriptor with no symlink followed (bastion.tasks.walk.beneath),
without blocking, and checked against the stat that made its record: nothing outside the tree
is read, and no walk hangs.

The racer is a real second user (``setpriv`` to ``bastion-test-user``, created when missing)
exchanging names atomically with ``renameat2(RENAME_EXCHANGE)``; each walk is a real
``bastion walk`` subprocess with a timeout, so a hang fails the test instead of stalling it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from bastion.tasks.walk.beneath import foreign_link, open_beneath, uses_openat2
from procutil import before_a_writer  # tests/ is on sys.path
from seconduser import second_user  # tests/ is on sys.path

REPO = Path(__file__).resolve().parent.parent
SECRET = b"root-only secret: shadow-like bytes that must never be hashed\n"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a second user")

RACER = r"""
import ctypes, os, random, sys, time
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE, AT_FDCWD = 2, -100

def exchange(a, b):
    return libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0

root, outside, secret, links, stop = sys.argv[1:6]
rng = random.Random(32)
dirs = sorted(os.path.join(root, n) for n in os.listdir(root))
files = [os.path.join(d, "f0.txt") for d in dirs] + [os.path.join(d, "big.bin") for d in dirs]
link_dir, link_file, fifo = (os.path.join(links, n) for n in ("dir", "file", "fifo"))
os.symlink(outside, link_dir)
os.symlink(secret, link_file)
os.mkfifo(fifo)
swaps = 0
print("ready", flush=True)
while not os.path.exists(stop):
    if rng.random() < 0.5:
        place, other = rng.choice(dirs), link_dir
    else:
        place, other = rng.choice(files), rng.choice((link_file, fifo))
    if exchange(place, other):  # place is now the symlink (or the FIFO)
        swaps += 1
        time.sleep(rng.random() * 0.002)
        exchange(place, other)
    time.sleep(rng.random() * 0.001)
print(swaps, flush=True)
"""

WALK = ("import sys\n"
        "from bastion.tasks.cli import main\n"
        "sys.exit(main(['walk', sys.argv[1], '--out', sys.argv[2], '-q']))\n")


def start_racer(uid: int, gid: int, root: Path, outside: Path, links: Path,
                stop: Path) -> subprocess.Popen:
    """The second user's racer (RACER), swapping until ``stop`` exists; returned once ready."""
    racer = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", sys.executable,
         "-c", RACER, str(root), str(outside), str(outside / "SECRET.txt"), str(links),
         str(stop)], stdout=subprocess.PIPE, text=True)
    assert racer.stdout is not None
    assert racer.stdout.readline().strip() == "ready"
    return racer


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A directory other users can traverse (pytest's tmp is root-only)."""
    d = Path(tempfile.mkdtemp(prefix="bastion-race-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def build(shared: Path, uid: int, gid: int) -> tuple[Path, Path, Path]:
    """The co-user's tree (20 directories of 40 small files and a 1 MB one), a root-only
    directory outside it holding a secret, and the co-user's scratch directory."""
    root = shared / "root"
    for d in range(20):
        sub = root / f"d{d:02d}"
        sub.mkdir(parents=True)
        for i in range(40):
            (sub / f"f{i}.txt").write_bytes(f"public file {d}/{i}\n".encode())
        (sub / "big.bin").write_bytes(os.urandom(1 << 20))
    outside = shared / "outside"
    outside.mkdir(mode=0o700)
    (outside / "SECRET.txt").write_bytes(SECRET)
    (outside / "SECRET.txt").chmod(0o600)
    links = shared / "links"
    links.mkdir()
    for p in [root, *root.rglob("*"), links]:
        os.chown(p, uid, gid)
    return root, outside, links


@as_root
@pytest.mark.slow
@pytest.mark.parametrize("follow", [False, True])
def test_a_racing_co_user_gets_nothing_outside_read_and_no_walk_hangs(
        shared: Path, follow: bool) -> None:
    uid, gid = second_user()
    root, outside, links = build(shared, uid, gid)
    manifest = shared / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({
        "version": 1, "stages": ["walk"],
        "roots": [{"name": "r", "path": "root", "follow_symlinks": follow}]}))
    stop = shared / "stop"
    racer = start_racer(uid, gid, root, outside, links, stop)
    secret_sha = hashlib.sha256(SECRET).hexdigest()
    seen_problems = 0
    try:
        for n in range(6):
            out = shared / f"out{n}"
            r = subprocess.run([sys.executable, "-c", WALK, str(manifest), str(out)],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
            assert r.returncode in (0, 3), r.stderr  # 3: the walk met what it refused
            recs = [json.loads(line) for line in (out / "walk.jsonl").read_bytes()
                    .splitlines()]
            summary = json.loads((out / "walk.summary.json").read_text())
            leaked = [rec for rec in recs if "SECRET" in rec["path"]
                      or rec["sha256"] == secret_sha or rec["size"] == len(SECRET)]
            assert not leaked, leaked
            assert not any("SECRET" in w for w in summary["warning_samples"])
            seen_problems += summary["unreadable"] + summary["errors"] + summary["symlinks"]
    finally:
        stop.touch()
        out_text, _ = racer.communicate(timeout=60)
    swaps = int(out_text.strip())
    assert swaps > 200, swaps  # the race really ran
    assert seen_problems > 0  # and the walks met it


def test_open_beneath_refuses_symlinks_anywhere_and_paths_out(tmp_path: Path) -> None:
    """A symlink as the last component or in the middle, a ``..`` and an absolute path are
    refused; a FIFO opens without blocking."""
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f.txt").write_text("x")
    (tmp_path / "secret").write_text("s")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "e")
    (tmp_path / "d" / "e" / "leaf").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "d" / "fifo")
    top = os.open(tmp_path / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(open_beneath(top, "e/f.txt"))
        for bad in ("link/f.txt", "e/leaf", "link", "../secret", "e/../../secret",
                    str(tmp_path / "secret")):
            with pytest.raises(OSError):
                os.close(open_beneath(top, bad))
        os.close(before_a_writer(tmp_path / "d" / "fifo", lambda: open_beneath(top, "fifo")))
    finally:
        os.close(top)


def test_the_fallback_without_openat2_gives_the_same_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bastion.tasks.walk.beneath as beneath

    assert uses_openat2() in (True, False)
    monkeypatch.setattr(beneath, "_have_openat2", False)
    test_open_beneath_refuses_symlinks_anywhere_and_paths_out(tmp_path)


@as_root
def test_a_root_named_through_another_users_symlink_is_refused(shared: Path) -> None:
    """The manifest names the root through a symlink another user owns (and could point at
    /etc at will): one line, the link and its owner named.  Through root's own symlink the
    root is resolved once and its written path recorded in walk.summary.json."""
    from bastion.tasks.cli import main

    uid, gid = second_user()
    (shared / "real").mkdir()
    (shared / "real" / "a.txt").write_text("hello\n")
    theirs = shared / "theirs"
    theirs.symlink_to(shared / "real")
    os.lchown(theirs, uid, gid)
    assert foreign_link(theirs) == (str(theirs), uid)
    m = shared / "m.yaml"
    m.write_text(yaml.safe_dump({"version": 1, "stages": ["walk"],
                                 "roots": [{"name": "r", "path": "theirs"}]}))
    r = subprocess.run([sys.executable, "-m", "bastion", "walk", str(m), "--out",
                        str(shared / "out")], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r.stderr
    assert "symbolic link" in r.stderr and f"uid {uid}" in r.stderr, r.stderr
    assert not (shared / "out").exists()
    mine = shared / "mine"
    mine.symlink_to(shared / "real")
    assert foreign_link(mine) is None
    m.write_text(yaml.safe_dump({"version": 1, "stages": ["walk"],
                                 "roots": [{"name": "r", "path": "mine"}]}))
    assert main(["walk", str(m), "--out", str(shared / "out"), "-q"]) == 0
    summary = json.loads((shared / "out" / "walk.summary.json").read_text())
    assert summary["roots"] == [{"name": "r", "path": str(shared / "real"),
                                 "given": str(mine)}]


class OpenWatch:
    """inotify on a directory: whether anything in it (or it) was opened or read since."""

    IN_ACCESS, IN_OPEN, IN_NONBLOCK = 0x1, 0x20, 0o4000

    def __init__(self, path: Path) -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(self.IN_NONBLOCK)
        assert self.fd >= 0
        assert libc.inotify_add_watch(self.fd, os.fsencode(str(path)),
                                      self.IN_ACCESS | self.IN_OPEN) >= 0

    def events(self) -> int:
        try:
            return len(os.read(self.fd, 1 << 16))
        except BlockingIOError:
            return 0

    def close(self) -> None:
        os.close(self.fd)


@as_root
@pytest.mark.slow
def test_a_racing_co_user_gets_nothing_outside_opened_by_walk_or_extract(shared: Path) -> None:
    """The same race through whole sweeps (walk, then the sandboxed extract): directories
    swapped for symlinks to a root-only directory holding files of the same names.  An
    inotify watch on that directory sees no open and no read of it or anything in it: the
    walk opens beneath the root, and each document reaches its worker through its directory
    opened beneath the root (tasks/extract/docopen.py), never through the swapped name."""
    uid, gid = second_user()
    root, outside, links = build(shared, uid, gid)
    for name in [f"f{i}.txt" for i in range(40)] + ["big.bin"]:
        (outside / name).write_bytes(SECRET)
    manifest = shared / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "stages": ["walk", "extract"],
                                        "roots": [{"name": "r", "path": "root"}]}))
    watch = OpenWatch(outside)
    stop = shared / "stop"
    racer = start_racer(uid, gid, root, outside, links, stop)
    sweep = ("import sys\nfrom bastion.tasks.cli import main\n"
             "sys.exit(main(['sweep', sys.argv[1], '--out', sys.argv[2], '-q', '-j', '2',"
             " '--no-external']))\n")
    changed = 0
    try:
        for n in range(4):
            out = shared / f"out{n}"
            r = subprocess.run([sys.executable, "-c", sweep, str(manifest), str(out)],
                               cwd=REPO, capture_output=True, text=True, timeout=300)
            assert r.returncode in (0, 2, 3, 4), r.stderr
            recs = [json.loads(line) for line in (out / "extract.jsonl").read_bytes()
                    .splitlines()]
            assert not [rec for rec in recs if rec["sha256"] == hashlib.sha256(SECRET)
                        .hexdigest()]
            changed += sum(rec.get("error_kind") == "changed" for rec in recs)
            assert watch.events() == 0, f"sweep {n} opened something outside the tree"
    finally:
        stop.touch()
        out_text, _ = racer.communicate(timeout=60)
        watch.close()
    assert int(out_text.strip()) > 200
    assert changed > 0  # the extract met the race too


def test_a_directory_swapped_after_the_walk_is_a_changed_record_read_by_no_worker(
        tmp_path: Path) -> None:
    """The deterministic form of the race: walked, then ``sub`` renamed and a symlink to a
    directory holding a same-named file put in its place, then extracted: the file's record
    is ``error``/``changed`` ("a symbolic link on its path"), no worker opened anything in
    the other directory (inotify), and the other files are read as usual."""
    from bastion.tasks.cli import main

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("public a\n")
    (root / "b.txt").write_text("public b\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("public a\n")  # the same bytes: only an open would tell
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({"version": 1, "stages": ["walk", "extract"],
                                 "roots": [{"name": "r", "path": "root"}]}))
    out = tmp_path / "out"
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    (root / "sub").rename(root / "sub.moved")
    (root / "sub").symlink_to(outside)
    watch = OpenWatch(outside)
    try:
        rc = main(["extract", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"])
        assert watch.events() == 0
    finally:
        watch.close()
    assert rc == 2
    recs = {json.loads(line)["path"]: json.loads(line)
            for line in (out / "extract.jsonl").read_bytes().splitlines()}
    assert recs["b.txt"]["status"] == "ok"
    assert recs["sub/a.txt"]["status"] == "error"
    assert recs["sub/a.txt"]["error_kind"] == "changed"
    assert "symbolic link on its path" in recs["sub/a.txt"]["error"]
