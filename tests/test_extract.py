"""The extract stage end to end, through the CLI in-process (``bastion.tasks.cli.main``) on small trees.

Records (one per walked file, sorted), the store's normal form, content addressing, the
retry/reuse rules across runs (including installing a tool by PATH manipulation), the store as
the source of truth (doit's db deleted, a text deleted, kill -9 mid-run), determinism, the
summary, and the stage's refusals.
"""

from __future__ import annotations

import hashlib
import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest

import bastion.tasks.extract.plan
from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs

from procutil import eventually, workers_of  # tests/ is on sys.path

REPO = Path(__file__).resolve().parent.parent
TESSERACT = shutil.which("tesseract")


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BASTION_NO_EXTERNAL", raising=False)


def write_manifest(path: Path, roots: dict[str, Path], stages: str = "[walk, extract]",
                   extra: str = "") -> Path:
    lines = ["version: 1", "roots:"]
    for name, root in roots.items():
        lines += [f"  - name: {name}", f"    path: {root}"]
    lines.append(f"stages: {stages}")
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def run(cmd: str, manifest: Path, out: Path, *extra: str) -> int:
    args = [cmd, str(manifest), "--out", str(out), "-q"]
    if cmd != "walk":
        args += ["-j", "2"]
    return main([*args, *extra])


def records(out: Path) -> list[dict]:
    with open(out / "extract.jsonl", "rb") as f:
        return [json.loads(line) for line in f]


def walk_records(out: Path) -> list[dict]:
    with open(out / "walk.jsonl", "rb") as f:
        return [json.loads(line) for line in f]


def summary(out: Path) -> dict:
    return json.loads((out / "extract.summary.json").read_text())


def by_path(recs: list[dict]) -> dict[str, dict]:
    return {f"{r['root']}/{r['path']}": r for r in recs}


def text_of(out: Path, sha: str) -> Path:
    return out / "extract" / sha[:2] / f"{sha}.txt"


def store_texts(out: Path) -> list[Path]:
    return sorted((out / "extract").glob("*/*.txt")) if (out / "extract").is_dir() else []


@pytest.fixture()
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A small text tree (two roots); returns (manifest, out)."""
    a = tmp_path / "a"
    b = tmp_path / "b"
    (a / "sub dir").mkdir(parents=True)
    b.mkdir()
    (a / "one.txt").write_bytes(b"first file\r\nsecond line\rthird\n")
    (a / "sub dir" / "two.md").write_bytes("# Caf\u0065\u0301\r\n\r\nna\u0308ive\n".encode())
    (a / "dup1.txt").write_bytes(b"same bytes in two files\n")
    (b / "dup2.txt").write_bytes(b"same bytes in two files\n")
    (b / "z.txt").write_bytes(b"last\n")
    (b / "empty.txt").write_bytes(b"   \n\n")
    (b / "blob.bin").write_bytes(bytes(range(256)) * 4)
    m = write_manifest(tmp_path / "manifest.yaml", {"docs": a, "more": b})
    return m, tmp_path / "out"


# -- records and the store ----------------------------------------------------------------------


def test_one_record_per_walked_file_sorted(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    walked = walk_records(out)
    recs = records(out)
    assert len(recs) == len(walked) == 7
    assert sorted((r["root"], r["path"]) for r in walked) == [(r["root"], r["path"])
                                                                for r in recs]
    assert [(r["root"], r["path"]) for r in recs] == sorted((r["root"], r["path"]) for r in recs)
    by = by_path(recs)
    assert by["docs/one.txt"]["status"] == "ok"
    assert by["docs/one.txt"]["extractor"] == "text:utf-8"
    assert by["docs/sub dir/two.md"]["status"] == "ok"
    assert by["more/empty.txt"]["status"] == "empty"
    assert by["more/blob.bin"]["status"] == "unsupported"
    for r in recs:
        assert set(r) >= {"root", "path", "sha256", "mime", "status", "extractor", "chars",
                          "error", "error_kind", "v", "reused", "tools_used", "text"}
        assert r["v"] == bastion.tasks.extract.plan.EXTRACT_VERSION
        has_text = text_of(out, r["sha256"]).exists()
        assert has_text == (r["status"] == "ok"), r
        if r["status"] == "ok":
            assert r["chars"] == len(text_of(out, r["sha256"]).read_text(encoding="utf-8"))
        else:
            assert r["chars"] == 0


def test_store_text_is_normalised(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "crlf.txt").write_bytes("line e\u0301\r\nlone\rend\r\n".encode("utf-8"))
    # a NUL only reaches the text reader inside UTF-16 (detection calls other NULs binary)
    body = "utf16 e\u0301 with a NUL\x00 here\r\nand a lone CR\rdone " + "padding " * 20 + "\n"
    (root / "utf16.txt").write_bytes(b"\xff\xfe" + body.encode("utf-16-le"))
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert run("sweep", m, out) == 0
    by = by_path(records(out))
    crlf = by["r/crlf.txt"]
    assert crlf["status"] == "ok"
    assert text_of(out, crlf["sha256"]).read_bytes() == "line \u00e9\nlone\nend\n".encode()
    u16 = by["r/utf16.txt"]
    assert u16["status"] == "ok", u16
    assert u16["extractor"] == "text:utf-16-le"
    got = text_of(out, u16["sha256"]).read_bytes().decode("utf-8")
    assert got == unicodedata.normalize("NFC", body.replace("\x00", "").replace("\r\n", "\n")
                                        .replace("\r", "\n"))
    for p in store_texts(out):
        t = p.read_bytes().decode("utf-8")  # strict UTF-8
        assert "\r" not in t and "\x00" not in t
        assert unicodedata.is_normalized("NFC", t)
        assert p.parent.name == p.stem[:2] and len(p.stem) == 64


def test_duplicates_extracted_once(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    by = by_path(records(out))
    d1, d2 = by["docs/dup1.txt"], by["more/dup2.txt"]
    assert d1["sha256"] == d2["sha256"]
    assert (d1["reused"], d2["reused"]) == (False, True)
    assert d1["status"] == d2["status"] == "ok"
    same = [p for p in store_texts(out) if p.stem == d1["sha256"]]
    assert len(same) == 1
    s = summary(out)
    unique = len({r["sha256"] for r in by.values()})
    assert s["extracted"] == unique
    assert s["reused"] == 1


def test_awkward_names(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "dir: with colon").mkdir(parents=True)
    names = [b"space name.txt", b"dir: with colon/a:b.txt", b"latin1-\xe9t\xe9.txt",
             b"new\nline.txt", b"extract:x.txt"]
    for i, n in enumerate(names):
        with open(os.fsencode(root) + b"/" + n, "wb") as f:
            f.write(f"content {i}\n".encode())
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert run("sweep", m, out) == 0
    recs = records(out)
    assert len(recs) == len(names)
    assert sorted(os.fsencode(r["path"]) for r in recs) == sorted(names)
    assert all(r["status"] == "ok" for r in recs), recs
    for r in recs:
        assert text_of(out, r["sha256"]).read_bytes().startswith(b"content ")
    first = (out / "extract.jsonl").read_bytes()
    assert run("sweep", m, out) == 0
    assert summary(out)["extracted"] == 0
    # nothing to do: every verdict kept, and the records say so (issue 33)
    assert (out / "extract.jsonl").read_bytes() == first.replace(b'"reused":false',
                                                                 b'"reused":true')


# -- reuse and retry across runs ----------------------------------------------------------------


def test_second_run_reuses_everything_and_one_edit_redoes_one(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    first = (out / "extract.jsonl").read_bytes()
    texts = {p: p.stat().st_mtime_ns for p in store_texts(out)}
    assert run("sweep", m, out) == 0
    recs = records(out)
    s = summary(out)
    assert s["extracted"] == 0 and s["reused"] == len(recs)
    assert {p: p.stat().st_mtime_ns for p in store_texts(out)} == texts  # nothing rewritten
    # nothing to do: every verdict was kept, and the records say so as the summary does
    # (issue 33: they used to keep the flags of the run that had work)
    assert all(r["reused"] for r in recs)
    assert (out / "extract.jsonl").read_bytes() == first.replace(b'"reused":false',
                                                                 b'"reused":true')
    # and the next run with nothing to do writes nothing at all
    flipped = (out / "extract.jsonl").stat()
    assert run("sweep", m, out) == 0 and summary(out)["extracted"] == 0
    again = (out / "extract.jsonl").stat()
    assert (again.st_ino, again.st_mtime_ns) == (flipped.st_ino, flipped.st_mtime_ns)
    # without the no-op stamp, the full plan gives the same records, all reused
    (out / ".bastion" / "extract-stamp.json").unlink()
    assert run("sweep", m, out) == 0
    recs = records(out)
    assert all(r["reused"] for r in recs)
    assert summary(out)["extracted"] == 0
    strip = [{k: v for k, v in json.loads(line).items() if k != "reused"}
             for line in first.splitlines()]
    assert strip == [{k: v for k, v in r.items() if k != "reused"} for r in recs]

    (m.parent / "a" / "one.txt").write_bytes(b"edited, and longer than before\n")
    assert run("sweep", m, out) == 0
    s = summary(out)
    assert s["extracted"] == 1
    by = by_path(records(out))
    assert by["docs/one.txt"]["reused"] is False
    assert text_of(out, by["docs/one.txt"]["sha256"]).read_text() == \
        "edited, and longer than before\n"
    assert [k for k, r in by.items() if not r["reused"]] == ["docs/one.txt"]


def test_tool_versions_asked_once_per_binary(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool is asked for its version once; later runs take it from .bastion/tools.json
    while the binary's stat is unchanged, and ask again when the binary changes."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "note.txt").write_bytes(b"a note\n")
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    tool = bindir / "pdftotext"

    def install(version: str) -> None:
        tool.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                        f"echo 'pdftotext version {version}' >&2\n")
        tool.chmod(0o755)

    install("99.1")
    monkeypatch.setenv("PATH", str(bindir))
    assert run("sweep", m, out) == 0
    assert calls.read_text() == "-v\n"
    assert [(t["name"], t["version"]) for t in summary(out)["tools"]] == [("pdftotext", "99.1")]
    assert run("sweep", m, out) == 0
    assert calls.read_text() == "-v\n"  # not asked again
    assert summary(out)["tools"][0]["version"] == "99.1"
    install("99.2")  # an upgrade: a new binary, a new stat
    assert run("sweep", m, out) == 0
    assert calls.read_text() == "-v\n-v\n"
    assert summary(out)["tools"][0]["version"] == "99.2"


@pytest.mark.slow
def test_tool_probe_asks_only_when_told(tmp_path: Path) -> None:
    """ToolProbe finds the tools at once but starts no process until ask(); the answers are
    collected by result(), which asks itself when nobody did; a binary whose stat matches
    the known cache is never asked."""
    from bastion.readers.runtime.toolset import ToolProbe

    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    for name, version in (("pdftotext", "1.2"), ("tesseract", "5.3.0")):
        tool = bindir / name
        # tesseract is also asked where its language packs are (--list-langs), as the real
        # one answers (here a directory that does not exist: no packs)
        langs = (f'if [ "$1" = --list-langs ]; then echo {name}-langs >> {calls}; echo '
                 f"'List of available languages in \"{tmp_path}/no-tessdata/\" (0):'; exit 0; fi\n"
                 if name == "tesseract" else "")
        # asked for its version, each tool says it started, waits (at most 10 s) until the
        # test lets it go and until the other tool has started, and says what it saw
        other = "tesseract" if name == "pdftotext" else "pdftotext"
        tool.write_text(
            f"#!/bin/sh\n{langs}touch {tmp_path}/started-{name}\ni=0\n"
            f"while [ $i -lt 100 ] && ! [ -e {tmp_path}/release -a -e {tmp_path}/started-{other} ]"
            f"; do sleep 0.1; i=$((i+1)); done\n"
            f"[ -e {tmp_path}/release ] && echo {name}-released >> {tmp_path}/events\n"
            f"[ -e {tmp_path}/started-{other} ] && echo {name}-saw-{other} >> {tmp_path}/events\n"
            f"echo {name} >> {calls}\necho '{name} {version}'\n")
        tool.chmod(0o755)
    known: dict[str, list] = {}
    probe = ToolProbe(path=str(bindir), known=known)
    assert probe.paths == {"pdftotext": str(bindir / "pdftotext"),
                           "tesseract": str(bindir / "tesseract")}
    time.sleep(0.6)
    assert not calls.exists()  # nothing asked yet
    probe.ask()
    # the questions run beside the caller: ask() returned while both still wait to be let go
    (tmp_path / "release").touch()
    tools = probe.result()
    # at the same time: each saw the other started before it answered (one after the other,
    # the first would have answered before the second started)
    assert sorted((tmp_path / "events").read_text().split()) == [
        "pdftotext-released", "pdftotext-saw-tesseract", "tesseract-released",
        "tesseract-saw-pdftotext"]
    assert {t.name: t.version for t in tools.values()} == {"pdftotext": "1.2",
                                                          "tesseract": "5.3.0"}
    assert sorted(calls.read_text().split()) == ["pdftotext", "tesseract", "tesseract-langs"]
    assert set(known) == {str(bindir / "pdftotext"), str(bindir / "tesseract"),
                          f"tessdata:{bindir / 'tesseract'}"}

    calls.unlink()
    again = ToolProbe(path=str(bindir), known=known).result()  # result() without ask()
    assert {t.name: t.version for t in again.values()} == {"pdftotext": "1.2",
                                                          "tesseract": "5.3.0"}
    assert not calls.exists()  # both from the cache
    assert ToolProbe(no_external=True, path=str(bindir)).result() == {}


def test_stage_module_loads_neither_doit_nor_the_readers() -> None:
    """The CLI creates the extract stage and starts its workers before it imports doit (and
    the parent's reader registry): importing bastion.tasks.extract.run must not pull them in."""
    code = ("import sys, bastion.tasks.extract.run; "
            "print(sorted(m for m in ('doit', 'bastion.readers.dispatch', 'bastion.readers.pdf.reader') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, check=True).stdout
    assert out.strip() == "[]"


def test_workers_started_before_the_walk_are_stopped(tmp_path: Path) -> None:
    """The CLI starts the workers before the walk; a run that extracts nothing, or stops
    early, leaves none behind."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "note.txt").write_bytes(b"a note\n")
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert run("sweep", m, out) == 0
    # one document: one worker (a second starts only when a document finds the first busy)
    assert summary(out)["workers_started"] == 1
    assert workers_of(out) == []
    assert run("sweep", m, out) == 0  # nothing to extract: the workers still stop
    assert summary(out)["extracted"] == 0
    assert workers_of(out) == []
    m2 = write_manifest(tmp_path / "m2.yaml", {"r": root}, extra="# another manifest\n")
    assert run("extract", m2, out) == 1  # refused (the walk is of another manifest)
    assert workers_of(out) == []


def _png(path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (120, 40), "white").save(path, "PNG")


def test_unsupported_retried_when_a_tool_appears(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _png(root / "scan.png")
    (root / "note.txt").write_bytes(b"a note\n")
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))  # no tool at all

    assert run("sweep", m, out) == 0
    by = by_path(records(out))
    png = by["r/scan.png"]
    assert png["mime"] == "image/png"
    assert png["status"] == "unsupported"
    assert png["tools_used"] == []
    assert "tesseract" in (png["error"] or "")
    assert summary(out)["tools"] == []

    assert run("sweep", m, out) == 0  # same PATH: kept
    by = by_path(records(out))
    assert by["r/scan.png"]["status"] == "unsupported"
    assert summary(out)["extracted"] == 0

    if TESSERACT is None:
        pytest.skip("tesseract not installed: cannot install it by PATH")
    (bindir / "tesseract").symlink_to(os.path.realpath(TESSERACT))
    assert run("sweep", m, out) == 0
    by = by_path(records(out))
    png = by["r/scan.png"]
    assert png["reused"] is False
    assert png["status"] in ("ok", "empty"), png
    assert png["extractor"] == "tesseract"
    assert by["r/note.txt"]["reused"] is True
    s = summary(out)
    assert s["extracted"] == 1
    # the one program found on PATH, beside the language packs (found where tesseract keeps
    # them, whatever PATH says)
    programs = [t for t in s["tools"] if t["name"] != "tessdata" and ":" not in t["name"]]
    assert [t["name"] for t in programs] == ["tesseract"]
    assert programs[0]["path"] == str(bindir / "tesseract")

    assert run("sweep", m, out) == 0  # tool still there: the new verdict is kept
    assert summary(out)["extracted"] == 0

    (bindir / "tesseract").unlink()  # uninstalled: back to the tool set of the first run,
    assert run("sweep", m, out) == 0  # whose verdict on the image is still in the store
    by = by_path(records(out))
    assert by["r/scan.png"]["status"] == "unsupported"
    assert by["r/note.txt"]["reused"] is True
    assert summary(out)["extracted"] == 0
    assert not text_of(out, by["r/scan.png"]["sha256"]).exists()  # the OCR text: gone


def test_error_records_are_retried_every_run(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    victim = root / "victim.txt"
    victim.write_bytes(b"original content\n")
    (root / "steady.txt").write_bytes(b"steady\n")
    (root / "gone.txt").write_bytes(b"deleted after the walk\n")
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert run("walk", m, out) == 0
    st = victim.stat()
    with open(victim, "r+b") as f:  # same size, same inode, same mtime: the walk can't tell
        f.write(b"ORIGINAL")
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    (root / "gone.txt").unlink()

    assert run("extract", m, out) == 2  # completed with error records
    by = by_path(records(out))
    assert by["r/gone.txt"]["status"] == "error"
    assert by["r/gone.txt"]["error_kind"] == "changed"
    assert "disappeared" in by["r/gone.txt"]["error"]
    assert by["r/victim.txt"]["status"] == "error"
    assert by["r/victim.txt"]["error_kind"] == "changed"
    assert "sha256" in by["r/victim.txt"]["error"]
    assert by["r/steady.txt"]["status"] == "ok"
    assert summary(out)["counts"]["error"] == 2

    assert run("extract", m, out) == 2  # no re-walk: the error verdict is retried
    by = by_path(records(out))
    assert by["r/victim.txt"]["status"] == "error"
    assert by["r/victim.txt"]["reused"] is False
    assert by["r/gone.txt"]["reused"] is False
    assert by["r/steady.txt"]["reused"] is True
    assert summary(out)["extracted"] == 2

    victim.write_bytes(b"original content\n")  # back as the walk saw it: now it succeeds
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run("extract", m, out) == 2  # gone.txt is still an error
    rec = by_path(records(out))["r/victim.txt"]
    assert rec["status"] == "ok" and rec["reused"] is False


def test_raising_extract_version_redoes_everything(tree: tuple[Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    unique = len({r["sha256"] for r in records(out)})
    monkeypatch.setattr(bastion.tasks.extract.plan, "EXTRACT_VERSION", bastion.tasks.extract.plan.EXTRACT_VERSION + 1)
    assert run("sweep", m, out) == 0
    recs = records(out)
    s = summary(out)
    assert s["extracted"] == unique
    assert s["extract_version"] == bastion.tasks.extract.plan.EXTRACT_VERSION
    assert all(r["v"] == bastion.tasks.extract.plan.EXTRACT_VERSION for r in recs)
    assert [r["path"] for r in recs if r["reused"]] == ["dup2.txt"]  # the in-run duplicate
    assert run("sweep", m, out) == 0
    assert summary(out)["extracted"] == 0


def test_records_and_summary_agree_on_reused_after_every_run(tree: tuple[Path, Path]) -> None:
    """``reused``: this run kept a prior verdict.  The summary counts what the records say,
    after a first run, runs with nothing to do, a change merged in, a deletion, a full plan."""
    m, out = tree

    def agree() -> int:
        s = summary(out)
        assert s["reused"] == sum(r["reused"] for r in records(out)), s
        return s["reused"]

    assert run("sweep", m, out) == 0
    assert agree() == 1  # the in-run duplicate
    assert run("sweep", m, out) == 0
    assert agree() == len(records(out))
    assert run("sweep", m, out) == 0
    assert agree() == len(records(out))
    (m.parent / "a" / "one.txt").write_bytes(b"edited once more\n")
    assert run("sweep", m, out) == 0
    assert agree() == len(records(out)) - 1
    (m.parent / "a" / "one.txt").unlink()
    assert run("sweep", m, out) == 0
    assert agree() == len(records(out))
    (out / ".bastion" / "extract-stamp.json").unlink()
    assert run("sweep", m, out) == 0
    agree()


def test_deleting_doits_db_costs_nothing(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    db = out / ".bastion" / "doit.json"
    assert db.exists()
    db.unlink()
    assert run("sweep", m, out) == 0
    s = summary(out)
    assert s["extracted"] == 0 and s["reused"] == s["records"]


def test_deleting_a_store_text_redoes_that_file(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    by = by_path(records(out))
    gone = text_of(out, by["more/z.txt"]["sha256"])
    gone.unlink()
    assert run("extract", m, out) == 0
    assert summary(out)["extracted"] == 1
    by = by_path(records(out))
    assert by["more/z.txt"]["reused"] is False
    assert gone.read_text() == "last\n"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_external_uses_no_tools(tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                   how: str) -> None:
    m, out = tree
    extra = ()
    if how == "flag":
        extra = ("--no-external",)
    else:
        monkeypatch.setenv("BASTION_NO_EXTERNAL", "1")
    assert run("sweep", m, out, *extra) == 0
    s = summary(out)
    assert s["tools"] == []
    assert s["no_external"] is True


def test_summary_fields(tree: tuple[Path, Path]) -> None:
    m, out = tree
    assert run("sweep", m, out) == 0
    s = summary(out)
    recs = records(out)
    assert s["counts"] == {"ok": 5, "empty": 1, "unsupported": 1, "error": 0, "skipped": 0}
    assert s["records"] == len(recs) == 7
    assert s["reused"] == 1
    assert s["chars"] == sum(r["chars"] for r in recs)
    assert s["extract_version"] == bastion.tasks.extract.plan.EXTRACT_VERSION
    digest = hashlib.sha256(m.read_bytes()).hexdigest()
    assert s["manifest_digest"] == digest
    assert s["walk_manifest_digest"] == digest
    assert isinstance(s["tools"], list)
    for t in s["tools"]:
        assert set(t) == {"name", "path", "version", "identity"}
        assert os.path.isabs(t["path"])
    assert [t["name"] for t in s["tools"]] == sorted(t["name"] for t in s["tools"])
    assert isinstance(s["duration_s"], float)


def test_two_fresh_runs_are_byte_identical(tree: tuple[Path, Path]) -> None:
    m, out = tree
    out2 = out.parent / "out2"
    assert run("sweep", m, out) == 0
    assert run("sweep", m, out2) == 0
    assert compare_outputs(out, out2) == []
    assert (out / "extract.jsonl").read_bytes() == (out2 / "extract.jsonl").read_bytes()
    s1 = {p.relative_to(out): p.read_bytes() for p in (out / "extract").rglob("*")
          if p.is_file()}
    s2 = {p.relative_to(out2): p.read_bytes() for p in (out2 / "extract").rglob("*")
          if p.is_file()}
    assert s1 == s2 and s1


def test_compare_ignores_reused_as_documented(tree: tuple[Path, Path]) -> None:
    m, out = tree
    out2 = out.parent / "out2"
    assert run("sweep", m, out) == 0
    assert run("sweep", m, out) == 0  # every record now reused
    assert run("sweep", m, out2) == 0
    assert compare_outputs(out, out2) == []


# -- atomicity: kill -9 mid-run -----------------------------------------------------------------


def _committed(out: Path) -> int:
    """Verdicts committed to the store so far (0 while it does not exist yet)."""
    db = out / ".bastion" / "verdicts.sqlite"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5)
        try:
            return con.execute("SELECT count(*) FROM verdicts").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_is_complete_and_consistent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for d in range(30):
        sub = root / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(100):
            (sub / f"f{i:03}.txt").write_bytes(f"file {d}/{i}\nunique text {d * 1000 + i}\n"
                                               .encode())
    m = write_manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    log = open(tmp_path / "killed.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from bastion.tasks.cli import main; sys.exit(main())",
         "sweep", str(m), "--out", str(out), "-j", "2", "-q"],
        cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT)
    try:
        # wait until extraction is under way and a first batch of verdicts is committed
        # (verdicts are committed in batches), then kill
        end = time.monotonic() + 60
        while time.monotonic() < end and proc.poll() is None:
            if _committed(out) > 0:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        workers = workers_of(out)
        assert workers, "no worker processes seen"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert not (out / "extract.jsonl").exists(), "killed too late: the run had finished"
    # the workers die with their parent (PR_SET_PDEATHSIG)
    eventually(lambda: workers_of(out) == [], "workers survived their parent's kill -9")
    partial = len(store_texts(out))
    committed = _committed(out)
    assert 0 < committed <= partial < 3000

    assert run("sweep", m, out) == 0
    walked = walk_records(out)
    recs = records(out)
    assert len(walked) == 3000
    keys = [(r["root"], r["path"]) for r in recs]
    assert len(keys) == len(set(keys)) == 3000
    assert set(keys) == {(r["root"], r["path"]) for r in walked}
    assert all(r["status"] == "ok" for r in recs)
    s = summary(out)
    # what the killed run committed was kept; texts it stored without a verdict were redone
    assert committed <= s["reused"] <= partial
    assert s["extracted"] == 3000 - s["reused"]
    leftovers = [os.path.join(d, n) for d, _, names in os.walk(out) for n in names
                 if n.startswith(".tmp-")]
    assert leftovers == []
    assert not any((out / ".bastion" / "tmp").iterdir())

    clean = tmp_path / "clean"
    assert run("sweep", m, clean) == 0
    for r in recs:
        assert text_of(out, r["sha256"]).read_bytes() == text_of(clean, r["sha256"]).read_bytes()
    # apart from 'reused', records and store are the same bytes as the clean run's
    differences = compare_outputs(out, clean)
    assert [d for d in differences if ": reused: " not in d] == []


# -- refusals -----------------------------------------------------------------------------------


def test_refuses_without_a_walk(tree: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    m, out = tree
    assert run("extract", m, out) == 1
    err = capsys.readouterr().err
    assert "no walk" in err and err.count("\n") == 1
    assert not (out / "extract.jsonl").exists()


def test_refuses_a_walk_from_another_manifest(tree: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture) -> None:
    m, out = tree
    assert run("walk", m, out) == 0
    other = m.parent / "other.yaml"
    other.write_text(m.read_text() + "# another manifest, same roots\n")
    capsys.readouterr()
    assert run("extract", other, out) == 1
    err = capsys.readouterr().err
    assert "different manifest" in err
    assert not (out / "extract.jsonl").exists()


def test_refuses_when_extract_is_not_a_stage(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    m = write_manifest(tmp_path / "m.yaml", {"r": root}, stages="[walk]")
    out = tmp_path / "out"
    assert run("sweep", m, out) == 0  # walks only
    assert (out / "walk.jsonl").exists() and not (out / "extract.jsonl").exists()
    capsys.readouterr()
    assert run("extract", m, out) == 1
    assert "'extract' is not in the stages" in capsys.readouterr().err
    assert not (out / "extract.jsonl").exists()


def test_extracting_in_slices_gives_the_same_outputs(tree: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    """The CLI hands doit the files to extract in slices (RunConfig.slice) to bound the
    parent's memory; slices of 2 must give what one run gives, and finish once."""
    from bastion.tasks.cli import run_stages
    from bastion.tasks.config import RunConfig

    m, out = tree
    assert run("sweep", m, out) == 0
    base = RunConfig(manifest=m, out=tmp_path / "sliced", jobs=2, quiet=True)
    cfg = dataclasses.replace(base, slice=2)
    assert run_stages(cfg, ["walk", "extract"]) == 0
    assert compare_outputs(out, tmp_path / "sliced", strict=True) == []
    s = json.loads((tmp_path / "sliced" / "extract.summary.json").read_text())
    assert s["extracted"] == 6 and s["records"] == 7  # 7 files, two with the same bytes
    walks = json.loads((tmp_path / "sliced" / "walk.summary.json").read_text())
    assert walks["hashed"] == 7  # walked once, not once per slice


def test_a_killed_runs_store_temps_are_cleared_after_it_only(tmp_path: Path) -> None:
    """The store's buckets are listed for a killed run's temp files only when that run left
    its marker (``.bastion/extracting``, there while a session may write the store): a run that
    closed its session leaves none, and the next run does not list a million texts."""
    from bastion.tasks.extract.session import RUNNING

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("some text\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    out = tmp_path / "out"
    assert run("sweep", m, out) == 0
    assert not (out / RUNNING).exists()
    bucket = next(p for p in (out / "extract").iterdir() if p.is_dir())
    stale = bucket / ".tmp-left.meta.json.1"
    stale.write_bytes(b"{")
    (root / "b.txt").write_text("more text\n")  # work for a session
    assert run("sweep", m, out) == 0
    assert stale.exists()  # no marker: the buckets were not listed
    (out / RUNNING).write_bytes(b"")  # as a run killed while writing leaves it
    (root / "c.txt").write_text("and more\n")
    assert run("sweep", m, out) == 0
    assert not stale.exists() and not (out / RUNNING).exists()
