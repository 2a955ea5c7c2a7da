"""The index stage and ``bastion search``: a full-text index (SQLite FTS5) of the stored
texts, built incrementally per text and searched by bm25 with the walked paths and a snippet;
``bastion.search`` returns the same as typed frozen values."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import bastion
from bastion.tasks.cli import main
from bastion.tasks.index.database import INDEX_DB, unpack

REPO = Path(__file__).resolve().parent.parent
STAGES = "stages: [walk, extract, index]\n"


def manifest(tmp: Path, root: Path, extra: str = STAGES, name: str = "m.yaml") -> Path:
    m = tmp / name
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n{extra}")
    return m


def sweep(m: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external", *extra])


def corpus(root: Path) -> None:
    """Five documents: two hold both words (one of them twice), one each word alone, one
    neither; one text is shared by two paths."""
    (root / "d0").mkdir(parents=True)
    (root / "d1").mkdir()
    (root / "d0" / "both.txt").write_text("The Alder pump failed. The alder pump was replaced; "
                                          "alder pump parts ordered.\n")
    (root / "d0" / "once.txt").write_text("A report mentions the alder pump once among many "
                                          "other words about the plant and its staff, Zoë among them.\n")
    (root / "d1" / "pump.txt").write_text("Only the pump is named here.\n")
    (root / "d1" / "alder.txt").write_text("Alder trees grow by the river.\n")
    (root / "d1" / "none.txt").write_text("Nothing relevant at all.\n")
    shutil.copyfile(root / "d0" / "both.txt", root / "d1" / "copy-of-both.txt")


@pytest.fixture()
def swept(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    corpus(root)
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    return m, root, out


def index_rows(out: Path) -> dict[str, tuple[str, str]]:
    """The index's rows: stem -> (key, text)."""
    db = sqlite3.connect(f"file:{out / INDEX_DB}?mode=ro", uri=True)
    try:
        return {stem: (key, unpack(body)) for stem, key, body in
                db.execute("SELECT stem, key, body FROM texts")}
    finally:
        db.close()


def index_words(out: Path) -> set[tuple[str, str, int, int]]:
    """Every word the FTS5 index holds, as (stem, term, column, offset)."""
    db = sqlite3.connect(f"file:{out / INDEX_DB}?mode=ro", uri=True)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, texts_fts, instance)")
        stems = dict(db.execute("SELECT id, stem FROM texts"))
        return {(stems[doc], term, col, off) for term, doc, col, off in
                db.execute("SELECT term, doc, col, offset FROM temp.v")}
    finally:
        db.close()


def ranked(out: Path, query: str, limit: int = 10) -> list[tuple[tuple[str, ...], float]]:
    return [(tuple(str(p) for p in h.paths), h.score) for h in bastion.search(out, query,
                                                                              limit=limit)]


def test_search_ranks_the_documents_holding_two_words(swept, capsys) -> None:
    _, _, out = swept
    capsys.readouterr()
    assert main(["search", str(out), "alder pump"]) == 0
    printed = capsys.readouterr().out
    # the documents holding both words, the one saying them three times first; the shared
    # text lists both of its paths; the documents with one word or none do not appear
    assert printed.index("r/d0/both.txt") < printed.index("r/d0/once.txt")
    assert "r/d1/copy-of-both.txt" in printed
    for absent in ("pump.txt", "alder.txt", "none.txt"):
        assert absent not in printed, printed
    hits = bastion.search(out, "alder pump")
    assert [[str(p) for p in h.paths] for h in hits] == [
        ["r/d0/both.txt", "r/d1/copy-of-both.txt"], ["r/d0/once.txt"]]
    assert hits.hits[0].score > hits.hits[1].score and [h.rank for h in hits] == [1, 2]
    assert hits.hits[0].path_count == 2 and not hits.behind
    first = hits.hits[0]
    assert [first.snippet[a:b].lower() for a, b in first.highlights][:2] == ["alder", "pump"]
    assert "\n" not in first.snippet
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.rank = 5  # type: ignore[misc]
    assert isinstance(first.paths[0], bastion.Place) and isinstance(hits, bastion.SearchResults)
    # a phrase, OR, a prefix, diacritics folded
    assert len(bastion.search(out, '"pump failed"')) == 1
    assert len(bastion.search(out, "river OR nothing")) == 2
    assert len(bastion.search(out, "alde*")) == 3
    assert [p for p, _ in ranked(out, "zoe")] == [("r/d0/once.txt",)]


def test_no_match_exits_1_json_and_limit(swept, capsys) -> None:
    _, _, out = swept
    capsys.readouterr()
    assert main(["search", str(out), "quokka"]) == 1
    assert capsys.readouterr().out == ""
    assert main(["search", str(out), "--json", "--limit", "1", "pump"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    hit = json.loads(lines[0])
    assert set(hit) == {"rank", "score", "text", "paths", "path_count", "snippet",
                        "highlights"}
    assert hit["rank"] == 1 and hit["text"].startswith("extract/")
    assert (out / hit["text"]).is_file()


@pytest.mark.parametrize("query", ["e-mail", '"unbalanced', "AND", "a:b", "   "])
def test_a_malformed_query_is_one_line_and_exit_2(swept, capsys, query: str) -> None:
    _, _, out = swept
    capsys.readouterr()
    assert main(["search", str(out), query]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("bastion: search: ") and "query" in err
    with pytest.raises(bastion.QueryError):
        bastion.search(out, query)


def test_search_without_an_index_says_how_to_make_one(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    corpus(root)
    out = tmp_path / "out"
    assert sweep(manifest(tmp_path, root, extra=""), out) == 0
    capsys.readouterr()
    assert main(["search", str(out), "pump"]) == 2
    err = capsys.readouterr().err
    assert "no index" in err and "index" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(bastion.PrerequisiteError):
        bastion.search(out, "pump")
    assert main(["search", str(tmp_path), "pump"]) == 2  # not an output
    assert "not a bastion output" in capsys.readouterr().err
    with pytest.raises(bastion.NotAnOutputError):
        bastion.search(tmp_path, "pump")


def test_a_deleted_file_leaves_the_results_at_the_next_sweep(swept, capsys) -> None:
    m, root, out = swept
    (root / "d0" / "once.txt").unlink()
    assert [p for p, _ in ranked(out, "alder pump")][1] == ("r/d0/once.txt",)
    capsys.readouterr()
    assert sweep(m, out) == 0
    assert [p for p, _ in ranked(out, "alder pump")] == [("r/d0/both.txt",
                                                          "r/d1/copy-of-both.txt")]
    # one of two paths of a shared text deleted: the text stays, with the other path
    (root / "d0" / "both.txt").unlink()
    assert sweep(m, out) == 0
    assert [p for p, _ in ranked(out, "alder pump")] == [("r/d1/copy-of-both.txt",)]
    (root / "d1" / "copy-of-both.txt").unlink()
    assert sweep(m, out) == 0
    assert ranked(out, "alder pump") == []
    assert not any("alder pump" in text.lower() for _, text in index_rows(out).values())


def test_a_text_is_indexed_once_and_the_index_is_up_to_date_when_nothing_changed(
        swept, capsys) -> None:
    m, root, out = swept
    rows = index_rows(out)
    records = [json.loads(line) for line in (out / "extract.jsonl").read_bytes().splitlines()]
    assert set(rows) == {r["text"].rsplit("/", 1)[1][:-4] for r in records}
    assert len(rows) == 5  # six files, two of them the same bytes
    for r in records:
        stem = r["text"].rsplit("/", 1)[1][:-4]
        assert rows[stem][1] == (out / r["text"]).read_text()
    capsys.readouterr()
    assert main(["sweep", str(m), "--out", str(out), "-j", "1", "--no-external"]) == 0
    assert main(["sweep", str(m), "--out", str(out), "-j", "1", "--no-external"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("index: 5 texts") and "nothing to do" in last, last
    # the index stage on its own, from the CLI
    assert main(["index", str(m), "--out", str(out)]) == 0
    assert "index: " in capsys.readouterr().err


def test_a_changed_key_reindexes_the_text(swept) -> None:
    """A file read again under another task key (here a smaller max_chars, which every
    reader's key holds; a tool installed or upgraded is the same change) has its text's row
    replaced under the same store name."""
    m, root, out = swept
    before = index_rows(out)
    m.write_text(m.read_text() + "limits:\n  max_chars: 20\n")
    assert sweep(m, out) == 0
    after = index_rows(out)
    assert set(after) == set(before)
    for stem, (key, text) in after.items():
        assert key != before[stem][0] and "text truncated" in text
    assert ranked(out, "replaced") == []  # past the cap now
    assert index_words(out) == index_words(_fresh(out, m))


def _fresh(out: Path, m: Path) -> Path:
    fresh = out.parent / f"fresh-{len(list(out.parent.glob('fresh-*')))}"
    assert sweep(m, fresh) == 0
    return fresh


def test_the_index_files_follow_the_outputs_modes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    corpus(root)
    for mode, expected in (("private", 0o600), ("group", 0o640)):
        m = manifest(tmp_path, root, extra=STAGES + f"output_mode: {mode}\n", name=f"{mode}.yaml")
        out = tmp_path / f"out-{mode}"
        assert sweep(m, out) == 0
        for path in (out / ".bastion").glob("index.sqlite*"):
            assert stat.S_IMODE(path.stat().st_mode) == expected, path
        assert stat.S_IMODE((out / INDEX_DB).stat().st_mode) == expected


def test_the_index_stage_refuses_records_that_are_not_whole(swept, capsys) -> None:
    m, root, out = swept
    db = sqlite3.connect(out / ".bastion" / "verdicts.sqlite")
    with db:  # what an extract run killed while it rewrote the records leaves: some rows
        db.execute("UPDATE records_state SET value = 'null' WHERE name = 'export'")
        db.execute("DELETE FROM records WHERE path LIKE 'd0/%'")
    db.close()
    os.utime(out / "extract.jsonl", ns=(1, 1))  # (and the index behind the export)
    before = index_rows(out)
    capsys.readouterr()
    assert main(["index", str(m), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "not whole" in err and "Traceback" not in err
    assert index_rows(out) == before  # nothing dropped


def test_the_index_is_not_in_a_manifest_without_it(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    corpus(root)
    m = manifest(tmp_path, root, extra="")
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    assert not (out / INDEX_DB).exists()
    capsys.readouterr()
    assert main(["index", str(m), "--out", str(out)]) == 1
    assert "'index' is not in the stages" in capsys.readouterr().err


@pytest.mark.slow
def test_a_tool_set_change_that_rereads_a_file_reindexes_it(tmp_path: Path) -> None:
    """A PDF with a typed page and a scanned one: without tesseract (--no-external) only
    the typed page's words are in the index; with it, the next sweep OCRs the scan (a new
    task key, the same store name) and its words are found."""
    if shutil.which("tesseract") is None:
        if os.environ.get("CI"):
            pytest.fail("tesseract is missing: .ci/run installs tesseract-ocr")
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")
    from tests import pdfgen

    root = tmp_path / "root"
    root.mkdir()
    (root / "memo.pdf").write_bytes(pdfgen.make_mixed_scan(
        ["Cover page of the maintenance memo"], {1: "QUOKKA 42 zebra"}))
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    assert sweep(m, out) == 0  # --no-external
    assert ranked(out, "maintenance") and ranked(out, "quokka") == []
    before = index_rows(out)
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1"]) == 0
    after = index_rows(out)
    assert set(after) == set(before)
    (stem,) = after
    assert after[stem][0] != before[stem][0]
    assert [p for p, _ in ranked(out, "quokka")] == [("r/memo.pdf",)]
    assert [p for p, _ in ranked(out, "maintenance")] == [("r/memo.pdf",)]


@pytest.mark.slow
def test_doit_index_runs_after_extract_and_is_up_to_date_the_second_time(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    corpus(root)
    m = manifest(tmp_path, root)
    out = tmp_path / "out"
    env = {**os.environ, "BASTION_NO_EXTERNAL": "1"}

    def doit(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"),
                               *args, f"manifest={m}", f"out={out}", "jobs=1"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        return proc

    first = doit("-v", "2")  # a plain doit: the manifest's last stage, index
    assert first.returncode == 0, first.stderr
    assert ".  index" in first.stdout and "index: 5 texts" in first.stderr
    assert len(index_rows(out)) == 5
    again = doit("-v", "2", "index")
    assert again.returncode == 0 and ".  index" not in again.stdout, again.stdout
    (root / "d1" / "none.txt").write_text("Now it names a quokka.\n")
    third = doit("-v", "2", "index")
    assert ".  extract:r/d1/none.txt" in third.stdout and ".  index" in third.stdout
    assert [p for p, _ in ranked(out, "quokka")] == [("r/d1/none.txt",)]
    listed = doit("list", "--status")
    assert listed.returncode == 0 and "U index" in listed.stdout, listed.stdout
    assert doit("clean", "index").returncode == 0
    assert not (out / INDEX_DB).exists()


NAMES = ["a.txt", "b.md", "c.json", "sub/d.txt", "sub/e.html"]
BODIES = [b"alder pump report\n", b"pump station notes\n", b'{"k": "alder"}\n',
          b"<p>river alder</p>\n", b"alder pump report\n"]  # a duplicate on purpose


def _apply(root: Path, op: tuple) -> None:
    kind, a, b = op
    src = root / a if isinstance(a, str) else None
    if kind == "write":
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_bytes(b)
    elif kind == "delete":
        src.unlink(missing_ok=True)
    elif kind in ("rename", "copy") and src.exists() and a != b:
        dest = root / b
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.move if kind == "rename" else shutil.copyfile)(src, dest)


def _same_index(a: Path, b: Path) -> None:
    assert index_rows(a) == index_rows(b)
    assert index_words(a) == index_words(b)
    for query in ("alder", "pump", "alder pump", "river OR station", "notes"):
        assert ranked(a, query) == ranked(b, query), query


@pytest.mark.slow
def test_an_index_kept_up_over_edits_equals_one_built_fresh(tmp_path_factory) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    step = st.one_of(
        st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(BODIES)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
        st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("copy"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("limits"), st.booleans(), st.none()),  # every key changes
    )

    @settings(max_examples=6, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(steps=st.lists(step, min_size=1, max_size=4))
    def check(steps: list) -> None:
        tmp = tmp_path_factory.mktemp("inc")
        root = tmp / "root"
        (root / "sub").mkdir(parents=True)
        for name, body in zip(NAMES[:4], BODIES):
            (root / name).write_bytes(body)
        m = manifest(tmp, root)
        out = tmp / "out"
        assert sweep(m, out) == 0
        for i, op in enumerate(steps):
            if op[0] == "limits":
                m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n{STAGES}"
                             + ("limits:\n  max_chars: 12\n" if op[1] else ""))
            else:
                _apply(root, op)
            assert sweep(m, out) == 0
            fresh = tmp / f"fresh{i}"
            assert sweep(m, fresh) == 0
            _same_index(out, fresh)

    check()


def test_the_snippet_of_a_long_text_comes_from_the_first_window_that_matches() -> None:
    """A text of several MiB is given to snippet() a window at a time (memory bounded by
    the window): the snippet is where the words are, marked, however far into the text."""
    from bastion.tasks.index.query import WINDOW, _Snipper

    text = "filler line of words\n" * (3 * WINDOW // 20) + "the alder pump is here\n"
    snipper = _Snipper()
    try:
        snippet, spans = snipper.snippet(text, "alder pump")
        assert [snippet[a:b] for a, b in spans] == ["alder", "pump"]
        snippet, spans = snipper.snippet(text, "quokka OR alder")
        assert "alder" in [snippet[a:b] for a, b in spans]
    finally:
        snipper.close()


def test_after_a_sweep_that_changed_nothing_the_index_is_not_said_to_be_behind(
        swept, capsys) -> None:
    """The first sweep after one with work rewrites extract.jsonl only to flag every record
    reused: the index task is up to date then, and a search does not warn."""
    m, root, out = swept
    assert sweep(m, out) == 0 and sweep(m, out) == 0
    capsys.readouterr()
    assert main(["search", str(out), "pump"]) == 0
    assert "behind" not in capsys.readouterr().err
    assert not bastion.search(out, "pump").behind
    (root / "d1" / "none.txt").write_text("a quokka now\n")
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external",
                 ]) == 0
    assert not bastion.search(out, "quokka").behind
    (root / "d1" / "none.txt").write_text("a wombat now\n")
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    assert main(["extract", str(m), "--out", str(out), "-q", "-j", "1",
                 "--no-external"]) == 0  # the extract stage alone: the index is behind
    results = bastion.search(out, "wombat")
    assert results.behind and [p for p, _ in ranked(out, "wombat")] == []
    capsys.readouterr()
    assert main(["search", str(out), "wombat"]) == 1
    assert "behind" in capsys.readouterr().err
