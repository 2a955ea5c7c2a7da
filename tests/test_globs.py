"""bastion.tasks.walk.globs: the compiled Selector's rules as tables (selection, pruning, devices, links)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bastion.tasks.walk.globs import (FOLLOW, LINK_BROKEN, LINK_EXCLUDED, LINK_LOOP, LINK_OUT_OF_ROOT,
                         LINK_SPECIAL, Selector, compile_glob, relative_to, selector)
from bastion.tasks.manifest import Root, dir_excluded, root_selects

SELECTS = [
    # include, exclude, path, selected
    ((), (), "a.txt", True),
    ((), (), "deep/er/a.txt", True),
    (("*.pdf",), (), "a/b.pdf", True),
    (("*.pdf",), (), "a/b.PDF", False),  # case-sensitive
    (("*.pdf",), (), "a/b.txt", False),
    (("*.pdf", "docs/**"), (), "docs/x/y.txt", True),
    (("/top.txt",), (), "top.txt", True),
    (("/top.txt",), (), "sub/top.txt", False),
    ((), ("*.tmp",), "a.tmp", False),
    ((), ("*.tmp",), "d/a.tmp", False),
    ((), ("*.tmp",), "a.tmp.txt", True),
    (("*.pdf",), ("private/",), "private/a.pdf", False),
    (("*.pdf",), ("private/",), "public/a.pdf", True),
    ((), ("**/node_modules/**",), "app/node_modules/x/y.js", False),
    ((), ("**/node_modules/**",), "app/node_modules_x/y.js", True),
    ((), ("[!a]*",), "a.txt", True),
    ((), ("[!a]*",), "b.txt", False),
    ((), ("?.txt",), "ab.txt", True),
    ((), ("*",), ".hidden", False),  # * matches a leading dot
    (("bad-\udcff.txt",), (), "bad-\udcff.txt", True),  # a name that is not UTF-8
]


@pytest.mark.parametrize("include,exclude,path,selected", SELECTS)
def test_selects(include: tuple[str, ...], exclude: tuple[str, ...], path: str,
                 selected: bool) -> None:
    sel = Selector(include, exclude)
    assert sel.selects(path) is selected
    root = Root(name="r", path=Path("/"), include=include, exclude=exclude)
    assert root_selects(root, path) is selected  # the manifest's question, the same answer


EXCLUDED = [
    # exclude, path, excluded (includes never matter here)
    ((), "a.txt", False),
    (("*.tmp",), "x/a.tmp", True),
    (("build/",), "build/a.o", True),
    (("build/",), "src/build.c", False),
]


@pytest.mark.parametrize("exclude,path,excluded", EXCLUDED)
def test_excluded_ignores_includes(exclude: tuple[str, ...], path: str, excluded: bool) -> None:
    assert Selector(("nothing-matches-this",), exclude).excluded(path) is excluded


PRUNES = [
    # exclude, directory, pruned
    (("build/",), "build", True),
    (("build/",), "build/sub", True),
    (("build/",), "x/build", False),
    (("build/**",), "build", True),
    (("/build/",), "build", True),
    (("**/node_modules/**",), "a/b/node_modules/c", True),
    (("**/node_modules/**",), "a/node_modules_x", False),
    (("docs/*/tmp/",), "docs/a/tmp", True),
    (("docs/*/tmp/",), "docs/a/b/tmp", False),
    (("*.tmp",), "x.tmp", False),  # names files only
    (("build",), "build", False),  # a file named build, not its contents
    (("build/*.o",), "build", False),  # only some files under build
    (("**",), "a", True),
    (("build/",), "", False),  # the root is never pruned
    (("build/",), ".", False),
    (("build/",), "/build/", True),
    ((), "build", False),
]


@pytest.mark.parametrize("exclude,reldir,pruned", PRUNES)
def test_prunes(exclude: tuple[str, ...], reldir: str, pruned: bool) -> None:
    sel = Selector((), exclude)
    assert sel.prunes(reldir) is pruned
    assert dir_excluded(Root(name="r", path=Path("/"), exclude=exclude), reldir) is pruned
    if pruned:  # pruning is only ever safe: every file below is excluded
        for rest in ("f", "x/y/f", ".hidden"):
            assert not sel.selects(f"{reldir.strip('/')}/{rest}")


DEVICES = [
    # one_file_system, top device, directory's device, left
    (False, 1, 1, False),
    (False, 1, 2, False),
    (True, 1, 1, False),
    (True, 1, 2, True),
]


@pytest.mark.parametrize("one_fs,top,dev,left", DEVICES)
def test_leaves_device(one_fs: bool, top: int, dev: int, left: bool) -> None:
    assert Selector(one_file_system=one_fs).leaves_device(top, dev) is left


def _st(mode: int) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, 0, 0, 0, 0, 0, 0))


DIR, FILE, FIFO = _st(stat.S_IFDIR | 0o755), _st(stat.S_IFREG | 0o644), _st(stat.S_IFIFO)

LINKS = [
    # exclude, target relative to the root (None: outside), target stat (None: broken),
    # directory already walked, verdict
    ((), "sub", None, False, LINK_BROKEN),
    ((), None, FILE, False, LINK_OUT_OF_ROOT),
    ((), None, DIR, False, LINK_OUT_OF_ROOT),
    ((), "sub", DIR, False, FOLLOW),
    ((), "", DIR, True, LINK_LOOP),  # a link to the root itself
    ((), "sub", DIR, True, LINK_LOOP),
    (("build/",), "build", DIR, False, LINK_EXCLUDED),
    (("build/",), "build/deep", DIR, False, LINK_EXCLUDED),
    (("build/",), "src", DIR, False, FOLLOW),
    ((), "a.txt", FILE, False, FOLLOW),
    ((), "a.txt", FILE, True, FOLLOW),  # "walked" only matters for directories
    (("*.tmp",), "x.tmp", FILE, False, LINK_EXCLUDED),
    (("build/",), "build/x.txt", FILE, False, LINK_EXCLUDED),  # its directory is pruned
    (("*.tmp",), "pipe", FIFO, False, LINK_SPECIAL),
]


@pytest.mark.parametrize("exclude,target_rel,st,seen,verdict", LINKS)
def test_link(exclude: tuple[str, ...], target_rel: str | None, st: os.stat_result | None,
              seen: bool, verdict: str) -> None:
    assert Selector((), exclude, follow_symlinks=True).link(target_rel, st, seen) == verdict


RELATIVE = [
    ("/data/root", "/data/root", ""),
    ("/data/root", "/data/root/a/b", "a/b"),
    ("/data/root", "/data/rootless/a", None),
    ("/data/root", "/etc/passwd", None),
    ("/", "/etc/passwd", "etc/passwd"),
    ("/", "/", ""),
]


@pytest.mark.parametrize("top,target,rel", RELATIVE)
def test_relative_to(top: str, target: str, rel: str | None) -> None:
    assert relative_to(top, target) == rel


def test_selector_is_compiled_once_per_root() -> None:
    root = Root(name="r", path=Path("/"), include=("*.txt",), exclude=("build/",),
                follow_symlinks=True, one_file_system=True)
    sel = selector(root)
    assert selector(root) is sel
    assert sel.follow_symlinks and sel.one_file_system
    assert Selector.for_root(root).selects("a.txt") and not sel.selects("build/a.txt")
    assert compile_glob("*.txt") is compile_glob("*.txt")


@pytest.mark.parametrize("pattern", ["", "a//b", "./a", "a/../b", "/", "[ab", "[b-a]", "a\x00b"])
def test_malformed_pattern_refused_when_compiled(pattern: str) -> None:
    with pytest.raises(ValueError):
        Selector((), (pattern,))
