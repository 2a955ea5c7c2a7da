"""Which files a root's walk records, which directories it prunes, which links it follows.

A :class:`Selector` is compiled once per root from the manifest's ``include``, ``exclude``,
``follow_symlinks`` and ``one_file_system`` and owns every rule of selection; the walk
(:mod:`bastion.tasks.walk.stage`) only lists directories and asks it.  The glob language itself is
:func:`glob_match`'s (also used by the manifest's validation, through :func:`compile_glob`).
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass

FOLLOW = "follow"  # Selector.link: walk the directory, or read the file, the link points to
LINK_NOT_FOLLOWED = "symlink (not followed)"
LINK_BROKEN = "broken symlink or symlink loop"
LINK_OUT_OF_ROOT = "symlink out of the root (not followed)"
LINK_LOOP = "symlink loop (directory already walked)"
LINK_EXCLUDED = "symlink into an excluded path (not followed)"
LINK_SPECIAL = "symlink to a special file (not followed)"


class Selector:
    """The selection rules of one root, compiled: one regex for all includes, one for all
    excludes, and the subtree regexes of the excludes that name whole directories.

    Paths are POSIX, relative to the root.  Under a followed directory link the walk asks
    twice, with the path in the tree and with the real path the link leads to: a link can
    make a file reachable, never select a file the excludes name.
    """

    __slots__ = ("include", "exclude", "subtrees", "follow_symlinks", "one_file_system")

    def __init__(self, include: tuple[str, ...] = (), exclude: tuple[str, ...] = (), *,
                 follow_symlinks: bool = False, one_file_system: bool = False) -> None:
        self.include = _any_of(include)
        self.exclude = _any_of(exclude)
        self.subtrees = tuple(g.subtree for g in map(compile_glob, exclude)
                              if g.subtree is not None)
        self.follow_symlinks = follow_symlinks
        self.one_file_system = one_file_system

    @classmethod
    def for_root(cls, root) -> "Selector":  # root: bastion.tasks.manifest.Root
        return cls(root.include, root.exclude, follow_symlinks=root.follow_symlinks,
                   one_file_system=root.one_file_system)

    def selects(self, relpath: str) -> bool:
        """Whether the file at ``relpath`` is swept: it matches an include pattern (or there
        are none) and no exclude pattern."""
        if self.include is not None and self.include.fullmatch(relpath) is None:
            return False
        return self.exclude is None or self.exclude.fullmatch(relpath) is None

    def excluded(self, relpath: str) -> bool:
        """Whether ``relpath`` matches an exclude pattern (includes aside): the check a
        followed link's real path gets."""
        return self.exclude is not None and self.exclude.fullmatch(relpath) is not None

    def prunes(self, reldir: str) -> bool:
        """Whether every file under the directory ``reldir`` is certainly excluded, so the
        walk may skip it without listing it.

        Conservative: true only when an exclude pattern of the form ``<dir>/`` or
        ``<dir>/**`` has its ``<dir>`` part match ``reldir`` or one of its ancestors
        (``build/``, ``**/node_modules/**``).  The root itself (``""`` or ``"."``) is never
        pruned.
        """
        if not self.subtrees:
            return False
        reldir = reldir.strip("/")
        if reldir in ("", "."):
            return False
        parts = reldir.split("/")
        for i in range(len(parts)):
            ancestor = "/".join(parts[: i + 1])
            if any(s.fullmatch(ancestor) for s in self.subtrees):
                return True
        return False

    def leaves_device(self, top_dev: int, dev: int) -> bool:
        """Whether a directory on device ``dev`` is outside a ``one_file_system`` walk."""
        return self.one_file_system and dev != top_dev

    def link(self, target_rel: str | None, st: os.stat_result | None, seen: bool) -> str:
        """What a followed symlink leads to: :data:`FOLLOW`, or the reason its record gives.

        ``target_rel`` is the link's real target relative to the root's real path (None when
        it leads out of the root), ``st`` the target's stat (None when it cannot be
        resolved), ``seen`` whether that directory was already walked.  A directory to
        follow may still be pruned, and a file to read must still be selected by the link's
        own path: the walk asks :meth:`prunes` and :meth:`selects` for those.
        """
        if st is None:
            return LINK_BROKEN
        if target_rel is None:
            return LINK_OUT_OF_ROOT
        if stat.S_ISDIR(st.st_mode):
            if seen:
                return LINK_LOOP
            return LINK_EXCLUDED if self.prunes(target_rel) else FOLLOW
        if stat.S_ISREG(st.st_mode):
            if self.excluded(target_rel) or self.prunes(os.path.dirname(target_rel)):
                return LINK_EXCLUDED
            return FOLLOW
        return LINK_SPECIAL


def relative_to(real_top: str, target: str) -> str | None:
    """``target`` (a real path) relative to ``real_top``, or None when it is outside."""
    top = real_top.rstrip("/")
    if target == real_top:
        return ""
    if target.startswith(top + "/"):
        return target[len(top) + 1:]
    return None


# -- glob patterns ------------------------------------------------------------------------


@dataclass(frozen=True)
class Glob:
    regex: re.Pattern[str]  # matches a file's relative POSIX path
    subtree: re.Pattern[str] | None  # for "<dir>/**" patterns: matches <dir> itself


def glob_match(pattern: str, relpath: str) -> bool:
    """Whether ``pattern`` matches ``relpath``, a file's POSIX path relative to its root.

    * A pattern without ``/`` matches the base name at any depth (``*.pdf``).
    * A pattern with ``/`` is anchored at the root (a leading ``/`` is allowed and ignored).
    * ``*`` matches any run of characters, ``?`` one character, ``[abc]`` / ``[a-z]`` /
      ``[!abc]`` one character of a set; none of them matches ``/``.  There is no escape
      character: write ``[*]`` for a literal ``*``.  ``*`` also matches a leading dot.
    * ``**`` as a whole path segment matches zero or more whole directories
      (``docs/**/*.md``, ``**/build/**``); elsewhere in a segment it acts like ``*``.
    * A pattern ending in ``/`` or ``/**`` matches everything under that directory.

    Matching is case-sensitive.  Raises ValueError for a malformed pattern.
    """
    return compile_glob(pattern).regex.fullmatch(relpath) is not None


@functools.lru_cache(maxsize=256)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching what any of ``patterns`` matches (the walk asks once per file)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{compile_glob(p).regex.pattern})" for p in patterns),
                      re.DOTALL)


@functools.lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> Glob:
    """Compile a glob pattern (see :func:`glob_match`), once.  Raises ValueError."""
    if not pattern:
        raise ValueError("empty glob pattern")
    if "\x00" in pattern:
        raise ValueError("glob pattern contains a NUL character")
    anchored = "/" in pattern
    body = pattern[1:] if pattern.startswith("/") else pattern
    if body.endswith("/"):
        body += "**"
    segments = body.split("/")
    for seg in segments:
        if seg in ("", ".", ".."):
            raise ValueError(f"bad glob pattern {pattern!r}: empty, '.' or '..' path segment")
    if not anchored:
        segments = ["**", *segments]
    regex = re.compile(_segments_regex(segments, pattern), re.DOTALL)
    subtree = None
    if len(segments) > 1 and segments[-1] == "**":
        subtree = re.compile(_segments_regex(segments[:-1], pattern), re.DOTALL)
    return Glob(regex, subtree)


def _segments_regex(segments: list[str], pattern: str) -> str:
    out: list[str] = []
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        if seg == "**":
            out.append(".+" if i == last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(seg, pattern) + ("" if i == last else "/"))
    return "".join(out)


def _segment_regex(seg: str, pattern: str) -> str:
    """One path segment (no ``/``) of a glob as a regex."""
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        i += 1
        if c == "*":
            while i < n and seg[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i
            negate = j < n and seg[j] in "!^"
            if negate:
                j += 1
            start = j
            if j < n and seg[j] == "]":
                j += 1  # a leading "]" is a member
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:
                raise ValueError(f"bad glob pattern {pattern!r}: unterminated '['")
            out.append(_class_regex(seg[start:j], negate, pattern))
            i = j + 1
        else:
            out.append(re.escape(c))
    return "".join(out)


def _class_regex(members: str, negate: bool, pattern: str) -> str:
    """A ``[...]`` set (its members, without brackets) as a regex character class."""
    items: list[str] = []
    k, n = 0, len(members)
    while k < n:
        if k + 2 < n and members[k + 1] == "-":
            lo, hi = members[k], members[k + 2]
            if lo > hi:
                raise ValueError(f"bad glob pattern {pattern!r}: reversed range {lo}-{hi}")
            items.append(f"{re.escape(lo)}-{re.escape(hi)}")
            k += 3
        else:
            items.append(re.escape(members[k]))
            k += 1
    return f"[^/{''.join(items)}]" if negate else f"[{''.join(items)}]"


# -- one-off questions about a manifest Root (the manifest's tests and docs ask these) -----


@functools.lru_cache(maxsize=256)
def selector(root) -> Selector:  # root: bastion.tasks.manifest.Root (frozen, hashable)
    """The compiled Selector of ``root``, made once."""
    return Selector.for_root(root)


def root_selects(root, relpath: str) -> bool:
    """:meth:`Selector.selects` for a manifest Root."""
    return selector(root).selects(relpath)


def path_excluded(root, relpath: str) -> bool:
    """:meth:`Selector.excluded` for a manifest Root."""
    return selector(root).excluded(relpath)


def dir_excluded(root, reldir: str) -> bool:
    """:meth:`Selector.prunes` for a manifest Root."""
    return selector(root).prunes(reldir)
