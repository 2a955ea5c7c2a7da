"""Every standard doit command on bastion's tasks, through the real ``doit`` command in a
subprocess (``python -m doit -f dodo.py …``) on a copy of the bundled example tree."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here runs real pools, clusters or doit runs (> 1 s)

REPO = Path(__file__).resolve().parent.parent
DODO = str(REPO / "dodo.py")


@pytest.fixture()
def example(tmp_path: Path) -> tuple[Path, Path]:
    """(manifest, out): a private copy of examples/ (so no test depends on the checkout)."""
    shutil.copytree(REPO / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns(".agent"))
    return tmp_path / "examples" / "manifest.yaml", tmp_path / "out"


def doit(*args: str, manifest: Path | None = None, out: Path | None = None,
         cwd: Path = REPO) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "doit", "-f", DODO, *args]
    if manifest is not None:
        argv.append(f"manifest={manifest}")
    if out is not None:
        argv.append(f"out={out}")
    env = dict(os.environ)
    env.pop("BASTION_NO_EXTERNAL", None)
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def records(out: Path) -> dict[str, dict]:
    with open(out / "extract.jsonl", "rb") as f:
        return {json.loads(line)["path"]: json.loads(line) for line in f}


def test_extract_prints_the_summary_and_v2_a_line_per_file(example) -> None:
    m, out = example
    first = doit("-v", "2", "extract", manifest=m, out=out)
    assert first.returncode == 0, first.stderr
    assert ".  extract:docs/readme.txt" in first.stdout
    assert "extract: 16 files" in first.stderr
    again = doit("extract", manifest=m, out=out)
    assert again.returncode == 0
    assert "16 reused, 0 extracted now" in again.stderr
    assert ".  extract:" not in again.stdout


def test_forget_makes_that_file_run_again(example) -> None:
    m, out = example
    assert doit("extract", manifest=m, out=out).returncode == 0
    forgot = doit("forget", "extract:docs/readme.txt", manifest=m, out=out)
    assert "forgetting extract:docs/readme.txt" in forgot.stdout
    run = doit("-v", "2", "extract", manifest=m, out=out)
    assert run.stdout.count(".  extract:") == 1 and ".  extract:docs/readme.txt" in run.stdout
    recs = records(out)
    assert recs["readme.txt"]["reused"] is False
    assert sum(not r["reused"] for r in recs.values()) == 1
    # forgotten once: the next run reuses it again
    assert "0 extracted now" in doit("extract", manifest=m, out=out).stderr


def test_clean_one_file_then_everything(example) -> None:
    m, out = example
    assert doit("extract", manifest=m, out=out).returncode == 0
    readme = records(out)["readme.txt"]
    text = out / readme["text"]
    assert text.exists()
    cleaned = doit("clean", "extract:docs/readme.txt", manifest=m, out=out)
    assert cleaned.returncode == 0
    assert not text.exists()
    assert records(out)["readme.txt"]["status"] == "skipped"
    assert records(out)["page.html"]["status"] == "ok"
    run = doit("-v", "2", "extract", manifest=m, out=out)
    assert run.stdout.count(".  extract:") == 1 and text.exists()

    assert doit("clean", manifest=m, out=out).returncode == 0
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert not [p for p in left if p.startswith("extract") or p.endswith(".jsonl")
                or "summary" in p or "verdicts" in p or ".lines" in p], left


@pytest.mark.parametrize("parallel", [["-n", "2"], ["-n", "2", "-P", "thread"], ["-n2"]])
def test_doit_n_is_a_one_line_refusal(example, parallel: list[str]) -> None:
    m, out = example
    for _ in range(2):  # on a fresh output, then on an up-to-date one
        proc = doit(*parallel, "extract", manifest=m, out=out)
        assert proc.returncode != 0
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert lines and all("jobs=N" in ln for ln in lines), proc.stderr
    assert doit("extract", manifest=m, out=out).returncode == 0


def test_info_list_dumpdb_strace_say_what_they_should(example) -> None:
    m, out = example
    listed = doit("list", manifest=m, out=out)
    assert listed.returncode == 0 and "extract" in listed.stdout
    assert not out.exists()  # listing creates nothing
    assert doit("extract", manifest=m, out=out).returncode == 0
    info = doit("info", "extract:docs/readme.txt", manifest=m, out=out)
    assert info.returncode == 0 and "up to date: ok" in info.stdout
    status = doit("list", "--all", "--status", manifest=m, out=out)
    assert "U extract:docs/readme.txt" in status.stdout
    (Path(m).parent / "docs" / "readme.txt").write_text("edited\n")
    assert doit("walk", manifest=m, out=out).returncode == 0
    status = doit("list", "--all", "--status", manifest=m, out=out)
    line = next(ln for ln in status.stdout.splitlines() if "extract:docs/readme.txt" in ln)
    assert line.startswith("R ") and "not extracted yet" in line, line
    why = doit("info", "extract:docs/readme.txt", manifest=m, out=out)
    assert "not extracted yet" in why.stdout
    dump = doit("dumpdb", manifest=m, out=out)
    assert dump.returncode == 0 and "walk ->" in dump.stdout
    assert doit("strace", "extract:docs/readme.txt", manifest=m, out=out).returncode in (0, 1)


def test_info_and_list_without_variables_leave_the_checkout_alone() -> None:
    agent = REPO / "examples" / "docs" / ".agent"
    existed = agent.exists()
    for args in (("list",), ("info", "extract:docs/readme.txt"), ("dumpdb",)):
        doit(*args)
    assert agent.exists() == existed


def test_an_unknown_file_name_is_an_error_naming_the_closest(example) -> None:
    m, out = example
    proc = doit("extract:docs/readme.text", manifest=m, out=out)
    assert proc.returncode != 0
    assert "no walked file is named extract:docs/readme.text" in proc.stderr
    assert "docs/readme.txt" in proc.stderr


def test_a_single_file_run_on_a_fresh_output_leaves_a_complete_output(example) -> None:
    m, out = example
    proc = doit("-a", "extract:docs/readme.txt", manifest=m, out=out)
    assert proc.returncode == 0, proc.stderr
    assert "re-extracted 1 file(s): docs/readme.txt" in proc.stderr
    recs = records(out)
    assert len(recs) == 16
    assert recs["readme.txt"]["status"] == "ok"
    assert {r["status"] for p, r in recs.items() if p != "readme.txt"} == {"skipped"}
    summary = json.loads((out / "extract.summary.json").read_text())
    assert summary["counts"]["skipped"] == 15 and summary["extracted"] == 1
    # the rest follows with the group; the output then equals a fresh run's
    assert doit("extract", manifest=m, out=out).returncode == 0
    fresh = out.parent / "fresh"
    assert doit("extract", manifest=m, out=fresh).returncode == 0
    from bastion.tasks.commands.compare import compare_outputs

    assert compare_outputs(out, fresh) == []


def test_any_file_name_works_and_stays_selectable(tmp_path: Path) -> None:
    """A name doit would refuse or misread (``=``, ``*``, ``%``, a newline, an option, a
    variable) never stops a run, and each file's task is selectable by its escaped name."""
    from bastion.tasks.cli import main
    from bastion.tasks.names import task_name

    root = tmp_path / "root"
    root.mkdir()
    names = ["enc-XI-R6,V5,U=view.txt", "x=y", "-a", "--help", "100%.txt", "a*b.txt",
             "line\nbreak.txt", "tab\there.txt", "n" * 200 + ".txt"]
    for i, name in enumerate(names):
        (root / name).write_text(f"file number {i}\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1"]) == 0
    assert len(records(out)) == len(names)
    for name in ("enc-XI-R6,V5,U=view.txt", "a*b.txt", "-a"):
        proc = doit("-a", f"extract:{task_name('r', name)}", "jobs=1", manifest=m, out=out)
        assert proc.returncode == 0, proc.stderr
        assert "re-extracted 1 file(s)" in proc.stderr, proc.stderr
        recs = records(out)
        assert [p for p, r in recs.items() if not r["reused"]] == [name]


def test_clean_of_a_shared_text_keeps_what_another_record_names(example) -> None:
    """Two files with the same bytes share one text and verdict: ``doit clean`` of one of
    them (named with ESC and a newline, its task name escaped) resets only its record, keeps
    the text the other record names, and says so with the name escaped; cleaning the other
    one too then removes the text."""
    m, out = example
    docs = m.parent / "docs"
    body = (docs / "readme.txt").read_bytes()
    hostile = "copy\x1b[31m\nred.txt"
    (docs / hostile).write_bytes(body)
    assert doit("extract", manifest=m, out=out).returncode == 0
    recs = records(out)
    text = out / recs["readme.txt"]["text"]
    assert recs[hostile]["text"] == recs["readme.txt"]["text"]
    cleaned = doit("clean", "extract:docs/copy%1B[31m%0Ared.txt", manifest=m, out=out)
    assert cleaned.returncode == 0, cleaned.stderr
    said = cleaned.stdout + cleaned.stderr
    assert "\x1b" not in said, repr(said)
    assert "reset the record of docs/copy\\x1b[31m\\x0ared.txt" in said, said
    assert text.exists() and records(out)["readme.txt"]["status"] == "ok"
    assert records(out)[hostile]["status"] == "skipped"
    assert doit("clean", "extract:docs/readme.txt", manifest=m, out=out).returncode == 0
    assert not text.exists()


def test_clean_while_the_records_are_not_whole_keeps_the_text(example) -> None:
    """While the records table is not whole (a run killed after it cleared the export's
    identity and before it wrote every row), which records name a text is not known:
    ``doit clean`` of one file forgets its verdict but keeps the text another record may
    name, and the next run makes every record right."""
    m, out = example
    docs = m.parent / "docs"
    (docs / "copy.txt").write_bytes((docs / "readme.txt").read_bytes())
    assert doit("extract", manifest=m, out=out).returncode == 0
    recs = records(out)
    assert recs["copy.txt"]["text"] == recs["readme.txt"]["text"]
    text = out / recs["readme.txt"]["text"]
    db = sqlite3.connect(out / ".bastion" / "verdicts.sqlite")
    with db:  # what such a run leaves: readme.txt's row not yet written, no export matching
        db.execute("DELETE FROM records WHERE name = ?", (b"readme.txt",))
        db.execute("UPDATE records_state SET value = 'null' WHERE name = 'export'")
    db.close()
    cleaned = doit("clean", "extract:docs/copy.txt", manifest=m, out=out)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "its text stays" in cleaned.stdout + cleaned.stderr
    assert text.exists()
    assert doit("extract", manifest=m, out=out).returncode == 0
    recs = records(out)
    assert recs["readme.txt"]["status"] == recs["copy.txt"]["status"] == "ok"
    assert recs["copy.txt"]["text"] == recs["readme.txt"]["text"]
    assert (out / recs["readme.txt"]["text"]).read_bytes() == text.read_bytes()


def test_a_glob_re_extracts_exactly_the_changed_files_it_names(tmp_path: Path) -> None:
    """``doit "extract:ROOT/dir*"`` (doit's own task wildcard) after a walk: the changed files
    the glob names are re-extracted, and only they (the changed file outside it waits);
    ``-a`` re-extracts every file it names; a glob that names no walked file says so."""
    root = tmp_path / "root"
    for d in ("dir1", "dir1/deep", "dir2", "other"):
        (root / d).mkdir(parents=True)
    for rel in ("dir1/a.txt", "dir1/b.txt", "dir1/deep/c.txt", "dir2/d.txt", "other/e.txt",
                "top.txt"):
        (root / rel).write_text(f"first version of {rel}\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    out = tmp_path / "out"
    assert doit("extract", manifest=m, out=out).returncode == 0
    for rel in ("dir1/a.txt", "dir1/deep/c.txt", "dir2/d.txt", "other/e.txt"):
        (root / rel).write_text(f"second version of {rel}\n")
    assert doit("walk", manifest=m, out=out).returncode == 0
    proc = doit("-v", "2", "extract:r/dir*", manifest=m, out=out)
    assert proc.returncode == 0, proc.stderr
    ran = sorted(ln[len(".  extract:"):] for ln in proc.stdout.splitlines()
                 if ln.startswith(".  extract:"))
    assert ran == ["r/dir1/a.txt", "r/dir1/deep/c.txt", "r/dir2/d.txt"], proc.stdout
    assert "re-extracted 3 file(s)" in proc.stderr
    recs = records(out)
    assert recs["dir1/a.txt"]["status"] == "ok" and not recs["dir1/a.txt"]["reused"]
    assert recs["other/e.txt"]["status"] == "skipped"  # changed, outside the glob: waits
    assert (out / recs["dir2/d.txt"]["text"]).read_text() == "second version of dir2/d.txt\n"
    narrow = doit("-v", "2", "extract:r/dir1/*", manifest=m, out=out)
    assert ".  extract:" not in narrow.stdout  # all up to date now
    forced = doit("-v", "2", "-a", "extract:r/dir1/*", manifest=m, out=out)
    ran = sorted(ln[len(".  extract:"):] for ln in forced.stdout.splitlines()
                 if ln.startswith(".  extract:"))
    assert ran == ["r/dir1/a.txt", "r/dir1/b.txt", "r/dir1/deep/c.txt"], forced.stdout
    nothing = doit("extract:r/nowhere/*", manifest=m, out=out)
    assert nothing.returncode != 0
    assert "no walked file matches extract:r/nowhere/*" in nothing.stderr, nothing.stderr
    assert doit("extract", manifest=m, out=out).returncode == 0
    assert records(out)["other/e.txt"]["status"] == "ok"
