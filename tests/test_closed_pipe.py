"""A closed pipe (``bastion … | head -1``) is a quiet exit with the command's own code: each
command that prints a lot, run for real in a shell pipeline whose reader leaves after one line
while the command has far more than a pipe's buffer (64 KiB) left to write."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bastion.tasks.cli import main

pytestmark = pytest.mark.slow  # one sweep of 1,800 files, then a real pipeline per command

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "BASTION_NO_EXTERNAL": "1"}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(a swept output of 1,200 text files and 600 unsupported ones, the output of an empty
    tree, a 1 MiB text file)."""
    base = tmp_path_factory.mktemp("pipes")
    root = base / "root"
    for d in range(12):
        (root / f"d{d:02}").mkdir(parents=True)
        for i in range(100):
            (root / f"d{d:02}" / f"f{i:03}.txt").write_text(
                f"line one of file {d}-{i} with the word pump\nline two, pump again\n"
                f"line three of {d}-{i}: pump\n")
            if i < 50:
                (root / f"d{d:02}" / f"junk{i:03}.bin").write_bytes(bytes(range(256)) * 2
                                                                    + bytes([d, i]))
    (root / "big.txt").write_text("a pump line of the big file\n" * 40_000)
    empty = base / "empty"
    empty.mkdir()
    outs = []
    for tree in (root, empty):
        m = base / f"{tree.name}.yaml"
        m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {tree}\n"
                     "stages: [walk, extract, index]\n")
        out = base / f"out-{tree.name}"
        assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "2",
                     "--no-external"]) == 0
        outs.append(out)
    return outs[0], outs[1], root / "big.txt"


def piped(*argv: str) -> tuple[int, str, str]:
    """``python -m bastion ARGV | head -1`` in bash: bastion's exit code, what head printed,
    bastion's stderr."""
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "bastion", *argv))
    script = f"{command} 2>\"$ERR\" | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
    err = Path(os.environ.get("TMPDIR", "/tmp")) / f"bastion-pipe-{os.getpid()}.err"
    try:
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              cwd=str(REPO), env={**ENV, "ERR": str(err)}, timeout=300)
        stderr = err.read_text() if err.exists() else ""
    finally:
        err.unlink(missing_ok=True)
    first, _, tail = proc.stdout.rpartition("rc=")
    return int(tail.strip()), first, stderr


def test_compare_into_head_exits_5_without_a_traceback(outputs) -> None:
    full, empty, _ = outputs
    rc, shown, err = piped("compare", str(full), str(empty))
    assert rc == 5, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert len(shown.splitlines()) == 1 and "only in" in shown


@pytest.mark.parametrize("argv,code", [
    (["grep", "pump", "{out}"], 0),
    (["grep", "-c", "pump", "{out}"], 0),
    (["show", "{out}", "big.txt"], 0),
    (["search", "--json", "--limit", "2000", "{out}", "pump"], 0),
    (["report", "{out}", "--max-files", "5000"], 0),
    (["text", "{big}"], 0),
])
def test_commands_that_print_a_lot_are_quiet_on_a_closed_pipe(outputs, argv: list[str],
                                                              code: int) -> None:
    full, _, big = outputs
    rc, shown, err = piped(*(a.format(out=full, big=big) for a in argv))
    assert rc == code, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception" not in err, err
    assert len(shown.splitlines()) == 1
