"""extract.jsonl as the export of the ``records`` table (tasks/extract/table.py), and the one
splice both exports share (tasks/output/splice.py): a change found by byte offset, the few
lines it touches rewritten, "what changed" and "texts no record names" queries."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs
from bastion.tasks.database import DB_NAME, SCHEMA_VERSION
from bastion.tasks.extract import table as table_module
from bastion.tasks.output import splice as splice_module
from bastion.tasks.output.directory import open_output


def line(root: str, path: str, extra: str = "") -> bytes:
    return (json.dumps({"path": path, "root": root, "x": extra}, sort_keys=True) + "\n").encode()


@pytest.mark.parametrize("seed", range(6))
def test_a_splice_gives_the_bytes_of_a_full_export(tmp_path: Path, seed: int) -> None:
    """Lines found by bisecting byte offsets, whatever their lengths (some longer than one
    read), names that sort oddly included: each splice equals the export written whole."""
    rng = random.Random(seed)
    names = ["a", "a/b", "a.b", "a b", "é", "\udcff-raw", "z/zz", "\u4e2d", "A"]
    keys = sorted({(rng.choice(["r", "s"]), f"{rng.choice(names)}/{i}")
                   for i in range(rng.randint(0, 60))})
    have = {k: line(*k, "x" * rng.choice([1, 10, 5000])) for k in keys}
    path = tmp_path / "out" / "e.jsonl"
    od = open_output(tmp_path / "out")
    splice_module.export(od, "e.jsonl", [have[k] for k in sorted(have)])
    for _ in range(5):
        changes: list = []
        for _ in range(rng.randint(0, 6)):
            k = (rng.choice(["r", "s"]), f"{rng.choice(names)}/{rng.randint(0, 70)}")
            new = None if rng.random() < 0.4 else line(*k, "y" * rng.choice([0, 3, 9000]))
            changes.append((k, new))
        splice_module.splice(od, "e.jsonl", changes)
        for k, new in changes:
            if new is None:
                have.pop(k, None)
            else:
                have[k] = new
        assert path.read_bytes() == b"".join(have[k] for k in sorted(have))
    od.close()


def test_a_splice_refuses_a_file_that_is_not_an_export(tmp_path: Path) -> None:
    """A line that is not a record (an export edited by hand, another file) raises
    ValueError, the file left as it was: the caller writes the export in full."""
    od = open_output(tmp_path / "out")
    path = tmp_path / "out" / "e.jsonl"
    data = line("r", "a") + b'{"junk": 1}\n' + line("r", "c") + b"[1, 2]\n" + line("r", "e")
    path.write_bytes(data)
    with pytest.raises(ValueError):
        for key in ("b", "d", "f"):
            splice_module.splice(od, "e.jsonl", [(("r", key), line("r", key))])
    assert path.read_bytes() == data
    od.close()


def sweep(m: Path, out: Path) -> None:
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) == 0


def setup(tmp_path: Path, n: int = 40) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    for i in range(n):
        (root / f"f{i:02}.txt").write_text(f"file {i}\n")
    (root / "sub" / "same.txt").write_text("file 5\n")  # the bytes of f05.txt
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    return root, m, tmp_path / "out"


def spliced_lines(monkeypatch: pytest.MonkeyPatch) -> list[list]:
    """The changes of every splice of extract.jsonl (the records table's)."""
    seen: list[list] = []
    real = table_module.splice

    def spy(od, name, changes):
        changes = list(changes)
        seen.append(changes)
        return real(od, name, changes)

    monkeypatch.setattr(table_module, "splice", spy)
    return seen


def test_a_one_file_change_rewrites_at_most_two_lines(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """In steady state a change of one file touches its own line and the line of the file
    the previous run extracted (its ``reused`` flips); the rest is copied."""
    root, m, out = setup(tmp_path)
    sweep(m, out)
    sweep(m, out)  # every record now says reused (a flip of every line: written in full)
    (root / "f03.txt").write_text("edited\n")
    sweep(m, out)
    seen = spliced_lines(monkeypatch)
    (root / "f09.txt").write_text("edited too\n")
    sweep(m, out)
    assert len(seen) == 1 and {k[1] for k, _ in seen[0]} == {"f09.txt", "f03.txt"}
    recs = {json.loads(x)["path"]: json.loads(x) for x in (out / "extract.jsonl").read_bytes()
            .splitlines()}
    assert [p for p, r in recs.items() if not r["reused"]] == ["f09.txt"]
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert compare_outputs(out, fresh) == []


def test_what_changed_is_the_walks_log(tmp_path: Path) -> None:
    """The walk logs each key it changes with its generation; the extract stage that made
    the records from it clears the log up to there."""
    root, m, out = setup(tmp_path, 5)
    sweep(m, out)
    (root / "f01.txt").write_text("edited\n")
    (root / "f02.txt").unlink()
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    db = sqlite3.connect(out / DB_NAME)
    logged = db.execute("SELECT name, gen FROM walk_log ORDER BY name").fetchall()
    assert logged == [(b"f01.txt", 2), (b"f02.txt", 2)]
    db.close()
    sweep(m, out)
    db = sqlite3.connect(out / DB_NAME)
    assert db.execute("SELECT count(*) FROM walk_log").fetchone()[0] == 0
    assert json.loads(db.execute("SELECT value FROM records_state WHERE name = 'gen'")
                      .fetchone()[0]) == 2
    db.close()


def test_texts_no_record_names_are_a_query(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted file's text stays while another record names it (found by the index on the
    text's name, not by reading extract.jsonl), and goes with the last record naming it."""
    root, m, out = setup(tmp_path, 8)
    sweep(m, out)
    text = json.loads(next(x for x in (out / "extract.jsonl").read_bytes().splitlines()
                           if b'"f05.txt"' in x))["text"]
    real_open = open

    def no_reading_records(path, *a, **k):
        assert not str(path).endswith("extract.jsonl"), "extract.jsonl read"
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_reading_records)
    (root / "f05.txt").unlink()
    sweep(m, out)
    assert (out / text).exists()  # sub/same.txt still names it
    (root / "sub" / "same.txt").unlink()
    sweep(m, out)
    assert not (out / text).exists()
    monkeypatch.undo()
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert compare_outputs(out, fresh) == []


def test_a_run_killed_between_its_rows_and_its_export_is_written_in_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows change only with the export marked as not matching them, in the same
    transaction: a run that dies before its export is written leaves the next run to plan in
    full and write extract.jsonl from scratch, extracting nothing again."""
    root, m, out = setup(tmp_path, 10)
    sweep(m, out)
    (root / "f04.txt").write_text("edited\n")

    def dies(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(table_module, "splice", dies)
    monkeypatch.setattr(table_module, "export", dies)
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) != 0
    monkeypatch.undo()
    sweep(m, out)
    s = json.loads((out / "extract.summary.json").read_text())
    assert s["extracted"] == 0
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert compare_outputs(out, fresh) == []


def test_an_output_of_schema_3_is_taken_over_extracting_nothing(tmp_path: Path) -> None:
    """A database of version 3 (no records table, no change log) is upgraded in place: its
    verdicts and walk kept, the records made once from them (no file hashed or read again),
    the same bytes as before."""
    root, m, out = setup(tmp_path, 12)
    sweep(m, out)
    before = (out / "extract.jsonl").read_bytes()
    db = sqlite3.connect(out / DB_NAME)
    for t in ("records", "records_state", "walk_log"):
        db.execute(f"DROP TABLE {t}")
    db.execute("DELETE FROM walk_state WHERE name = 'log_base'")
    db.execute("PRAGMA user_version=3")
    db.commit()
    db.close()
    legacy = [out / ".bastion" / n for n in ("walk.jsonl.lines", "extract.jsonl.lines",
                                             "walk-delta")]
    for f in legacy:  # the sidecars that layout kept beside the exports
        f.write_bytes(b"old")
    sweep(m, out)
    assert not any(f.exists() for f in legacy)
    s = json.loads((out / "extract.summary.json").read_text())
    w = json.loads((out / "walk.summary.json").read_text())
    assert s["extracted"] == 0 and w["hashed"] == 0
    db = sqlite3.connect(out / DB_NAME)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT count(*) FROM records").fetchone()[0] == s["records"]
    db.close()
    assert (out / "extract.jsonl").read_bytes() == before.replace(b'"reused":false',
                                                                  b'"reused":true')
    (root / "f03.txt").write_text("edited\n")  # and the next change is merged
    sweep(m, out)
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert compare_outputs(out, fresh) == []


def test_a_change_too_big_for_the_log_is_planned_in_full(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk that changes more keys than the log holds empties it and moves its base on: the
    extract stage behind it plans every file (not only the logged ones), and the output is a
    fresh run's."""
    import bastion.tasks.extract.plan
    from bastion.tasks.walk import table as walk_table

    root, m, out = setup(tmp_path, 20)
    sweep(m, out)
    monkeypatch.setattr(walk_table, "LOG_MIN", 3)
    planned: list[int] = []
    real = bastion.tasks.extract.plan.plan

    def counting(walk, *a, **k):
        walk = list(walk() if callable(walk) else walk)
        planned.append(len(walk))
        return real(walk, *a, **k)

    monkeypatch.setattr(bastion.tasks.extract.plan, "plan", counting)  # a change's plan
    monkeypatch.setattr("bastion.tasks.extract.runplan.plan", counting)  # the full plan
    for i in range(5):
        (root / f"f{i:02}.txt").write_text(f"edited {i}\n")
    sweep(m, out)
    assert planned == [21]  # every file, not the five the log could not hold
    db = sqlite3.connect(out / DB_NAME)
    assert db.execute("SELECT count(*) FROM walk_log").fetchone()[0] == 0
    db.close()
    (root / "f10.txt").write_text("one more\n")  # the next change is logged again
    sweep(m, out)
    assert planned == [21, 1]
    monkeypatch.undo()
    fresh = tmp_path / "fresh"
    sweep(m, fresh)
    assert compare_outputs(out, fresh) == []
