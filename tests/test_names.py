"""Task names for every possible path: escaped where doit refuses or misreads, reversible,
selectable on the real ``doit`` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bastion.tasks.names import TaskNameError, escape, parse_task_name, task_name, unescape

REPO = Path(__file__).resolve().parent.parent

ROOTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True)  # the manifest's rule
# one path component: any bytes but NUL and '/' (what a file system allows), 1–255 of them
COMPONENT = st.binary(min_size=1, max_size=255).map(
    lambda b: b.replace(b"\x00", b"\x01").replace(b"/", b"\x02"))
PATHS = st.lists(COMPONENT, min_size=1, max_size=4).map(lambda parts: os.fsdecode(b"/".join(parts)))
ORDINARY = st.text(st.characters(codec="utf-8", exclude_characters="%=*/",
                                 exclude_categories=("Cc", "Cs", "Cf", "Zl", "Zp")),
                   min_size=1, max_size=40)

ALL_BYTES = bytes(b for b in range(1, 256) if b != 0x2F)  # every byte a name can hold
ODD = [b"-a", b"--help", b"x=y", b"a*b", b"enc-XI-R6,V5,U=view.pdf", b"100%.txt", b"%41",
       b"line\nbreak.txt", b"tab\there", b"esc\x1b[31mred", b"bad-\xff\xfe-utf8.txt",
       b"\xc3\xa9t\xc3\xa9.txt", b"\xe2\x80\xaeevil.txt", b"a b:c.txt", ALL_BYTES,
       b"/".join([b"d" * 255] * 16)]


def _expected_escape(raw: bytes) -> str:
    """The escaping spelled out per byte / character, independently of the module's regex."""
    out = []
    for ch in os.fsdecode(raw):
        cp = ord(ch)
        if ch in "%=*" or cp < 0x20 or 0x7F <= cp <= 0x9F or 0xDC80 <= cp <= 0xDCFF or \
                cp in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D,
                       0x202E, 0x2066, 0x2067, 0x2068, 0x2069):
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")))
        else:
            out.append(ch)
    return "".join(out)


@pytest.mark.parametrize("raw", ODD, ids=lambda r: repr(r[:20]))
def test_odd_names_escape_as_documented_and_round_trip(raw: bytes) -> None:
    path = os.fsdecode(raw)
    name = task_name("docs", path)
    assert name == "docs/" + _expected_escape(raw)
    assert parse_task_name(name) == ("docs", path)
    assert os.fsencode(parse_task_name(name)[1]) == raw
    name.encode("utf-8")  # strict: no surrogate left
    assert "=" not in name and "*" not in name
    assert all(0x20 <= ord(c) and not 0x7F <= ord(c) <= 0x9F for c in name)


def test_examples_from_the_docs() -> None:
    assert task_name("docs", "readme.txt") == "docs/readme.txt"
    assert task_name("docs", "sub dir/a b:c.txt") == "docs/sub dir/a b:c.txt"
    assert task_name("docs", "enc-XI-R6,V5,U=view.pdf") == "docs/enc-XI-R6,V5,U%3Dview.pdf"
    assert task_name("docs", os.fsdecode(b"\xff.txt")) == "docs/%FF.txt"
    assert task_name("docs", "50%.txt") == "docs/50%25.txt"
    assert task_name("docs", "é\u202e.txt") == "docs/é%E2%80%AE.txt"
    assert task_name("docs", "-a") == "docs/-a"


@settings(max_examples=400, deadline=None)
@given(ROOTS, PATHS)
@example("docs", os.fsdecode(ALL_BYTES))
@example("r", os.fsdecode(b"/".join([ALL_BYTES] * 16)))  # > 4 KiB of bytes, every one escaped
def test_every_path_round_trips_to_a_valid_doit_name(root: str, path: str) -> None:
    name = task_name(root, path)
    assert parse_task_name(name) == (root, path)
    assert name == task_name(root, path)  # deterministic
    assert not name.startswith("-")
    name.encode("utf-8")
    for refused in "=*\n\r\x1b\x7f\x85":
        assert refused not in name


@settings(max_examples=300, deadline=None)
@given(PATHS, PATHS)
def test_distinct_paths_have_distinct_names(a: str, b: str) -> None:
    if a != b:
        assert task_name("r", a) != task_name("r", b)


@settings(max_examples=300, deadline=None)
@given(ROOTS, st.lists(ORDINARY, min_size=1, max_size=3).map("/".join))
def test_ordinary_names_are_unchanged(root: str, path: str) -> None:
    assert task_name(root, path) == f"{root}/{path}"


@pytest.mark.parametrize("bad", ["docs/a%3db", "docs/a%", "docs/a%4", "docs/a=b", "docs/a*b",
                                 "docs/%41", "docs/%C3%A9", "docs/a\nb", "docs/\udcff",
                                 "docs/%ZZ", "noslash", "/path"])
def test_parse_refuses_names_task_name_does_not_make(bad: str) -> None:
    with pytest.raises(TaskNameError):
        parse_task_name(bad)


@pytest.mark.parametrize("path", ["\ud800", "a\udcc3\udca9"])  # never made by os.fsdecode
def test_strings_no_file_can_have_are_refused(path: str) -> None:
    with pytest.raises(TaskNameError):
        task_name("docs", path)


def test_root_must_be_one_name() -> None:
    for root in ("", "a/b"):
        with pytest.raises(TaskNameError):
            task_name(root, "x")


def test_escape_and_unescape_are_inverse_on_text() -> None:
    for text in ("", "plain", "a=b*c%d", "\x01\x7f\x9f", "\udc80\udcff"):
        assert unescape(escape(text)) == text


def test_doit_refuses_the_raw_names() -> None:
    """Why the escaping exists (doit 0.37): if doit ever accepts these, it can be revisited."""
    from doit.exceptions import InvalidTask
    from doit.task import Task

    with pytest.raises(InvalidTask):
        Task("extract:docs/x=y", None)


# -- the real doit command ------------------------------------------------------------------

DODO = textwrap.dedent('''
    """Subtasks named by bastion.tasks.names for odd paths; each run appends its path's bytes (hex)."""
    import json, os
    from bastion.tasks import names  # (a "task_name" imported here would be a doit task creator)

    PATHS = [os.fsdecode(bytes.fromhex(h)) for h in json.load(open("paths.json"))]

    def _ran(name):
        root, path = names.parse_task_name(name)
        with open("ran.txt", "a") as f:
            f.write(os.fsencode(path).hex() + "\\n")

    def task_extract():
        """one subtask per odd path"""
        yield {"basename": "extract", "name": None, "doc": "the group"}
        for path in PATHS:
            name = names.task_name("docs", path)
            yield {"basename": "extract", "name": name, "actions": [(_ran, (name,))],
                   "doc": "odd", "verbosity": 2, "file_dep": ["paths.json"]}
''')

# "ax b" is what a raw "a*b" would select as a glob: it must stay unselected
DOIT_PATHS = ODD + [b"axb", b"ax b", b"docs/readme.txt"]


def _doit(tmp: Path, command: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONIOENCODING="utf-8:strict",
               LC_ALL="C.UTF-8")
    argv = [sys.executable, "-m", "doit", command, "--backend", "json", *args]
    return subprocess.run([os.fsencode(a) for a in argv], cwd=tmp, env=env,
                          capture_output=True, timeout=120)


@pytest.fixture()
def dodo_dir(tmp_path: Path) -> Path:
    (tmp_path / "dodo.py").write_text(DODO)
    (tmp_path / "paths.json").write_text(json.dumps([p.hex() for p in DOIT_PATHS]))
    return tmp_path


def test_real_doit_selects_exactly_the_escaped_names(dodo_dir: Path) -> None:
    chosen = DOIT_PATHS[::2] + [b"a*b"]
    names = ["extract:" + task_name("docs", os.fsdecode(p)) for p in chosen]
    proc = _doit(dodo_dir, "run", *names)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    ran = [bytes.fromhex(h) for h in (dodo_dir / "ran.txt").read_text().split()]
    assert sorted(ran) == sorted(set(chosen))  # each exactly once, no glob victim ("axb")

    # a second run of one name: up to date per doit, run again with -a
    (dodo_dir / "ran.txt").unlink()
    one = "extract:" + task_name("docs", "x=y")
    assert one == "extract:docs/x%3Dy"
    proc = _doit(dodo_dir, "run", "-a", one)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert (dodo_dir / "ran.txt").read_text().split() == [b"x=y".hex()]


@pytest.mark.slow
def test_real_doit_list_info_forget_take_every_escaped_name(dodo_dir: Path) -> None:
    proc = _doit(dodo_dir, "list", "--all", "-q")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    listed = proc.stdout.decode("utf-8").split("\n")[:-1]  # strict: no surrogate came out
    expected = {"extract"} | {"extract:" + task_name("docs", os.fsdecode(p)) for p in DOIT_PATHS}
    assert {ln.rstrip() for ln in listed} == expected  # one line per task, none split
    assert len(listed) == len(expected)

    assert _doit(dodo_dir, "run").returncode == 0  # every task up to date from now on
    for raw in (b"x=y", b"--help", b"bad-\xff\xfe-utf8.txt", ALL_BYTES):
        name = "extract:" + task_name("docs", os.fsdecode(raw))
        info = _doit(dodo_dir, "info", name)
        assert info.returncode == 0, (raw, info.stderr.decode(errors="replace"))
        assert f"\n{name}\n" in info.stdout.decode("utf-8")
        assert "status     : up-to-date" in info.stdout.decode("utf-8")
        forget = _doit(dodo_dir, "forget", name)
        assert forget.returncode == 0, (raw, forget.stderr.decode(errors="replace"))
        assert f"forgetting {name}\n" == forget.stdout.decode("utf-8")
        info = _doit(dodo_dir, "info", name)  # doit: exit 1 when the task would run
        assert info.returncode == 1 and "status     : run" in info.stdout.decode("utf-8")
