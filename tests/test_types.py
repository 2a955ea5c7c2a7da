"""mypy over ``bastion``, ``bastion.readers`` and ``bastion.tasks``, configured in
pyproject.toml's ``[tool.mypy]``: zero errors.

The repository keeps ``readers/`` and ``tasks/`` at its top and installs them as
``bastion.readers`` and ``bastion.tasks`` (pyproject's ``package-dir``), a mapping mypy cannot
read; the test lays the installed shape out with symbolic links in a temporary directory and
checks that, so every module is checked under the name it is imported by.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def installed_shape(into: Path) -> Path:
    """``into/bastion`` with the package's files, ``readers`` and ``tasks`` linked in."""
    pkg = into / "bastion"
    pkg.mkdir(parents=True)
    for f in sorted((REPO / "bastion").glob("*.py")):
        (pkg / f.name).symlink_to(f)
    for sub in ("readers", "tasks"):
        (pkg / sub).symlink_to(REPO / sub, target_is_directory=True)
    return into


def test_mypy_finds_no_error(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extras (pip install -e '.[test]')")
    shape = installed_shape(tmp_path / "shape")
    env = {**os.environ, "MYPYPATH": str(shape)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "-p", "bastion"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    report = (done.stdout + done.stderr).replace(str(shape / "bastion") + "/", "")
    assert done.returncode == 0, report
    checked = report.strip().splitlines()[-1]
    assert checked.startswith("Success: no issues found"), report
    assert int(checked.split(" in ")[1].split()[0]) > 90, report  # the subpackages were seen
