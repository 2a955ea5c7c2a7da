"""The plan as queries (tasks/extract/plan.py): its database gives back exactly what was
planned, the linking of equal bytes matches the plain rule (the first item of a (sha256, key)
is its job; the smallest key of a sha256 keeps the plain text name), a job is handed out once
a run, what a run made is the store's query, and a large plan holds no object per file."""

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
from bastion.tasks.extract.plan import plan
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
    """The plain rule, as plan() was before it was made of queries: (items as tuples, stale)."""
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
def test_the_plan_is_the_plain_rule(spec, with_verdict) -> None:
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


def test_a_job_is_handed_out_once_a_run() -> None:
    """Two files of the same bytes read under one key are one job: the plan marks the
    (sha256, key) handed out (what the session's bit set of plan indices did)."""
    sha = "c" * 64
    walk = [rec("a.txt", sha, "text/plain", 3), rec("b.txt", sha, "text/plain", 3),
            rec("c.txt", "d" * 64, "text/plain", 3)]
    p = plan(walk, {}, select, {}, Limits(), set())
    a, b, c = p.items
    assert a.canonical == b.canonical == a.index != c.canonical
    assert p.hand_out(b) and not p.hand_out(a) and not p.hand_out(b)
    assert p.hand_out(c) and not p.hand_out(c)
    # a plan of its own: another run's plan hands them out again
    again = plan(walk, {}, select, {}, Limits(), set())
    assert again.hand_out(again.items[0])


def test_forgotten_items_leave_the_stale_query() -> None:
    walk = [rec("a.txt", "a" * 64, "text/plain", 1), rec("b.txt", "b" * 64, "text/plain", 9)]
    first = plan(walk, {}, select, {}, Limits(), set())
    verdicts = {(i.sha256, i.key): Verdict(status=Status.EMPTY) for i in first.items}
    p = plan(walk, verdicts, select, {}, Limits(), set())
    assert len(p.stale) == 0 and all(i.fresh for i in p.items)
    p.unfresh(lambda i: i.path == "a.txt")
    assert [i.path for i in p.stale] == ["a.txt"]
    assert [i.fresh for i in p.items] == [False, True]


def test_the_store_says_which_verdicts_this_run_made(tmp_path) -> None:
    """"Produced by this run" is a query on the verdicts' run column: a verdict made by an
    earlier run is not this run's, one made again is."""
    from bastion.tasks.extract import backoff
    from bastion.tasks.extract.store import Store
    from bastion.tasks.output.directory import open_output

    out = tmp_path / "out"
    (out / ".bastion").mkdir(parents=True)
    od = open_output(out)
    store = Store(out, lambda: od)
    assert backoff.start_run(store) == 1
    store.put_many([("a" * 64, "k", Verdict(status=Status.EMPTY)),
                    ("b" * 64, "k", Verdict(status=Status.EMPTY))])
    assert store.made(["a" * 64, "b" * 64, "c" * 64]) == {("a" * 64, "k"), ("b" * 64, "k")}
    assert store.made_count() == 2
    assert backoff.start_run(store) == 2
    assert store.made(["a" * 64, "b" * 64]) == set() and store.made_count() == 0
    store.put_many([("b" * 64, "k", Verdict(status=Status.EMPTY))])
    assert store.made(["a" * 64, "b" * 64]) == {("b" * 64, "k")} and store.made_count() == 1
    store.close()


def test_the_records_name_a_buckets_stems(tmp_path) -> None:
    """The clean-up asks the records table one store bucket at a time (an indexed range)."""
    from bastion.tasks.extract.store import Store
    from bastion.tasks.extract.table import Records, make_row
    from bastion.tasks.output.directory import open_output

    out = tmp_path / "out"
    (out / ".bastion").mkdir(parents=True)
    od = open_output(out)
    store = Store(out, lambda: od)
    rows = [make_row("r", f"f{n}.txt", s, "text/plain", "k", None, False, stem)
            for n, (s, stem) in enumerate([("ab" * 32, "ab" * 32), ("ab" * 32, "ab" * 32),
                                           ("ac" * 32, f"{'ac' * 32}.k"), ("ad" * 32, None)])]
    store.db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    table = Records(store.db, od)
    assert table.stems("ab") == {"ab" * 32}
    assert table.stems("ac") == {f"{'ac' * 32}.k"} and table.stems("ad") == set()
    store.close()


PLAN_MEMORY = r"""
import resource, sys
from bastion.readers.base import Limits
from bastion.readers.dispatch import select
from bastion.tasks.extract.plan import plan
from bastion.tasks.records import WalkRecord

N = int(sys.argv[1])
def walk():
    for n in range(N):
        yield WalkRecord("root", f"dir{n // 1000:04d}/some/deeper/name-{n:07d}.txt", "file",
                         n % 5000, 1, n, f"{n % (N // 2):064x}", None, "text/plain", None)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
p = plan(walk, {}, select, {}, Limits(), set())
stale = p.stale
assert len(p.items) == N and len(stale) == N // 2, (len(p.items), len(stale))
assert stale[0].size == 4999 and sum(1 for _ in stale) == N // 2
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
"""


@pytest.mark.slow
def test_a_large_plan_holds_no_object_per_file(tmp_path) -> None:
    """400,000 files planned, their stale items read back: the planning process grows by the
    plan database's page cache and the readers it imports (≈ 35 MB, as at 800,000), not by
    the files (the column store it replaced grew 135 MB here, 271 MB at 800,000)."""
    import subprocess
    import sys

    script = tmp_path / "plan_memory.py"
    script.write_text(PLAN_MEMORY)
    done = subprocess.run([sys.executable, str(script), "400000"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    grown_mb = int(done.stdout.split()[-1])
    assert grown_mb < 56, grown_mb
