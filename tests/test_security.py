"""The store is as private as the files it came from (issue 22, docs/security.md): owner-only
modes whatever the umask, a symlinked / foreign-owned / loose output refused, writes that a
swapped directory cannot redirect, and the same records and texts as before the change.

The tests that need a second user run as root (as here and in CI) and create
``bastion-test-user`` when it is missing (a system user without a home: harmless to leave).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs
from bastion.tasks.output.atomic import UnsafeOutputError
from bastion.tasks.manifest import ManifestError, load_manifest
from bastion.tasks.output.directory import GROUP, PRIVATE, open_output, secure_path
from seconduser import TEST_USER, second_user  # tests/ is on sys.path

REPO = Path(__file__).resolve().parent.parent
# main just before this change (the output written by name, with the umask's modes); pinned:
# a later change of what a reader extracts is a legitimate difference, so move it then
BASE = "d0748c3"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a second user")


# -- helpers ----------------------------------------------------------------------------------


def manifest(directory: Path, root: str = "root", **extra: object) -> Path:
    path = directory / "manifest.yaml"
    doc = {"version": 1, "roots": [{"name": "docs", "path": root}], **extra}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def small_tree(root: Path, n: int = 12) -> Path:
    (root / "sub").mkdir(parents=True)
    for i in range(n):
        (root / ("sub" if i % 3 else "") / f"doc{i}.txt").write_bytes(
            f"private marker {i} of the sweep\n".encode())
    (root / "page.html").write_bytes(b"<html><body><p>hello page</p></body></html>")
    (root / "t.csv").write_bytes(b"a,b\n1,2\n")
    return root


def many_files(root: Path, n: int) -> Path:
    for d in range(n // 100 + 1):
        (root / f"d{d:03d}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"d{i // 100:03d}" / f"f{i}.txt").write_bytes(f"file {i} body\n".encode())
    return root


def sweep(m: Path, out: Path | None = None, *extra: str) -> int:
    argv = ["sweep", str(m), "-q", "-j", "2", "--no-external", *extra]
    if out is not None:
        argv[2:2] = ["--out", str(out)]
    return main(argv)


def one_line_refusal(capsys: pytest.CaptureFixture, rc: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bastion: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def modes_of(out: Path) -> dict[str, int]:
    """Every entry under ``out`` (and ``out`` itself) with its permission bits."""
    found = {".": stat.S_IMODE(out.lstat().st_mode)}
    for dirpath, dirs, files in os.walk(out):
        for name in dirs + files:
            p = Path(dirpath) / name
            found[str(p.relative_to(out))] = stat.S_IMODE(p.lstat().st_mode)
    return found


def assert_modes(out: Path, dir_mode: int, file_mode: int) -> None:
    wrong = {}
    for rel, mode in modes_of(out).items():
        want = dir_mode if (out / rel).is_dir() else file_mode
        if mode != want:
            wrong[rel] = oct(mode)
    assert not wrong, wrong


def as_user(uid: int, gid: int, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=60)


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A directory other users can traverse (pytest's own tmp is root-only, which would make
    every 'unreadable' assertion true for the wrong reason)."""
    d = Path(tempfile.mkdtemp(prefix="bastion-sec-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- modes ------------------------------------------------------------------------------------


def test_modes_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    old = os.umask(0)
    try:
        assert sweep(m, tmp_path / "out") == 0
    finally:
        os.umask(old)
    out = tmp_path / "out"
    found = modes_of(out)
    # the lock, the caches, doit's database, sqlite, the store and its buckets are all there
    for rel in (".lock", ".bastion/extract-stamp.json", ".bastion/verdicts.sqlite", ".bastion/doit.json",
                "walk.jsonl", "extract.jsonl", "extract", ".bastion/tmp"):
        assert rel in found, sorted(found)
    assert any(rel.endswith(".txt") and rel.startswith("extract/") for rel in found)
    assert_modes(out, 0o700, 0o600)


def test_sqlite_journals_and_temps_get_the_mode(tmp_path: Path) -> None:
    """sqlite's -wal/-shm (alive while the store is open) and a temp file of a killed run."""
    from bastion.tasks.extract.store import Store

    old = os.umask(0)
    try:
        od = open_output(tmp_path / "out")
        store = Store(tmp_path / "out", lambda: od)
        store.forget([("x", "y")])  # nothing there: opens nothing
        store.db.execute("SELECT 1")
        state = tmp_path / "out" / ".bastion"
        assert {p.name for p in state.iterdir()} >= {"verdicts.sqlite", "verdicts.sqlite-wal",
                                                     "verdicts.sqlite-shm"}
        for p in state.iterdir():
            if p.name.startswith("verdicts"):
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
        (tmp_path / "out" / ".tmp-walk.jsonl.999").write_bytes(b"left by kill -9")
        os.chmod(tmp_path / "out" / ".tmp-walk.jsonl.999", 0o666)
        od.write("walk.jsonl", b"{}\n")
        assert stat.S_IMODE((tmp_path / "out" / "walk.jsonl").stat().st_mode) == 0o600
        store.close()
        od.close()
    finally:
        os.umask(old)


def test_group_mode_is_asked_for_and_never_wider(tmp_path: Path) -> None:
    small_tree(tmp_path / "root")
    m = manifest(tmp_path, output_mode="group")
    old = os.umask(0)
    try:
        assert sweep(m, tmp_path / "out") == 0
    finally:
        os.umask(old)
    assert_modes(tmp_path / "out", 0o750, 0o640)
    # back to private: tightened on the next run
    m = manifest(tmp_path)
    assert sweep(m, tmp_path / "out") == 0
    assert_modes(tmp_path / "out", 0o700, 0o600)
    summary = json.loads((tmp_path / "out" / "extract.summary.json").read_bytes())
    assert summary["tightened"] > 0


def test_output_mode_key_is_validated(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    path = manifest(tmp_path, output_mode="world")
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    assert "output_mode: must be one of private, group, got 'world'" in str(e.value)
    assert load_manifest(manifest(tmp_path, output_mode="group")).output_mode == "group"
    assert load_manifest(manifest(tmp_path)).output_mode == "private"


def test_existing_output_is_tightened_once_and_the_summaries_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    # an output of the base code, made with umask 022
    (out / ".bastion" / "modes").unlink()
    for p in [out, *out.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    n = len(modes_of(out))
    capsys.readouterr()
    assert main(["sweep", str(m), "--out", str(out), "-j", "1", "--no-external"]) == 0
    err = capsys.readouterr().err
    assert_modes(out, 0o700, 0o600)
    walk = json.loads((out / "walk.summary.json").read_bytes())
    extract = json.loads((out / "extract.summary.json").read_bytes())
    assert walk["tightened"] == extract["tightened"] == n
    assert f"tightened {n} file(s) and director(ies) of {out} to 700/600" in err
    assert sweep(m, out) == 0
    assert json.loads((out / "extract.summary.json").read_bytes())["tightened"] == 0


# -- refusals ---------------------------------------------------------------------------------


def test_symlinked_output_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "root" / ".agent").symlink_to(elsewhere)  # the default output <root>/.agent
    one_line_refusal(capsys, sweep(m), "refusing output directory",
                     str(tmp_path / "root" / ".agent"), "symbolic link")
    (tmp_path / "out").symlink_to(elsewhere)
    one_line_refusal(capsys, sweep(m, tmp_path / "out"), "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_loose_output_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for mode, who in ((0o777, "its group and others"), (0o1777, "its group and others"),
                      (0o770, "its group"), (0o757, "others")):
        out.chmod(mode)
        one_line_refusal(capsys, sweep(m, out), "refusing output directory", f"writable by {who}",
                         "chmod go-w")
        assert list(out.iterdir()) == []
    # a missing ancestor that bastion creates is made owner-only
    old = os.umask(0)
    try:
        assert sweep(m, tmp_path / "new" / "deeper" / "out") == 0
    finally:
        os.umask(old)
    for d in ("new", "new/deeper", "new/deeper/out"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d


def test_out_on_a_users_folder_changes_nothing_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An existing --out that holds files and has no bastion tag is a user's folder: refused
    in one line before anything in it is touched (modes, tag, lock, state directory)."""
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "sub" / "deep.txt").write_text("deep\n")
    for p in (folder, folder / "sub"):
        p.chmod(0o755)
    for p in (folder / "notes.txt", folder / "sub" / "deep.txt"):
        p.chmod(0o644)
    before = modes_of(folder)
    for argv in (["sweep", str(m), "--out", str(folder), "-q", "--no-external"],
                 ["walk", str(m), "--out", str(folder), "-q"]):
        one_line_refusal(capsys, main(argv), "refusing output directory", str(folder),
                         "'notes.txt'", "not a bastion output", "CACHEDIR.TAG")
        assert modes_of(folder) == before
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "sub"]
    # another program's cache tag does not make it bastion's
    (folder / "CACHEDIR.TAG").write_bytes(b"Signature: 8a477f597d28d172789f06886806bc55\n")
    one_line_refusal(capsys, sweep(m, folder), "not a bastion output")
    # an empty folder is fine
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    assert sweep(m, empty) == 0 and (empty / "CACHEDIR.TAG").is_file()


def test_an_output_that_is_or_holds_a_root_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--out at the root itself, or at a directory holding it (here the manifest's own
    directory), is refused in one line; the sources and the manifest keep their modes."""
    root = small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    m.chmod(0o644)
    before = modes_of(tmp_path)
    one_line_refusal(capsys, sweep(m, root), "refusing output directory", "is the root 'docs'")
    one_line_refusal(capsys, sweep(m, tmp_path), "contains the root 'docs'")
    assert modes_of(tmp_path) == before
    assert not (root / "CACHEDIR.TAG").exists() and not (tmp_path / "CACHEDIR.TAG").exists()
    assert sweep(m) == 0  # the default output inside the root is still fine
    assert json.loads((root / ".agent" / "walk.summary.json").read_bytes())["files"] == 14


def test_a_file_put_beside_an_outputs_own_keeps_its_mode(tmp_path: Path) -> None:
    """Tightening touches only the names bastion writes at an output's top: a user's file
    dropped into the output (and its modes loosened) keeps its own mode."""
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    (out / "notes.txt").write_text("mine\n")
    (out / "notes.txt").chmod(0o644)
    (out / "walk.jsonl").chmod(0o644)
    (out / ".bastion" / "modes").unlink()  # the tree is walked again
    assert sweep(m, out) == 0
    assert stat.S_IMODE((out / "notes.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / "walk.jsonl").stat().st_mode) == 0o600


@as_root
def test_foreign_owned_output_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    uid, gid = second_user()
    small_tree(tmp_path / "root")
    m = manifest(tmp_path)
    out = tmp_path / "root" / ".agent"
    out.mkdir(mode=0o700)
    os.chown(out, uid, gid)
    one_line_refusal(capsys, sweep(m), "refusing output directory", f"owned by {TEST_USER}",
                     "not by root")
    assert list(out.iterdir()) == []
    with pytest.raises(UnsafeOutputError):
        open_output(out)


# -- another user -----------------------------------------------------------------------------


@as_root
def test_store_unreadable_by_another_user(shared: Path) -> None:
    uid, gid = second_user()
    root = small_tree(shared / "root")
    for p in [root, *root.rglob("*")]:  # documents others may read: the store must not be
        p.chmod(0o755 if p.is_dir() else 0o644)
    m = manifest(shared)
    old = os.umask(0o022)
    try:
        assert sweep(m) == 0
    finally:
        os.umask(old)
    out = root / ".agent"
    text = next((out / "extract").rglob("*.txt"))
    assert b"private marker" in text.read_bytes()
    seen = as_user(uid, gid, "cat", str(root / "doc0.txt"))
    assert seen.returncode == 0 and "private marker 0" in seen.stdout  # the path is reachable
    for target in (text, out / "walk.jsonl", out / "extract.jsonl"):
        r = as_user(uid, gid, "cat", str(target))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (target, r)
    r = as_user(uid, gid, "ls", str(out))
    assert r.returncode != 0 and "Permission denied" in r.stderr


RACER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100

def exchange(a, b):
    return libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0

mode, target, outside, stop, links = sys.argv[1:6]  # links: where the symlinks are made
pause = 0.0 if mode == "buckets" else 0.002
swaps = 0
print("ready", flush=True)
while not os.path.exists(stop):
    if mode == "buckets":  # every bucket of the store, in turn
        try:
            names = sorted(n for n in os.listdir(target) if len(n) == 2)
        except OSError:
            names = []
        places = [os.path.join(target, n) for n in names]
    else:
        places = [target]
    for place in places:
        link = os.path.join(links, os.path.basename(place) + ".swap")
        try:
            os.symlink(outside, link)
        except FileExistsError:
            pass
        except OSError:
            continue
        if exchange(place, link):  # place is now the symlink, link the real directory
            swaps += 1
            time.sleep(0.0002)
            exchange(place, link)
            time.sleep(pause)  # the real directory in place: a run may start and be swapped
        try:
            os.unlink(link)
        except OSError:
            pass
    if not places:
        time.sleep(0.001)
print(swaps, flush=True)
"""


def start_racer(argv: list[str], mode: str, target: Path, outside: Path,
                stop: Path, links: Path) -> subprocess.Popen:
    """A process that swaps ``target`` (``one``) or each bucket under it (``buckets``) with a
    symlink to ``outside`` (made in ``links``) by ``renameat2(RENAME_EXCHANGE)``, and back."""
    proc = subprocess.Popen([*argv, sys.executable, "-c", RACER, mode, str(target),
                             str(outside), str(stop), str(links)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def stop_racer(proc: subprocess.Popen, stop: Path) -> int:
    stop.touch()
    out, _ = proc.communicate(timeout=60)
    return int(out.strip())


def outside_files(outside: Path) -> list[str]:
    return sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))


@pytest.mark.slow
def test_racing_bucket_swap_writes_nothing_outside(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """A helper swaps each store bucket (``extract/ab/``) for a symlink to a directory
    outside, in a loop, while a sweep of 2000 files writes their texts: every text lands in
    the store (renameat into the bucket's descriptor, opened once without following links)."""
    many_files(tmp_path / "root", 2000)
    m = manifest(tmp_path)
    clean = tmp_path / "clean"
    out = tmp_path / "out"
    outside = tmp_path / "outside"
    outside.mkdir()
    # the buckets exist before the race (the texts of a first run, then removed by an edit of
    # every file), so the racer has something to swap from the first text on
    assert sweep(m, out) == 0
    for p in (tmp_path / "root").rglob("*.txt"):
        p.write_bytes(p.read_bytes() + b"edited\n")
    (tmp_path / "stop").unlink(missing_ok=True)
    (tmp_path / "links").mkdir()
    racer = start_racer([], "buckets", out / "extract", outside, tmp_path / "stop",
                        tmp_path / "links")
    try:
        capsys.readouterr()
        rc = sweep(m, out)
    finally:
        swaps = stop_racer(racer, tmp_path / "stop")
    err = capsys.readouterr().err
    assert swaps > 100, swaps  # the race really ran
    assert outside_files(outside) == []
    assert rc in (0, 1), err
    if rc == 1:  # a bucket found swapped when first opened is refused, never followed
        assert "symbolic link" in err or "Too many levels" in err, err
    assert not [p for p in (out / "extract").iterdir() if p.is_symlink()]
    for p in (tmp_path / "root").rglob("*.txt"):
        p.write_bytes(p.read_bytes()[: -len(b"edited\n")])
    assert sweep(m, out) == 0
    assert sweep(m, clean) == 0
    assert compare_outputs(clean, out) == []


@as_root
@pytest.mark.slow
def test_racing_output_swap_at_start_writes_nothing_outside(
        shared: Path, capsys: pytest.CaptureFixture) -> None:
    """Another user who can write the root swaps ``<root>/.agent`` for a symlink to their own
    directory, over and over, while runs start: each run refuses the link or keeps writing
    to the directory it checked; nothing reaches theirs."""
    uid, gid = second_user()
    root = small_tree(shared / "root", 40)
    m = manifest(shared)
    theirs = shared / "theirs"
    theirs.mkdir()
    os.chown(theirs, uid, gid)
    os.chown(root, uid, gid)  # the root is theirs to write (they cannot write .agent)
    assert sweep(m) == 0  # .agent exists (root's, 0700) before the race
    assert not secure_path(root)
    stop = shared / "stop"
    racer = start_racer(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"],
                        "one", root / ".agent", theirs, stop, root)
    rcs = []
    try:
        for i in range(12):
            (root / f"doc{i}.txt").write_bytes(f"private marker {i} edit {time.time()}\n"
                                               .encode())
            rcs.append(sweep(m))
    finally:
        swaps = stop_racer(racer, stop)
    assert swaps > 20, swaps
    assert outside_files(theirs) == [], rcs
    assert set(rcs) <= {0, 1, 2}, rcs
    assert (root / ".agent").is_dir() and not (root / ".agent").is_symlink()
    r = as_user(uid, gid, "ls", str(root / ".agent"))
    assert r.returncode != 0 and "Permission denied" in r.stderr


# -- the same output as before ----------------------------------------------------------------


@pytest.mark.damaged_output  # the base code's summaries predate fields the schemas now require
@pytest.mark.slow
def test_same_records_and_texts_as_the_base_code(tmp_path: Path) -> None:
    """A sweep by the code before this change and by this code: compare_outputs finds no
    difference in records or texts (bastion compare)."""
    base = tmp_path / "base-code"
    base.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", BASE], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"base commit {BASE} not in this checkout: {archive.stderr[:200]!r}")
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    from tests.officegen import docx, w_p
    from tests.pdfgen import make_nested_outline  # the PDF reader writes a sidecar

    root = small_tree(tmp_path / "root")
    (root / "letter.docx").write_bytes(docx(w_p("Dear reader, private marker docx")))
    (root / "paper.pdf").write_bytes(make_nested_outline())
    m = manifest(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(base), "BASTION_NO_EXTERNAL": "1"}
    # the base code predates the one import name: its CLI is the top-level tasks.cli
    r = subprocess.run([sys.executable, "-m", "tasks.cli", "sweep", str(m), "--out",
                        str(tmp_path / "before"), "-q", "-j", "2", "--no-external"],
                       cwd=base, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sweep(m, tmp_path / "after") == 0
    assert _unplanned(tmp_path / "before", tmp_path / "after") == []
    umask = os.umask(0)
    os.umask(umask)
    assert modes_of(tmp_path / "before")["walk.jsonl"] == 0o644 & ~umask  # really the base
    assert_modes(tmp_path / "after", 0o700, 0o600)


def _unplanned(before: Path, after: Path) -> list[str]:
    """compare_outputs' differences less what was added on purpose since the base (issue 35:
    the record's metadata fields, where the base has no key, and a sidecar's ``metadata``;
    issue 34: every text's languages and OCR's packs, absent from the base's records)."""
    added = ("languages", "ocr_languages", "ocr_missing", "ocr_packs")
    out = []
    for d in compare_outputs(before, after):
        if d.endswith(": authors: None != []"):
            continue
        if any(f": {f}: None != " in d for f in added):
            continue
        rel = d.removeprefix("store: ").removesuffix(": contents differ")
        if rel != d and rel.endswith(".meta.json"):
            was, now = (json.loads((o / rel).read_text()) for o in (before, after))
            now.pop("metadata", None)
            if was == now:
                continue
        out.append(d)
    return out


def test_group_and_private_modes_are_the_only_ones() -> None:
    assert (PRIVATE.dir, PRIVATE.file) == (0o700, 0o600)
    assert (GROUP.dir, GROUP.file) == (0o750, 0o640)
    for modes in (PRIVATE, GROUP):
        assert not modes.dir & 0o027 and not modes.file & 0o137


def test_adopted_text_must_be_a_regular_file(tmp_path: Path) -> None:
    """A worker's "text" that is a symlink (to a secret) or a FIFO never enters the store."""
    from bastion.tasks.output.atomic import OutputError

    od = open_output(tmp_path / "out")
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only")
    scratch = tmp_path / "out" / ".bastion" / "tmp" / "w1"
    od.dir_fd(".bastion/tmp/w1")
    (scratch / "t1.txt").symlink_to(secret)
    with pytest.raises(OutputError, match="cannot store text"):
        od.adopt(scratch / "t1.txt", "extract/ab/ab12.txt")
    os.mkfifo(scratch / "t2.txt")
    with pytest.raises(OutputError, match="not a regular file"):
        od.adopt(scratch / "t2.txt", "extract/ab/ab34.txt")
    assert list((tmp_path / "out" / "extract" / "ab").iterdir()) == []
    (scratch / "t3.txt").write_bytes(b"fine\n")
    os.chmod(scratch / "t3.txt", 0o666)
    od.adopt(scratch / "t3.txt", "extract/ab/ab56.txt")
    done = tmp_path / "out" / "extract" / "ab" / "ab56.txt"
    assert done.read_bytes() == b"fine\n" and stat.S_IMODE(done.stat().st_mode) == 0o600
    od.close()
