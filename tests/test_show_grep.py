"""``bastion show`` and ``bastion grep``: from the store back to the documents, by path and by
regular expression, read from the output's records (no index needed)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import bastion
from bastion.tasks.cli import main
from bastion.tasks.commands import grep as grep_command

REPO = Path(__file__).resolve().parent.parent


def sweep(m: Path, out: Path) -> int:
    return main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"])


@pytest.fixture()
def swept(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    (root / "d0").mkdir(parents=True)
    (root / "d1").mkdir()
    (root / "d0" / "a.txt").write_text("first line\nthe Alder pump failed\nlast line\n")
    (root / "d0" / "b.txt").write_text("pump station\nALDER grove\n")
    (root / "d1" / "c.txt").write_text("nothing to see\n")
    shutil.copyfile(root / "d0" / "a.txt", root / "d1" / "a-copy.txt")
    (root / "d1" / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    out = tmp_path / "out"
    assert sweep(m, out) == 2  # (the broken docx is an error record)
    return m, root, out


def test_show_prints_the_text_by_root_relative_path(swept, capsys) -> None:
    m, root, out = swept
    capsys.readouterr()
    assert main(["show", str(out), "d0/a.txt"]) == 0
    assert capsys.readouterr().out == "first line\nthe Alder pump failed\nlast line\n"
    # as grep prints it (ROOT/PATH), and by the file's own path on disk
    assert main(["show", str(out), "r/d0/b.txt"]) == 0
    assert capsys.readouterr().out == "pump station\nALDER grove\n"
    assert main(["show", str(out), str(root / "d1" / "c.txt")]) == 0
    assert capsys.readouterr().out == "nothing to see\n"
    # several: each after a header, as head does
    assert main(["show", str(out), "d0/b.txt", "d1/c.txt"]) == 0
    assert capsys.readouterr().out == ("==> r/d0/b.txt <==\npump station\nALDER grove\n\n"
                                       "==> r/d1/c.txt <==\nnothing to see\n")


def test_show_markdown_prints_the_stored_rendering(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "page.html").write_text("<html><body><h1>Alder pump</h1><ul><li>one</li>"
                                    "<li>two</li></ul><p>see <a href='https://example.org/'>"
                                    "the manual</a></p></body></html>")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nmarkdown: true\n")
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    capsys.readouterr()
    assert main(["show", "--markdown", str(out), "page.html"]) == 0
    shown_md = capsys.readouterr().out
    assert "# Alder pump" in shown_md and "- one" in shown_md
    assert "[the manual](https://example.org/)" in shown_md
    assert main(["show", str(out), "page.html"]) == 0
    plain = capsys.readouterr().out
    assert "Alder pump" in plain and "#" not in plain and "](" not in plain
    # an output swept without markdown: one line on stderr, exit 1
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    plain_out = tmp_path / "plain"
    assert sweep(m, plain_out) == 0
    capsys.readouterr()
    assert main(["show", "--markdown", str(plain_out), "page.html"]) == 1
    got = capsys.readouterr()
    assert got.out == "" and "no Markdown stored" in got.err


def test_show_without_out_uses_the_manifest_here(swept, capsys, monkeypatch) -> None:
    m, root, out = swept
    here = m.parent / "here"
    here.mkdir()
    (here / "manifest.yaml").write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    monkeypatch.chdir(here)
    capsys.readouterr()
    assert main(["show", "d1/c.txt"]) == 1  # its output is root/.agent: not swept yet
    assert str(root / ".agent") in capsys.readouterr().err
    assert sweep(here / "manifest.yaml", root / ".agent") == 2
    capsys.readouterr()
    assert main(["show", "d1/c.txt"]) == 0
    assert capsys.readouterr().out == "nothing to see\n"


def test_show_a_path_not_walked_or_not_ok_is_one_line_and_exit_1(swept, capsys) -> None:
    m, root, out = swept
    capsys.readouterr()
    assert main(["show", str(out), "d0/nope.txt"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "no walked file" in captured.err and "d0/nope.txt" in captured.err
    assert main(["show", str(out), "d1/broken.docx"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error (corrupt)" in err, err
    # one bad among good ones: the good ones are still shown
    assert main(["show", str(out), "d1/c.txt", "d0/nope.txt"]) == 1
    assert "nothing to see" in capsys.readouterr().out
    with pytest.raises(LookupError):
        bastion.show(out, "d0/nope.txt")


def test_show_json_gives_the_record_beside_the_text(swept, capsys) -> None:
    m, root, out = swept
    capsys.readouterr()
    assert main(["show", str(out), "--json", "d0/a.txt", "d1/broken.docx"]) == 1
    lines = capsys.readouterr().out.splitlines()
    records = {json.loads(line)["path"]: json.loads(line)
               for line in (out / "extract.jsonl").read_bytes().splitlines()}
    a, broken = (json.loads(line) for line in lines)
    assert a["record"] == records["d0/a.txt"] and a["text"].startswith("first line")
    assert (a["root"], a["path"]) == ("r", "d0/a.txt")
    assert broken["record"]["status"] == "error" and broken["text"] is None
    shown = bastion.show(out, "r/d0/a.txt")
    assert shown.record.path == "d0/a.txt" and shown.text == a["text"]


def test_show_an_ambiguous_path_names_the_candidates(tmp_path: Path, capsys) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.txt").write_text(f"in {name}\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - {{name: one, path: {tmp_path / 'one'}}}\n"
                 f"  - {{name: two, path: {tmp_path / 'two'}}}\n")
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    capsys.readouterr()
    assert main(["show", str(out), "same.txt"]) == 1
    err = capsys.readouterr().err
    assert "one/same.txt" in err and "two/same.txt" in err
    assert main(["show", str(out), "two/same.txt"]) == 0
    assert capsys.readouterr().out == "in two\n"


def test_grep_lists_every_path_holding_the_word_and_exits_1_on_none(swept, capsys) -> None:
    m, root, out = swept
    capsys.readouterr()
    assert main(["grep", "Alder", str(out)]) == 0
    # both paths of the shared text, in (root, path) order, line numbers from 1
    assert capsys.readouterr().out == ("r/d0/a.txt:2:the Alder pump failed\n"
                                       "r/d1/a-copy.txt:2:the Alder pump failed\n")
    assert main(["grep", "-i", "alder", str(out)]) == 0
    assert capsys.readouterr().out == ("r/d0/a.txt:2:the Alder pump failed\n"
                                       "r/d0/b.txt:2:ALDER grove\n"
                                       "r/d1/a-copy.txt:2:the Alder pump failed\n")
    assert main(["grep", "-l", "line", str(out)]) == 0
    assert capsys.readouterr().out == "r/d0/a.txt\nr/d1/a-copy.txt\n"
    assert main(["grep", "-c", "-i", "l", str(out)]) == 0
    assert capsys.readouterr().out == ("r/d0/a.txt:3\nr/d0/b.txt:1\nr/d1/a-copy.txt:3\n")
    assert main(["grep", "quokka", str(out)]) == 1
    assert capsys.readouterr().out == ""


def test_grep_reads_each_distinct_text_once(swept, capsys, monkeypatch) -> None:
    m, root, out = swept
    for i in range(5):  # five more copies of a.txt's bytes
        shutil.copyfile(root / "d0" / "a.txt", root / "d1" / f"more-{i}.txt")
    assert sweep(m, out) == 2
    from bastion.tasks.commands.stored import Stored

    read: list[str] = []
    original = Stored.text

    def text(self, stem):
        read.append(stem)
        return original(self, stem)

    monkeypatch.setattr(Stored, "text", text)
    capsys.readouterr()
    assert main(["grep", "pump", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 8  # seven paths of one text, and b.txt
    assert [p.split(":")[0] for p in printed] == sorted(p.split(":")[0] for p in printed)
    assert len(read) == len(set(read)) == 3  # a, b, c: each once (broken.docx has none)


def test_grep_trouble_is_exit_2(swept, capsys) -> None:
    m, root, out = swept
    capsys.readouterr()
    assert main(["grep", "(", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not a regular expression" in err and "Traceback" not in err
    assert main(["grep", "x", str(m.parent)]) == 2
    assert "not a bastion output" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["grep"])
    assert usage.value.code == 2
    # a text the store lost: said, the search goes on, exit 2 even with matches
    records = [json.loads(line) for line in (out / "extract.jsonl").read_bytes().splitlines()]
    b = next(r for r in records if r["path"] == "d0/b.txt")
    (out / b["text"]).unlink()
    capsys.readouterr()
    assert main(["grep", "-i", "alder", str(out)]) == 2
    captured = capsys.readouterr()
    assert "r/d0/a.txt:2:" in captured.out and "r/d0/b.txt" in captured.err


def test_grep_and_show_escape_control_characters_on_a_terminal(tmp_path: Path) -> None:
    """A file name and a line of text holding ESC sequences reach a terminal as escapes;
    into a pipe they are written as they are."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "red\x1b[31m.txt").write_text("alarm \x1b[2J here\tand a tab\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    import pty

    for argv in (["grep", "alarm", str(out)], ["show", str(out), "r/red\x1b[31m.txt"]):
        pid, fd = pty.fork()
        if pid == 0:  # the child: stdout is the pseudo-terminal (not pytest's capture)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            code = main(argv)
            sys.stdout.flush()
            os._exit(code)
        got = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, got
        assert b"\x1b" not in got, got
        assert b"\\x1b" in got and b"\t" in got, got
    piped = subprocess.run([sys.executable, "-m", "bastion", "grep", "alarm", str(out)],
                           capture_output=True, cwd=str(REPO))
    assert piped.returncode == 0
    assert piped.stdout == b"r/red\x1b[31m.txt:1:alarm \x1b[2J here\tand a tab\n"


def test_grep_over_shared_texts_streams_from_the_records(swept, capsys) -> None:
    """The matches of a text several records name are kept only until its last record is
    printed (the temporary database holds no row at the end), and every record's lines
    come out in (root, path) order with the right line numbers."""
    m, root, out = swept
    from bastion.tasks.commands.stored import open_stored
    import re

    with open_stored(out) as stored:
        g = grep_command.Grep(stored, re.compile("line", re.M), "lines")
        kept = []
        for named in stored.named():
            g._file(named)
            kept.append((named.path, g.kept.execute("SELECT count(*) FROM texts").fetchone()[0]))
        # a.txt's matches are kept from its first path to its last, then dropped
        assert kept == [("d0/a.txt", 1), ("d0/b.txt", 1), ("d1/a-copy.txt", 0),
                        ("d1/c.txt", 0)]
        g.stdout.flush()
        assert g.kept.execute("SELECT count(*) FROM lines").fetchone()[0] == 0
        assert g.found and not g.trouble
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["r/d0/a.txt:1:first line", "r/d0/a.txt:3:last line",
                     "r/d1/a-copy.txt:1:first line", "r/d1/a-copy.txt:3:last line"]


@pytest.mark.parametrize("text,pattern,expected", [
    ("a\nb\n", "^$", []),  # the LF that ends the last line starts no line
    ("a\n\nb", "^$", [(2, "")]),
    ("x a\nb y\n", r"a\sb", []),  # per line, as grep: no match across a line break
    ("one\ntwo\n", r"\Atwo", [(2, "two")]),
    ("", "", []),
    ("page one\fpage two\n", "two", [(1, "page one\fpage two")]),
])
def test_matching_lines_is_per_line(text: str, pattern: str, expected: list) -> None:
    import re

    assert list(grep_command.matching_lines(re.compile(pattern, re.M), text)) == expected


def test_grep_warns_while_the_records_are_not_whole(swept, capsys) -> None:
    m, root, out = swept
    db = sqlite3.connect(out / ".bastion" / "verdicts.sqlite")
    with db:
        db.execute("UPDATE records_state SET value = 'null' WHERE name = 'export'")
    db.close()
    capsys.readouterr()
    assert main(["grep", "pump", str(out)]) == 0
    assert "being written" in capsys.readouterr().err
