"""``bastion text FILE…``: one file's text without a manifest, through the sweep's sandboxed
worker; the same text as a sweep stores; exit codes; stdin; no trace left; and the helpful
refusals of ``bastion extract report.pdf`` and ``bastion sweep`` without a manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bastion.tasks.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "samples"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "BASTION_NO_EXTERNAL": "1"}


def bastion(*argv: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bastion", *argv], input=stdin,
                          capture_output=True, env=env or ENV, cwd=cwd, timeout=300)


def test_prints_the_text_and_nothing_else(tmp_path: Path) -> None:
    doc = tmp_path / "notes.txt"
    doc.write_bytes(b"caf\xc3\xa9 marker-alpha\r\nsecond line\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    got = bastion("text", str(doc), env={**ENV, "TMPDIR": str(tmp)}, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "café marker-alpha\nsecond line\n".encode()
    assert got.stderr == b""
    assert list(tmp.iterdir()) == []  # no scratch directory left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "tmp"]  # no output dir


def test_stdin_json_and_exit_codes(tmp_path: Path) -> None:
    ok = tmp_path / "a.csv"
    ok.write_bytes(b"name,qty\napple,3\n")
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    got = bastion("text", "--json", str(ok), str(broken))
    assert got.returncode == 2  # an error record, as a sweep
    lines = [json.loads(x) for x in got.stdout.decode().splitlines()]
    assert [r["status"] for r in lines] == ["ok", "error"]
    assert lines[0]["text"] == "name\tqty\napple\t3\n" and lines[0]["extractor"].startswith("csv")
    assert lines[1]["error_kind"] == "corrupt" and lines[1]["text"] is None
    assert "broken.docx: error (corrupt)" in got.stderr.decode()

    got = bastion("text", str(tmp_path / "missing.txt"), str(ok))
    assert got.returncode == 3  # a FILE that cannot be read: the walk's "partial"
    assert got.stdout.decode().endswith("==> " + str(ok) + " <==\nname\tqty\napple\t3\n")
    assert "missing.txt: cannot read" in got.stderr.decode()

    got = bastion("text", "-", "--name", "page.html",
                  stdin=b"<html><head><title>T</title></head><body><p>from stdin</p></body>")
    assert got.returncode == 0, got.stderr
    assert b"from stdin" in got.stdout

    assert bastion("text").returncode == 1  # no FILE: a usage error
    assert bastion("text", "-", "-").returncode == 1


def test_extract_of_a_document_and_sweep_without_manifest_say_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = SAMPLES / "pdf" / "crazyones.pdf"
    assert main(["extract", str(pdf)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"bastion text {pdf}" in err and "not a manifest" in err
    monkeypatch.chdir(tmp_path)
    for cmd in ("sweep", "walk", "extract"):
        assert main([cmd]) == 1
        err = capsys.readouterr().err
        assert "no manifest given" in err and "bastion text FILE" in err
    # a manifest.yaml in the current directory is the default
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "a.txt").write_text("hello\n")
    (tmp_path / "manifest.yaml").write_text(yaml.safe_dump(
        {"version": 1, "roots": [{"name": "r", "path": "root"}], "stages": ["walk"]}))
    assert main(["sweep", "--out", str(tmp_path / "out"), "-q"]) == 0
    assert (tmp_path / "out" / "walk.jsonl").is_file()


@pytest.mark.slow
def test_same_text_as_a_sweep_for_every_sample(tmp_path: Path) -> None:
    """Every file of tests/samples: ``bastion text --json`` (one call) gives the sweep's
    verdict and text byte for byte."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "stages": ["walk", "extract"],
                                        "roots": [{"name": "s", "path": str(SAMPLES)}]}))
    out = tmp_path / "out"
    swept = bastion("sweep", str(manifest), "--out", str(out), "-q", "-j", "2")
    assert swept.returncode in (0, 2), swept.stderr
    records = {}
    with open(out / "extract.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            records[str(SAMPLES / r["path"])] = r
    files = sorted(records)
    assert len(files) > 100
    got = bastion("text", "--json", *files)
    assert got.returncode == swept.returncode
    printed = [json.loads(x) for x in got.stdout.decode().splitlines()]
    assert len(printed) == len(files)
    for path, mine in zip(files, printed):
        theirs = records[path]
        assert mine["path"] == path
        for key in ("status", "extractor", "chars", "error_kind", "limit", "sha256", "mime"):
            assert mine[key] == theirs[key], (path, key)
        if theirs["status"] == "ok":
            stored = (out / theirs["text"]).read_text(encoding="utf-8")
            assert mine["text"] == stored, path


def test_the_dispatch_table_is_what_the_readers_declare() -> None:
    """readers/dispatch.py SPECS (which lets a one-file read import only its reader's module)
    lists every reader, in the registry's order, with the MIME types and extensions its
    READER declares; and it chooses as the loaded readers' declarations do."""
    code = ("import json, sys\n"
            "from bastion.readers import dispatch\n"
            "picks = [(m, n) for m, n in json.loads(sys.argv[1])]\n"
            "lazy = [getattr(dispatch.select(m, n), 'name', None) for m, n in picks]\n"
            "assert 'bastion.readers.text.rtf' not in sys.modules  # no pick is RTF\n"
            "specs = {r.name: [list(r.mimes), list(r.extensions)]\n"
            "         for r in dispatch.BUILTIN.readers()}\n"
            "readers = dispatch.BUILTIN.readers()\n"
            "def declared(m, n):  # the choice on what the loaded readers declare\n"
            "    return (next((r.name for r in readers if m in r.mimes), None)\n"
            "            or next((r.name for r in readers if r.accepts(m, n)), None)\n"
            "            or ('text' if m.startswith('text/') else None))\n"
            "full = [declared(m, n) for m, n in picks]\n"
            "print(json.dumps([specs, {k: [list(a), list(b)] for k, (a, b) in "
            "dispatch.SPECS.items()}, list(dispatch.SPECS) == list(specs), lazy, full]))\n")
    picks = [["application/pdf", "a.pdf"], ["text/plain", "a.txt"], ["text/x-unknown", "a.q"],
             ["application/octet-stream", "a.docx"], ["application/octet-stream", "a.tar.gz"],
             ["application/x-ole-storage", "a.msg"], ["image/png", "a.png"],
             ["application/octet-stream", "a.bin"], ["message/rfc822", ""],
             ["application/vnd.ms-outlook", "x"], ["text/html", "a.txt"]]
    got = subprocess.run([sys.executable, "-c", code, json.dumps(picks)], capture_output=True,
                         env=ENV, timeout=60)
    assert got.returncode == 0, got.stderr.decode()
    declared, table, same_order, lazy, full = json.loads(got.stdout)
    assert table == declared and same_order
    assert lazy == full and lazy[:3] == ["pdf", "text", "text"] and lazy[7] is None


GERMAN = "Dies ist ein kleiner deutscher Text über das Wetter, die Arbeit und den Garten.\n"


def test_languages_are_named_only_when_printed(tmp_path: Path) -> None:
    """``bastion text`` prints only the text: its worker loads no language model (≈ 0.6 s of
    CPU, three times the rest of a small file's reading); ``--json`` names the languages."""
    doc = tmp_path / "brief.txt"
    doc.write_text(GERMAN, encoding="utf-8")
    code = ("import sys\n"
            "from bastion.readers.base import Document, Limits\n"
            "from bastion.readers.dispatch import read_document\n"
            "from bastion.readers.runtime.context import LocalContext\n"
            "out = read_document(Document(open(sys.argv[1], 'rb').read(), 'brief.txt',"
            " 'text/plain'), LocalContext(Limits(name_languages=sys.argv[2] == '1')))\n"
            "print(out.status, out.result.languages, 'py3langid' in sys.modules)\n")
    for flag, want in (("0", "ok () False"), ("1", "ok (('de', 1.0),) True")):
        done = subprocess.run([sys.executable, "-c", code, str(doc), flag], env=ENV,
                              capture_output=True, text=True, timeout=120, check=True)
        assert done.stdout.strip() == want, done.stdout
    plain = subprocess.run([sys.executable, "-m", "bastion", "text", str(doc)], env=ENV,
                           capture_output=True, text=True, timeout=120)
    assert (plain.returncode, plain.stdout) == (0, GERMAN)
    js = subprocess.run([sys.executable, "-m", "bastion", "text", "--json", str(doc)], env=ENV,
                        capture_output=True, text=True, timeout=120)
    assert json.loads(js.stdout)["languages"] == [{"code": "de", "confidence": 1.0}]
