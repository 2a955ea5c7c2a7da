"""The line index kept beside walk.jsonl and extract.jsonl (tasks/output/lineindex.py): what the
writers build is true of the file they wrote (every mark a line's start, the count, the
flagged lines), a small change finds its lines through it without counting the file, and
an index that does not describe its file is never trusted."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.tasks.extract import delta
from bastion.tasks.output import lineindex
from bastion.tasks.cli import main
from bastion.tasks.commands.compare import compare_outputs
from bastion.tasks.output.directory import OutputDir, open_output

PATTERN = b'"reused":false'


def check(od: OutputDir, name: str, pattern: bytes = b"",
          spacing: int | None = None) -> lineindex.LineIndex:
    """The index beside the output's file ``name`` holds and says only true things about it."""
    path = od.path / name
    index = lineindex.load(od, name)
    assert index is not None, f"no index holds for {path.name}"
    data = path.read_bytes()
    lines = [line + b"\n" for line in data.split(b"\n")[:-1]]  # newlines only, not \r
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    assert index.count == len(lines) and index.size == len(data)
    assert list(index.lines) == sorted(set(index.lines)) and index.lines[0] == 0
    for line, offset in zip(index.lines, index.offsets):
        assert starts[line] == offset
    if spacing is not None:  # marks close enough that a lookup reads little
        ends = [*index.offsets[1:], len(data)]
        longest = max((len(x) for x in lines), default=0)
        assert all(e - o <= 2 * spacing + longest for o, e in zip(index.offsets, ends))
    flagged = {n for n, line in enumerate(lines) if pattern and pattern in line}
    runs = set()
    for j in range(0, len(index.flagged), 2):
        runs.update(range(index.flagged[j], index.flagged[j + 1]))
    assert runs == flagged
    return index


line_st = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")).flatmap(
    lambda b: st.sampled_from([b, b + PATTERN, PATTERN + b])).map(lambda b: b + b"\n")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(old=st.lists(line_st, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=6),
       new=st.lists(line_st, max_size=5), mark=st.sampled_from([1, 16, 64, 1 << 20]))
def test_a_builder_follows_added_and_kept_lines(tmp_path_factory, old, cuts, new, mark) -> None:
    """An old file written through the builder, then a new one of kept ranges (its pattern
    shortened, as a merge flips ``"reused":false``) and added lines: both indexes true."""
    od = open_output(tmp_path_factory.mktemp("ix") / "out")
    tmp = od.path
    mp = pytest.MonkeyPatch()
    mp.setattr(lineindex, "MARK_BYTES", mark)
    try:
        a = tmp / "a.jsonl"
        b = lineindex.Builder(PATTERN)
        a.write_bytes(b"".join(lineindex.indexed(old, b)))
        lineindex.save_built(od, "a.jsonl", b)
        index = check(od, "a.jsonl", PATTERN)
        # lines located through the index are where counting finds them
        with open(a, "rb") as f:
            counted, count = delta.line_offsets(f, list(range(len(old) + 1)))
            assert count == len(old)
            assert index.locate(f.fileno(), range(len(old) + 1)) == counted
            hits = index.find(f.fileno(), index.locate(f.fileno(), index.flagged), PATTERN)
        data = a.read_bytes()
        assert list(hits) == [i for i in range(len(data)) if data.startswith(PATTERN, i)]
        # the new file: old ranges between the cuts, a new line after each
        bounds = sorted({0, len(old), *(min(c, len(old)) for c in cuts)})
        out, nb = [], lineindex.Builder(PATTERN)
        for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            s, e = counted[lo], counted[hi]
            piece = data[s:e]
            mine = array("q", [h for h in hits if s <= h < e])
            nb.keep(index, lo, hi - lo, s, e, mine, len(PATTERN) - len(b'"reused":true'))
            out.append(piece.replace(PATTERN, b'"reused":true'))
            if k < len(new):
                nb.add(new[k])
                out.append(new[k])
        c = tmp / "c.jsonl"
        c.write_bytes(b"".join(out))
        lineindex.save_built(od, "c.jsonl", nb)
        check(od, "c.jsonl", PATTERN)
    finally:
        mp.undo()
        od.close()


def test_an_index_that_does_not_describe_its_file_is_not_used(tmp_path: Path) -> None:
    od = open_output(tmp_path / "out")
    f = od.path / "x.jsonl"
    b = lineindex.Builder()
    f.write_bytes(b"".join(lineindex.indexed([b"one\n", b"two\n"], b)))
    lineindex.save_built(od, "x.jsonl", b)
    assert lineindex.load(od, "x.jsonl") is not None
    f.write_bytes(b"one\ntwo\nthree\n")  # written by something else: another identity
    assert lineindex.load(od, "x.jsonl") is None
    # a mark that is not at a line's start (a wrong index with the right identity)
    lines = [f"line {i}\n".encode() for i in range(100)]
    b = lineindex.Builder()
    f.write_bytes(b"".join(lineindex.indexed(lines, b)))
    good = b.finish(f)
    assert good is not None
    bad = lineindex.LineIndex(good.identity, good.count, array("q", [0, 50]),
                              array("q", [0, good.offsets[-1] + 3 if len(good.offsets) > 1
                                          else 350]), array("q"))
    with open(f, "rb") as fh, pytest.raises(ValueError):
        bad.locate(fh.fileno(), [60])
    short = lineindex.LineIndex(good.identity, good.count + 5, good.lines, good.offsets,
                                array("q"))
    with open(f, "rb") as fh, pytest.raises(ValueError):
        short.locate(fh.fileno(), [99])


def check_out(out: Path, name: str, pattern: bytes = b"", spacing: int | None = None) -> None:
    with open_output(out) as od:
        check(od, name, pattern, spacing)


def drop_out(out: Path, name: str) -> None:
    with open_output(out) as od:
        lineindex.drop(od, name)


def sweep(m: Path, out: Path) -> None:
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "1", "--no-external"]) == 0


@pytest.mark.parametrize("drop_index", [False, True])
@pytest.mark.slow
def test_changes_find_their_lines_through_the_index(tmp_path: Path, monkeypatch,
                                                   drop_index: bool) -> None:
    """Sweeps over a tree with small changes: after each, both files' indexes hold; with
    the indexes in place no change counts either file's lines, and without them (dropped
    before each change) the counting pass gives the same output; both equal a fresh run."""
    monkeypatch.setattr(lineindex, "MARK_BYTES", 512)
    root = tmp_path / "root"
    for i in range(400):
        d = root / f"d{i % 5}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03}.txt").write_text(f"file {i}: " + "word " * (i % 13) + "\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\nstages: [walk, extract]\n")
    out = tmp_path / "out"
    sweep(m, out)
    check_out(out, "walk.jsonl", spacing=512)
    check_out(out, "extract.jsonl", PATTERN, spacing=512)
    counted = []
    real = delta.line_offsets

    def counting(f, wanted, *a, **k):
        counted.append(str(getattr(f, "name", "?")))
        return real(f, wanted, *a, **k)

    monkeypatch.setattr(delta, "line_offsets", counting)  # the walk's patch counts through it too
    rng = random.Random(7)
    for step in range(5):
        if drop_index:
            drop_out(out, "walk.jsonl")
            drop_out(out, "extract.jsonl")
        i = rng.randrange(400)
        victim = root / f"d{i % 5}" / f"f{i:03}.txt"
        if step == 2:
            victim.unlink(missing_ok=True)
        else:
            victim.write_text(f"edited in step {step}\n" * (step + 1))
        (root / f"d{step}" / f"new{step}.txt").write_text(f"new in step {step}\n")
        counted.clear()
        sweep(m, out)
        assert bool(counted) == drop_index, counted
        check_out(out, "walk.jsonl", spacing=512)
        check_out(out, "extract.jsonl", PATTERN, spacing=512)
        fresh = tmp_path / f"fresh{step}"
        sweep(m, fresh)
        assert compare_outputs(out, fresh) == []
