"""The JSON Schemas in schemas/ (draft 2020-12) hold for every record and summary bastion
writes: a sweep over every sample format and the bundled examples validates line by line;
the schemas' vocabularies follow the code; a record that breaks the contract is refused; and
the DuckDB and pandas queries of docs/records.md run on a real output."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from bastion.readers.base import limit_kinds
from bastion.readers.errors import ERROR_KINDS
from bastion.tasks.cli import main
from tests.schemacheck import FILES, SCHEMAS, schema, validate_output, validator

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "samples"
CI = bool(os.environ.get("CI"))


def _need(module: str):
    """An optional test dependency: installed by the test extra, so required in CI."""
    if CI:
        return __import__(module)
    return pytest.importorskip(module, reason=f"{module} is a test extra "
                               "(pip install -e '.[test]')")


jsonschema = _need("jsonschema")


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """One sweep over every sample folder (all formats) and the bundled examples, plus a few
    files that make each other status: empty, unsupported, error, skipped."""
    base = tmp_path_factory.mktemp("schemas")
    tree = base / "tree"
    shutil.copytree(SAMPLES, tree / "samples", ignore=shutil.ignore_patterns("ORIGIN.md"))
    shutil.copytree(REPO / "examples" / "docs", tree / "examples",
                    ignore=shutil.ignore_patterns(".agent"))
    _odd_files(tree / "odd")
    manifest = base / "manifest.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: t\n    path: {tree}\n"
                        "stages: [walk, extract]\n", encoding="utf-8")
    out = base / "out"
    rc = main(["sweep", str(manifest), "--out", str(out), "-q", "-j", "2"])
    assert rc in (0, 2), rc
    return out


def _odd_files(odd: Path) -> None:
    """Files that make each status but ``ok``: empty, unsupported, error, skipped; and a name
    that is not UTF-8."""
    odd.mkdir(parents=True)
    (odd / "empty.txt").write_bytes(b"")
    (odd / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (odd / "broken.docx").write_bytes(b"PK\x03\x04 this is not a zip")
    (odd / "link.txt").symlink_to("empty.txt")
    with open(os.fsencode(odd) + b"/na\xffme <b>.txt", "wb") as f:  # not UTF-8
        f.write(b"a name that is not UTF-8\n")
    os.mkfifo(odd / "fifo")


@pytest.fixture(scope="module")
def every_status(tmp_path_factory) -> Path:
    """A small sweep with a record of each status (the odd files beside a text and a page):
    for the tests that need records of each kind, not of each format (``swept``'s sweep of
    every sample reads with the tools and takes long)."""
    base = tmp_path_factory.mktemp("statuses")
    tree = base / "tree"
    _odd_files(tree / "odd")
    (tree / "note.txt").write_text("a plain note\n")
    (tree / "page.html").write_text("<html><head><title>T</title></head><body><p>page</p>"
                                    "</body></html>")
    manifest = base / "manifest.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: t\n    path: {tree}\n"
                        "stages: [walk, extract]\n", encoding="utf-8")
    out = base / "out"
    assert main(["sweep", str(manifest), "--out", str(out), "-q", "--no-external"]) == 2
    return out


def test_every_schema_is_valid_draft_2020_12() -> None:
    names = sorted(p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json"))
    assert names == ["extract-record", "extract-summary", "pdf-sidecar", "walk-record",
                     "walk-summary"]
    for name in names:
        s = schema(name)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(s)


@pytest.mark.slow
def test_every_record_and_summary_of_a_sweep_validates(swept: Path) -> None:
    assert validate_output(swept) == []
    records = [json.loads(line) for line in (swept / "extract.jsonl").open("rb")]
    statuses = {r["status"] for r in records}
    assert statuses == {"ok", "empty", "unsupported", "error", "skipped"}, statuses
    mimes = {r["mime"] for r in records}
    for family in ("application/pdf", "message/rfc822", "application/rtf", "text/csv",
                   "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                   "application/vnd.oasis.opendocument.text", "application/zip",
                   "application/msword", "application/vnd.ms-excel"):
        assert family in mimes, family
    sidecars = list((swept / "extract").glob("*/*.meta.json"))
    assert sidecars, "no PDF sidecar was written"
    assert sum(1 for _ in (swept / "walk.jsonl").open("rb")) == len(records)


def test_the_vocabularies_follow_the_code() -> None:
    record = schema("extract-record")["properties"]
    assert [k for k in record["error_kind"]["enum"] if k] == list(ERROR_KINDS)
    caps = sorted(k for k, kind in limit_kinds().items() if kind != "internal")
    assert sorted(k for k in record["limit"]["enum"] if k) == caps
    from bastion.readers.runtime.verdict import VERDICT_FIELDS, Status

    assert set(record["status"]["enum"]) == {s.value for s in Status}
    assert set(VERDICT_FIELDS) <= set(record)
    from bastion.tasks.records import WalkRecord

    assert set(schema("walk-record")["properties"]) == set(WalkRecord.__slots__)
    from dataclasses import fields

    from bastion.tasks.extract.records import ExtractSummary

    assert set(schema("extract-summary")["properties"]) == {f.name for f in
                                                            fields(ExtractSummary)}


@pytest.mark.parametrize("change, needle", [
    ({"status": "fine"}, "status"),
    ({"chars": -1}, "chars"),
    ({"surprise": 1}, "surprise"),
    ({"error_kind": "gremlins"}, "error_kind"),
    ({"sha256": "XYZ"}, "sha256"),
    ({"status": "error", "error_kind": None, "error": "x"}, "error_kind"),
    ({"status": "empty"}, "text"),  # a text file named on a record that is not ok
])
def test_a_record_that_breaks_the_contract_is_refused(every_status: Path, change: dict,
                                                      needle: str) -> None:
    ok = next(json.loads(line) for line in (every_status / "extract.jsonl").open("rb")
              if json.loads(line)["status"] == "ok")
    assert list(validator("extract-record").iter_errors(ok)) == []
    errors = list(validator("extract-record").iter_errors({**ok, **change}))
    assert errors and any(needle in (e.message + str(list(e.absolute_path)))
                          for e in errors), [e.message for e in errors]


def test_a_damaged_output_is_reported_line_by_line(every_status: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(every_status, out, ignore=shutil.ignore_patterns(".bastion", ".lock"))
    lines = (out / "walk.jsonl").read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[1])
    bad["kind"] = "portal"
    lines[1] = (json.dumps(bad) + "\n").encode()
    (out / "walk.jsonl").write_bytes(b"".join(lines))
    problems = validate_output(out)
    assert len(problems) == 1 and re.search(r"walk\.jsonl:2: kind: 'portal'", problems[0])
    (out / "walk.jsonl").write_bytes(b"".join(lines[:1]) + b"".join(
        l for i, l in enumerate(lines) if i != 1))  # valid again: the check below must pass
    (out / "CACHEDIR.TAG").unlink()  # not an output any more: the autouse check leaves it


def _records_md_blocks(lang: str, marker: str) -> list[str]:
    text = (REPO / "docs" / "records.md").read_text(encoding="utf-8")
    found = [b for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S) if marker in b]
    assert found, f"no ```{lang} block with {marker!r} in docs/records.md"
    return found


@pytest.fixture(scope="module")
def examples_out(tmp_path_factory) -> Path:
    """A sweep of the bundled examples and one broken document (names all UTF-8)."""
    base = tmp_path_factory.mktemp("query")
    tree = base / "docs"
    shutil.copytree(REPO / "examples" / "docs", tree, ignore=shutil.ignore_patterns(".agent"))
    (tree / "broken.docx").write_bytes(b"PK\x03\x04 this is not a zip")
    (base / "manifest.yaml").write_text(f"version: 1\nroots:\n  - name: docs\n    path: {tree}\n"
                                       "stages: [walk, extract]\n", encoding="utf-8")
    assert main(["sweep", str(base / "manifest.yaml"), "--out", str(base / "out"), "-q",
                 "--no-external"]) == 2
    return base / "out"


def _counts(out: Path) -> dict[str, int]:
    counts = json.loads((out / "extract.summary.json").read_text())["counts"]
    return {k: v for k, v in counts.items() if v}


def test_the_duckdb_example_of_records_md_runs(examples_out: Path) -> None:
    duckdb = _need("duckdb")
    code = _records_md_blocks("python", "read_json_auto")[0]
    scope: dict = {"OUT": str(examples_out)}
    exec(compile(code, "docs/records.md (duckdb)", "exec"), scope)
    assert dict(scope["by_status"]) == _counts(examples_out)
    assert [(r[1], r[2]) for r in scope["failures"]] == [("broken.docx", "corrupt")]
    sql = next(b for b in re.findall(r"```sql\n(.*?)```",
                                     (REPO / "docs" / "records.md").read_text(), re.S))
    rows = duckdb.sql(sql.replace("OUT/", f"{examples_out}/")).fetchall()
    assert rows == [("broken.docx", 22, "corrupt")]  # its size in bytes


def test_duckdb_refuses_names_that_are_not_utf8_and_the_documented_way_round(
        every_status: Path) -> None:
    duckdb = _need("duckdb")
    _need("pandas")
    with pytest.raises(duckdb.Error, match="surrogate"):  # what docs/records.md says
        duckdb.sql(f"SELECT count(*) FROM read_json_auto('{every_status}/extract.jsonl')"
                   ).fetchall()
    code = next(b for b in _records_md_blocks("python", "FROM frame"))
    scope: dict = {"OUT": str(every_status)}
    exec(compile(code, "docs/records.md (pandas + duckdb)", "exec"), scope)
    summary = json.loads((every_status / "extract.summary.json").read_text())
    assert dict(scope["kinds"]) == summary["error_kinds"]


def test_the_database_example_of_records_md_runs(examples_out: Path) -> None:
    """The sqlite3 queries of docs/records.md on the database the exports are written from:
    they say what the exports and the summaries say."""
    code = next(b for b in _records_md_blocks("python", "import sqlite3"))
    scope: dict = {"OUT": str(examples_out)}
    exec(compile(code, "docs/records.md (sqlite3)", "exec"), scope)
    scope["db"].close()
    walk = [json.loads(line) for line in (examples_out / "walk.jsonl").read_text().splitlines()]
    files = [w for w in walk if w["kind"] == "file"]
    assert sum(n for _, n, _ in scope["by_type"]) == len(files)
    assert {m: n for m, n, _ in scope["by_type"]} == {
        m: sum(1 for w in files if w["mime"] == m) for m in {w["mime"] for w in files}}
    assert scope["changed"] == [(w["root"], w["path"]) for w in walk]  # one walk: all of it
    summary = json.loads((examples_out / "walk.summary.json").read_text())
    # the sweep's two runs: the walk's row, then the extract run's, whose export the summary is
    assert scope["runs"] == [(1, "walk", summary["hashed"]), (2, "extract", None)]
    extract = json.loads((examples_out / "extract.summary.json").read_text())
    assert scope["last_extract"] == (2, extract["extracted"], extract["reused"],
                                     extract["removed"], extract["records"])
    assert extract["extracted"] > 3
    assert sum(n for _, n in scope["statuses"]) == len({(r["sha256"]) for r in walk
                                                        if r["sha256"]})
    recs = [json.loads(x) for x in (examples_out / "extract.jsonl").read_text().splitlines()]
    assert dict(scope["record_statuses"]) == {
        s: sum(1 for r in recs if r["status"] == s) for s in {r["status"] for r in recs}}
    texts = [r["text"] for r in recs if r.get("text")]
    assert len(scope["shared_texts"]) == len({t for t in texts if texts.count(t) > 1})
    assert scope["pending"] == []


def test_the_duckdb_example_on_the_database_runs(examples_out: Path) -> None:
    """DuckDB reading the database through its sqlite extension (the wheel, no network), as
    docs/records.md shows: the same answers as sqlite3's."""
    _need("duckdb")
    _need("duckdb_extension_sqlite_scanner")
    code = next(b for b in _records_md_blocks("python", "TYPE sqlite"))
    scope: dict = {"OUT": str(examples_out)}
    exec(compile(code, "docs/records.md (duckdb on sqlite)", "exec"), scope)
    scope["con"].close()
    db = sqlite3.connect(f"file:{examples_out}/.bastion/verdicts.sqlite?mode=ro", uri=True)
    try:
        want_types = db.execute("SELECT mime, count(*), sum(size) FROM walk WHERE kind = 'file' "
                                "GROUP BY mime ORDER BY 3 DESC, 1").fetchall()
        want_statuses = db.execute("SELECT status, count(*) FROM verdicts GROUP BY status "
                                   "ORDER BY status").fetchall()
    finally:
        db.close()
    assert scope["by_type"] == want_types and len(want_types) > 3
    assert scope["statuses"] == want_statuses
    assert dict(scope["statuses"])["error"] == 1  # the broken .docx


def test_the_pandas_example_of_records_md_runs(every_status: Path) -> None:
    _need("pandas")
    code = next(b for b in _records_md_blocks("python", "value_counts"))
    scope: dict = {"OUT": str(every_status)}
    exec(compile(code, "docs/records.md (pandas)", "exec"), scope)
    assert scope["by_status"].to_dict() == _counts(every_status)
    assert len(scope["records"]) == sum(_counts(every_status).values())
    assert scope["unsupported_types"].sum() == _counts(every_status)["unsupported"]
