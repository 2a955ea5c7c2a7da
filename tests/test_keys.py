"""The task key says what ran: every file's key holds its reader, its settings and the tools its
reader may call (present or absent, by version), so installing, removing or upgrading a tool, or
changing a reader's settings, re-runs exactly the files it concerns.

The pure plan is tested without processes; the rest runs the real ``bastion`` command in-process
on real trees with the real tools, installed and removed by PATH manipulation (a directory of
symlinks to the real binaries, or a wrapper that runs the real binary but reports another
version).
"""

from __future__ import annotations

import json
import os
import shutil
from email.message import EmailMessage
from pathlib import Path

import pytest

import pdfgen
from bastion.readers.base import Limits, Reader, ReadResult
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict
from bastion.tasks.cli import main
from bastion.tasks.extract.plan import plan, task_key
from bastion.tasks.records import WalkRecord

pytestmark = pytest.mark.slow  # every test here runs real pools, clusters or doit runs (> 1 s)

TOOLS = {name: shutil.which(name) for name in ("pdftotext", "pdftoppm", "tesseract")}
needs_tools = pytest.mark.skipif(not all(TOOLS.values()),
                                 reason="poppler-utils and tesseract-ocr are not installed")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BASTION_NO_EXTERNAL", raising=False)


# -- the pure plan ----------------------------------------------------------------------------


def _read(doc, sink, ctx) -> ReadResult:  # never called: the plan does not read
    raise AssertionError


PDF = Reader("pdf", 1, ("application/pdf",), _read, tools=("pdftotext", "tesseract"),
             settings=("pdf_engines",))
TEXT = Reader("text", 1, ("text/plain",), _read, extensions=(".txt",))
JSON = Reader("json", 1, ("application/json",), _read, extensions=(".json",))
REGISTRY = (PDF, JSON, TEXT)


def select(mime: str, name: str) -> Reader | None:
    for r in REGISTRY:
        if r.accepts(mime, name):
            return r
    return None


def walk(path: str, sha: str, mime: str | None, kind: str = "file") -> WalkRecord:
    return WalkRecord("r", path, kind, 10, 0, 1, sha if kind == "file" else None, None, mime,
                      None)


def tools(**versions: str) -> dict[str, Tool]:
    return {n: Tool(n, f"/usr/bin/{n}", v, v) for n, v in versions.items()}


def test_key_holds_every_tool_the_reader_may_call_present_or_absent() -> None:
    lim = Limits()
    none = task_key(PDF, "application/pdf", lim, {})
    one = task_key(PDF, "application/pdf", lim, tools(pdftotext="22.0"))
    both = task_key(PDF, "application/pdf", lim, tools(pdftotext="22.0", tesseract="5.3"))
    newer = task_key(PDF, "application/pdf", lim, tools(pdftotext="23.0", tesseract="5.3"))
    assert len({none, one, both, newer}) == 4
    # a tool the reader never calls changes nothing
    assert task_key(TEXT, "text/plain", lim, {}) == task_key(TEXT, "text/plain", lim,
                                                              tools(tesseract="5.3"))
    # a setting the reader reads changes its key; one it ignores does not
    engines = Limits(pdf_engines=("pdfplumber",))
    assert task_key(PDF, "application/pdf", engines, {}) != none
    assert task_key(TEXT, "text/plain", engines, {}) == task_key(TEXT, "text/plain", lim, {})
    # the MIME type and the reader's version are in it
    assert task_key(TEXT, "text/markdown", lim, {}) != task_key(TEXT, "text/plain", lim, {})
    bumped = Reader("text", 2, TEXT.mimes, _read, extensions=TEXT.extensions)
    assert task_key(bumped, "text/plain", lim, {}) != task_key(TEXT, "text/plain", lim, {})


def test_external_tools_turned_off_are_in_the_key_of_the_readers_that_call_them() -> None:
    """A record made with --no-external says the tool was not used for that reason, so its
    key is not the key of the same file read where the tool is missing; a reader that calls
    no tool keeps its key."""
    off = Limits(external_off=True)
    assert task_key(PDF, "application/pdf", off, {}) != task_key(PDF, "application/pdf",
                                                                 Limits(), {})
    assert task_key(TEXT, "text/plain", off, {}) == task_key(TEXT, "text/plain", Limits(), {})


def test_plan_reuses_every_status_but_error() -> None:
    lim = Limits()
    recs = [walk("a.txt", "a" * 64, "text/plain"), walk("b.txt", "b" * 64, "text/plain"),
            walk("c.txt", "c" * 64, "text/plain"), walk("d.txt", "d" * 64, "text/plain"),
            walk("link", "", None, kind="symlink")]
    key = task_key(TEXT, "text/plain", lim, {})
    verdicts = {("a" * 64, key): Verdict(status=Status.OK, chars=3),
                ("b" * 64, key): Verdict(status=Status.EMPTY),
                ("c" * 64, key): Verdict(status=Status.UNSUPPORTED, error="x"),
                ("d" * 64, key): Verdict.failed("corrupt", "bad")}
    p = plan(recs, verdicts, select, {}, lim, texts={f"{'a' * 64}.txt"})
    assert [(i.path, i.fresh) for i in p.items] == [
        ("a.txt", True), ("b.txt", True), ("c.txt", True), ("d.txt", False)]
    assert [r.path for r in p.skipped] == ["link"]
    # an ok verdict whose text is gone is redone
    p = plan(recs[:1], verdicts, select, {}, lim, texts=set())
    assert not p.items[0].fresh
    # another key (a tool appeared for a reader that can use it): redone, whatever the status
    p = plan([walk("s.pdf", "e" * 64, "application/pdf")],
             {("e" * 64, task_key(PDF, "application/pdf", lim, {})):
              Verdict(status=Status.EMPTY)}, select, tools(tesseract="5.3"), lim, set())
    assert not p.items[0].fresh and p.items[0].tools == ("tesseract",)


def test_plan_same_bytes_under_two_types_each_get_their_own_verdict_and_text() -> None:
    lim = Limits()
    sha = "f" * 64
    recs = [walk("a.json", sha, "application/json"), walk("a.txt", sha, "text/plain")]
    p = plan(recs, {}, select, {}, lim, set())
    a_json, a_txt = p.items
    assert a_json.reader == "json" and a_txt.reader == "text"
    assert a_json.key != a_txt.key
    stems = {a_json.stem, a_txt.stem}
    assert len(stems) == 2 and sha in stems  # one keeps the plain name, one is keyed
    assert len(p.stale) == 2  # two jobs
    # the same bytes under one type twice: one job
    p = plan([walk("x.txt", sha, "text/plain"), walk("y.txt", sha, "text/plain")], {},
             select, {}, lim, set())
    assert len(p.stale) == 1 and p.items[0].stem == p.items[1].stem == sha


def test_plan_is_stable_whatever_the_walk_order_of_duplicates() -> None:
    lim = Limits()
    sha = "9" * 64
    one = plan([walk("a.json", sha, "application/json"), walk("b.txt", sha, "text/plain")],
               {}, select, {}, lim, set())
    two = plan([walk("a.txt", sha, "text/plain"), walk("b.json", sha, "application/json")],
               {}, select, {}, lim, set())
    assert {i.key: i.stem for i in one.items} == {i.key: i.stem for i in two.items}


# -- end to end, with the real tools ----------------------------------------------------------


def manifest(tmp: Path, root: Path, extra: str = "") -> Path:
    m = tmp / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n"
                 + extra, encoding="utf-8")
    return m


def sweep(m: Path, out: Path, *extra: str) -> dict[str, dict]:
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "2", *extra]) in (0, 2)
    with open(out / "extract.jsonl", "rb") as f:
        return {json.loads(line)["path"]: json.loads(line) for line in f}


def summary(out: Path) -> dict:
    return json.loads((out / "extract.summary.json").read_text())


def link_tools(bindir: Path, *names: str) -> None:
    for name in names:
        target = bindir / name
        if not target.exists():
            target.symlink_to(os.path.realpath(TOOLS[name]))


def png_of(text: str) -> bytes:
    import io

    from PIL import Image

    gray, w, h = pdfgen.render_text_gray(text)
    buf = io.BytesIO()
    Image.frombytes("L", (w, h), gray).save(buf, "PNG")
    return buf.getvalue()


def mail_with_image(text: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "a@example.org"
    msg["To"] = "b@example.org"
    msg["Subject"] = "the scan"
    msg.set_content("see the attached scan\n")
    msg.add_attachment(png_of(text), maintype="image", subtype="png", filename="scan.png")
    return bytes(msg)


@pytest.fixture()
def mixed_tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "scan.pdf").write_bytes(pdfgen.make_image_only("QUOKKA 42"))
    (root / "text.pdf").write_bytes(pdfgen.make_text_pdf(["a text layer WOMBAT"]))
    (root / "mail.eml").write_bytes(mail_with_image("NUMBAT 7"))
    (root / "photo.png").write_bytes(png_of("DINGO 9"))
    (root / "note.txt").write_bytes(b"a plain note\n")
    (root / "page.html").write_bytes(b"<html><body><p>hello page</p></body></html>")
    return root


@needs_tools
def test_scanned_pdf_and_mail_attachment_are_ocred_once_the_tools_appear(
        tmp_path: Path, mixed_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))  # no tool at all
    m, out = manifest(tmp_path, mixed_tree), tmp_path / "out"
    before = sweep(m, out)
    assert before["scan.pdf"]["status"] == "empty"
    assert "QUOKKA" not in json.dumps(before)
    assert before["photo.png"]["status"] == "unsupported"

    link_tools(bindir, "pdftotext", "pdftoppm", "tesseract")
    after = sweep(m, out)
    redone = {p for p, r in after.items() if not r["reused"]}
    # exactly the files whose readers can use the tools
    assert redone == {"scan.pdf", "text.pdf", "mail.eml", "photo.png"}, redone
    scan = after["scan.pdf"]
    assert scan["status"] == "ok", scan
    assert "QUOKKA" in (out / scan["text"]).read_text()
    assert "tesseract" in scan["tools_used"]  # the page is rendered by PDFium in memory
    mail = after["mail.eml"]
    assert mail["status"] == "ok"
    assert "NUMBAT" in (out / mail["text"]).read_text()
    assert "tesseract" in mail["tools_used"]
    assert after["photo.png"]["status"] == "ok"
    assert after["note.txt"]["tools_used"] == [] and after["note.txt"]["reused"]

    sweep(m, out)  # same tools: nothing redone
    assert summary(out)["extracted"] == 0


@needs_tools
def test_no_external_says_the_tools_were_off_where_they_are_installed(
        tmp_path: Path, mixed_tree: Path) -> None:
    m, out = manifest(tmp_path, mixed_tree), tmp_path / "out"
    off = sweep(m, out, "--no-external")
    wording = "needs tesseract, not used: external tools are off (--no-external)"
    assert off["photo.png"]["status"] == "unsupported"
    assert off["photo.png"]["error"] == wording
    assert off["scan.pdf"]["warnings"] == [f"page 1: no text layer, not OCRed: {wording}"]
    assert f"not read: {wording}" in (out / off["mail.eml"]["text"]).read_text()
    assert off["note.txt"]["status"] == "ok"
    on = sweep(m, out)  # the tools on: read again, OCRed
    assert on["photo.png"]["status"] == "ok" and not on["photo.png"]["reused"]
    assert on["note.txt"]["reused"]  # a reader that calls no tool kept its verdict


@needs_tools
def test_a_new_tool_version_reruns_exactly_the_types_it_serves(
        tmp_path: Path, mixed_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    link_tools(bindir, "pdftoppm", "tesseract")

    def pdftotext(version: str) -> None:
        # the real pdftotext, reporting another version (an upgrade, as the key sees it)
        wrapper = bindir / "pdftotext"
        wrapper.unlink(missing_ok=True)
        wrapper.write_text(f"#!/bin/sh\nif [ \"$1\" = -v ]; then echo 'pdftotext version "
                           f"{version}' >&2; exit 0; fi\nexec {TOOLS['pdftotext']} \"$@\"\n")
        wrapper.chmod(0o755)

    pdftotext("22.0.1")
    monkeypatch.setenv("PATH", str(bindir))
    m, out = manifest(tmp_path, mixed_tree), tmp_path / "out"
    sweep(m, out)
    pdftotext("23.5.0")
    after = sweep(m, out)
    redone = {p for p, r in after.items() if not r["reused"]}
    assert redone == {"scan.pdf", "text.pdf", "mail.eml"}  # not the image: OCR alone
    assert {t["name"]: t["version"] for t in summary(out)["tools"]}["pdftotext"] == "23.5.0"


@needs_tools
def test_changing_pdf_engines_reruns_exactly_the_pdfs(tmp_path: Path,
                                                      mixed_tree: Path) -> None:
    out = tmp_path / "out"
    sweep(manifest(tmp_path, mixed_tree), out)
    after = sweep(manifest(tmp_path, mixed_tree, "limits:\n  pdf_engines: [pdfplumber]\n"), out)
    redone = {p for p, r in after.items() if not r["reused"]}
    # the mail reader reads attached PDFs, so it declares pdf_engines among its settings
    assert redone == {"scan.pdf", "text.pdf", "mail.eml"}
    assert after["text.pdf"]["extractor"] == "pdfplumber"


def test_same_bytes_as_json_and_as_txt_both_get_stable_correct_records(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    body = b'{"animal": "platypus"}\n'
    (root / "a.json").write_bytes(body)
    (root / "a.txt").write_bytes(body)
    m, out = manifest(tmp_path, root), tmp_path / "out"
    runs = []
    for n in range(3):
        runs.append(sweep(m, out, "--no-external"))
        assert summary(out)["extracted"] == (2 if n == 0 else 0)  # two jobs, then none
    for recs in runs:
        assert {r["status"] for r in recs.values()} == {"ok"}, recs
        assert recs["a.json"]["mime"] != recs["a.txt"]["mime"]
        for r in recs.values():
            assert "platypus" in (out / r["text"]).read_text()
    # the runs with nothing to do kept every verdict: their records say so (issue 33), and
    # are otherwise the first run's
    assert [r["reused"] for r in runs[0].values()] == [False, False]
    assert runs[1] == runs[2] == {p: dict(r, reused=True) for p, r in runs[0].items()}
    (out / ".bastion" / "extract-stamp.json").unlink()  # the full plan: every verdict kept
    again = sweep(m, out, "--no-external")
    assert summary(out)["extracted"] == 0
    assert again == {p: dict(r, reused=True) for p, r in runs[0].items()}
    fresh = tmp_path / "fresh"
    sweep(m, fresh, "--no-external")
    from bastion.tasks.commands.compare import compare_outputs

    assert compare_outputs(out, fresh) == []


@needs_tools
def test_tool_versions_are_never_null_under_a_busy_pool(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(80):
        (root / f"doc{i:02}.pdf").write_bytes(pdfgen.make_text_pdf([f"document {i} KOALA"] * 3))
    m = manifest(tmp_path, root, "limits:\n  pdf_engines: [pdftotext, pdfium]\n")
    for n in range(3):
        out = tmp_path / f"out{n}"  # a fresh output each time: no cached versions
        recs = sweep(m, out)
        versions = {t["name"]: t["version"] for t in summary(out)["tools"]}
        assert set(versions) >= {"pdftotext", "pdftoppm", "tesseract"}
        assert all(versions[t] for t in ("pdftotext", "pdftoppm", "tesseract")), versions
        assert all(r["tools_used"] == ["pdftotext"] for r in recs.values()), recs


def test_a_reader_library_version_is_in_its_key(monkeypatch) -> None:
    """A new version of a library a reader reads with (charset-normalizer for text) changes
    that reader's key, and no other's."""
    import bastion.tasks.extract.plan as plan_mod

    lim = Limits()
    text = Reader("text", 1, ("text/plain",), _read, libraries=("charset-normalizer",))
    other = Reader("rtf", 1, ("application/rtf",), _read)
    before = (task_key(text, "text/plain", lim, {}), task_key(other, "application/rtf", lim, {}))
    real = plan_mod.library_version
    monkeypatch.setattr(plan_mod, "library_version",
                        lambda name: "999.0" if name == "charset-normalizer" else real(name))
    after = (task_key(text, "text/plain", lim, {}), task_key(other, "application/rtf", lim, {}))
    assert before[0] != after[0] and before[1] == after[1]
    # the language identification names every text's languages: its version keys every reader
    monkeypatch.setattr(plan_mod, "library_version",
                        lambda name: "999.0" if name == "py3langid" else real(name))
    assert task_key(other, "application/rtf", lim, {}) != before[1]


@needs_tools
def test_a_key_flipped_back_never_reuses_a_text_another_key_overwrote(
        tmp_path: Path, mixed_tree: Path) -> None:
    """The least key's text keeps the plain name (extract/<aa>/<sha256>.txt): reading the
    same bytes under another key later (the tools turned on) overwrites it, so the first
    key's verdict no longer describes the file there; turned off again, the file is read
    again, and the output is a fresh run's."""
    m, out = manifest(tmp_path, mixed_tree), tmp_path / "out"
    off = sweep(m, out, "--no-external")
    on = sweep(m, out)
    assert on["mail.eml"]["text"] == off["mail.eml"]["text"]  # one name, two keys' texts
    assert "NUMBAT" in (out / on["mail.eml"]["text"]).read_text()
    back = sweep(m, out, "--no-external")
    assert not back["mail.eml"]["reused"]  # its plain text was overwritten: read again
    fresh = tmp_path / "fresh"
    sweep(m, fresh, "--no-external")
    from bastion.tasks.commands.compare import compare_outputs

    assert compare_outputs(out, fresh) == []
    for path, rec in back.items():
        if rec["status"] == "ok":
            assert (out / rec["text"]).read_bytes() == (fresh / rec["text"]).read_bytes(), path


def test_same_bytes_whose_least_type_went_away_are_read_again_under_the_other(
        tmp_path: Path) -> None:
    """a.csv and a.txt hold the same bytes (read as a table and as plain text): the least
    key's text is the plain name, the other's the keyed one.  a.txt deleted, the other key becomes the least: the plain file
    still holds a.txt's text, so a.csv is read again, not given that text."""
    root = tmp_path / "root"
    root.mkdir()
    body = b'name,animal\n"x, y",platypus\n'
    (root / "a.csv").write_bytes(body)
    (root / "a.txt").write_bytes(body)
    m, out = manifest(tmp_path, root), tmp_path / "out"
    both = sweep(m, out, "--no-external")
    texts = {p: (out / r["text"]).read_bytes() for p, r in both.items()}
    assert texts["a.csv"] != texts["a.txt"]
    (root / "a.txt").unlink()
    (out / ".bastion" / "extract-stamp.json").unlink()  # the full plan, not the change's
    later = sweep(m, out, "--no-external")
    assert (out / later["a.csv"]["text"]).read_bytes() == texts["a.csv"]
    (root / "a.txt").write_bytes(body)
    (root / "a.csv").unlink()
    (out / ".bastion" / "extract-stamp.json").unlink()
    last = sweep(m, out, "--no-external")
    assert (out / last["a.txt"]["text"]).read_bytes() == texts["a.txt"]
    fresh = tmp_path / "fresh"
    sweep(m, fresh, "--no-external")
    from bastion.tasks.commands.compare import compare_outputs

    assert compare_outputs(out, fresh) == []
