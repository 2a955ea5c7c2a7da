"""The ``bastion`` CLI (in-process through ``bastion.tasks.cli.main``) and the ``doit`` entry point:
exit codes, one-line refusals, signed manifests, the lock, the default manifest, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["walk", "extract", "sweep", "keygen", "sign", "verify", "compare", "pdftext"]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "BASTION_NO_EXTERNAL": "1"}


# -- helpers ----------------------------------------------------------------------------------


def write_manifest(directory: Path, roots: list[dict[str, Any]], *,
                   stages: tuple[str, ...] = ("walk", "extract"),
                   name: str = "manifest.yaml", extra: str = "") -> Path:
    doc: dict[str, Any] = {"version": 1, "roots": roots, "stages": list(stages)}
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False) + extra, encoding="utf-8")
    return path


def text_tree(tmp_path: Path, name: str = "root") -> Path:
    root = tmp_path / name
    (root / "sub").mkdir(parents=True)
    (root / "readme.txt").write_bytes(b"Hello from bastion.\n")
    (root / "table.csv").write_bytes(b"name,qty\napple,3\npear,5\n")
    (root / "sub" / "notes.md").write_bytes(b"# Notes\n\nSome notes.\n")
    (root / "sub" / "data.json").write_bytes(b'{"k": "v"}\n')
    (root / "page.html").write_bytes(b"<!DOCTYPE html><html><body><p>Hi there</p></body></html>")
    return root


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(manifest, root, out) for a small text tree; out does not exist yet."""
    root = text_tree(tmp_path)
    m = write_manifest(tmp_path, [{"name": "docs", "path": "root"}])
    return m, root, tmp_path / "out"


def refused(capsys: pytest.CaptureFixture, argv: list[str], *needles: str) -> str:
    """Run ``bastion argv``: exit 1, one line on stderr naming every needle, no traceback."""
    capsys.readouterr()  # what earlier runs printed (their final summary lines)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bastion: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def sweep(m: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external", *extra])


def tree_files(directory: Path) -> set[Path]:
    return {p.relative_to(directory) for p in directory.rglob("*")} if directory.exists() else set()


# -- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help(command: str | None, capsys: pytest.CaptureFixture) -> None:
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out
    if command is not None:
        assert command in out


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code != 0
    assert "Traceback" not in capsys.readouterr().err


# -- refusals: exit 1, one line --------------------------------------------------------------


def test_invalid_manifest_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "root").mkdir()
    m = tmp_path / "manifest.yaml"
    m.write_text("version: 1\nroots:\n  - name: r\n    path: root\n    colour: blue\n")
    out = tmp_path / "out"
    line = refused(capsys, ["walk", str(m), "--out", str(out)], "colour", "manifest.yaml:5")
    assert "unknown key" in line
    assert not out.exists()
    m.write_text("version: 1\nroots:\n  - {name: r, path: root}\nshell: rm -rf /\n")
    refused(capsys, ["sweep", str(m), "--out", str(out)], "shell", ":4")
    refused(capsys, ["extract", str(m), "--out", str(out)], "shell", ":4")
    assert not out.exists()


def test_missing_manifest(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for cmd in ("walk", "extract", "sweep"):
        refused(capsys, [cmd, str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")],
                "nope.yaml", "cannot read manifest")
    assert not (tmp_path / "out").exists()


def test_root_missing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m = write_manifest(tmp_path, [{"name": "r", "path": "gone"}])
    refused(capsys, ["walk", str(m), "--out", str(tmp_path / "out")], "roots[0].path",
            "does not exist")
    (tmp_path / "afile").write_text("x")
    m = write_manifest(tmp_path, [{"name": "r", "path": "afile"}])
    refused(capsys, ["sweep", str(m), "--out", str(tmp_path / "out")], "roots[0].path")
    assert not (tmp_path / "out").exists()


def test_several_roots_need_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text_tree(tmp_path, "a")
    text_tree(tmp_path, "b")
    m = write_manifest(tmp_path, [{"name": "a", "path": "a"}, {"name": "b", "path": "b"}])
    refused(capsys, ["walk", str(m)], "--out")


def test_extract_before_any_walk(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    refused(capsys, ["extract", str(m), "--out", str(out), "-j", "1"], "no walk")
    assert not (out / "extract.jsonl").exists()


def test_stage_not_in_stages(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text_tree(tmp_path)
    walk_only = write_manifest(tmp_path, [{"name": "r", "path": "root"}], stages=("walk",),
                               name="walk-only.yaml")
    out = tmp_path / "out"
    assert main(["walk", str(walk_only), "--out", str(out), "-q"]) == 0
    refused(capsys, ["extract", str(walk_only), "--out", str(out), "-j", "1"],
            "'extract' is not in the stages")
    assert not (out / "extract.jsonl").exists()
    # sweep runs the manifest's stages only: a walk-only sweep is fine and extracts nothing
    assert main(["sweep", str(walk_only), "--out", str(out), "-q"]) == 0
    assert not (out / "extract.jsonl").exists()

    extract_only = write_manifest(tmp_path, [{"name": "r", "path": "root"}],
                                  stages=("extract",), name="extract-only.yaml")
    out2 = tmp_path / "out2"
    refused(capsys, ["walk", str(extract_only), "--out", str(out2)],
            "'walk' is not in the stages")
    assert not out2.exists()


def test_walk_from_a_different_manifest(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    with open(m, "a") as f:
        f.write("# an edit after the walk\n")
    refused(capsys, ["extract", str(m), "--out", str(out), "-j", "1"], "different manifest")
    assert not (out / "extract.jsonl").exists()
    # walking again with the new manifest makes extract possible
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    assert main(["extract", str(m), "--out", str(out), "-q", "-j", "1"]) == 0
    summary = json.loads((out / "walk.summary.json").read_text())
    assert summary["manifest_digest"] == hashlib.sha256(m.read_bytes()).hexdigest()


# -- signed manifests -------------------------------------------------------------------------


@pytest.fixture()
def signed(setup, tmp_path: Path, capsys: pytest.CaptureFixture):
    """(manifest, out, trusted keys file, private key), the manifest signed through main()."""
    m, root, out = setup
    keys = tmp_path / "keys"
    keys.mkdir()
    private, public = keys / "admin.key", keys / "trusted_keys"
    assert main(["keygen", str(private), str(public), "--comment", "admin@test"]) == 0
    assert main(["sign", str(m), str(private)]) == 0
    assert (tmp_path / "manifest.yaml.sig").is_file()
    capsys.readouterr()
    return m, out, public, private


def test_signed_manifest_accepted(signed, capsys: pytest.CaptureFixture) -> None:
    m, out, trusted, _ = signed
    assert main(["verify", str(m), "--trusted-keys", str(trusted)]) == 0
    assert "good signature" in capsys.readouterr().out
    rc = sweep(m, out, "--require-signed", "--trusted-keys", str(trusted))
    assert rc == 0, capsys.readouterr().err
    assert (out / "walk.jsonl").is_file() and (out / "extract.jsonl").is_file()
    # the default trusted-keys location can be set through the environment
    os.environ["BASTION_TRUSTED_KEYS"] = str(trusted)
    try:
        assert main(["walk", str(m), "--out", str(out), "-q", "--require-signed"]) == 0
    finally:
        del os.environ["BASTION_TRUSTED_KEYS"]


def test_signature_missing(signed, capsys: pytest.CaptureFixture) -> None:
    m, out, trusted, _ = signed
    Path(str(m) + ".sig").unlink()
    for cmd in ("walk", "extract", "sweep"):
        refused(capsys, [cmd, str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                         str(trusted)], "manifest.yaml")
    assert not out.exists()
    refused(capsys, ["verify", str(m), "--trusted-keys", str(trusted)])


def test_signature_tampered_manifest(signed, capsys: pytest.CaptureFixture) -> None:
    m, out, trusted, _ = signed
    # accepted first (so a stale in-process cache would accept it again)
    assert sweep(m, out, "--require-signed", "--trusted-keys", str(trusted)) == 0
    before = tree_files(out)
    data = bytearray(m.read_bytes())
    data[data.index(b"docs")] = ord(b"D")  # one byte: still a valid manifest
    m.write_bytes(bytes(data))
    out2 = out.parent / "out2"
    for o in (out, out2):
        for cmd in ("walk", "sweep", "extract"):
            refused(capsys, [cmd, str(m), "--out", str(o), "--require-signed",
                             "--trusted-keys", str(trusted)])
    assert not out2.exists()
    assert tree_files(out) == before
    # without --require-signed the (valid) manifest is accepted
    assert main(["walk", str(m), "--out", str(out2), "-q"]) == 0


def test_signature_wrong_key(signed, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m, out, trusted, _ = signed
    other_priv, other_pub = tmp_path / "other.key", tmp_path / "other.pub"
    assert main(["keygen", str(other_priv), str(other_pub), "--comment", "mallory"]) == 0
    capsys.readouterr()
    refused(capsys, ["sweep", str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                     str(other_pub)])
    # signed by the other key, checked against the admin key
    assert main(["sign", str(m), str(other_priv)]) == 0
    capsys.readouterr()
    refused(capsys, ["walk", str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                     str(trusted)])
    assert not out.exists()


def test_signature_unreadable_keys(signed, tmp_path: Path,
                                   capsys: pytest.CaptureFixture) -> None:
    m, out, trusted, _ = signed
    refused(capsys, ["walk", str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                     str(tmp_path / "no-such-keys")], "no-such-keys")
    refused(capsys, ["walk", str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                     str(tmp_path)])  # a directory
    garbage = tmp_path / "garbage-keys"
    garbage.write_bytes(b"\xff\xfe not a key line\n")
    refused(capsys, ["sweep", str(m), "--out", str(out), "--require-signed", "--trusted-keys",
                     str(garbage)])
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        unreadable = tmp_path / "unreadable-keys"
        unreadable.write_bytes(trusted.read_bytes())
        unreadable.chmod(0)
        refused(capsys, ["walk", str(m), "--out", str(out), "--require-signed",
                         "--trusted-keys", str(unreadable)])
    assert not out.exists()


# -- exit codes of runs -----------------------------------------------------------------------


def test_clean_sweep_exit_0(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    rc = main(["sweep", str(m), "--out", str(out), "-j", "2", "--no-external"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "Traceback" not in err
    assert "extract:" in err  # the final summary line
    recs = jsonl(out / "extract.jsonl")
    assert len(recs) == 5 and all(r["status"] == "ok" for r in recs)
    assert [(r["root"], r["path"]) for r in recs] == \
        [(r["root"], r["path"]) for r in jsonl(out / "walk.jsonl")]
    # a second sweep reuses everything and is still clean
    assert sweep(m, out) == 0
    s = json.loads((out / "extract.summary.json").read_text())
    assert s["extracted"] == 0 and s["reused"] == len(recs)


def test_doit_plugins_are_not_scanned_during_a_run(setup, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    """The bastion command gives doit its backend and reporter itself: while it runs doit,
    doit's lookup of plugins (a scan of every installed distribution) finds nothing, so a
    doit plugin installed beside bastion is not loaded; the lookup is restored after."""
    import doit.plugin

    asked: list[str] = []

    def foreign(group: str) -> list:
        asked.append(group)
        return []

    def impl():
        return foreign

    monkeypatch.setattr(doit.plugin, "entry_points_impl", impl)
    m, _root, out = setup
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) == 0
    assert asked == []
    assert doit.plugin.entry_points_impl is impl
    assert len(jsonl(out / "extract.jsonl")) == 5


def test_default_out_is_root_agent(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    assert main(["sweep", str(m), "-q", "-j", "1", "--no-external"]) == 0
    agent = root / ".agent"
    assert (agent / "walk.jsonl").is_file() and (agent / "extract.jsonl").is_file()
    assert not any(r["path"].startswith(".agent") for r in jsonl(agent / "walk.jsonl"))
    assert main(["walk", str(m), "-q"]) == 0
    assert not any(r["path"].startswith(".agent") for r in jsonl(agent / "walk.jsonl"))


def test_file_changed_between_walk_and_extract_exit_2(setup,
                                                      capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    target = root / "readme.txt"
    st = target.stat()
    data = target.read_bytes()
    target.write_bytes(data.upper())  # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert target.stat().st_size == st.st_size
    rc = main(["extract", str(m), "--out", str(out), "-j", "1", "--no-external"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["readme.txt"]["status"] == "error"
    assert recs["readme.txt"]["error_kind"] == "changed"
    assert all(r["status"] == "ok" for p, r in recs.items() if p != "readme.txt")
    summary = json.loads((out / "extract.summary.json").read_text())
    assert summary["counts"]["error"] == 1
    # size, mtime and inode are unchanged, but the edit moved the ctime, which the walk's stat
    # cache also compares: the next sweep reads the file again and extracts the new content
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) == 0
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["readme.txt"]["status"] == "ok"
    assert recs["readme.txt"]["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()


def test_lock_held_by_another_process(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, out = setup
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n",
         str(out / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        refused(capsys, ["walk", str(m), "--out", str(out)], "another bastion run",
                str(out / ".lock"))
        refused(capsys, ["sweep", str(m), "--out", str(out), "-j", "1"], ".lock")
        assert not (out / "walk.jsonl").exists()
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0


def test_sweep_of_the_bundled_example(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # (named, never the default: tests/test_text_command.py checks the refusal without one)
    examples = REPO / "examples"
    before = tree_files(examples)
    out = tmp_path / "out"
    rc = main(["sweep", str(examples / "manifest.yaml"), "--out", str(out), "-q", "-j", "2",
               "--no-external"])
    assert rc == 0, capsys.readouterr().err
    summary = json.loads((out / "walk.summary.json").read_text())
    assert summary["manifest"] == str(examples / "manifest.yaml")
    assert summary["manifest_digest"] == \
        hashlib.sha256((examples / "manifest.yaml").read_bytes()).hexdigest()
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    # built-in readers only: the scanned image needs tesseract, everything else is read
    assert recs.pop("scanned-note.png")["status"] == "unsupported"
    assert recs and all(r["status"] == "ok" for r in recs.values())
    assert tree_files(examples) == before  # nothing written into the repository


# -- doit -------------------------------------------------------------------------------------


def test_doit_entry_point(setup, tmp_path: Path) -> None:
    m, root, out = setup
    dodo = str(REPO / "dodo.py")
    examples_before = tree_files(REPO / "examples")
    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", dodo, "extract", f"manifest={m}", f"out={out}",
         "jobs=1", "no_external=1"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (out / "walk.jsonl").is_file() and (out / "extract.jsonl").is_file()
    assert len(jsonl(out / "extract.jsonl")) == 5
    assert (out / ".bastion" / "doit.json").exists()  # doit's database lives under out

    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", dodo, "list", f"manifest={m}", f"out={out}"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"walk", "extract"} <= names
    assert "_extract_finish" not in names
    assert tree_files(REPO / "examples") == examples_before


# -- compare / determinism --------------------------------------------------------------------


def _strip_stat(path: Path) -> list[dict[str, Any]]:
    recs = jsonl(path)
    for r in recs:
        r.pop("mtime_ns")
        r.pop("inode")
    return recs


def _store(out: Path) -> dict[str, bytes]:
    store = out / "extract"
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_compare_and_determinism(setup, capsys: pytest.CaptureFixture) -> None:
    m, root, _ = setup
    a, b = m.parent / "a", m.parent / "b"
    assert sweep(m, a, "-j", "2") == 0
    assert sweep(m, b, "-j", "1") == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    captured = capsys.readouterr()
    assert "identical" in captured.err and captured.out == ""
    assert _strip_stat(a / "walk.jsonl") == _strip_stat(b / "walk.jsonl")
    assert (a / "walk.jsonl").read_bytes() == (b / "walk.jsonl").read_bytes()  # same tree
    assert (a / "extract.jsonl").read_bytes() == (b / "extract.jsonl").read_bytes()
    store_a, store_b = _store(a), _store(b)
    assert store_a and store_a == store_b
    assert compare_outputs(a, b) == []

    # edit one text in the store of b: reported, exit 5 (its own code: "different")
    victim = sorted((b / "extract").rglob("*.txt"))[0]
    victim.write_bytes(victim.read_bytes() + b"tampered\n")
    assert main(["compare", str(a), str(b)]) == 5
    captured = capsys.readouterr()
    assert "contents differ" in captured.out and victim.name in captured.out
    assert "1 difference" in captured.err

    # a path that is not an output is refused in one line, exit 1, nothing compared
    # (it printed 62 "differences" before)
    plain = m.parent / "plain"
    plain.mkdir()
    (plain / "walk.jsonl").write_text("")
    for other in (m.parent / "nothing", plain, root):
        assert main(["compare", str(a), str(other)]) == 1
        captured = capsys.readouterr()
        assert captured.out == "", captured.out
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"bastion: error: cannot compare {other}")


def test_compare_two_copies_of_a_tree(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Two copies (other inodes and mtimes) of one tree: compare ignores the stat fields."""
    text_tree(tmp_path, "one")
    text_tree(tmp_path, "two")
    m1 = write_manifest(tmp_path, [{"name": "docs", "path": "one"}], name="m1.yaml")
    m2 = write_manifest(tmp_path, [{"name": "docs", "path": "two"}], name="m2.yaml")
    assert sweep(m1, tmp_path / "o1") == 0
    assert sweep(m2, tmp_path / "o2") == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "o1"), str(tmp_path / "o2")]) == 0
    (tmp_path / "two" / "readme.txt").write_bytes(b"Different text.\n")
    assert sweep(m2, tmp_path / "o2") == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "o1"), str(tmp_path / "o2")]) == 5
    out = capsys.readouterr().out
    assert "walk.jsonl: docs/readme.txt: sha256" in out
    assert "extract.jsonl: docs/readme.txt" in out


# -- known gaps -------------------------------------------------------------------------------


def test_followed_file_symlink_is_extracted(tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "root"
    (root / "hidden").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "hidden" / "x.txt").write_bytes(b"excluded, even through a link\n")
    (root / "docs" / "y.txt").write_bytes(b"reachable through the link\n")
    os.symlink("hidden/x.txt", root / "link.txt")
    os.symlink("docs/y.txt", root / "other-link.txt")
    m = write_manifest(tmp_path, [{"name": "r", "path": "root", "follow_symlinks": True,
                                   "exclude": ["hidden/"]}])
    out = tmp_path / "out"
    rc = sweep(m, out)
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["other-link.txt"]["status"] == "ok", recs["other-link.txt"]
    assert recs["other-link.txt"]["sha256"] == recs["docs/y.txt"]["sha256"]
    assert recs["link.txt"]["status"] == "skipped"
    assert recs["link.txt"]["error"] == "symlink into an excluded path (not followed)"
    assert not any(p.startswith("hidden/") for p in recs)
    assert rc == 0


def test_pdftext_child_mode_speaks_the_line_protocol(tmp_path: Path) -> None:
    """`bastion pdftext` reads a PDF on stdin and writes a meta line, then one line per page."""
    sample = REPO / "tests" / "samples" / "pdf" / "pdflatex-outline.pdf"
    proc = subprocess.run([sys.executable, "-m", "bastion", "pdftext", "-max-pages", "1"],
                          input=sample.read_bytes(), capture_output=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    meta = lines[0]["meta"]
    assert meta["pages"] > 1  # the full count, even though one page was extracted
    assert meta["outline"] and {"title", "page", "level"} <= set(meta["outline"][0])
    assert [ln["page"] for ln in lines[1:]] == [1]
    garbage = subprocess.run([sys.executable, "-m", "bastion", "pdftext"],
                             input=b"%PDF-1.4\nnot really a pdf", capture_output=True,
                             cwd=REPO, timeout=120)
    assert garbage.returncode == 4


# -- small CLI edges: the real command --------------------------------------------------------


def bastion(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run the real ``bastion`` command (``python -m bastion``)."""
    return subprocess.run([sys.executable, "-m", "bastion", *argv], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


def test_version_is_the_projects() -> None:
    import tomllib

    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    proc = bastion("--version")
    assert proc.returncode == 0, proc.stderr
    import doit.version

    doit_version = ".".join(map(str, doit.version.VERSION))
    assert proc.stdout == (f"bastion {expected} (doit {doit_version}, Python "
                           f"{'.'.join(map(str, sys.version_info[:3]))})\n")


def test_no_command_exits_1_with_the_usage() -> None:
    proc = bastion()
    assert proc.returncode == 1  # 2 is "completed with error records"
    assert proc.stderr.startswith("usage: bastion")
    for command in COMMANDS:
        assert command in proc.stderr
    assert proc.stderr.endswith("bastion: error: a command is required\n")
    assert proc.stdout == ""


@pytest.mark.parametrize("argv", [["frob"], ["sweep", "--bogus"], ["sweep", "-j", "many"],
                                  ["verify"], ["compare", "a"]])
def test_usage_errors_exit_1_not_2(argv: list[str]) -> None:
    proc = bastion(*argv)
    assert proc.returncode == 1, proc.stderr
    assert "usage: bastion" in proc.stderr and "error: " in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_jobs_outside_1_to_4_per_core_is_refused(setup) -> None:
    m, _, out = setup
    most = 4 * (os.cpu_count() or 1)
    for jobs in ("0", "-1", str(most + 1), "500"):
        for command in ("sweep", "extract"):
            proc = bastion(command, str(m), "--out", str(out), "-j", jobs)
            assert proc.returncode == 1, (jobs, proc.stderr)
            assert proc.stderr.splitlines() == [
                f"bastion: error: -j {jobs}: the number of reader workers must be between 1 "
                f"and {most} (4 × {os.cpu_count()} core{'s' if os.cpu_count() != 1 else ''})"]
    assert not out.exists()  # refused before anything was started or written
    proc = bastion("sweep", str(m), "--out", str(out), "-q", "-j", str(most), "--no-external")
    assert proc.returncode == 0, proc.stderr
    assert len(jsonl(out / "extract.jsonl")) == 5


def test_verify_trusted_keys_has_help() -> None:
    proc = bastion("verify", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert ("--trusted-keys TRUSTED_KEYS file of trusted public keys, one 'ed25519 <base64> "
            "<comment>' line each as 'bastion keygen' writes them (default: "
            "$BASTION_TRUSTED_KEYS, else /etc/bastion/trusted_keys)") in text


def test_a_foreign_pyproject_in_the_working_directory_changes_nothing(setup,
                                                                      tmp_path: Path) -> None:
    """bastion runs doit in-process; the pyproject.toml or doit.cfg of the directory it is
    run from belongs to the user's own project and is not read (a broken one once stopped
    the run)."""
    m, root, out = setup
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "pyproject.toml").write_text("[tool.doit]\nverbosity = \n<<<<<<< broken\n")
    (cwd / "doit.cfg").write_text("[GLOBAL]\nbackend = nonexistent\n")
    proc = subprocess.run([sys.executable, "-m", "bastion", "sweep", str(m), "--out",
                           str(out), "-q", "-j", "1"], cwd=cwd, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
