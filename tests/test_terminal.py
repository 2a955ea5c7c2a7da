"""A terminal gets no raw control characters from a document (issue 41, docs/security.md).

A document's text holds what a terminal acts on: OSC (set the window's title), CSI (clear the
screen), DCS (a device control string, XTGETTCAP), a C1 CSI (U+009B) and a bidirectional
override (U+202E).  ``bastion text``, ``show``, ``grep`` and ``search`` run as real processes
whose stdout is a real pseudo-terminal (``os.openpty``), and what they write is read from its
other end: no ESC, no C1 control, no override reaches it, the escapes show where they were,
tabs and line feeds are kept.  Into a pipe the bytes are the stored ones; ``--raw`` writes
them as they are on a terminal too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "BASTION_NO_EXTERNAL": "1"}

HOSTILE = ("alarm title \x1b]0;owned\x07 clear \x1b[2J dcs \x1bP+q544e\x1b\\ c1 \x9b31m "
           "bidi \u202e tab\there\nline two\n")
TERMINAL_ACTS_ON = (b"\x1b", "\x9b".encode(), "\u202e".encode(), b"\x07")


def bastion(*argv: str, terminal: bool) -> tuple[int, bytes]:
    """Run ``bastion ARGV`` with stdout a pseudo-terminal (``terminal``) or a pipe; its exit
    code and every byte it wrote there (a terminal's line discipline turns LF into CR LF:
    turned back here)."""
    if not terminal:
        got = subprocess.run([sys.executable, "-m", "bastion", *argv], capture_output=True,
                             env=ENV, cwd=REPO, timeout=300)
        return got.returncode, got.stdout
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "bastion", *argv], stdout=slave,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env=ENV, cwd=REPO)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=300), out.replace(b"\r\n", b"\n")


def assert_safe(got: bytes) -> None:
    for raw in TERMINAL_ACTS_ON:
        assert raw not in got, (raw, got)


@pytest.fixture()
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.txt"
    path.write_text(HOSTILE, encoding="utf-8")
    return path


def test_bastion_text_escapes_on_a_terminal_and_writes_the_stored_bytes_into_a_pipe(
        doc: Path) -> None:
    code, shown = bastion("text", str(doc), terminal=True)
    assert code == 0
    assert_safe(shown)
    assert shown.decode() == ("alarm title \\x1b]0;owned\\x07 clear \\x1b[2J dcs "
                              "\\x1bP+q544e\\x1b\\ c1 \\x9b31m bidi \\u202e tab\there\n"
                              "line two\n")
    code, piped = bastion("text", str(doc), terminal=False)
    assert (code, piped) == (0, HOSTILE.encode())  # the stored bytes, as before
    code, raw = bastion("text", "--raw", str(doc), terminal=True)
    assert (code, raw) == (0, HOSTILE.encode())  # --raw: as they are, on a terminal too


def test_bastion_text_json_on_a_terminal_is_still_json(doc: Path) -> None:
    code, shown = bastion("text", "--json", str(doc), terminal=True)
    assert code == 0
    assert_safe(shown)
    assert json.loads(shown)["text"] == HOSTILE
    code, piped = bastion("text", "--json", str(doc), terminal=False)
    assert json.loads(piped)["text"] == HOSTILE


@pytest.fixture()
def swept(tmp_path: Path, doc: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostile.txt").write_bytes(doc.read_bytes())
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({"version": 1, "roots": [{"name": "r", "path": str(root)}],
                                 "stages": ["walk", "extract", "index"]}))
    out = tmp_path / "out"
    got = subprocess.run([sys.executable, "-m", "bastion", "sweep", str(m), "--out", str(out),
                          "-q"], capture_output=True, env=ENV, cwd=REPO, timeout=300)
    assert got.returncode == 0, got.stderr
    return out


@pytest.mark.parametrize("argv", [["show", "{out}", "r/hostile.txt"],
                                  ["grep", "alarm", "{out}"],
                                  ["search", "{out}", "alarm"]],
                         ids=["show", "grep", "search"])
def test_show_grep_and_search_escape_on_a_terminal_unless_raw(swept: Path,
                                                              argv: list[str]) -> None:
    argv = [a.format(out=swept) for a in argv]
    code, shown = bastion(*argv, terminal=True)
    assert code == 0, shown
    assert_safe(shown.replace(b"\x1b[1m", b"").replace(b"\x1b[0m", b""))  # search's bold
    assert b"\\x1b]0;owned\\x07" in shown and b"\\u202e" in shown, shown
    code, raw = bastion(argv[0], "--raw", *argv[1:], terminal=True)
    assert code == 0 and b"\x1b]0;owned\x07" in raw and "\u202e".encode() in raw, raw
    code, piped = bastion(*argv, terminal=False)
    assert code == 0 and b"\x1b]0;owned\x07" in piped, piped
