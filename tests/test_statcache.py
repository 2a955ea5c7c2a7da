"""bastion.tasks.walk.statcache: the stat cache loads, answers and writes the previous walk's records."""

from __future__ import annotations

import marshal
import os
from pathlib import Path

from bastion.tasks.output.atomic import atomic_write
from bastion.tasks.manifest import Root
from bastion.tasks.walk.statcache import CACHE_NAME, EMPTY, StatCache, root_settings

SETTINGS = [3, 1 << 30, False]


def _roots(tmp_path: Path) -> tuple[Root, Root]:
    return (Root(name="a", path=tmp_path / "a"), Root(name="b", path=tmp_path / "b",
                                                        exclude=("*.tmp",)))


def _write(out: Path, roots, rows) -> None:
    out.mkdir(exist_ok=True)
    atomic_write(out / "walk.jsonl", b"".join(r[4] for r in rows))
    StatCache.write(out, SETTINGS, roots, rows)


ROWS = [  # (root, path, directory, name, line, key)
    ("a", "x.txt", "", "x.txt", b'{"path":"x.txt"}\n', (5, 100, 7, 101)),
    ("a", "sub/link", "sub", "link", b'{"path":"sub/link"}\n', None),
    ("b", "bad-\udcff", "", "bad-\udcff", b'{"path":"bad-\\udcff"}\n', (1, 2, 3, 4)),
]


def le(code: str, values) -> bytes:
    """An array's bytes as the cache stores them (little-endian)."""
    from array import array
    import sys

    a = array(code, values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def test_written_format(tmp_path: Path) -> None:
    """The file layout docs and the module docstring give: a versioned, marshal'ed dict of
    packed directories, and each line's directory."""
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    _write(out, roots, ROWS)
    data = marshal.loads((out / CACHE_NAME).read_bytes())
    st = os.stat(out / "walk.jsonl")
    assert data == {
        "settings": SETTINGS,
        "walk": [st.st_size, st.st_mtime_ns],
        "roots": {
            "a": [root_settings(roots[0]), {
                "": ["x.txt", le("q", [0, 5, 100, 7, 101]), {}],
                "sub": ["link", le("q", [1, -1, 0, 0, 0]), {"link": ROWS[1][4]}]}],
            "b": [root_settings(roots[1]), {"": ["bad-\udcff", le("q", [2, 1, 2, 3, 4]), {}]}],
        },
        "count": 3,
        "format": 2,
        "lines": le("I", [0, 1, 2]),
    }
    assert list(data) == ["settings", "walk", "roots", "count", "format", "lines"]


def test_a_cache_of_format_1_is_still_read(tmp_path: Path) -> None:
    """An upgrade re-reads no file: the dict-of-tuples cache loads and answers as before."""
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    out.mkdir()
    atomic_write(out / "walk.jsonl", b"".join(r[4] for r in ROWS))
    st = os.stat(out / "walk.jsonl")
    old = {"settings": SETTINGS, "walk": [st.st_size, st.st_mtime_ns], "count": 3, "roots": {
        "a": [root_settings(roots[0]), {"": {"x.txt": (0, 5, 100, 7, 101)},
                                        "sub": {"link": (1, -1, 0, 0, 0, ROWS[1][4])}}],
        "b": [root_settings(roots[1]), {"": {"bad-\udcff": (2, 1, 2, 3, 4)}}]}}
    (out / CACHE_NAME).parent.mkdir(exist_ok=True)
    (out / CACHE_NAME).write_bytes(marshal.dumps(old))
    cache = StatCache.load(out, SETTINGS, roots)
    assert cache.count == 3 and not cache.streams
    assert cache.root("a")[""]["x.txt"] == (0, 5, 100, 7, 101)
    assert cache.found([2, 0, 1], out / "walk.jsonl") == [ROWS[2], ROWS[0], ROWS[1]]


def test_kept_rows_stream_in_file_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    _write(out, roots, ROWS)
    cache = StatCache.load(out, SETTINGS, roots)
    assert cache.streams
    assert list(cache.kept(bytearray([1, 1, 1]), out / "walk.jsonl")) == ROWS
    assert list(cache.kept(bytearray([0, 1, 0]), out / "walk.jsonl")) == [ROWS[1]]
    # a root no longer cached keeps its directories' numbers: the others still line up
    changed = (Root(name="a", path=tmp_path / "a", follow_symlinks=True), roots[1])
    cache = StatCache.load(out, SETTINGS, changed)
    assert set(cache.roots) == {"b"}
    assert list(cache.kept(bytearray([0, 0, 1]), out / "walk.jsonl")) == [ROWS[2]]


def test_load_answers_and_finds_previous_lines(tmp_path: Path) -> None:
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    _write(out, roots, ROWS)
    cache = StatCache.load(out, SETTINGS, roots)
    assert cache.count == 3
    assert cache.root("a")[""]["x.txt"] == (0, 5, 100, 7, 101)
    assert cache.root("a").get("nowhere", EMPTY) == {}
    assert cache.root("unknown") == {}
    # the rows of lines found again: bytes from walk.jsonl, keys only for stat-only records
    assert cache.found([2, 0, 1], out / "walk.jsonl") == [ROWS[2], ROWS[0], ROWS[1]]


def test_unusable_caches_load_empty(tmp_path: Path) -> None:
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    assert StatCache.load(out, SETTINGS, roots).count == -1  # none yet
    _write(out, roots, ROWS)
    assert StatCache.load(out, [3, 1 << 20, False], roots).count == -1  # other settings
    assert StatCache.load(out, [4, 1 << 30, False], roots).count == -1  # other WALK_VERSION
    # a walk.jsonl that is not the one the cache describes
    atomic_write(out / "walk.jsonl", b"")
    assert StatCache.load(out, SETTINGS, roots).count == -1
    _write(out, roots, ROWS)
    for garbage in (b"", b"\x00garbage", marshal.dumps([1, 2]), marshal.dumps({"settings":
                                                                               SETTINGS})):
        (out / CACHE_NAME).write_bytes(garbage)
        cache = StatCache.load(out, SETTINGS, roots)
        assert cache.count == -1 and cache.roots == {}


def test_a_root_whose_settings_changed_gets_no_entries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    roots = _roots(tmp_path)
    _write(out, roots, ROWS)
    changed = (roots[0], Root(name="b", path=tmp_path / "b", exclude=("*.bak",)))
    cache = StatCache.load(out, SETTINGS, changed)
    assert cache.count == 3 and set(cache.roots) == {"a"}
    followed = (Root(name="a", path=tmp_path / "a", follow_symlinks=True), roots[1])
    assert set(StatCache.load(out, SETTINGS, followed).roots) == {"b"}
