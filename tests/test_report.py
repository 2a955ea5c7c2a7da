"""``bastion report``: the terminal text and the self-contained HTML page, on a real sweep
with hostile file names, rendered in headless Chromium (Debian's ``chromium``): the DOM holds
the counts, nothing is loaded from anywhere, no console error, a screenshot is kept."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bastion.tasks.cli import main
from bastion.tasks.commands.report import gather, render_html, render_text, shown

SCRIPT_NAME = "<script>alert(1)</script>.docx"
BIDI_NAME = "invoice\u202egnp.exe.docx"  # shows as "invoice" + reversed text without escaping


@pytest.fixture()
def swept(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "<script>alert(1)<").mkdir()  # the path reads <script>alert(1)</script>.docx
    (tree / SCRIPT_NAME).write_bytes(b"PK\x03\x04 not a zip at all")
    (tree / BIDI_NAME).write_bytes(b"PK\x03\x04 nor this")
    (tree / "plain.txt").write_bytes(b"plain words\n")
    (tree / "long.txt").write_bytes(b"many words here " * 40)
    (tree / "empty.txt").write_bytes(b"")
    (tree / 'a&b "quoted" <i>.bin').write_bytes(bytes(range(256)) * 4)
    other = tree / "old-output"  # another bastion output in the tree: a walk warning
    other.mkdir()
    from bastion.tasks.output.directory import mark_output, open_output

    od = open_output(other)
    mark_output(od)
    od.close()
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: docs\n    path: {tree}\n"
                        "stages: [walk, extract]\nlimits:\n  max_chars: 100\n",
                        encoding="utf-8")
    out = tmp_path / "out"
    assert main(["sweep", str(manifest), "--out", str(out), "-q", "--no-external"]) == 2
    return out


def test_the_terminal_report_names_every_failure_safely(swept: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["report", str(swept)]) == 0
    text = capsys.readouterr().out
    assert "records: 6" in text
    assert "  ok                   2" in text and "  error                2" in text
    assert "corrupt: 2" in text and "docs/<script>alert(1)</script>.docx" in text
    assert "max_chars: 1" in text and "docs/long.txt" in text
    assert "application/octet-stream: 1" in text
    assert "\u202e" not in text and "invoice\\u202egnp.exe.docx" in text
    assert 'docs/a&b "quoted" <i>.bin: no reader' in text
    assert "not recorded" in text  # no invented timings
    assert "bastion output" in text  # the walk's warning
    assert "\x1b" not in text


def test_an_output_that_is_not_there_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 1
    assert "holds no bastion output" in capsys.readouterr().err


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_page_escapes_hostile_names_and_loads_nothing(swept: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(swept), "--html", str(page)]) == 0
    body = page.read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(body)
    tags = {t for t, _ in parser.tags}
    assert "script" not in tags and "img" not in tags and "link" not in tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.docx" in body
    assert all(not v or not str(v).startswith(("http:", "https:", "//", "file:"))
               for _, attrs in parser.tags for k, v in attrs.items() if k in ("src", "href"))
    assert "\u202e" not in body
    assert "default-src 'none'" in body


def test_the_page_stays_bounded_over_100k_records(tmp_path: Path) -> None:
    out = tmp_path / "big"
    out.mkdir()
    kinds = ("corrupt", "timeout", "encrypted")
    with open(out / "extract.jsonl", "w", encoding="ascii") as f:
        for i in range(100_000):
            status = "error" if i % 10 == 0 else "ok"
            f.write(json.dumps({
                "root": "r", "path": f"d{i // 1000}/f{i}.pdf", "status": status,
                "mime": "application/pdf", "error_kind": kinds[i % 3] if status == "error"
                else None, "error": "boom" if status == "error" else None,
                "limit": "max_pages" if i % 1000 == 1 else None, "chars": 5}) + "\n")
    (out / "extract.summary.json").write_text(json.dumps({"duration_s": 12.5,
                                                          "extracted": 100_000, "tools": []}))
    report = gather(out, max_files=20)
    assert report.records == 100_000 and report.by_status == {"ok": 90_000, "error": 10_000}
    assert {k: g.count for k, g in report.errors.items()} == {
        "corrupt": 3334, "timeout": 3333, "encrypted": 3333}
    assert all(len(g.files) == 20 for g in report.errors.values())
    assert report.limits["max_pages"].count == 100
    page = render_html(report)
    assert len(page) < 60_000
    assert "… and 3314 more" in page
    assert len(render_text(report)) < 20_000


def test_shown_escapes_what_a_terminal_or_a_page_would_obey() -> None:
    assert shown("a\x1b[31mred") == "a\\x1b[31mred"
    assert shown("na\udcffme") == "na\\xffme"
    assert shown("ab\u202ecd\u2066") == "ab\\u202ecd\\u2066"
    assert shown("plain é ü 中") == "plain é ü 中"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is missing: .ci/run installs Debian's chromium for this test")
    pytest.skip("chromium is not installed (apt-get install chromium); CI installs it")


def _chromium_run(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, timeout=120, check=False)


@pytest.mark.slow
def test_the_page_renders_in_headless_chromium(swept: Path, tmp_path: Path) -> None:
    exe = _chromium()
    page = tmp_path / "report.html"
    assert main(["report", str(swept), "--html", str(page)]) == 0
    url = page.as_uri()
    dom = _chromium_run(exe, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    tree = dom.stdout.decode("utf-8")
    for status, n in (("ok", 2), ("error", 2), ("unsupported", 1), ("empty", 1)):
        assert f'data-status="{status}"><span class="n">{n}</span>' in tree, status
    assert '<span id="records">6</span>' in tree
    assert "invoice\\u202egnp.exe.docx" in tree and 'a&amp;b "quoted" &lt;i&gt;.bin' in tree
    assert 'data-group="corrupt" data-count="2"' in tree
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.docx" in tree
    assert "<script" not in tree.split("<body", 1)[1]
    log = dom.stderr.decode("utf-8", "replace")
    console = [ln for ln in log.splitlines() if "CONSOLE" in ln]
    assert console == [], console  # no error, no refused load (CSP), no script at all
    shot = tmp_path / "report.png"  # kept in the test's tmp directory as its artifact
    snap = _chromium_run(exe, tmp_path, f"--screenshot={shot}", "--window-size=1200,2000",
                         "--hide-scrollbars", url)
    assert snap.returncode == 0, snap.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank
    print(f"screenshot: {shot}")


def test_a_walk_alone_is_reported_as_such(tmp_path: Path, capsys) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("hi\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: t\n    path: {tree}\nstages: [walk]\n")
    assert main(["walk", str(manifest), "--out", str(tmp_path / "out"), "-q"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "extract stage has not run here" in text and "tools: not known" in text
    assert "walk: files 1, hashed 1" in text
    page = render_html(gather(tmp_path / "out"))
    assert 'id="no-extract"' in page and "Not known: no extract.summary.json" in page
