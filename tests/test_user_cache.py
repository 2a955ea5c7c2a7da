"""What bastion keeps for the user across outputs (tasks/extract/usercache.py): a new output's
first run takes the tools' versions and the reader registry's digest an earlier run on this
machine found, uses each only while what it describes is unchanged, and never trusts a cache
file another user could have written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bastion.tasks.cli import main
from bastion.tasks.extract import usercache

REPO = Path(__file__).resolve().parent.parent


def _manifest(tmp_path: Path, root: Path) -> Path:
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n"
                 "stages: [walk, extract]\n")
    return m


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "note.txt").write_text("A short note about the annual budget meeting.\n")
    return root


def _summary(out: Path) -> dict:
    return json.loads((out / "extract.summary.json").read_text())


def test_a_new_output_takes_the_tools_from_the_users_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("BASTION_NO_EXTERNAL", raising=False)
    m = _manifest(tmp_path, _tree(tmp_path))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    tool = bindir / "pdftotext"

    def install(version: str) -> None:
        tool.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                        f"echo 'pdftotext version {version}' >&2\n")
        tool.chmod(0o755)

    install("99.1")
    monkeypatch.setenv("PATH", str(bindir))
    assert main(["sweep", str(m), "--out", str(tmp_path / "out1"), "-q", "-j", "1"]) == 0
    assert calls.read_text() == "-v\n"
    # another output, never run: the version comes from the user's cache
    assert main(["sweep", str(m), "--out", str(tmp_path / "out2"), "-q", "-j", "1"]) == 0
    assert calls.read_text() == "-v\n"
    assert [(t["name"], t["version"]) for t in _summary(tmp_path / "out2")["tools"]] == [
        ("pdftotext", "99.1")]
    install("99.2")  # another binary at the same path: its stat changed, it is asked
    assert main(["sweep", str(m), "--out", str(tmp_path / "out3"), "-q", "-j", "1"]) == 0
    assert calls.read_text() == "-v\n-v\n"
    assert _summary(tmp_path / "out3")["tools"][0]["version"] == "99.2"
    # the user's cache keeps only entries whose file is still what they describe
    kept = json.loads((tmp_path / "cache" / "bastion" / "tools.json").read_text())
    assert [v[4] for k, v in kept.items() if k == str(tool)] == ["pdftotext version 99.2"
                                                                  .split()[-1]]


_IMPORTS = r'''
import json, sys
from bastion.tasks.cli import main
from bastion.readers.dispatch import MODULES
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "readers": sorted(
    n for n, m in MODULES.items() if f"bastion.readers.{m}" in sys.modules)}))
'''


def _sweep_in_a_process(tmp_path: Path, m: Path, out: Path) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _IMPORTS, "sweep", str(m), "--out", str(out),
                           "-q", "-j", "1"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_new_output_imports_only_the_readers_its_files_need(tmp_path: Path) -> None:
    m = _manifest(tmp_path, _tree(tmp_path))
    first = _sweep_in_a_process(tmp_path, m, tmp_path / "out1")
    assert first["rc"] == 0
    assert len(first["readers"]) > 1  # the registry's digest: every reader, once
    second = _sweep_in_a_process(tmp_path, m, tmp_path / "out2")
    assert second == {"rc": 0, "readers": ["text"]}
    # the digest taken from the cache is the one computed: both outputs' stamps agree
    stamps = [json.loads((tmp_path / o / ".bastion" / "extract-stamp.json").read_text())
              for o in ("out1", "out2")]
    assert stamps[0]["inputs"] == stamps[1]["inputs"]
    assert stamps[0]["readers"] == stamps[1]["readers"]
    # and the second output is a no-op now, as the first is
    assert main(["sweep", str(m), "--out", str(tmp_path / "out2"), "-q", "-j", "1"]) == 0
    assert _summary(tmp_path / "out2")["extracted"] == 0


def test_a_cache_file_others_could_write_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    usercache.write("x.json", {"a": [1]})
    assert usercache.read("x.json") == {"a": [1]}
    where = tmp_path / "cache" / "bastion" / "x.json"
    assert where.stat().st_mode & 0o077 == 0
    where.chmod(0o622)
    assert usercache.read("x.json") == {}
    where.chmod(0o600)
    where.write_text("[1, 2]")  # not an object
    assert usercache.read("x.json") == {}
    where.unlink()
    (tmp_path / "elsewhere.json").write_text('{"a": [1]}')
    where.symlink_to(tmp_path / "elsewhere.json")  # a link is never followed
    assert usercache.read("x.json") == {}
