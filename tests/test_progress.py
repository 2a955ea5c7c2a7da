"""The progress display, on a real pseudo-terminal, on a pipe, and quiet.

The children replace ``sys.stderr`` with a buffer before they make the Progress, as doit does
inside an action: the display must still reach the terminal (issue 15).
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
from pathlib import Path

import pytest

from bastion.tasks.progress import PLAIN_INTERVAL_S, Progress, Snapshot, _left_crop

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
COLUMNS = 100

DRIVER = textwrap.dedent('''
    import io, sys, time
    from bastion.tasks.progress import Progress

    n, quiet, interval = int(sys.argv[1]), sys.argv[2] == "quiet", float(sys.argv[3])
    sys.stdout = sys.stderr = io.StringIO()  # what doit does to an action's streams
    p = Progress("extract", n, quiet=quiet, interval=interval, slow_after=0.3)
    for i in range(n):
        name = f"docs/file{i}.txt"
        p.start(name)
        if i == n // 2:
            time.sleep(1.0)  # one slow file: shown by name while it is read
            p.print("bastion: error: a line above the display")
        elif i % 50 == 0:
            time.sleep(0.02)
        p.update(1, errors=1 if i % 100 == 0 else 0, name=name)
    p.close()
    sys.__stderr__.write("child done\\n")
''')


def _env(term: str = "xterm-256color") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), TERM=term)
    return env


def run_in_pty(argv: list[str], cwd: Path | None = None, timeout: float = 60,
               term: str = "xterm-256color") -> str:
    """Run ``argv`` with a pseudo-terminal (COLUMNS wide) as its stdin, stdout and stderr;
    everything it drew, as text."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, COLUMNS, 0, 0))
            if cwd is not None:
                os.chdir(cwd)
            os.execve(argv[0], argv, _env(term))
        finally:
            os._exit(127)
    out = bytearray()
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out += data
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")
    return out.decode("utf-8")


def frames(raw: str) -> list[str]:
    """The successive states of the display: split at carriage returns, escapes removed."""
    return [ANSI.sub("", part) for part in raw.replace("\r\n", "\n").split("\r")]


@pytest.mark.slow
def test_live_display_on_a_real_terminal() -> None:
    n = 1000
    raw = run_in_pty([sys.executable, "-c", DRIVER, str(n), "loud", "0.05"])
    shown = frames(raw)
    counts = [(int(m.group(1)), int(m.group(2)))
              for f in shown for m in [re.search(r"extract \S+ (\d+)/(\d+) \(\d+%\) \d+ files/s "
                                                  r"ETA \d+:\d\d:\d\d errors \d+", f)] if m]
    assert len(counts) >= 5, shown  # redrawn while it ran, not only at the end
    assert all(total == n for _, total in counts)
    assert [d for d, _ in counts] == sorted(d for d, _ in counts)  # only ever forward
    assert any(0 < d < n for d, _ in counts)
    assert any("reading docs/file500.txt (" in f for f in shown)  # the slow file, by name
    assert "bastion: error: a line above the display\n" in raw.replace("\r\n", "\n")
    text = ANSI.sub("", raw).replace("\r\n", "\n")
    final = f"extract: {n}/{n} files in "
    assert final in text and text.rstrip().endswith("child done")
    last = text.rstrip().splitlines()[-2]
    assert re.fullmatch(rf"extract: {n}/{n} files in \d+\.\d s, \d+ files/s, errors 10", last)
    # the live lines were erased before the final line: it stands alone at a line start
    assert "\x1b[2K" + final in raw
    assert raw.rstrip().endswith("child done") and "\x1b[?25h" in raw  # the cursor is back
    for f in shown:  # no line wider than the terminal (rich crops to its width)
        for line in f.split("\n"):
            assert len(line) <= COLUMNS, line


@pytest.mark.slow
def test_quiet_on_a_terminal_shows_only_what_is_printed() -> None:
    raw = run_in_pty([sys.executable, "-c", DRIVER, "200", "quiet", "0.05"])
    text = ANSI.sub("", raw).replace("\r\n", "\n")
    assert text == "bastion: error: a line above the display\nchild done\n"


@pytest.mark.slow
def test_plain_periodic_lines_on_a_pipe() -> None:
    proc = subprocess.run([sys.executable, "-c", DRIVER, "400", "loud", "0.25"],
                          env=_env(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    check_plain(proc.stderr.decode())


@pytest.mark.slow
def test_plain_lines_on_a_dumb_terminal() -> None:
    # a terminal that cannot move its cursor (TERM=dumb: Emacs shell, some CI runners)
    raw = run_in_pty([sys.executable, "-c", DRIVER, "400", "loud", "0.25"], term="dumb")
    check_plain(raw.replace("\r\n", "\n"))


def check_plain(err: str) -> None:
    assert "\x1b" not in err and "\r" not in err  # no terminal control in a log
    lines = err.splitlines()
    assert lines[-1] == "child done"
    periodic = [ln for ln in lines if re.fullmatch(
        r"extract: \d+/400 \(\d+%\) \d+ files/s ETA (\d+:\d\d:\d\d|\?) errors \d+"
        r"(; reading docs/file\d+\.txt \(\d+ s\))?", ln)]
    assert len(periodic) >= 3, lines  # the slow file alone takes 4 intervals
    done = [int(re.match(r"extract: (\d+)", ln).group(1)) for ln in periodic]
    assert done == sorted(done)
    assert any("; reading docs/file200.txt (" in ln for ln in periodic)
    assert "bastion: error: a line above the display" in lines
    assert re.fullmatch(r"extract: 400/400 files in \d+\.\d s, \d+ files/s, errors 4",
                        lines[-2])


DODO = textwrap.dedent('''
    """One task whose action shows a Progress: doit captures the action's sys.stderr."""
    import time
    from bastion.tasks.progress import Progress

    def _work():
        p = Progress("extract", 300, interval=0.05)
        for i in range(300):
            time.sleep(0.002)
            p.update(1)
        p.close()

    def task_work():
        return {"actions": [_work], "verbosity": 0, "uptodate": [False]}
''')


@pytest.mark.slow
def test_doit_action_draws_on_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "dodo.py").write_text(DODO)
    raw = run_in_pty([sys.executable, "-m", "doit", "--backend", "json"], cwd=tmp_path)
    shown = frames(raw)
    assert any(re.search(r"extract \S+ \d+/300 \(\d+%\)", f) for f in shown), shown
    assert re.search(r"extract: 300/300 files in \d+\.\d s", ANSI.sub("", raw))


# -- in-process: formatting and the caller's side ---------------------------------------------

def test_snapshot_lines() -> None:
    s = Snapshot("extract", 1234, 3000, 2, 10.0, 152.0, ("docs/big.pdf", 14.2), 2)
    assert s.counts() == "1234/3000 (41%) 152 files/s ETA 0:00:12 errors 2"
    assert s.line() == ("extract: 1234/3000 (41%) 152 files/s ETA 0:00:12 errors 2; "
                        "reading docs/big.pdf (14 s) and 2 more")
    assert s.final() == "extract: 1234/3000 files in 10.0 s, 123 files/s, errors 2"
    walk = Snapshot("walk", 5000, 0, 0, 125.0, 40.0, None, 0)
    assert walk.line() == "walk: 5000 files, 40 files/s"
    assert walk.final() == "walk: 5000 files in 0:02:05, 40 files/s"
    assert Snapshot("walk", 1, 0, 0, 0.5, 2.0, None, 0).final() == "walk: 1 file in 0.5 s, 2 files/s"
    assert Snapshot("extract", 0, 10, 0, 1.0, 0.0, None, 0).eta == "?"
    assert Snapshot("extract", 10, 10, 0, 1.0, 0.0, None, 0).eta == "0:00:00"


def test_a_long_name_shows_its_end() -> None:
    s = Snapshot("extract", 1, 2, 0, 1.0, 1.0, ("d/" + "x" * 200 + "/end.pdf", 3.0), 0)
    line = s.reading(60)
    assert line is not None and len(line) <= 60 and line.endswith("/end.pdf (3 s)")
    assert "…" in line
    assert _left_crop("short", 60) == "short"


def test_names_in_flight_are_escaped_and_oldest_first() -> None:
    p = Progress("extract", 3, stream=io.StringIO(), slow_after=0.0, leave=False)
    try:
        p.start("docs/esc\x1b[31mred.txt")
        p.start("docs/second.txt")
        snap = p.snapshot()
        assert snap.slow is not None and snap.slow[0] == "docs/esc%1B[31mred.txt"
        assert snap.slow_more == 1
        p.update(1, name="docs/esc\x1b[31mred.txt")
        assert p.snapshot().slow[0] == "docs/second.txt"  # type: ignore[index]
        p.current("docs/third.txt")
        assert p.snapshot().slow[0] == "docs/third.txt"  # type: ignore[index]
        assert p.snapshot().slow_more == 0
        p.current(None)
        assert p.snapshot().slow is None
    finally:
        p.close()


def test_plain_stream_defaults_and_close() -> None:
    out = io.StringIO()
    p = Progress("walk", 0, stream=out)
    assert not p.tty and p.interval == PLAIN_INTERVAL_S
    for _ in range(1000):
        p.update()
    p.close()
    p.close()  # twice: a no-op
    p.update(5)  # after close: counted, never drawn
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[-1]]
    assert re.fullmatch(r"walk: 1000 files in \d\.\d s, \d+ files/s\n", out.getvalue())


def test_no_thread_before_the_first_update() -> None:
    # the walk forks its re-walk helpers only while the process runs one thread, and decides
    # so after making its Progress (tasks/walk/stage.py: Walker._helpers)
    before = threading.active_count()
    p = Progress("walk", 0, stream=io.StringIO(), interval=0.01)
    assert threading.active_count() == before
    p.update(1)
    assert threading.active_count() == before + 1
    p.close()
    assert threading.active_count() == before
    quiet = Progress("walk", 0, stream=io.StringIO(), quiet=True)
    quiet.start("a")
    quiet.update(1, name="a")
    assert threading.active_count() == before
    quiet.close()


def test_quiet_writes_nothing_but_print() -> None:
    out = io.StringIO()
    p = Progress("extract", 4, stream=out, quiet=True, interval=0.01)
    p.start("docs/a")
    p.update(4, errors=1, name="docs/a")
    time.sleep(0.05)
    p.print("bastion: error: kept")
    p.close()
    assert out.getvalue() == "bastion: error: kept\n"
    assert p.done == 4 and p.errors == 1


def test_default_stream_is_a_duplicate_of_fd_2(capfd) -> None:  # type: ignore[no-untyped-def]
    saved = sys.stderr
    sys.stderr = io.StringIO()  # as inside a doit action
    try:
        p = Progress("walk", 0)
        p.update(3)
        p.close()
        p.print("bastion: error: after the end")  # still the real stderr
    finally:
        captured, sys.stderr = sys.stderr, saved
    assert captured.getvalue() == ""
    assert re.fullmatch(r"walk: 3 files in \d\.\d s, \d+ files/s\nbastion: error: after the end\n",
                        capfd.readouterr().err)


def test_the_walk_still_shares_a_re_walk_with_progress_shown(tmp_path: Path) -> None:
    """`bastion walk` without -q: the progress display must not stop the walk from forking
    its re-walk helpers (it forks only while the process runs one thread)."""
    root = tmp_path / "root"
    root.mkdir()
    for i in range(30):
        (root / f"f{i}.txt").write_text(f"file {i}\n")
    (tmp_path / "m.yaml").write_text(
        "version: 1\nroots:\n  - {name: docs, path: root}\nstages: [walk, extract]\n")
    script = textwrap.dedent(f'''
        import os, sys
        import bastion.tasks.walk.stage as w
        from bastion.tasks.cli import main
        w.PARALLEL_MIN_RECORDS = 1
        os.sched_getaffinity = lambda pid: {{0, 1}}  # two cores, whatever the machine
        shared = []
        run_shared = w.Walker._run_shared
        w.Walker._run_shared = lambda self, n: (shared.append(n), run_shared(self, n))
        out = {str(tmp_path / "out")!r}
        assert main(["walk", {str(tmp_path / "m.yaml")!r}, "--out", out]) == 0
        assert main(["walk", {str(tmp_path / "m.yaml")!r}, "--out", out]) == 0
        sys.stdout.write(repr(shared))
    ''')
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[1]", proc.stderr  # the second walk was shared with one helper
    assert re.search(r"^walk: 30 files \(230 bytes\) in \d+\.\d+ s", proc.stderr, re.M), \
        proc.stderr
