"""bastion.tasks.manifest: strict validation (every refusal names key and line), globs, pruning."""

from __future__ import annotations

import hashlib
import os
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest

from bastion.readers.base import GiB, KiB, Limits, MiB
from bastion.tasks.manifest import (
    Manifest,
    ManifestError,
    Root,
    dir_excluded,
    glob_match,
    load_manifest,
    parse_manifest,
    root_selects,
)


def write(tmp_path: Path, text: str, name: str = "manifest.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "more").mkdir()
    (tmp_path / "afile").write_text("x")
    return tmp_path


def refused(path: Path) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    return info.value


# -- accepted manifests ---------------------------------------------------------------------


def test_minimal_defaults(tree: Path) -> None:
    m = load_manifest(write(tree, """\
        version: 1
        roots:
          - name: data
            path: data
        """))
    assert isinstance(m, Manifest)
    assert m.version == 1
    assert m.stages == ("walk", "extract")
    assert m.max_file_bytes == 1 * GiB
    assert m.limits == Limits()
    assert m.roots == (Root(name="data", path=(tree / "data").resolve()),)
    assert m.path == tree / "manifest.yaml"


def test_full_manifest(tree: Path) -> None:
    m = load_manifest(write(tree, f"""\
        version: 1
        roots:
          - name: data
            path: {tree / "data"}
            include: ["*.pdf", "docs/**/*.md"]
            exclude: ["build/", "**/node_modules/**"]
            follow_symlinks: true
            one_file_system: true
          - name: more.2_x-y
            path: ./more/
        stages: [walk]
        limits:
          max_file_bytes: 512KiB
          deadline_s: 2.5
          tool_deadline_s: 10
          max_output_bytes: "64MiB"
          memory_bytes: 1GiB
          max_chars: 1000
          max_parts: 10
          max_member_bytes: 1000
          max_xml_bytes: "2 MiB"
          max_pages: 5
          ocr_max_pages: 1
          ocr_dpi: 300
          pdf_engines: [pdfplumber]
        """))
    assert m.stages == ("walk",)
    assert m.max_file_bytes == 512 * KiB
    r0, r1 = m.roots
    assert r0 == Root("data", (tree / "data").resolve(), ("*.pdf", "docs/**/*.md"),
                      ("build/", "**/node_modules/**"), True, True)
    assert r1.name == "more.2_x-y" and r1.path == (tree / "more").resolve()
    assert r1.include == () and r1.exclude == () and not r1.follow_symlinks
    assert m.limits == Limits(
        deadline_s=2.5, tool_deadline_s=10.0, max_output_bytes=64 * MiB, memory_bytes=GiB,
        max_chars=1000, max_parts=10, max_member_bytes=1000, max_xml_bytes=2 * MiB,
        max_pages=5, ocr_max_pages=1, ocr_dpi=300, pdf_engines=("pdfplumber",),
    )
    assert m.limits.stderr_bytes == Limits().stderr_bytes


def test_relative_root_resolved_against_manifest_dir(tree: Path, tmp_path_factory,
                                                      monkeypatch) -> None:
    path = write(tree, "version: 1\nroots:\n  - {name: d, path: data}\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "data").mkdir()
    monkeypatch.chdir(elsewhere)
    m = load_manifest(os.path.relpath(path, elsewhere))
    assert m.roots[0].path == (tree / "data").resolve()
    assert m.path.is_absolute() and m.path.samefile(path)


def test_digest_is_sha256_of_exact_bytes(tree: Path) -> None:
    data = b"# comment\r\nversion: 1\r\nroots:\r\n  - {name: d, path: data}\r\n"
    path = tree / "manifest.yaml"
    path.write_bytes(data)
    assert load_manifest(path).digest == hashlib.sha256(data).hexdigest()
    assert parse_manifest(data, path).digest == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("stages,expected", [
    ("[walk, extract]", ("walk", "extract")),
    ("[walk]", ("walk",)),
    ("[extract]", ("extract",)),
    ("[walk, extract, index]", ("walk", "extract", "index")),
    ("[index]", ("index",)),
])
def test_stages_accepted(tree: Path, stages: str, expected: tuple[str, ...]) -> None:
    m = load_manifest(write(tree, f"version: 1\nroots: [{{name: d, path: data}}]\n"
                                  f"stages: {stages}\n"))
    assert m.stages == expected


@pytest.mark.parametrize("text,value", [
    ("1000", 1000), ('"1000"', 1000), ("512KiB", 512 * KiB), ("64MiB", 64 * MiB),
    ('"1 GiB"', GiB), ("2TiB", 2 * 1024 * GiB), ("7B", 7), ("0x10", 16), ("1_000", 1000),
])
def test_size_syntax(tree: Path, text: str, value: int) -> None:
    m = load_manifest(write(tree, f"version: 1\nroots: [{{name: d, path: data}}]\n"
                                  f"limits: {{max_file_bytes: {text}, memory_bytes: {text}}}\n"))
    assert m.max_file_bytes == value
    assert m.limits.memory_bytes == value


def test_every_limits_field_but_the_internal_ones_is_a_key(tree: Path) -> None:
    """Keeps the schema in step with bastion.readers.base.Limits: every field is a key but
    the internal ones (the stderr cap; whether texts get languages, which a sweep always
    names and only ``bastion text`` turns off)."""
    err = refused(write(tree, "version: 1\nroots: [{name: d, path: data}]\nlimits: {x: 1}\n"))
    allowed = err.problem.split("(allowed: ")[1].rstrip(")").split(", ")
    internal = {f.name for f in fields(Limits) if f.metadata.get("kind") == "internal"}
    assert internal == {"stderr_bytes", "name_languages", "external_off"}
    expected = [f.name for f in fields(Limits) if f.name not in internal]
    assert allowed == ["max_file_bytes", *expected]
    lists = {"pdf_engines": "[pdfium]", "ocr_languages": "[deu, eng]"}
    text = "".join(f"\n  {name}: {lists.get(name, 1)}" for name in allowed)
    m = load_manifest(write(tree, f"version: 1\nroots: [{{name: d, path: data}}]\nlimits:{text}\n"))
    assert m.max_file_bytes == 1 and m.limits.max_pages == 1
    assert m.limits.ocr_languages == ("deu", "eng")


def test_bom_is_accepted(tree: Path) -> None:
    path = tree / "manifest.yaml"
    path.write_bytes(b"\xef\xbb\xbfversion: 1\nroots: [{name: d, path: data}]\n")
    assert load_manifest(path).roots[0].name == "d"


# -- refusals: each names the file, the line and the key -----------------------------------

ROOT = "roots:\n  - name: d\n    path: data\n"  # lines 2-4 when after "version: 1"

REFUSALS = [
    # (manifest text, line, key, fragment of the problem)
    ("version: 1\n" + ROOT + "colour: blue\n", 5, "colour",
     "unknown key (allowed: version, roots, stages, limits, output_mode, allow_root_workers, "
     "markdown)"),
    ("version: 1\n" + ROOT + "    exe: /bin/sh\n", 5, "roots[0].exe",
     "unknown key (allowed: name, path, include, exclude, follow_symlinks, one_file_system)"),
    ("version: 1\n" + ROOT + "limits:\n  stderr_bytes: 10\n", 6, "limits.stderr_bytes",
     "unknown key (allowed: max_file_bytes, deadline_s,"),
    ("version: 1\n" + ROOT + "limits:\n  command: ls\n", 6, "limits.command", "unknown key"),
    (ROOT, 1, None, "missing required key 'version'"),
    ("version: 1\nstages: [walk]\n", 1, None, "missing required key 'roots'"),
    ("version: 1\nroots:\n  - name: d\n", 3, "roots[0]", "missing required key 'path'"),
    ("version: 1\nroots:\n  - path: data\n", 3, "roots[0]", "missing required key 'name'"),
    ("version: 2\n" + ROOT, 1, "version", "unsupported version 2 (supported: 1)"),
    ("version: '1'\n" + ROOT, 1, "version", "expected an integer, got a string"),
    ("version: true\n" + ROOT, 1, "version", "expected an integer, got a boolean"),
    ("version: 1.0\n" + ROOT, 1, "version", "expected an integer, got a number"),
    ("version: 1\nroots: []\n", 2, "roots", "at least one root is required"),
    ("version: 1\nroots: data\n", 2, "roots", "expected a list, got a string"),
    ("version: 1\nroots:\n  - data\n", 3, "roots[0]", "expected a mapping, got a string"),
    ("version: 1\nroots:\n  - name: d\n    path: nope\n", 4, "roots[0].path",
     "'nope' does not exist"),
    ("version: 1\nroots:\n  - name: d\n    path: afile\n", 4, "roots[0].path",
     "'afile' is not a directory"),
    ("version: 1\nroots:\n  - name: d\n    path: ''\n", 4, "roots[0].path", "must not be empty"),
    ("version: 1\nroots:\n  - name: d\n    path: 5\n", 4, "roots[0].path",
     "expected a string, got an integer"),
    ('version: 1\nroots:\n  - name: d\n    path: "da\\0ta"\n', 4, "roots[0].path",
     "NUL character"),
    ("version: 1\n" + ROOT + "  - name: d\n    path: more\n", 5, "roots[1].name",
     "duplicate root name 'd' (also roots[0])"),
    ("version: 1\nroots:\n  - name: -bad\n    path: data\n", 3, "roots[0].name", "bad name"),
    ("version: 1\nroots:\n  - name: a b\n    path: data\n", 3, "roots[0].name", "bad name"),
    ("version: 1\nroots:\n  - name: " + "x" * 65 + "\n    path: data\n", 3, "roots[0].name",
     "bad name"),
    ("version: 1\nroots:\n  - name: \"d\\n\"\n    path: data\n", 3, "roots[0].name",
     "bad name"),
    ("version: 1\nroots:\n  - name: 7\n    path: data\n", 3, "roots[0].name",
     "expected a string, got an integer"),
    ("version: 1\nroots:\n  - name: no\n    path: data\n", 3, "roots[0].name",
     "expected a string, got a boolean"),
    ("version: 1\n" + ROOT + "    include: '*.pdf'\n", 5, "roots[0].include",
     "expected a list, got a string"),
    ("version: 1\n" + ROOT + "    exclude:\n      - ok\n      - 3\n", 7, "roots[0].exclude[1]",
     "expected a string, got an integer"),
    ("version: 1\n" + ROOT + "    exclude: ['[abc']\n", 5, "roots[0].exclude[0]",
     "unterminated '['"),
    ("version: 1\n" + ROOT + "    include: ['a//b']\n", 5, "roots[0].include[0]",
     "empty, '.' or '..' path segment"),
    ("version: 1\n" + ROOT + "    include: ['../x']\n", 5, "roots[0].include[0]",
     "empty, '.' or '..' path segment"),
    ("version: 1\n" + ROOT + "    include: ['']\n", 5, "roots[0].include[0]",
     "empty glob pattern"),
    ("version: 1\n" + ROOT + "    include: ['[z-a]']\n", 5, "roots[0].include[0]",
     "reversed range"),
    ("version: 1\n" + ROOT + "    follow_symlinks: 'yes'\n", 5, "roots[0].follow_symlinks",
     "expected a boolean, got a string"),
    ("version: 1\n" + ROOT + "    one_file_system: 1\n", 5, "roots[0].one_file_system",
     "expected a boolean, got an integer"),
    ("version: 1\n" + ROOT + "stages: []\n", 5, "stages", "must name at least one stage"),
    ("version: 1\n" + ROOT + "stages: walk\n", 5, "stages", "expected a list, got a string"),
    ("version: 1\n" + ROOT + "stages: [walk, search]\n", 5, "stages[1]",
     "unknown stage 'search' (allowed: walk, extract, index)"),
    ("version: 1\n" + ROOT + "stages: [extract, walk]\n", 5, "stages[1]",
     "stages must be in the order walk, extract, index"),
    ("version: 1\n" + ROOT + "stages: [walk, index, extract]\n", 5, "stages[2]",
     "stages must be in the order walk, extract, index"),
    ("version: 1\n" + ROOT + "stages:\n  - walk\n  - walk\n", 7, "stages[1]",
     "duplicate stage 'walk'"),
    ("version: 1\n" + ROOT + "limits: []\n", 5, "limits", "expected a mapping, got a list"),
    ("version: 1\n" + ROOT + "limits:\n  max_pages: true\n", 6, "limits.max_pages",
     "expected an integer, got a boolean"),
    ("version: 1\n" + ROOT + "limits:\n  max_pages: 0\n", 6, "limits.max_pages",
     "must be positive, got 0"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_dpi: -5\n", 6, "limits.ocr_dpi",
     "must be positive, got -5"),
    ("version: 1\n" + ROOT + "limits:\n  max_chars: 1.5\n", 6, "limits.max_chars",
     "expected an integer, got a number"),
    ("version: 1\n" + ROOT + "limits:\n  max_chars: '16MiB'\n", 6, "limits.max_chars",
     "expected an integer, got a string"),
    ("version: 1\n" + ROOT + "limits:\n  max_pages: " + str(2**63) + "\n", 6,
     "limits.max_pages", "at most"),
    ("version: 1\n" + ROOT + "limits:\n  memory_bytes: true\n", 6, "limits.memory_bytes",
     "expected an integer or a string, got a boolean"),
    ("version: 1\n" + ROOT + "limits:\n  memory_bytes: 64MB\n", 6, "limits.memory_bytes",
     "bad size '64MB'"),
    ("version: 1\n" + ROOT + "limits:\n  memory_bytes: 1.5GiB\n", 6, "limits.memory_bytes",
     "bad size"),
    ("version: 1\n" + ROOT + "limits:\n  memory_bytes: 0KiB\n", 6, "limits.memory_bytes",
     "must be positive, got '0KiB'"),
    ("version: 1\n" + ROOT + "limits:\n  max_file_bytes: 0\n", 6, "limits.max_file_bytes",
     "must be positive, got 0"),
    ("version: 1\n" + ROOT + "limits:\n  max_file_bytes: 9000000TiB\n", 6,
     "limits.max_file_bytes", "at most"),
    ("version: 1\n" + ROOT + "limits:\n  deadline_s: 0\n", 6, "limits.deadline_s",
     "must be a positive number of seconds"),
    ("version: 1\n" + ROOT + "limits:\n  deadline_s: -1.5\n", 6, "limits.deadline_s",
     "must be a positive number of seconds"),
    ("version: 1\n" + ROOT + "limits:\n  deadline_s: .inf\n", 6, "limits.deadline_s",
     "must be a positive number of seconds"),
    ("version: 1\n" + ROOT + "limits:\n  deadline_s: .nan\n", 6, "limits.deadline_s",
     "must be a positive number of seconds"),
    ("version: 1\n" + ROOT + "limits:\n  tool_deadline_s: false\n", 6,
     "limits.tool_deadline_s", "expected an integer or a number, got a boolean"),
    ("version: 1\n" + ROOT + "limits:\n  tool_deadline_s: '10'\n", 6,
     "limits.tool_deadline_s", "got a string"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_languages: deu\n", 6, "limits.ocr_languages",
     "must be 'auto' or a list of language packs, got 'deu'"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_languages: []\n", 6, "limits.ocr_languages",
     "must name at least one language pack"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_languages: [deu, ../x]\n", 6,
     "limits.ocr_languages[1]", "bad language pack '../x'"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_languages: [deu, deu]\n", 6,
     "limits.ocr_languages[1]", "duplicate language pack 'deu'"),
    ("version: 1\n" + ROOT + "limits:\n  pdf_engines: []\n", 6, "limits.pdf_engines",
     "must name at least one engine"),
    ("version: 1\n" + ROOT + "limits:\n  pdf_engines: pdfium\n", 6, "limits.pdf_engines",
     "expected a list, got a string"),
    ("version: 1\n" + ROOT + "limits:\n  pdf_engines: [pdfium, mutool]\n", 6,
     "limits.pdf_engines[1]", "unknown engine 'mutool' (allowed: pdfium, pdfplumber, pdftotext)"),
    ("version: 1\n" + ROOT + "limits:\n  pdf_engines:\n    - pdfium\n    - pdfium\n", 8,
     "limits.pdf_engines[1]", "duplicate engine 'pdfium'"),
    # duplicate keys, at every level
    ("version: 1\n" + ROOT + "version: 1\n", 5, "version", "duplicate key (first at line 1)"),
    ("version: 1\n" + ROOT + "    name: e\n", 5, "roots[0].name",
     "duplicate key (first at line 3)"),
    ("version: 1\n" + ROOT + "limits:\n  ocr_dpi: 1\n  ocr_dpi: 2\n", 7, "limits.ocr_dpi",
     "duplicate key (first at line 6)"),
    # the shape of the document
    ("- version: 1\n", 1, None, "the top level must be a mapping, got a list"),
    ("just a string\n", 1, None, "the top level must be a mapping, got a string"),
    ("version: 1\n" + ROOT + "? [a]\n: b\n", 5, None, "mapping keys must be strings"),
    ("version: 1\n" + ROOT + "1: x\n", 5, None, "mapping keys must be strings, got an integer"),
    ("version: 1\n" + ROOT + "<<: {stages: [walk]}\n", 5, None, "mapping keys must be strings"),
    # YAML features refused
    ("version: 1\nroots:\n  - &r {name: d, path: data}\n", 3, None,
     "YAML anchors are not allowed (&r)"),
    ("version: 1\nroots:\n  - {name: d, path: data}\nx: &a [1]\ny: *a\n", 4, None,
     "YAML anchors are not allowed"),
    ("version: 1\n" + ROOT + "limits:\n  max_pages: *undefined\n", 6, None,
     "YAML aliases are not allowed (*undefined)"),
    ("version: !!int 1\n" + ROOT, 1, None, "YAML tags are not allowed (tag:yaml.org,2002:int)"),
    ("version: 1\n" + ROOT + "x: !!python/object/apply:os.system ['true']\n", 5, None,
     "YAML tags are not allowed"),
    ("version: 1\n" + ROOT + "x: ! 5\n", 5, None, "YAML tags are not allowed (!)"),
    # syntax errors
    ("version: 1\nroots: [\n  {name: d\n", 4, None, "YAML syntax error"),
    ("version: 1\n" + ROOT + "  bad: indentation: here\n", 5, None, "YAML syntax error"),
    ("version: 1\n" + ROOT + "\tstages: []\n", 5, None, "YAML syntax error"),
    ("version: 1\n" + ROOT + "---\nversion: 1\n", 5, None, "YAML syntax error"),
    ("version: 1\n" + ROOT + "x: \"\x01\"\n", 5, None, "YAML syntax error"),
]


@pytest.mark.parametrize("text,line,key,problem", REFUSALS)
def test_refusals_name_key_and_line(tree: Path, text: str, line: int, key: str | None,
                                    problem: str) -> None:
    err = refused(write(tree, text))
    assert err.line == line, str(err)
    assert err.key == key, str(err)
    assert problem in err.problem, str(err)
    prefix = f"manifest.yaml:{line}: " + (f"{key}: " if key else "")
    assert str(err) == prefix + err.problem


def test_message_format_example(tree: Path) -> None:
    text = "version: 1\nroots:\n  - name: a\n    path: data\n  - name: b\n\n    path: /nope\n"
    assert str(refused(write(tree, text))) == \
        "manifest.yaml:7: roots[1].path: '/nope' does not exist"


def test_empty_file(tree: Path) -> None:
    for text in ("", "\n\n", "# only a comment\n"):
        err = refused(write(tree, text))
        assert (err.line, err.key) == (1, None)
        assert "empty" in err.problem


def test_invalid_utf8_names_line(tree: Path) -> None:
    path = tree / "manifest.yaml"
    path.write_bytes(b"version: 1\nroots:\n  - name: \xff\n")
    err = refused(path)
    assert err.line == 3 and "UTF-8" in err.problem


def test_over_one_mib(tree: Path) -> None:
    path = tree / "manifest.yaml"
    path.write_bytes(b"version: 1\n" + b"#" * (1024 * 1024))
    err = refused(path)
    assert "1 MiB" in str(err) and err.line is None
    with pytest.raises(ManifestError, match="1 MiB"):
        parse_manifest(path.read_bytes(), path)


def test_exactly_one_mib_is_read(tree: Path) -> None:
    head = b"version: 1\nroots: [{name: d, path: data}]\n"
    path = tree / "manifest.yaml"
    path.write_bytes(head + b"#" * (1024 * 1024 - len(head)))
    assert load_manifest(path).roots[0].name == "d"


def test_alias_bomb_refused_quickly(tree: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    err = refused(write(tree, "\n".join(lines) + "\n"))
    assert err.line == 1 and "anchors are not allowed" in err.problem


def test_missing_and_non_regular_manifest(tree: Path) -> None:
    err = refused(tree / "absent.yaml")
    assert str(err).startswith("absent.yaml: cannot read manifest: ")
    assert str(refused(tree / "data")) == "data: the manifest is not a regular file"
    os.mkfifo(tree / "fifo")
    assert str(refused(tree / "fifo")) == "fifo: the manifest is not a regular file"


# -- globs ---------------------------------------------------------------------------------

GLOBS = [
    # pattern, path, matches
    ("*.pdf", "a.pdf", True),
    ("*.pdf", "x/y/a.pdf", True),
    ("*.pdf", "a.pdf/b.txt", False),
    ("*.pdf", "a.PDF", False),
    ("*.pdf", ".pdf", True),
    ("a?c", "d/abc", True),
    ("a?c", "a/c", False),
    ("README", "docs/README", True),
    ("README", "README.md", False),
    ("*", "a/b/c", True),
    ("[ab].txt", "x/a.txt", True),
    ("[!ab].txt", "x/a.txt", False),
    ("[!ab].txt", "x/c.txt", True),
    ("[^ab].txt", "c.txt", True),
    ("[a-c]x", "bx", True),
    ("[a-c]x", "dx", False),
    ("[]]x", "]x", True),
    ("[*]", "*", True),
    ("[*]", "a", False),
    ("a.b", "axb", False),
    ("(x)+", "(x)+", True),
    ("docs/*.md", "docs/a.md", True),
    ("docs/*.md", "docs/sub/a.md", False),
    ("docs/*.md", "x/docs/a.md", False),
    ("/docs/*.md", "docs/a.md", True),
    ("docs/[!x]/f", "docs/a/f", True),
    ("docs/?", "docs/a", True),
    ("docs/?", "docs/ab", False),
    ("docs/**/*.md", "docs/a.md", True),
    ("docs/**/*.md", "docs/x/a.md", True),
    ("docs/**/*.md", "docs/x/y/a.md", True),
    ("docs/**/*.md", "other/docs/a.md", False),
    ("docs/**/*.md", "docs/a.mdx", False),
    ("**/build/**", "build/a", True),
    ("**/build/**", "x/y/build/a/b", True),
    ("**/build/**", "build", False),
    ("**/build/**", "xbuild/a", False),
    ("**/*.md", "a.md", True),
    ("**/*.md", "x/a.md", True),
    ("build/", "build/a", True),
    ("build/", "build/a/b", True),
    ("build/", "build", False),
    ("build/", "x/build/a", False),
    ("build/**", "build/a/b", True),
    ("a/**/b/**/c", "a/b/c", True),
    ("a/**/b/**/c", "a/x/b/y/z/c", True),
    ("a/**/b/**/c", "a/x/y/c", False),
    ("a**b/c", "axyb/c", True),
    ("a**b/c", "ax/yb/c", False),
    ("**", "a/b", True),
    ("**/", "a/b", True),
    ("x/*", "x/\n", True),
]


@pytest.mark.parametrize("pattern,path,matches", GLOBS)
def test_glob_match(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


@pytest.mark.parametrize("pattern", ["", "a//b", "./a", "a/../b", "/", "[ab", "x[", "[b-a]",
                                     "a\x00b"])
def test_bad_glob_raises_value_error(pattern: str) -> None:
    with pytest.raises(ValueError):
        glob_match(pattern, "a")


def _root(include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> Root:
    return Root(name="r", path=Path("/"), include=include, exclude=exclude)


SELECTS = [
    # include, exclude, path, selected
    ((), (), "anything/at/all", True),
    (("*.pdf",), (), "a/b.pdf", True),
    (("*.pdf",), (), "a/b.txt", False),
    (("*.pdf", "docs/**"), (), "docs/x.txt", True),
    ((), ("*.tmp",), "a.tmp", False),
    ((), ("*.tmp",), "a.txt", True),
    (("*.pdf",), ("private/",), "private/a.pdf", False),
    (("*.pdf",), ("private/",), "public/a.pdf", True),
    ((), ("**/node_modules/**",), "app/node_modules/x/y.js", False),
]


@pytest.mark.parametrize("include,exclude,path,selected", SELECTS)
def test_root_selects(include: tuple[str, ...], exclude: tuple[str, ...], path: str,
                      selected: bool) -> None:
    assert root_selects(_root(include, exclude), path) is selected


PRUNES = [
    # exclude, directory, prunable
    (("build/",), "build", True),
    (("build/",), "build/sub", True),
    (("build/",), "x/build", False),
    (("build/**",), "build", True),
    (("/build/",), "build", True),
    (("**/node_modules/**",), "node_modules", True),
    (("**/node_modules/**",), "a/b/node_modules", True),
    (("**/node_modules/**",), "a/b/node_modules/c", True),
    (("**/node_modules/**",), "a/node_modules_x", False),
    (("docs/*/tmp/",), "docs/a/tmp", True),
    (("docs/*/tmp/",), "docs/a/b/tmp", False),
    (("*.tmp",), "x.tmp", False),  # names files only: x.tmp/f is not excluded
    (("build",), "build", False),  # "build" matches a file named build, not its contents
    (("build/*.o",), "build", False),  # only some files under build
    (("docs/**/*.md",), "docs", False),
    (("**",), "a", True),
    (("build/",), "", False),
    (("build/",), ".", False),
    ((), "build", False),
]


@pytest.mark.parametrize("exclude,reldir,prunable", PRUNES)
def test_dir_excluded(exclude: tuple[str, ...], reldir: str, prunable: bool) -> None:
    root = _root(exclude=exclude)
    assert dir_excluded(root, reldir) is prunable
    if prunable:  # pruning is only ever safe: every file below is excluded
        for rest in ("f", "x/y/f", ".hidden"):
            assert not root_selects(root, f"{reldir}/{rest}")


# -- limit kinds, from Limits' field metadata ---------------------------------------------


def test_every_limits_field_declares_its_kind() -> None:
    """A field added to Limits must say how a manifest writes it (or that it is internal)."""
    from bastion.readers.base import LIMIT_KINDS

    for f in fields(Limits):
        assert f.metadata.get("kind") in LIMIT_KINDS, f"Limits.{f.name} declares no kind"


def test_a_new_limits_field_is_a_key_by_its_kind(tree: Path, monkeypatch) -> None:
    """Adding a field to Limits never breaks validation: with a manifest kind it is a key
    parsed by that kind; without one it is refused as unknown, with the usual message."""
    import dataclasses

    import bastion.tasks.manifest as manifest_mod

    extra = dataclasses.make_dataclass(
        "ExtraLimits",
        [("max_widgets", int, dataclasses.field(default=7, metadata={"kind": "count"})),
         ("widget_bytes", int, dataclasses.field(default=1, metadata={"kind": "size"})),
         ("widget_wait_s", float, dataclasses.field(default=1.0, metadata={"kind": "seconds"})),
         ("no_kind", int, dataclasses.field(default=3))],
        bases=(Limits,), frozen=True)
    monkeypatch.setattr(manifest_mod, "Limits", extra)
    head = "version: 1\nroots: [{name: d, path: data}]\n"
    m = load_manifest(write(tree, head + "limits: {max_widgets: 9, widget_bytes: 2KiB, "
                                         "widget_wait_s: 0.5, max_pages: 3}\n"))
    assert (m.limits.max_widgets, m.limits.widget_bytes, m.limits.widget_wait_s) == (9, 2048, 0.5)
    assert m.limits.max_pages == 3 and m.limits.no_kind == 3
    err = refused(write(tree, head + "limits: {no_kind: 1}\n", "m2.yaml"))
    assert err.key == "limits.no_kind" and "unknown key" in err.problem
    assert "max_widgets" in err.problem
    err = refused(write(tree, head + "limits: {max_widgets: 1.5}\n", "m3.yaml"))
    assert err.key == "limits.max_widgets" and "integer" in err.problem
