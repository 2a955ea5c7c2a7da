"""One import name, checked in a real installation: the wheel built from this checkout, installed
into a fresh virtual environment, gives that environment ``bastion`` and nothing else.

The wheel is built by pip (``--no-build-isolation``: the test extra brings setuptools, so no
network) and installed by pip into a new venv.  Its dependencies are the test environment's
own: a ``.pth`` file names this environment's site-packages as a plain path, so none of its
``.pth`` files (the editable install's finder among them) runs there, and ``bastion`` can only
come from the wheel.  The installed package then reads a document through its sandboxed
worker, and sweeps the bundled example from outside the checkout, by ``python -m bastion`` and
by the ``bastion`` command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the python of a fresh venv with the wheel installed)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # what the build reads, copied: an in-tree build writes build/ and egg-info
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("bastion", "readers", "tasks"):
        shutil.copytree(REPO / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(src)],
        capture_output=True, text=True, cwd=str(tmp))
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("bastion-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)], capture_output=True, text=True, cwd=str(tmp))
    assert install.returncode == 0, install.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]  # this environment's: bastion's dependencies
    (Path(purelib) / "bastion-test-deps.pth").write_text(deps + "\n", encoding="utf-8")
    return wheel, python


def run_in(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=str(cwd),
                          env=env, timeout=300)


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"bastion"}
    assert "bastion/readers/runtime/workermain.py" in names and "bastion/tasks/cli.py" in names
    # every module of the source tree is in the wheel (a subpackage missing from pyproject's
    # package list would install without it)
    source = {f"bastion/{p.relative_to(REPO).as_posix()}" for folder in ("readers", "tasks")
              for p in (REPO / folder).rglob("*.py")}
    assert source - set(names) == set()
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as z:
        points = z.read(entry).decode()
    assert "bastion = bastion.tasks.commands.entry:main" in points
    assert "bastion.tasks.doitdb:AtomicJsonDB" in points


def test_only_bastion_is_importable_from_the_installation(installed: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    _, python = installed
    probe = run_in(python, "-c", (
        "import importlib.util, json, bastion\n"
        "found = {n: importlib.util.find_spec(n) is not None for n in ('readers', 'tasks')}\n"
        "import bastion.readers.runtime.workermain, bastion.tasks.cli\n"
        "r = bastion.extract_bytes(b'hello from the wheel', 'note.txt')\n"
        "print(json.dumps({'file': bastion.__file__, 'readers': bastion.readers.__file__,\n"
        "                  'found': found, 'status': str(r.status), 'text': r.text}))"),
        cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    got = json.loads(probe.stdout.strip().splitlines()[-1])
    site = str(python.parent.parent)
    assert got["file"].startswith(site) and got["readers"].startswith(site), got
    assert got["found"] == {"readers": False, "tasks": False}, got
    assert (got["status"], got["text"].strip()) == ("ok", "hello from the wheel"), got


@pytest.mark.parametrize("how", ["module", "command"])
def test_the_installed_command_sweeps_the_example(installed: tuple[Path, Path], tmp_path: Path,
                                                  how: str) -> None:
    _, python = installed
    argv = ["-m", "bastion"] if how == "module" else [str(python.parent / "bastion")]
    out = tmp_path / "out"
    args = [*argv, "sweep", str(REPO / "examples" / "manifest.yaml"), "--out", str(out), "-q"]
    if how == "command":  # the script's own shebang names the venv's python
        done = subprocess.run(args, capture_output=True, text=True, cwd=str(tmp_path),
                              timeout=300, env={k: v for k, v in os.environ.items()
                                                if k not in ("PYTHONPATH", "PYTHONHOME")})
    else:
        done = run_in(python, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "extract.summary.json").read_text(encoding="utf-8"))
    assert summary["counts"].get("ok", 0) > 0
    assert summary["counts"].get("error", 0) == 0
