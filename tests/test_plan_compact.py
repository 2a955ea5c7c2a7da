"""The plan's compact form (tasks/extract/plan.py): ``Items`` gives back exactly what was planned, the
linking of equal bytes matches the plain rule (the first item of a (sha256, key) is its job;
the smallest key of a sha256 keeps the plain text name), and the small sets behind a run
(``IndexSet``, ``StemSet``) answer as sets do."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.readers.base import Limits
from bastion.readers.dispatch import select
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict
from bastion.tasks.extract.records import StemSet
from bastion.tasks.extract.plan import IndexSet, plan
from bastion.tasks.records import WalkRecord
from bastion.tasks.extract.store import text_stem

NAMES = ["a.txt", "b.json", "c.csv", "d.html", "e.txt", "f.md", "g.xml", "h"]
MIMES = ["text/plain", "application/json", "text/csv", "text/html"]


def rec(path: str, sha: str | None, mime: str, size: int, kind: str = "file") -> WalkRecord:
    return WalkRecord("r", path, kind, size, 1, 1, sha, None if sha else "no-hash", mime, None)


records = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from("0123"), st.sampled_from(MIMES),
              st.integers(0, 50), st.booleans()),
    max_size=40)


def reference(walk: list[WalkRecord], verdicts: dict) -> tuple[list, list]:
    """The plain rule, as plan() was before it was made compact: (items as tuples, stale)."""
    p = plan(walk, verdicts, select, {}, Limits(), set())
    first_key: dict[str, str] = {}
    for i in p.items:
        if i.sha256 not in first_key or i.key < first_key[i.sha256]:
            first_key[i.sha256] = i.key
    rows, seen, todo = [], set(), []
    for i in p.items:
        stem = text_stem(i.sha256, i.key, first_key[i.sha256] == i.key)
        v = verdicts.get((i.sha256, i.key))
        fresh = v is not None and v.status is not Status.ERROR and v.status is not Status.OK
        rows.append((i.path, i.sha256, i.key, stem, fresh))
        if not fresh and (i.sha256, i.key) not in seen:
            seen.add((i.sha256, i.key))
            todo.append(i)
    todo.sort(key=lambda i: -i.size)
    return rows, [(i.path, i.size) for i in todo]


@settings(max_examples=60, deadline=None)
@given(records, st.sets(st.integers(0, 39)))
def test_the_compact_plan_is_the_plain_rule(spec, with_verdict) -> None:
    walk, seen_paths = [], set()
    for n, (name, digit, mime, size, hashed) in enumerate(spec):
        path = f"d{n:02d}/{name}"
        if path in seen_paths:
            continue
        seen_paths.add(path)
        walk.append(rec(path, digit * 64 if hashed else None, mime, size))
    p = plan(walk, {}, select, {}, Limits(), set())
    # verdicts (not ok: no text needed) for some of the planned pairs
    verdicts = {(i.sha256, i.key): Verdict(status=Status.EMPTY)
                for n, i in enumerate(p.items) if n in with_verdict}
    p = plan(walk, verdicts, select, {}, Limits(), set())
    rows, stale = reference(walk, verdicts)
    assert [(i.path, i.sha256, i.key, i.stem, i.fresh) for i in p.items] == rows
    assert [(i.path, i.size) for i in p.stale] == stale
    assert [i.index for i in p.items] == list(range(len(p.items)))
    for i in p.items:  # the job of an item is the first item of its pair
        first = next(j for j in p.items if (j.sha256, j.key) == (i.sha256, i.key))
        assert i.canonical == first.index
    assert [r.path for r in p.skipped] == [r.path for r in walk if r.sha256 is None]


def test_items_keep_any_path_and_slice_like_a_list() -> None:
    odd = "caf\udce9/\u00e9t\u00e9 \U0001f600.txt"  # a surrogate escape (a non-UTF-8 name)
    walk = [rec(odd, "a" * 64, "text/plain", 3), rec("z.txt", "b" * 64, "text/plain", 9)]
    p = plan(walk, {}, select, {}, Limits(), set())
    assert [i.path for i in p.items] == [odd, "z.txt"]
    assert [i.path for i in p.items[1:]] == ["z.txt"] and p.items[-1].path == "z.txt"
    assert [i.path for i in p.stale[:1]] == ["z.txt"]  # largest first
    a, b = p.items
    assert (a.sha256, b.sha256) == ("a" * 64, "b" * 64)


def test_a_plan_from_a_function_reads_the_skipped_again() -> None:
    walk = [rec("a.txt", "a" * 64, "text/plain", 1), rec("b.bin", None, "text/plain", 1),
            rec("c", None, None, 0, kind="other")]
    reads = []

    def again():
        reads.append(1)
        return iter(walk)

    p = plan(again, {}, select, {}, Limits(), set())
    assert len(reads) == 1
    assert [r.path for r in p.skipped] == ["b.bin", "c"] and len(reads) == 2


def test_an_item_is_read_as_the_plan_decided() -> None:
    """``Item.job``: the one document to read that the session and the cluster's batches hand
    on, as the plan decided it (reader, deadline, task key, the reader's tools present here
    with their paths), under the file's own name; frozen, and whole and small when pickled
    (a Dask batch carries them)."""
    tools = {"pdftotext": Tool("pdftotext", "/usr/bin/pdftotext", "24.02"),
             "7z": Tool("7z", "/usr/bin/7z", "23.01")}  # not the PDF reader's: not handed on
    limits = Limits(deadline_s=30.0, tool_deadline_s=90.0)
    sha = "ab" * 32
    p = plan([rec("d/r\u00e9sum\u00e9.PDF", sha, "application/pdf", 10)], {}, select, tools,
             limits, set())
    item = p.items[0]
    job = item.job(7, "/srv/r/d/r\u00e9sum\u00e9.PDF", tools)
    assert job == Job(7, "/srv/r/d/r\u00e9sum\u00e9.PDF", "r\u00e9sum\u00e9.PDF",
                      "application/pdf", sha, 10, 90.0, {"pdftotext": "/usr/bin/pdftotext"},
                      "pdf", item.key)
    assert job.pair == (sha, item.key) and len(item.key) == 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.reader = "text"  # type: ignore[misc]
    blob = pickle.dumps(job)
    assert pickle.loads(blob) == job and len(blob) < 400


def test_index_set() -> None:
    s = IndexSet()
    for i in (0, 7, 8, 100_000, 7):
        s.add(i)
    assert len(s) == 4
    assert all(i in s for i in (0, 7, 8, 100_000))
    assert not any(i in s for i in (1, 9, 99_999, 100_001, 10**9, -1, "7"))


def test_stem_set() -> None:
    names = [f"{n:064x}" for n in range(1000)] + ["x.y"]
    s = StemSet(names[:500])
    for n in names[500:]:
        s.add(n)
    other = StemSet(["only-here"])
    s |= other
    assert all(n in s for n in names) and "only-here" in s
    assert "absent" not in s and 3 not in s
    s.add("late")  # added after a look-up: found too
    assert "late" in s
