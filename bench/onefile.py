"""One file from the command line: ``bastion text`` against ``markitdown`` and kreuzberg.

    python bench/onefile.py --peers VENV [-n 9] FILE [FILE …]

VENV is a throw-away virtualenv holding ``markitdown[pdf,docx,pptx,xlsx]`` and ``kreuzberg``
(never bastion's own).  For each FILE the three commands run interleaved ``-n`` times; printed
as Markdown rows: the medians of start-to-text (first byte on stdout), start-to-exit and the
CPU seconds of the whole process tree (``wait4``).  ``PYTHONDONTWRITEBYTECODE`` is dropped from
their environment so that every program runs from its bytecode caches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

KREUZBERG = ("import sys\nfrom kreuzberg import extract_file_sync\n"
             "sys.stdout.write(extract_file_sync(sys.argv[1]).content)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peers", type=Path, required=True, help="the peers' virtualenv")
    ap.add_argument("-n", type=int, default=9)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    bastion = shutil.which("bastion", path=str(Path(sys.executable).parent)) or "bastion"
    peers = args.peers / "bin"
    cmds = {
        "bastion text": lambda f: [bastion, "text", f],
        "markitdown": lambda f: [str(peers / "markitdown"), f],
        "kreuzberg": lambda f: [str(peers / "python"), "-c", KREUZBERG, f],
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    print("| file | command | start-to-text s | start-to-exit s | CPU s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for f in args.files:
        res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
        for _ in range(args.n):
            for name, cmd in cmds.items():
                t0 = time.perf_counter()
                p = subprocess.Popen(cmd(f), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env)
                assert p.stdout is not None
                p.stdout.read(1)
                t1 = time.perf_counter()
                p.stdout.read()
                _, _, ru = os.wait4(p.pid, 0)
                res[name].append((t1 - t0, time.perf_counter() - t0, ru.ru_utime + ru.ru_stime))
        for name, v in res.items():
            med = [statistics.median(x[i] for x in v) for i in range(3)]
            print(f"| {os.path.basename(f)} | {name} | {med[0]:.3f} | {med[1]:.3f} | "
                  f"{med[2]:.3f} |")


if __name__ == "__main__":
    main()
