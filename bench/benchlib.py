"""What the benchmark scripts share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGES = ("bastion", "tasks", "readers")  # a source tree's Python packages


def compile_trees(*trees: Path | None) -> None:
    """Byte-compile bastion's own modules in each source tree, as an installed package has
    them.  With ``PYTHONDONTWRITEBYTECODE=1`` (set on this machine) a tree without
    ``__pycache__`` would compile its sources again in every timed process (≈ 50 ms of CPU a
    sweep), while the peers' venvs were compiled by pip at install."""
    for tree in filter(None, trees):
        subprocess.run([sys.executable, "-m", "compileall", "-q",
                        *(str(tree / p) for p in PACKAGES if (tree / p).is_dir())],
                       check=True, stdout=subprocess.DEVNULL)
