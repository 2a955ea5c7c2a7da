"""bastion's Python API: the examples of docs/api.md run as written; one document goes
through the same sandboxed workers (reused across calls, killed at a deadline, closed at exit,
left alone by a fork); sweep raises the documented exceptions; records come back typed."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bastion
from bastion.extractor import Extractor
from tests.procutil import alive

REPO = Path(__file__).resolve().parent.parent
PDF = REPO / "examples" / "docs" / "pdflatex-outline.pdf"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def api_blocks() -> list[str]:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def make_docs_tree(where: Path) -> None:
    """The files docs/api.md's examples name."""
    (where / "notes.txt").write_text("Notes with marker-alpha in them.\n", encoding="utf-8")
    shutil.copy(PDF, where / "outline.pdf")
    docs = where / "docs"
    docs.mkdir()
    shutil.copy(where / "notes.txt", docs / "notes.txt")
    shutil.copy(PDF, docs / "outline.pdf")
    (docs / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (where / "manifest.yaml").write_text("version: 1\nroots:\n  - name: docs\n    path: docs\n"
                                         "stages: [walk, extract]\n", encoding="utf-8")


@pytest.mark.slow
def test_every_example_of_docs_api_md_runs(tmp_path: Path) -> None:
    blocks = api_blocks()
    assert len(blocks) >= 8
    make_docs_tree(tmp_path)
    script = "\n\n".join(f"# --- docs/api.md example {i + 1}\n{b}" for i, b in enumerate(blocks))
    (tmp_path / "examples.py").write_text(script, encoding="utf-8")
    done = subprocess.run([sys.executable, "examples.py"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ok text/plain text:utf-8" in done.stdout
    assert "bad.yaml:3: surprise" in done.stdout


def test_python_m_bastion_is_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "bastion", "--version"], env=ENV,
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0 and done.stdout.startswith("bastion ")
    done = subprocess.run([sys.executable, "-m", "bastion"], env=ENV, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1 and "a command is required" in done.stderr


def test_the_workers_are_reused_across_calls(tmp_path: Path) -> None:
    files = []
    for i in range(30):
        f = tmp_path / f"f{i}.txt"
        f.write_text(f"document number {i}\n")
        files.append(f)
    with Extractor(tools=None) as ex:
        first = ex.extract_file(files[0])
        pids = ex.worker_pids
        assert len(pids) == 1 and alive(pids[0])
        for i, f in enumerate(files):
            r = ex.extract_file(f)
            assert r.ok and r.text == f"document number {i}\n"
        assert ex.worker_pids == pids  # no interpreter started per file
    assert first.sha256 and first.size == len("document number 0\n")
    assert not alive(pids[0])


def test_the_module_level_extractor_is_shared() -> None:
    from bastion.extractor import default_extractor

    a = default_extractor(None, None)
    assert default_extractor(bastion.Limits(), None) is a
    assert default_extractor(bastion.Limits(max_chars=5), None) is not a


def _hostile(ex: Extractor, path: Path, body: bytes) -> bastion.Result:
    """A document for the tests' misbehaving reader (its MIME type is never detected)."""
    import hashlib

    from tests.hostile_readers import MIME, READER

    path.write_bytes(body)
    return ex._run([ex._job(str(path), path.name, MIME, hashlib.sha256(body).hexdigest(),
                            len(body), READER)])[0]


@pytest.mark.slow
@pytest.mark.timeout(120)  # the "sleep" reader never ends of itself: no deadline is a hang
def test_a_hung_reader_is_killed_at_the_deadline_and_the_next_call_works(tmp_path: Path) -> None:
    with Extractor(tools=None, limits=bastion.Limits(deadline_s=1.0),
                   extra_readers=("tests.hostile_readers",)) as ex:
        r = _hostile(ex, tmp_path / "hang", b"sleep\n")
        assert (r.status, r.error_kind) == ("error", "timeout")
        assert r.error == "extraction timed out after 1 s"  # the deadline it was given
        assert _hostile(ex, tmp_path / "fine", b"ok\n").text.strip() == "fine"
        assert _hostile(ex, tmp_path / "segv", b"segv\n").error_kind == "crash"
    with Extractor(tools=None, extra_readers=("tests.hostile_readers",)) as ex:
        assert _hostile(ex, tmp_path / "alloc", b"alloc\n").error_kind == "memory"
        plain = tmp_path / "plain.hostile"  # detected as text: the worker reads it as text
        plain.write_text("just text\n")
        assert ex.extract_file(plain).extractor == "text:utf-8"


def test_the_worker_rechecks_what_the_parent_hashed(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("before\n")
    with Extractor(tools=None) as ex:
        prepared = ex._prepare(f, None)
        f.write_text("after!\n")  # same size, other bytes
        r = ex._run([prepared])[0]
    assert (r.status, r.error_kind) == ("error", "changed")


def test_extract_bytes_leaves_no_file_behind(tmp_path: Path) -> None:
    with Extractor(tools=None) as ex:
        r = ex.extract_bytes(b"<html><body><p>marker-beta</p></body></html>", "page.html")
        assert r.ok and "marker-beta" in r.text and r.mime == "text/html"
        scratch = ex._tmp
        assert scratch is not None and oct(scratch.stat().st_mode & 0o777) == "0o700"
        assert list((scratch / "input").iterdir()) == []
    assert not scratch.exists()


def test_bad_arguments_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        bastion.extract_file(tmp_path / "missing.txt", tools=None)
    with pytest.raises(IsADirectoryError):
        bastion.extract_file(tmp_path, tools=None)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="not a regular file"):
        bastion.extract_file(tmp_path / "fifo", tools=None)
    with pytest.raises(ValueError, match="unknown tool"):
        bastion.extract_file(PDF, tools=["acrobat"])
    with pytest.raises(ValueError):
        Extractor(jobs=0)


_CHILD = """
import os, sys, tempfile
import bastion
from bastion.extractor import default_extractor
r = bastion.extract_file(sys.argv[1], tools=None)
ex = default_extractor(None, None)
print(ex.worker_pids[0], ex._tmp, r.status, flush=True)
"""


def test_the_workers_are_closed_at_exit(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello\n")
    done = subprocess.run([sys.executable, "-c", _CHILD, str(f)], env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid, scratch, status = done.stdout.split()
    assert status == "ok"
    for _ in range(50):
        if not alive(int(pid)):
            break
        time.sleep(0.1)
    assert not alive(int(pid))
    assert not Path(scratch).exists()


def test_a_forked_child_leaves_the_parents_workers_alone(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello\n")
    with Extractor(tools=None) as ex:
        assert ex.extract_file(f).ok
        parent_pids = ex.worker_pids
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover — the child reports through the pipe
            code = 1
            try:
                r = ex.extract_file(f)
                mine = ex.worker_pids
                ok = r.ok and mine and not set(mine) & set(parent_pids)
                os.write(write, b"ok" if ok else b"bad")
                ex.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(child, 0)
        answer = os.read(read, 10)
        os.close(read)
        assert answer == b"ok" and os.waitstatus_to_exitcode(status) == 0
        assert all(alive(p) for p in parent_pids)
        assert ex.extract_file(f).ok and ex.worker_pids == parent_pids


# -- sweep, records, errors ---------------------------------------------------------------------


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    make_docs_tree(tmp_path)
    return tmp_path


def test_sweep_returns_the_typed_summary_and_records(tree: Path, capsys) -> None:
    s = bastion.sweep(tree / "manifest.yaml", out=tree / "out", jobs=1, no_external=True)
    assert capsys.readouterr().err == ""  # quiet: nothing printed
    assert isinstance(s.extract, bastion.ExtractSummary) and isinstance(s.walk,
                                                                         bastion.WalkSummary)
    assert s.counts["ok"] == 2 and s.errors == 1 and s.exit_code == 2 and not s.partial
    assert s.extract.error_kinds == {"corrupt": 1} and s.extract.no_external
    recs = list(bastion.records(tree / "out"))
    assert all(isinstance(r, bastion.ExtractRecord) for r in recs)
    assert [(r.path, r.verdict.status) for r in recs] == [
        ("broken.docx", "error"), ("notes.txt", "ok"), ("outline.pdf", "ok")]
    pdf = recs[2]
    assert pdf.verdict.pages == 4 and (tree / "out" / pdf.text).is_file()
    again = bastion.sweep(tree / "manifest.yaml", out=tree / "out", no_external=True)
    assert again.extract.extracted == 1  # only the error is retried
    assert bastion.sweep(tree / "manifest.yaml", out=tree / "out",
                         stages=["walk"]).extract is None


def test_sweep_raises_the_documented_exceptions(tree: Path) -> None:
    with pytest.raises(bastion.PrerequisiteError, match="no walk"):
        bastion.sweep(tree / "manifest.yaml", out=tree / "fresh", stages=["extract"])
    (tree / "bad.yaml").write_text("version: 2\nroots: []\n")
    with pytest.raises(bastion.ManifestError) as e:
        bastion.sweep(tree / "bad.yaml", out=tree / "o")
    assert isinstance(e.value, bastion.ConfigError) and e.value.line == 1
    # one tree: the class the manifest loader raises is the API's, nothing translated
    from bastion.tasks import manifest
    assert manifest.ManifestError is bastion.ManifestError and e.value.__cause__ is None
    with pytest.raises(bastion.SignatureError):
        bastion.sweep(tree / "manifest.yaml", out=tree / "o", require_signed=True,
                      trusted_keys=tree / "keys")
    with pytest.raises(ValueError):
        bastion.sweep(tree / "manifest.yaml", out=tree / "o", jobs=10_000)
    with pytest.raises(ValueError, match="stages"):
        bastion.sweep(tree / "manifest.yaml", out=tree / "o", stages=["search"])
    with pytest.raises(bastion.PrerequisiteError, match="'index' is not in the stages"):
        bastion.sweep(tree / "manifest.yaml", out=tree / "o", stages=["index"])
    out = tree / "locked"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,os,sys,time; "
                               "fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT); "
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); "
                               "time.sleep(60)", str(out / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(bastion.LockedError, match="another bastion run"):
            bastion.sweep(tree / "manifest.yaml", out=out)
    finally:
        holder.kill()
        holder.wait()
    assert fcntl  # the lock is a real flock held by another process


def test_records_of_what_is_not_an_output(tmp_path: Path) -> None:
    with pytest.raises(bastion.NotAnOutputError):
        list(bastion.records(tmp_path))
    with pytest.raises(bastion.NotAnOutputError):
        bastion.read_summary(tmp_path)
    (tmp_path / "extract.jsonl").write_text('{"root": "r"}\n')
    with pytest.raises(bastion.NotAnOutputError, match="not a bastion record"):
        list(bastion.records(tmp_path))
    with pytest.raises(ValueError):
        list(bastion.records(tmp_path, "texts"))


def test_the_exception_tree_is_the_documented_one() -> None:
    doc = bastion.errors.__doc__
    for name in ("BastionError", "ConfigError", "ManifestError", "SignatureError",
                 "PrerequisiteError", "OutputError", "LockedError", "NotAnOutputError",
                 "WorkerError"):
        cls = getattr(bastion, name)
        assert issubclass(cls, bastion.BastionError) and name in doc
        assert name in (REPO / "docs" / "api.md").read_text()
    assert issubclass(bastion.LockedError, bastion.OutputError)
    assert issubclass(bastion.ManifestError, bastion.ConfigError)


def test_every_public_name_resolves() -> None:
    """Each name of ``bastion.__all__`` is importable from ``bastion`` (the lazy table of
    exports names the module each comes from: a wrong module is an ImportError only at first
    use), and the names the type checker sees are the same objects."""
    code = ("import bastion\n"
            "missing = [n for n in bastion.__all__ if n != '__version__' and "
            "getattr(bastion, n, None) is None]\n"
            "assert not missing, missing\n"
            "from bastion.readers.runtime.verdict import Status, Verdict\n"
            "assert bastion.Status is Status and bastion.Verdict is Verdict\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, timeout=120)
