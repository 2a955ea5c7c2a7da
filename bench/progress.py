"""The cost of progress reporting per file, at 100k files, on a real pseudo-terminal.

    python bench/progress.py [--files 100000] [--rounds 5]

Each case runs in its own child process whose stdin/stdout/stderr are a pseudo-terminal (100
columns) that the parent drains, as a terminal would; the cases alternate round by round, and
the table gives the median CPU time (process time, every thread) per call over the bare loop.
Cases: bastion's ``Progress`` (live and on a pipe; ``update`` alone and with ``start``/``name``
for the file in flight), one redraw of its live display, and for comparison ``rich``'s own
``Progress.update`` and ``tqdm.update`` called for every file (tqdm only when importable).
Figures are quoted in docs/performance.md.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import statistics
import struct
import sys
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def case(name: str, n: int) -> float:
    """CPU seconds of ``n`` progress calls (the loop included; imports and the display's
    construction not: they are paid once per run), or of one redraw."""
    import rich.live  # noqa: F401
    import rich.progress  # noqa: F401

    import bastion.tasks.progress  # noqa: F401

    t0 = time.process_time()
    if name == "bare loop":
        for _ in range(n):
            pass
    elif name == "bastion redraw":  # one refresh of the live display (seconds)
        from bastion.tasks.progress import Progress

        p = Progress("extract", n, interval=3600, slow_after=0.0)
        p.start("docs/a-long-directory/name/of/the/slow/file.pdf")
        draws = 200
        t0 = time.process_time()
        for _ in range(draws):
            p._draw_live()
        cpu = time.process_time() - t0
        p.close()
        return cpu / draws
    elif name.startswith("bastion"):
        from bastion.tasks.progress import Progress

        stream = open(os.devnull, "w") if "pipe" in name else None
        p = Progress("extract", n, stream=stream)
        names = [f"docs/dir{i // 1000}/file{i}.txt" for i in range(n)] if "name" in name else []
        t0 = time.process_time()
        if names:
            for nm in names:
                p.start(nm)
                p.update(1, errors=0, name=nm)
        else:
            for _ in range(n):
                p.update(1, errors=0)
        p.close()
    elif name == "rich update":
        from rich.progress import Progress as RichProgress

        t0 = time.process_time()
        with RichProgress() as rp:
            task = rp.add_task("extract", total=n)
            for _ in range(n):
                rp.update(task, advance=1)
    elif name == "tqdm update":
        from tqdm import tqdm

        t0 = time.process_time()
        bar = tqdm(total=n)
        for _ in range(n):
            bar.update(1)
        bar.close()
    return time.process_time() - t0


def in_pty(name: str, n: int) -> float:
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        try:
            cpu = case(name, n)
            with open(os.environ["BENCH_OUT"], "w") as f:
                json.dump(cpu, f)
        finally:
            os._exit(0)
    while True:  # drain the terminal, as a terminal emulator would
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                if not os.read(fd, 1 << 16):
                    break
            except OSError:
                break
    os.close(fd)
    os.waitpid(pid, 0)
    with open(os.environ["BENCH_OUT"]) as f:
        return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.environ["BENCH_OUT"] = str(HERE / f".progress-{os.getpid()}.json")
    names = ["bare loop", "bastion live", "bastion live, with name", "bastion pipe",
             "bastion redraw", "rich update"]
    try:
        import tqdm  # noqa: F401

        names.append("tqdm update")
    except ImportError:
        pass
    cpu: dict[str, list[float]] = {k: [] for k in names}
    try:
        for _ in range(args.rounds):
            for name in names:
                cpu[name].append(in_pty(name, args.files))
    finally:
        Path(os.environ["BENCH_OUT"]).unlink(missing_ok=True)
    base = statistics.median(cpu["bare loop"])
    print(f"{args.files} calls, median of {args.rounds} rounds, CPU time of every thread\n")
    print("| case | CPU for all calls | per call over the bare loop |")
    print("| --- | --- | --- |")
    for name in names:
        med = statistics.median(cpu[name])
        extra = (med - base) / args.files * 1e6 if name != "bare loop" else 0.0
        if name == "bastion redraw":
            print(f"| {name}: one redraw (5 a second) | {med * 1e3:.2f} ms | – |")
        else:
            print(f"| {name} | {med * 1e3:.0f} ms | {extra:.2f} µs |")


if __name__ == "__main__":
    main()
