"""bastion.tasks.walk.stage and bastion.readers.detect: walk.jsonl records, odd trees, MIME detection, incremental
re-walks, the summary and atomic writes — all on real files under tmp_path."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import struct
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import bastion.tasks.walk.stage as walk_mod
from bastion.readers import detect
from bastion.readers.detect import detect_bytes
from bastion.tasks.cli import main
from bastion.tasks.output.atomic import STATE_DIR, OutputError
from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk.stage import Walker, run_walk
from bastion.tasks.database import DB_NAME

REPO = Path(__file__).resolve().parent.parent
FIELDS = {"root", "path", "kind", "size", "mtime_ns", "inode", "sha256", "reason", "mime",
          "error"}


# -- helpers ----------------------------------------------------------------------------------


def write_manifest(directory: Path, roots: list[dict[str, Any]], *,
                   stages: tuple[str, ...] = ("walk", "extract"),
                   max_file_bytes: int | None = None, name: str = "manifest.yaml") -> Path:
    doc: dict[str, Any] = {"version": 1, "roots": roots, "stages": list(stages)}
    if max_file_bytes is not None:
        doc["limits"] = {"max_file_bytes": max_file_bytes}
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "walk.jsonl").read_bytes().splitlines()]


def by_path(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["path"]: r for r in recs}


def walk(manifest: Path, out: Path, **kw: Any) -> tuple[dict, list[dict]]:
    with open_output(out) as od:
        summary = run_walk(load_manifest(manifest), od, **kw)
    return summary, records(out)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_with_timeout(fn, timeout: float = 20.0):
    """Run ``fn`` in a daemon thread; fail (rather than hang the suite) when it takes too long."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 — re-raised in the test's thread
            result["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"did not finish within {timeout} s (hang?)"
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.fixture()
def simple(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(manifest, root, out) over a small tree of text files."""
    root = tmp_path / "root"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"alpha\n")
    (root / "b.csv").write_bytes(b"x,y\n1,2\n")
    (root / "sub" / "c.txt").write_bytes(b"gamma gamma\n")
    (root / "sub" / "deeper" / "d.json").write_bytes(b'{"d": 1}\n')
    (root / "e.md").write_bytes(b"# title\n")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    return m, root, tmp_path / "out"


# -- records ----------------------------------------------------------------------------------


def test_records_two_roots_sorted_posix_and_complete(tmp_path: Path) -> None:
    files = {
        "one": {"z.txt": b"zed\n", "a.txt": b"a\n", "a-b.txt": b"ab\n", "a/b.txt": b"b\n",
                "a/c/d.txt": b"d\n", "B.txt": b"upper\n"},
        "two": {"m.txt": b"em\n", "dir/n.txt": b"en\n"},
    }
    for rootname, tree in files.items():
        for rel, data in tree.items():
            p = tmp_path / rootname / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    # roots listed "two" first: the output is still sorted by (root, path)
    m = write_manifest(tmp_path, [{"name": "two", "path": "two"}, {"name": "one", "path": "one"}])
    summary, recs = walk(m, tmp_path / "out")
    keys = [(r["root"], r["path"]) for r in recs]
    expected = sorted((root, rel) for root, tree in files.items() for rel in tree)
    assert keys == expected
    for r in recs:
        assert set(r) == FIELDS
        assert "\\" not in r["path"] and not r["path"].startswith("/")
        data = files[r["root"]][r["path"]]
        st = os.stat(tmp_path / r["root"] / r["path"])
        assert r["kind"] == "file"
        assert r["size"] == len(data) == st.st_size
        assert r["mtime_ns"] == st.st_mtime_ns
        assert r["inode"] == st.st_ino
        assert r["sha256"] == sha(data)
        assert r["reason"] is None and r["error"] is None
        assert r["mime"] == "text/plain"
    assert summary["files"] == summary["hashed"] == summary["records"] == 8
    assert summary["bytes"] == sum(len(d) for t in files.values() for d in t.values())
    # every line is ASCII JSON with sorted keys, one record per line
    for line in (tmp_path / "out" / "walk.jsonl").read_bytes().splitlines():
        line.decode("ascii")
        assert list(json.loads(line)) == sorted(FIELDS)


def test_odd_names_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    bad = b"bad\xff\xfename.txt"
    broot = os.fsencode(str(root))
    try:
        with open(os.path.join(broot, bad), "wb") as f:
            f.write(b"not utf-8 name\n")
    except OSError as e:  # a filesystem that insists on UTF-8 names
        pytest.skip(f"cannot create a non-UTF-8 name here: {e}")
    odd = {"new\nline.txt": b"nl\n", "a:b.txt": b"colon\n", " spaced  name .txt": b"sp\n",
           "tab\there.txt": b"tab\n", "uni\u00e9\u4e2d.txt": b"uni\n"}
    for name, data in odd.items():
        (root / name).write_bytes(data)
    (root / b"dir\xff".decode("utf-8", "surrogateescape")).mkdir()
    (root / b"dir\xff".decode("utf-8", "surrogateescape") / "inner.txt").write_bytes(b"in\n")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    out = tmp_path / "out"
    _, recs = walk(m, out)
    raw = (out / "walk.jsonl").read_bytes()
    assert raw.count(b"\n") == len(recs) == len(odd) + 2  # the newline in a name is escaped
    assert b"\\udcff\\udcfe" in raw  # how a non-UTF-8 byte is written: a \udcXX escape
    paths = by_path(recs)
    for r in recs:
        on_disk = os.path.join(broot, os.fsencode(r["path"]))
        with open(on_disk, "rb") as f:
            assert sha(f.read()) == r["sha256"]
    assert os.fsencode(paths[bad.decode("utf-8", "surrogateescape")]["path"]) == bad
    assert os.fsencode("dir\udcff/inner.txt") == b"dir\xff/inner.txt"
    assert "dir\udcff/inner.txt" in paths
    for name, data in odd.items():
        assert paths[name]["sha256"] == sha(data)


def test_include_exclude_and_pruning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    for rel in ["keep.txt", "drop.tmp", "docs/x.txt", "docs/y.tmp", "build/out.txt",
                "build/deep/more.txt", "src/node_modules/pkg/i.txt", "src/main.txt",
                "notes.log"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rel.encode() + b"\n")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root",
                                   "include": ["*.txt", "*.tmp"],
                                   "exclude": ["*.tmp", "build/", "**/node_modules/**"]}])
    scanned: list[bytes] = []
    real_open = walk_mod.open_dir

    def spy(dirfd, relpath):  # the walk opens each directory it lists, beneath the root
        scanned.append(os.fsencode(relpath or "."))
        return real_open(dirfd, relpath)

    monkeypatch.setattr(walk_mod, "open_dir", spy)
    _, recs = walk(m, tmp_path / "out")
    monkeypatch.undo()
    assert sorted(r["path"] for r in recs) == ["docs/x.txt", "keep.txt", "src/main.txt"]
    names = scanned
    assert b"build" not in names and b"build/deep" not in names  # pruned, never listed
    assert b"src/node_modules" not in names
    assert b"docs" in names and b"src" in names


def test_output_directory_inside_root_is_never_walked(tmp_path: Path) -> None:
    for i, rel_out in enumerate((".agent", "nested/out")):
        root = tmp_path / f"root{i}"
        (root / "nested").mkdir(parents=True)
        (root / "a.txt").write_bytes(b"a\n")
        m = write_manifest(tmp_path, [{"name": "r", "path": f"root{i}"}], name=f"m{i}.yaml")
        for _ in range(2):  # the second walk finds the first one's outputs in the tree
            _, recs = walk(m, root / rel_out)
            assert [r["path"] for r in recs] == ["a.txt"]


def test_max_file_bytes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "small.txt").write_bytes(b"0123456789")  # exactly the limit: hashed
    (root / "big.txt").write_bytes(b"0123456789A")
    (root / "big.pdf.txt").write_bytes(b"%PDF-1.4\n" + b"x" * 40)
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}], max_file_bytes=10)
    summary, recs = walk(m, tmp_path / "out")
    p = by_path(recs)
    assert p["small.txt"]["sha256"] == sha(b"0123456789") and p["small.txt"]["reason"] is None
    for name in ("big.txt", "big.pdf.txt"):
        assert p[name]["sha256"] is None
        assert "max_file_bytes" in p[name]["reason"]
        assert p[name]["error"] is None
        assert p[name]["kind"] == "file"
    assert p["big.pdf.txt"]["mime"] == "application/pdf"  # still typed
    assert summary["hashed"] == 1 and summary["not_hashed"] == 2
    assert summary["max_file_bytes"] == 10


def test_no_hash(simple: tuple[Path, Path, Path], capsys: pytest.CaptureFixture) -> None:
    m, root, out = simple
    assert main(["walk", str(m), "--out", str(out), "--no-hash", "-q"]) == 0
    recs = records(out)
    assert len(recs) == 5
    for r in recs:
        assert r["sha256"] is None and r["reason"] == "no-hash" and r["error"] is None
        assert r["mime"]
    summary = json.loads((out / "walk.summary.json").read_text())
    assert summary["no_hash"] is True and summary["hashed"] == 0 and summary["not_hashed"] == 5
    # hashing again afterwards: the no-hash records are not reused
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    assert all(r["sha256"] for r in records(out))


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "empty").write_bytes(b"")
    (tmp_path / "root" / "empty.csv").write_bytes(b"")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    _, recs = walk(m, tmp_path / "out")
    for r in recs:
        assert r["size"] == 0 and r["sha256"] == sha(b"") and r["error"] is None
    assert by_path(recs)["empty"]["mime"] == "text/plain"
    assert by_path(recs)["empty.csv"]["mime"] == "text/csv"


# -- symlinks, FIFOs, vanishing and growing files ---------------------------------------------


def test_symlinks_recorded_not_followed_by_default(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "inside.txt").write_bytes(b"inside\n")
    (root / "target.txt").write_bytes(b"target\n")
    (tmp_path / "secret.txt").write_bytes(b"outside secret\n")
    os.symlink("target.txt", root / "to_file")
    os.symlink("dir", root / "to_dir")
    os.symlink(tmp_path / "secret.txt", root / "to_outside")
    os.symlink("nowhere", root / "broken")
    os.symlink(".", root / "loop")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    summary, recs = run_with_timeout(lambda: walk(m, tmp_path / "out"))
    p = by_path(recs)
    assert sorted(p) == ["broken", "dir/inside.txt", "loop", "target.txt", "to_dir", "to_file",
                         "to_outside"]
    for name in ("broken", "loop", "to_dir", "to_file", "to_outside"):
        r = p[name]
        assert r["kind"] == "symlink"
        assert r["sha256"] is None and r["mime"] is None and r["error"] is None
        assert "not followed" in r["reason"]
        assert r["size"] == os.lstat(root / name).st_size
        assert r["inode"] == os.lstat(root / name).st_ino
    assert summary["symlinks"] == 5 and summary["files"] == 2


def test_follow_symlinks_loops_and_escapes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "x.txt").write_bytes(b"x\n")
    (root / "hidden").mkdir()
    (root / "hidden" / "only-via-link.txt").write_bytes(b"reached through a link\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_bytes(b"secret\n")
    os.symlink(".", root / "loop")  # back to the root
    os.symlink("..", root / "real" / "up")  # back to the root from below
    os.symlink("self", root / "self")  # ELOOP
    os.symlink(tmp_path / "outside", root / "out_dir")
    os.symlink(tmp_path / "outside" / "secret.txt", root / "out_file")
    os.symlink("hidden/only-via-link.txt", root / "link.txt")
    os.symlink("real/x.txt", root / "x-link.txt")
    os.symlink("hidden", root / "hidden-link")
    (root / "real" / "skip.log").write_bytes(b"excluded by name\n")
    os.symlink("real", root / "real-link")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root", "follow_symlinks": True,
                                   "exclude": ["hidden/", "real/*.log"]}])
    summary, recs = run_with_timeout(lambda: walk(m, tmp_path / "out"))
    p = by_path(recs)
    assert "loop" in p and "self" in p and "out_dir" in p and "out_file" in p
    assert not any("secret" in path for path in p)
    assert not any(path.startswith(("loop/", "out_dir/")) for path in p)
    assert p["loop"]["kind"] == "symlink" and "loop" in p["loop"]["reason"]
    assert p["real/up"]["kind"] == "symlink" and "loop" in p["real/up"]["reason"]
    assert p["self"]["kind"] == "symlink" and "loop" in p["self"]["reason"]
    for name in ("out_dir", "out_file"):
        assert p[name]["kind"] == "symlink" and p[name]["sha256"] is None
        assert "out of the root" in p[name]["reason"]
    # a followed link to a file inside the root is read (through its target) and hashed
    link = p["x-link.txt"]
    assert link["kind"] == "file" and link["error"] is None, link
    assert link["sha256"] == sha(b"x\n") == p["real/x.txt"]["sha256"]
    assert link["mime"] == "text/plain"
    # but a link cannot reach what the manifest excludes: the exclusion applies to the target
    for name in ("link.txt", "hidden-link"):
        assert p[name]["kind"] == "symlink" and p[name]["sha256"] is None
        assert p[name]["reason"] == "symlink into an excluded path (not followed)"
    assert not any(path.startswith(("hidden/", "hidden-link/")) for path in p)
    # under a followed directory link, a file is excluded by its real path too
    assert p["real-link/x.txt"]["sha256"] == sha(b"x\n")
    assert "real/skip.log" not in p and "real-link/skip.log" not in p
    assert summary["errors"] == 0
    # a re-walk finds the same records, reading nothing again
    again, recs2 = walk(m, tmp_path / "out")
    assert recs2 == recs and again["hashed"] == 0 and again["reused"] == summary["hashed"]


def test_fifo_recorded_never_opened(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    for name, follow in (("plain", False), ("follow", True)):
        root = tmp_path / name
        root.mkdir()
        os.mkfifo(root / "pipe")
        (root / "z.txt").write_bytes(b"after the pipe\n")
        if follow:
            os.symlink("pipe", root / "to_pipe")
    m = write_manifest(tmp_path, [{"name": "plain", "path": "plain"},
                                  {"name": "follow", "path": "follow", "follow_symlinks": True}])
    out = tmp_path / "out"
    # in a child process with a timeout: opening a FIFO for reading would block for ever
    proc = subprocess.run([sys.executable, "-m", "bastion", "walk", str(m), "--out", str(out),
                           "-q"], cwd=tmp_path, capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    recs = records(out)
    keyed = {(r["root"], r["path"]): r for r in recs}
    for rootname in ("plain", "follow"):
        r = keyed[(rootname, "pipe")]
        assert r["kind"] == "other" and r["sha256"] is None and r["mime"] is None
        assert "never opened" in r["reason"]
        assert keyed[(rootname, "z.txt")]["sha256"] == sha(b"after the pipe\n")
    link = keyed[("follow", "to_pipe")]
    assert link["kind"] == "symlink" and "special file" in link["reason"]
    summary = json.loads((out / "walk.summary.json").read_text())
    assert summary["other"] == 2


def _manifest_obj(tmp_path: Path, **kw: Any):
    (tmp_path / "root").mkdir(exist_ok=True)
    return load_manifest(write_manifest(tmp_path, [{"name": "r", "path": "root"}], **kw))


def test_hash_file_growing_during_the_walk(tmp_path: Path) -> None:
    m = _manifest_obj(tmp_path)
    f = tmp_path / "root" / "grows.txt"
    f.write_bytes(b"first part\n")
    stale = os.stat(f)  # the walk's stat, before the file grows
    with open(f, "ab") as fh:
        fh.write(b"appended while hashing\n")
    walker = Walker(m, open_output(tmp_path / "out"))
    digest, reason, mime, error = walker._hash(os.fsencode(str(f)), "grows.txt", stale)
    assert digest is None
    assert reason == "changed during the walk"
    assert error and mime == "text/plain"
    # with a fresh stat the same file hashes fine
    fresh = os.stat(f)
    digest, reason, _, error = walker._hash(os.fsencode(str(f)), "grows.txt", fresh)
    assert digest == sha(f.read_bytes()) and reason is None and error is None


def test_hash_file_replaced_or_deleted(tmp_path: Path) -> None:
    m = _manifest_obj(tmp_path)
    f = tmp_path / "root" / "f.txt"
    f.write_bytes(b"old\n")
    stale = os.stat(f)
    other = tmp_path / "root" / "new.tmp"
    other.write_bytes(b"new\n")
    os.replace(other, f)  # a different inode at the same name
    walker = Walker(m, open_output(tmp_path / "out"))
    digest, reason, _, error = walker._hash(os.fsencode(str(f)), "f.txt", stale)
    assert digest is None and reason == "changed during the walk" and error
    os.unlink(f)
    digest, reason, _, error = walker._hash(os.fsencode(str(f)), "f.txt", stale)
    assert digest is None and reason == "read error" and "cannot open" in error


def test_file_and_directory_vanishing_mid_walk(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    (root / "gone_dir").mkdir(parents=True)
    (root / "gone_dir" / "x.txt").write_bytes(b"x\n")
    (root / "gone.txt").write_bytes(b"bye\n")
    (root / "stays.txt").write_bytes(b"stays\n")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    real_selects, real_excluded = walk_mod.root_selects, walk_mod.dir_excluded

    def selects(root_, relpath):  # runs after the directory was listed, before the stat
        if relpath == "gone.txt" and (root / "gone.txt").exists():
            (root / "gone.txt").unlink()
        return real_selects(root_, relpath)

    def excluded(root_, reldir):  # runs after the directory's stat, before it is listed
        if reldir == "gone_dir" and (root / "gone_dir").exists():
            (root / "gone_dir" / "x.txt").unlink()
            (root / "gone_dir").rmdir()
        return real_excluded(root_, reldir)

    monkeypatch.setattr(walk_mod, "root_selects", selects)
    monkeypatch.setattr(walk_mod, "dir_excluded", excluded)
    summary, recs = walk(m, tmp_path / "out")
    assert [r["path"] for r in recs] == ["stays.txt"]
    assert summary["warnings"] == 2
    text = " ".join(summary["warning_samples"])
    assert "gone.txt" in text and "gone_dir" in text


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="permission bits do not stop root")
def test_unreadable_directory_and_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "x.txt").write_bytes(b"x\n")
    (root / "secret.txt").write_bytes(b"s\n")
    (root / "ok.txt").write_bytes(b"ok\n")
    (root / "locked").chmod(0)
    (root / "secret.txt").chmod(0)
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    try:
        summary, recs = walk(m, tmp_path / "out")
    finally:
        (root / "locked").chmod(0o755)
    p = by_path(recs)
    assert p["ok.txt"]["sha256"] == sha(b"ok\n")
    assert p["secret.txt"]["sha256"] is None and p["secret.txt"]["reason"] == "read error"
    assert p["secret.txt"]["error"]
    assert "locked/x.txt" not in p
    assert summary["warnings"] == 1 and "locked" in summary["warning_samples"][0]
    assert summary["errors"] == 1


# -- MIME detection ---------------------------------------------------------------------------


def make_zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            ctype = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data,
                       compress_type=ctype)
    return buf.getvalue()


def odf(kind: str) -> bytes:
    return make_zip([("mimetype", kind.encode()), ("content.xml", b"<office:document-content/>"),
                     ("META-INF/manifest.xml", b"<manifest/>")])


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
CT = ("[Content_Types].xml", b"<Types/>")
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer\n%%EOF\n"
MAIL = (b"Return-Path: <a@example.org>\nFrom: Alice <a@example.org>\nTo: b@example.org\n"
        b"Subject: hello\nDate: Mon, 1 Jan 2024 10:00:00 +0000\nMessage-ID: <1@x>\n\nBody.\n")


def _bmp() -> bytes:
    header = b"BM" + struct.pack("<IHHI", 70, 0, 0, 54)
    dib = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, 4, 2835, 2835, 0, 0)
    return header + dib + b"\x00\x00\xff\x00"


def _random_binary() -> bytes:
    data = bytearray(random.Random(20240601).randbytes(4096))
    data[0:4] = b"\x00\x01\x02\x03"  # no magic number by accident
    return bytes(data)


MIME_CASES: list[tuple[str, str, bytes, str]] = [
    ("pdf-in-txt", "document.txt", PDF, "application/pdf"),
    ("pdf-no-ext", "scan", PDF, "application/pdf"),
    ("rtf", "letter.txt", b"{\\rtf1\\ansi hello}", "application/rtf"),
    ("docx-no-ext", "report", make_zip([CT, ("word/document.xml", b"<w:document/>")]),
     detect.DOCX),
    ("docx-as-zip", "report.zip", make_zip([CT, ("word/document.xml", b"<w:document/>")]),
     detect.DOCX),
    ("xlsx", "sheet.bin", make_zip([CT, ("xl/workbook.xml", b"<workbook/>")]), detect.XLSX),
    ("pptx", "deck", make_zip([CT, ("ppt/presentation.xml", b"<p/>")]), detect.PPTX),
    ("odt", "text.zip", odf("application/vnd.oasis.opendocument.text"),
     "application/vnd.oasis.opendocument.text"),
    ("ods", "calc", odf("application/vnd.oasis.opendocument.spreadsheet"),
     "application/vnd.oasis.opendocument.spreadsheet"),
    ("odp", "slides.docx", odf("application/vnd.oasis.opendocument.presentation"),
     "application/vnd.oasis.opendocument.presentation"),
    ("epub", "book", make_zip([("mimetype", b"application/epub+zip"),
                               ("META-INF/container.xml", b"<container/>")]),
     "application/epub+zip"),
    ("zip", "archive.docx", make_zip([("readme.txt", b"hi"), ("data/x.bin", b"\x00\x01")]),
     "application/zip"),
    ("ole2-plain", "legacy", OLE_MAGIC + b"\x00" * 504 + b"WordDocument".ljust(64, b"\x00"),
     detect.OLE2),
    ("ole2-doc", "legacy.doc", OLE_MAGIC + b"\x00" * 504, "application/msword"),
    ("ole2-xls", "legacy.xls", OLE_MAGIC + b"\x00" * 504, "application/vnd.ms-excel"),
    ("ole2-encrypted", "secret.docx",
     OLE_MAGIC + b"\x00" * 504 + "EncryptedPackage".encode("utf-16-le") + b"\x00" * 64,
     detect.OOXML_ENCRYPTED),
    ("png", "image.txt", b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 20,
     "image/png"),
    ("jpeg", "photo", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20, "image/jpeg"),
    ("tiff-le", "scan.tif", b"II*\x00\x08\x00\x00\x00" + b"\x00" * 20, "image/tiff"),
    ("tiff-be", "scan", b"MM\x00*\x00\x00\x00\x08" + b"\x00" * 20, "image/tiff"),
    ("bmp", "picture", _bmp(), "image/bmp"),
    ("gif", "anim.txt", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "image/gif"),
    ("webp", "image", b"RIFF\x1a\x00\x00\x00WEBPVP8 " + b"\x00" * 18, "image/webp"),
    ("html-doctype", "page.txt", b"<!DOCTYPE html>\n<html><head><title>t</title></head>"
     b"<body><p>hi</p></body></html>\n", "text/html"),
    ("html-no-doctype", "page", b"  <html>\n<body>hello</body></html>\n", "text/html"),
    ("html-comment-first", "x", b"<!-- generated -->\n<HTML><BODY>x</BODY></HTML>",
     "text/html"),
    ("xhtml", "page.txt", b'<?xml version="1.0" encoding="utf-8"?>\n'
     b'<html xmlns="http://www.w3.org/1999/xhtml"><body>x</body></html>\n',
     "application/xhtml+xml"),
    ("svg-xml", "drawing", b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg">'
     b"<text>hi</text></svg>\n", "image/svg+xml"),
    ("svg-bare", "drawing.txt", b'<svg xmlns="http://www.w3.org/2000/svg"></svg>\n',
     "image/svg+xml"),
    ("xml", "data", b'<?xml version="1.0"?>\n<root><a>1</a></root>\n', "application/xml"),
    ("flat-odt", "doc.xml", b'<?xml version="1.0" encoding="UTF-8"?>\n<office:document '
     b'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" office:version="1.3" '
     b'office:mimetype="application/vnd.oasis.opendocument.text"><office:body/>'
     b"</office:document>\n", "application/vnd.oasis.opendocument.text-flat-xml"),
    ("mail", "message", MAIL, "message/rfc822"),
    ("mail-crlf", "message.txt", MAIL.replace(b"\n", b"\r\n"), "message/rfc822"),
    ("mail-mbox-from", "mbox", b"From alice@example.org Mon Jan  1 10:00:00 2024\n" + MAIL,
     "message/rfc822"),
    ("not-mail", "notes.txt", b"Subject: one header only\n\nbody\n", "text/plain"),
    ("utf16-bom", "notes", "\ufeffHello, world \u00e9\n".encode("utf-16-le"), "text/plain"),
    ("utf16be-bom", "notes", "\ufeffHello, world\n".encode("utf-16-be"), "text/plain"),
    ("utf16-no-bom", "notes.txt", "Hello, plain UTF-16 text here\n".encode("utf-16-le"),
     "text/plain"),
    ("utf16-html", "page", "\ufeff<!DOCTYPE html><html><body>x</body></html>"
     .encode("utf-16-le"), "text/html"),
    ("utf8-bom", "t", "\ufeffplain text\n".encode("utf-8"), "text/plain"),
    ("csv", "table.csv", b"a,b,c\n1,2,3\n", "text/csv"),
    ("tsv", "table.tsv", b"a\tb\n1\t2\n", "text/tab-separated-values"),
    ("json", "data.json", b'{"a": [1, 2, 3]}\n', "application/json"),
    ("markdown", "README.md", b"# Title\n\ntext\n", "text/markdown"),
    ("plain", "readme", b"Just some words.\n", "text/plain"),
    ("latin1", "old.txt", "caf\u00e9 cr\u00e8me\n".encode("latin-1"), "text/plain"),
    ("random-binary", "blob.txt", _random_binary(), detect.OCTET),
    ("control-bytes-txt", "weird.txt", bytes(range(1, 8)) * 200, detect.OCTET),
    ("gzip", "data.txt", b"\x1f\x8b\x08\x00" + b"\x00" * 20, "application/gzip"),
    ("empty", "empty.json", b"", "application/json"),
]


@pytest.mark.parametrize("label,name,data,expected", MIME_CASES, ids=[c[0] for c in MIME_CASES])
def test_detect_bytes(label: str, name: str, data: bytes, expected: str) -> None:
    assert detect_bytes(data, name) == expected


def test_detect_through_the_walk(tmp_path: Path) -> None:
    """The walk's own detection (head + reopen for ZIP/OLE directories) agrees on real files."""
    root = tmp_path / "root"
    expected: dict[str, str] = {}
    for label, name, data, mime in MIME_CASES:
        path = root / label / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        expected[f"{label}/{name}"] = mime
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    _, recs = walk(m, tmp_path / "out")
    assert {r["path"]: r["mime"] for r in recs} == expected
    for r in recs:
        assert r["sha256"] == sha((root / r["path"]).read_bytes())


def test_detect_zip_with_large_head(tmp_path: Path) -> None:
    """A DOCX whose central directory lies beyond the first 64 KiB is still a DOCX."""
    filler = random.Random(7).randbytes(200_000)
    data = make_zip([("word/media/image1.bin", filler), CT,
                     ("word/document.xml", b"<w:document/>")])
    assert len(data) > detect.HEAD_BYTES
    assert detect_bytes(data, "big") == detect.DOCX
    p = tmp_path / "big"
    p.write_bytes(data)
    assert detect.detect_file(p, "big", data[: detect.HEAD_BYTES]) == detect.DOCX


# -- incremental walks ------------------------------------------------------------------------


def test_incremental_rewalk(simple: tuple[Path, Path, Path],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    m, root, out = simple
    first, recs1 = walk(m, out)
    assert first["hashed"] == 5 and first["reused"] == 0
    before = (out / "walk.jsonl").read_bytes()
    assert (out / DB_NAME).is_file() and DB_NAME.startswith(STATE_DIR + "/")

    hashed: list[str] = []
    real_hash = Walker._hash

    def spy(self, path, relpath, st):
        hashed.append(relpath)
        return real_hash(self, path, relpath, st)

    monkeypatch.setattr(Walker, "_hash", spy)
    second, _ = walk(m, out)
    assert second["hashed"] == 0 and second["reused"] == 5 and hashed == []
    assert (out / "walk.jsonl").read_bytes() == before

    # change one file's content (same size, later mtime): exactly that file is read again
    target = root / "sub" / "c.txt"
    st = target.stat()
    target.write_bytes(b"GAMMA GAMMA\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    third, recs3 = walk(m, out)
    assert third["hashed"] == 1 and third["reused"] == 4
    assert hashed == ["sub/c.txt"]
    p1, p3 = by_path(recs1), by_path(recs3)
    assert p3["sub/c.txt"]["sha256"] == sha(b"GAMMA GAMMA\n") != p1["sub/c.txt"]["sha256"]
    assert {k: v for k, v in p3.items() if k != "sub/c.txt"} == \
        {k: v for k, v in p1.items() if k != "sub/c.txt"}

    # a file replaced by another inode with the same size and mtime is read again too
    hashed.clear()
    a = root / "a.txt"
    st = a.stat()
    tmp = root / "a.new"
    tmp.write_bytes(b"ALPHA\n")
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, a)
    fourth, recs4 = walk(m, out)
    assert hashed == ["a.txt"] and fourth["hashed"] == 1
    assert by_path(recs4)["a.txt"]["sha256"] == sha(b"ALPHA\n")


def test_stat_cache_ignored_when_max_file_bytes_changes(simple: tuple[Path, Path, Path]) -> None:
    m, root, out = simple
    walk(m, out)
    m2 = write_manifest(m.parent, [{"name": "r", "path": "root"}], max_file_bytes=1 << 20)
    summary, _ = walk(m2, out)
    assert summary["hashed"] == 5 and summary["reused"] == 0
    # and a limit that now excludes a file gives that file a reason, not a stale sha256
    m3 = write_manifest(m.parent, [{"name": "r", "path": "root"}], max_file_bytes=8)
    summary, recs = walk(m3, out)
    p = by_path(recs)
    assert p["sub/c.txt"]["sha256"] is None and "max_file_bytes" in p["sub/c.txt"]["reason"]
    assert summary["reused"] == 0


def test_deleted_database_means_full_rehash(simple: tuple[Path, Path, Path]) -> None:
    m, root, out = simple
    walk(m, out)
    before = (out / "walk.jsonl").read_bytes()
    for suffix in ("", "-wal", "-shm"):
        (out / (DB_NAME + suffix)).unlink(missing_ok=True)
    summary, _ = walk(m, out)
    assert summary["hashed"] == 5 and summary["reused"] == 0
    assert (out / "walk.jsonl").read_bytes() == before
    assert (out / DB_NAME).is_file()
    # walk.jsonl is an export of the database: an edited one is written again from it, the
    # same bytes, with nothing read again
    (out / "walk.jsonl").write_bytes(b"")
    summary, _ = walk(m, out)
    assert summary["hashed"] == 0 and (out / "walk.jsonl").read_bytes() == before
    (out / "walk.jsonl").unlink()
    summary, _ = walk(m, out)
    assert summary["hashed"] == 0 and (out / "walk.jsonl").read_bytes() == before
    # a database that is not one is a clear error naming it, and nothing is written
    for suffix in ("", "-wal", "-shm"):
        (out / (DB_NAME + suffix)).unlink(missing_ok=True)
    (out / DB_NAME).write_bytes(b"\x00garbage" * 100)
    with pytest.raises(OutputError, match="verdicts.sqlite"):
        walk(m, out)
    assert (out / "walk.jsonl").read_bytes() == before


def test_new_and_deleted_files_between_walks(simple: tuple[Path, Path, Path]) -> None:
    m, root, out = simple
    walk(m, out)
    (root / "a.txt").unlink()
    (root / "new.txt").write_bytes(b"new\n")
    summary, recs = walk(m, out)
    assert sorted(r["path"] for r in recs) == ["b.csv", "e.md", "new.txt", "sub/c.txt",
                                               "sub/deeper/d.json"]
    assert summary["hashed"] == 1 and summary["reused"] == 4


def test_edit_that_restores_size_and_mtime_is_seen(simple: tuple[Path, Path, Path]) -> None:
    """An edit in place that keeps the size and puts the mtime back (``touch -r``, ``rsync
    -t``, a tool restoring timestamps) still changes the inode's ctime: the file is read
    again rather than keeping a stale sha256."""
    m, root, out = simple
    walk(m, out)
    target = root / "sub" / "c.txt"
    st = target.stat()
    with open(target, "r+b") as f:  # same inode, same size
        f.write(b"GAMMA")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == \
        (st.st_size, st.st_mtime_ns, st.st_ino)
    summary, recs = walk(m, out)
    assert summary["hashed"] == 1 and summary["reused"] == 4
    assert by_path(recs)["sub/c.txt"]["sha256"] == sha(b"GAMMA gamma\n")


def test_cache_kept_per_root(tmp_path: Path) -> None:
    """Adding a root, or changing one root's patterns, re-reads only that root's files."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        for i in range(3):
            (tmp_path / name / f"{i}.txt").write_bytes(f"{name} {i}\n".encode())
    out = tmp_path / "out"
    m1 = write_manifest(tmp_path, [{"name": "one", "path": "one"}])
    first, recs1 = walk(m1, out)
    assert first["hashed"] == 3
    m2 = write_manifest(tmp_path, [{"name": "one", "path": "one"},
                                   {"name": "two", "path": "two"}], name="m2.yaml")
    second, recs2 = walk(m2, out)
    assert second["hashed"] == 3 and second["reused"] == 3 and len(recs2) == 6
    m3 = write_manifest(tmp_path, [{"name": "one", "path": "one"},
                                   {"name": "two", "path": "two", "exclude": ["0.txt"]}],
                        name="m3.yaml")
    third, recs3 = walk(m3, out)
    assert third["hashed"] == 2 and third["reused"] == 3 and len(recs3) == 5
    # dropping a root drops its records (walk.jsonl is rewritten, not left as it was)
    fourth, recs4 = walk(m1, out)
    assert fourth["reused"] == 3 and recs4 == recs1


def _big_tree(root: Path, dirs: int = 6, per_dir: int = 40) -> None:
    for d in range(dirs):
        sub = root / f"d{d}" / "inner"
        sub.mkdir(parents=True)
        for i in range(per_dir):
            (sub if i % 2 else sub.parent).joinpath(f"f{i:03d}.txt").write_bytes(
                f"dir {d} file {i}\n".encode())
    os.mkfifo(root / "pipe") if hasattr(os, "mkfifo") else None
    os.symlink("d0", root / "link")


def test_shared_rewalk_matches_a_serial_one(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A big re-walk is shared with forked helpers (each lstats the entries it owns); its
    records, counts and cache are those of a walk in one process, changes included."""
    root = tmp_path / "root"
    _big_tree(root)
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    serial_out, shared_out = tmp_path / "serial", tmp_path / "shared"
    walk(m, serial_out)
    walk(m, shared_out)
    (root / "d1" / "f000.txt").write_bytes(b"changed, longer than before\n")
    (root / "d2" / "inner" / "f001.txt").unlink()
    (root / "d3" / "new.txt").write_bytes(b"new\n")
    serial, serial_recs = walk(m, serial_out)
    monkeypatch.setattr(walk_mod, "PARALLEL_MIN_RECORDS", 1)
    monkeypatch.setattr(walk_mod, "MAX_WALKERS", 3)
    monkeypatch.setattr(walk_mod.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    # threads another test left behind would (rightly) stop the walk from forking
    monkeypatch.setattr(walk_mod.threading, "active_count", lambda: 1)
    helpers: list[int] = []
    real_run_shared = Walker._run_shared

    def spy(self, n):
        helpers.append(n)
        return real_run_shared(self, n)

    monkeypatch.setattr(Walker, "_run_shared", spy)
    shared, shared_recs = walk(m, shared_out)
    assert helpers == [2]
    assert shared_recs == serial_recs
    assert shared["hashed"] == serial["hashed"] == 2
    for key in ("files", "bytes", "reused", "not_hashed", "symlinks", "other", "errors",
                "records"):
        assert shared[key] == serial[key], key
    # nothing changed since: the shared walk finds every record again and writes nothing
    before = (shared_out / "walk.jsonl").stat().st_mtime_ns
    again, again_recs = walk(m, shared_out)
    assert helpers == [2, 2] and again_recs == serial_recs and again["hashed"] == 0
    assert (shared_out / "walk.jsonl").stat().st_mtime_ns == before
    # a process that runs threads never forks: the same walk, in one process
    monkeypatch.undo()
    monkeypatch.setattr(walk_mod, "PARALLEL_MIN_RECORDS", 1)
    monkeypatch.setattr(Walker, "_run_shared", spy)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        _, recs = walk(m, shared_out)
    finally:
        stop.set()
        thread.join()
    assert helpers == [2, 2] and recs == serial_recs


def test_failed_helper_share_is_walked_again(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    _big_tree(root)
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}])
    out = tmp_path / "out"
    _, recs = walk(m, out)
    (root / "d4" / "f010.txt").write_bytes(b"edited\n")
    monkeypatch.setattr(walk_mod, "PARALLEL_MIN_RECORDS", 1)
    monkeypatch.setattr(walk_mod.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(walk_mod.threading, "active_count", lambda: 1)
    parent = os.getpid()
    real_walk_root = Walker._walk_root

    def dies_in_the_helper(self, root, owner=0, owners=1):
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)  # the helper is killed mid-walk
        return real_walk_root(self, root, owner, owners)

    monkeypatch.setattr(Walker, "_walk_root", dies_in_the_helper)
    summary, recs2 = walk(m, out)
    assert len(recs2) == len(recs) and summary["hashed"] == 1
    assert by_path(recs2)["d4/f010.txt"]["sha256"] == sha(b"edited\n")
    assert any("walk helper 1 failed" in w for w in summary["warning_samples"])


# -- summary and atomic writes ----------------------------------------------------------------


def test_walk_summary(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a" * 10)
    (root / "big.txt").write_bytes(b"b" * 100)
    os.symlink("a.txt", root / "link")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root"}], max_file_bytes=50)
    summary, _ = walk(m, tmp_path / "out")
    on_disk = json.loads((tmp_path / "out" / "walk.summary.json").read_text())
    assert on_disk == summary
    assert summary["stage"] == "walk"
    assert summary["files"] == 2 and summary["bytes"] == 110
    assert summary["hashed"] == 1 and summary["reused"] == 0 and summary["not_hashed"] == 1
    assert summary["symlinks"] == 1 and summary["other"] == 0
    assert summary["errors"] == 0 and summary["warnings"] == 0
    assert summary["records"] == 3
    assert summary["manifest_digest"] == hashlib.sha256(m.read_bytes()).hexdigest()
    assert summary["manifest"] == str(m)
    assert summary["roots"] == [{"name": "r", "path": str(root)}]
    assert isinstance(summary["duration_s"], (int, float)) and summary["duration_s"] >= 0
    assert summary["started_at"].endswith("Z")
    again, recs = walk(m, tmp_path / "out")
    # a record that depends only on the file's stat is reused without opening the file, with
    # or without a sha256 (over max_file_bytes here): files = hashed + reused + not_hashed
    assert again["hashed"] == 0 and again["reused"] == 2 and again["not_hashed"] == 0
    assert again["files"] == 2 and again["bytes"] == 110 and again["records"] == 3
    assert by_path(recs)["big.txt"]["reason"] == "over max_file_bytes (50)"


def test_atomic_writes_leave_no_temp_files(simple: tuple[Path, Path, Path]) -> None:
    m, root, out = simple
    out.mkdir()
    stale = out / ".tmp-walk.jsonl.123"
    stale.write_bytes(b'{"half": "a record')  # what a killed run leaves behind
    walk(m, out)
    assert not stale.exists()
    leftovers = [p for p in out.rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
    assert not any(r["path"].startswith(".tmp-") for r in records(out))
    (root / "a.txt").write_bytes(b"changed, longer\n")
    walk(m, out)
    assert [p for p in out.rglob("*") if p.name.startswith(".tmp-")] == []
