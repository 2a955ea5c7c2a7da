"""The manifest: which trees to sweep, which stages to run, and the extract budgets.

A manifest is a small YAML file (see docs/manifest.md).  It is validated strictly: an unknown
key at any level, a value of the wrong type, a missing required key, a duplicate mapping key,
a root that is not an existing directory, a duplicate or malformed root name, a bad list of
stages, a YAML tag, anchor or alias, a file over 1 MiB or an empty file is refused with a
:class:`ManifestError` that names the file, the YAML line and the key path, e.g.::

    manifest.yaml:7: roots[1].path: '/nope' does not exist

The YAML is parsed with PyYAML's safe loader only, composed to a node tree that is walked
here (for line numbers and duplicate keys); nothing is ever constructed from a tag.

By design the schema has no key that can name an executable, a command, a URL or a network
address: a manifest can only point at local directories, select files in them by glob, and
tighten or loosen the numeric budgets of :class:`bastion.readers.base.Limits`.

Glob patterns (``include`` / ``exclude``) are matched against a file's POSIX path relative to
its root, case-sensitively; the language and its compiled form, the walk's Selector, are in
:mod:`bastion.tasks.walk.globs` (:func:`glob_match` is re-exported here).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from bastion.errors import ManifestError
from bastion.readers.base import GiB, KiB, Limits, MiB, limit_kinds

from .walk.beneath import foreign_link
from .walk.globs import compile_glob
from .walk.globs import dir_excluded, glob_match, path_excluded, root_selects  # noqa: F401

MAX_MANIFEST_BYTES = 1 * MiB
VERSION = 1
STAGES: tuple[str, ...] = ("walk", "extract", "index")  # the stages, in their order
DEFAULT_STAGES: tuple[str, ...] = ("walk", "extract")  # a manifest without ``stages``
# Engine names, never paths: "pdftotext" is looked up on PATH at run time (a sensor).
PDF_ENGINES: tuple[str, ...] = ("pdfium", "pdfplumber", "pdftotext")
DEFAULT_MAX_FILE_BYTES = 1 * GiB
MAX_INT = 2**63 - 1  # budgets end up in rlimits and C APIs

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SIZE_RE = re.compile(r"\s*([0-9]{1,30})\s*([A-Za-z]*)\s*")
_SIZE_UNITS = {"": 1, "B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": 1024 * GiB}

_TOP_KEYS = ("version", "roots", "stages", "limits", "output_mode", "allow_root_workers",
             "markdown")
OUTPUT_MODES = ("private", "group")  # tasks/output/directory.py: 0700/0600 or 0750/0640, never wider
_ROOT_KEYS = ("name", "path", "include", "exclude", "follow_symlinks", "one_file_system")
_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TYPE_NAMES = {
    _STR: "a string", _INT: "an integer", _FLOAT: "a number", _BOOL: "a boolean",
    _NULL: "null", "tag:yaml.org,2002:timestamp": "a timestamp",
    "tag:yaml.org,2002:merge": "a merge key", "tag:yaml.org,2002:binary": "binary data",
    "tag:yaml.org,2002:map": "a mapping", "tag:yaml.org,2002:seq": "a list",
}


@dataclass(frozen=True)
class Root:
    """One tree to sweep."""

    name: str  # short name: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$
    path: Path  # absolute, resolved; relative paths resolved against the manifest's directory
    include: tuple[str, ...] = ()  # glob patterns; empty = everything
    exclude: tuple[str, ...] = ()
    follow_symlinks: bool = False
    one_file_system: bool = False
    # the path as written (joined to the manifest's directory) when it resolved elsewhere
    # through a symlink (root's or the running user's): resolved once, here, and recorded
    given: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Manifest:
    """A validated manifest."""

    path: Path  # the manifest file, absolute
    digest: str  # sha256 hex of the manifest file's exact bytes
    version: int  # always 1
    roots: tuple[Root, ...]
    stages: tuple[str, ...]  # non-empty subset of STAGES (walk, extract, index), in that order
    max_file_bytes: int  # limits.max_file_bytes
    limits: Limits  # the extract budgets
    output_mode: str = "private"  # one of OUTPUT_MODES (docs/security.md)
    allow_root_workers: bool = False  # run as root, accept workers that cannot give it up
    markdown: bool = False  # store each text's Markdown beside it (extract/<aa>/<stem>.md)


# -- loading ------------------------------------------------------------------------------


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read, parse and validate the manifest at ``path``.

    Only a regular file of at most 1 MiB is read.  Raises :class:`ManifestError`.
    """
    p = Path(path).absolute()
    return parse_manifest(read_manifest_bytes(p), p)


def read_manifest_bytes(p: Path) -> bytes:
    """The manifest file's exact bytes (a regular file, read once, at most 1 MiB + 1)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ManifestError(f"cannot read manifest: {e.strerror}", file=p.name) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ManifestError("the manifest is not a regular file", file=p.name)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_MANIFEST_BYTES + 1)
        except OSError as e:
            raise ManifestError(f"cannot read manifest: {e.strerror}", file=p.name) from None
    return data


def parse_manifest(data: bytes, path: Path) -> Manifest:
    """Parse and validate manifest bytes; ``path`` is where the file lives.

    Relative root paths are resolved against ``path``'s directory, and every root must be
    an existing directory.  Raises :class:`ManifestError`.
    """
    path = Path(path).absolute()
    v = _Validator(path.name)
    if len(data) > MAX_MANIFEST_BYTES:
        raise v.error(f"the manifest is over the {MAX_MANIFEST_BYTES // MiB} MiB limit")
    node = _compose(data, v.file)
    return v.manifest(node, path, hashlib.sha256(data).hexdigest())


class _Refused(Exception):
    """Raised inside the YAML loader; carries a problem and a node mark."""

    def __init__(self, problem: str, mark: Any) -> None:  # a yaml Mark, or None
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing tags, anchors and aliases while composing."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"YAML aliases are not allowed (*{event.anchor})", event.start_mark)
        if event.anchor is not None:
            raise _Refused(f"YAML anchors are not allowed (&{event.anchor})", event.start_mark)
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise _Refused(f"YAML tags are not allowed ({tag})", event.start_mark)
        return super().compose_node(parent, index)


def _compose(data: bytes, file: str) -> yaml.Node:
    """The manifest's YAML node tree, or ManifestError (not UTF-8, a YAML error, a tag,
    an anchor or an alias, empty)."""

    def error(problem: str, line: int | None = None) -> ManifestError:
        return ManifestError(problem, line=line, file=file)

    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error("the manifest is not valid UTF-8", line=line) from None
    try:
        node = yaml.compose(text, Loader=_StrictLoader)
    except _Refused as e:
        raise error(e.problem, line=e.mark.line + 1) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = ", ".join(p for p in (e.context, e.problem) if p) or "malformed YAML"
        where = mark.line + 1 if mark is not None else None
        raise error(f"YAML syntax error: {problem}", line=where) from None
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        char = chr(e.character) if isinstance(e.character, int) else e.character
        raise error(
            f"YAML syntax error: character U+{ord(char):04X} is not allowed", line=line
        ) from None
    except yaml.YAMLError as e:
        raise error(f"YAML syntax error: {e}") from None
    if node is None:
        raise error("the manifest is empty", line=1)
    return node


class _Validator:
    """Walks the composed node tree, building the manifest or raising ManifestError."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._constructor = yaml.constructor.SafeConstructor()

    def error(
        self, problem: str, key: str | None = None, node: yaml.Node | None = None,
        line: int | None = None,
    ) -> ManifestError:
        if node is not None:
            line = node.start_mark.line + 1
        return ManifestError(problem, key=key, line=line, file=self.file)

    # -- YAML nodes ---------------------------------------------------------------------

    def kind(self, node: yaml.Node) -> str:
        return _TYPE_NAMES.get(node.tag, node.tag)

    def mapping(
        self, node: yaml.Node, key: str | None, allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """A mapping node's entries by key, checked for type, duplicates and unknown keys."""
        if not isinstance(node, yaml.MappingNode):
            what = "the top level must be" if key is None else "expected"
            raise self.error(f"{what} a mapping, got {self.kind(node)}", key, node)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode) or knode.tag != _STR:
                raise self.error(f"mapping keys must be strings, got {self.kind(knode)}",
                                 key, knode)
            name = knode.value
            sub = _join(key, name)
            if name in out:
                first = out[name][0].start_mark.line + 1
                raise self.error(f"duplicate key (first at line {first})", sub, knode)
            if name not in allowed:
                raise self.error(f"unknown key (allowed: {', '.join(allowed)})", sub, knode)
            out[name] = (knode, vnode)
        for name in required:
            if name not in out:
                raise self.error(f"missing required key '{name}'", key, node)
        return out

    def sequence(self, node: yaml.Node, key: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(f"expected a list, got {self.kind(node)}", key, node)
        return list(node.value)

    def scalar(self, node: yaml.Node, key: str, *tags: str) -> Any:
        if not isinstance(node, yaml.ScalarNode) or node.tag not in tags:
            want = " or ".join(_TYPE_NAMES[t] for t in tags)
            raise self.error(f"expected {want}, got {self.kind(node)}", key, node)
        try:
            return self._constructor.construct_object(node)
        except (yaml.YAMLError, ValueError) as e:
            raise self.error(f"malformed value: {e}", key, node) from None

    def string(self, node: yaml.Node, key: str) -> str:
        value: str = self.scalar(node, key, _STR)
        if "\x00" in value:
            raise self.error("must not contain a NUL character", key, node)
        return value

    def boolean(self, node: yaml.Node, key: str) -> bool:
        value: bool = self.scalar(node, key, _BOOL)
        return value

    def string_list(self, node: yaml.Node, key: str) -> list[tuple[str, yaml.Node]]:
        return [
            (self.string(item, f"{key}[{i}]"), item)
            for i, item in enumerate(self.sequence(node, key))
        ]

    # -- schema -------------------------------------------------------------------------

    def manifest(self, node: yaml.Node, path: Path, digest: str) -> Manifest:
        top = self.mapping(node, None, _TOP_KEYS, required=("version", "roots"))
        vnode = top["version"][1]
        version: int = self.scalar(vnode, "version", _INT)
        if version != VERSION:
            raise self.error(f"unsupported version {version} (supported: {VERSION})",
                             "version", vnode)
        roots = self.roots(top["roots"][1], path.parent)
        stages = self.stages(top["stages"][1]) if "stages" in top else DEFAULT_STAGES
        values = self.limits(top["limits"][1]) if "limits" in top else {}
        max_file_bytes = values.pop("max_file_bytes", DEFAULT_MAX_FILE_BYTES)
        output_mode = "private"
        if "output_mode" in top:
            mnode = top["output_mode"][1]
            output_mode = self.string(mnode, "output_mode")
            if output_mode not in OUTPUT_MODES:
                raise self.error(f"must be one of {', '.join(OUTPUT_MODES)}, got "
                                 f"{output_mode!r}", "output_mode", mnode)
        allow_root = ("allow_root_workers" in top
                      and self.boolean(top["allow_root_workers"][1], "allow_root_workers"))
        markdown = "markdown" in top and self.boolean(top["markdown"][1], "markdown")
        return Manifest(
            path=path, digest=digest, version=version, roots=roots, stages=stages,
            max_file_bytes=max_file_bytes, limits=Limits(**values), output_mode=output_mode,
            allow_root_workers=allow_root, markdown=markdown,
        )

    def roots(self, node: yaml.Node, base: Path) -> tuple[Root, ...]:
        items = self.sequence(node, "roots")
        if not items:
            raise self.error("at least one root is required", "roots", node)
        roots: list[Root] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            root, name_node = self.root(item, f"roots[{i}]", base)
            if root.name in seen:
                raise self.error(
                    f"duplicate root name {root.name!r} (also roots[{seen[root.name]}])",
                    f"roots[{i}].name", name_node)
            seen[root.name] = i
            roots.append(root)
        return tuple(roots)

    def root(self, node: yaml.Node, key: str, base: Path) -> tuple[Root, yaml.Node]:
        """One root, and its name's node (for the duplicate-name message)."""
        m = self.mapping(node, key, _ROOT_KEYS, required=("name", "path"))
        nnode = m["name"][1]
        name = self.string(nnode, f"{key}.name")
        if not _NAME_RE.fullmatch(name):
            raise self.error(
                f"bad name {name!r}: 1-64 characters from A-Z a-z 0-9 . _ -, "
                "starting with a letter or digit", f"{key}.name", nnode)
        pnode = m["path"][1]
        raw = self.string(pnode, f"{key}.path")
        if not raw:
            raise self.error("must not be empty", f"{key}.path", pnode)
        try:
            resolved = (base / raw).resolve()
            exists, is_dir = resolved.exists(), resolved.is_dir()
        except (OSError, RuntimeError) as e:
            raise self.error(f"{raw!r} cannot be resolved: {e}", f"{key}.path", pnode) from None
        if not exists:
            raise self.error(f"{raw!r} does not exist", f"{key}.path", pnode)
        link = foreign_link(base / raw)
        if link is not None:  # another user could point the root anywhere: refused
            raise self.error(f"{raw!r} goes through the symbolic link {link[0]} owned by uid "
                             f"{link[1]} (another user could point it elsewhere)",
                             f"{key}.path", pnode)
        if not is_dir:
            raise self.error(f"{raw!r} is not a directory", f"{key}.path", pnode)
        patterns: dict[str, tuple[str, ...]] = {}
        for which in ("include", "exclude"):
            got: list[str] = []
            if which in m:
                listed = self.string_list(m[which][1], f"{key}.{which}")
                for i, (pattern, item) in enumerate(listed):
                    try:
                        compile_glob(pattern)
                    except ValueError as e:
                        raise self.error(str(e), f"{key}.{which}[{i}]", item) from None
                    got.append(pattern)
            patterns[which] = tuple(got)
        flags = {
            which: self.boolean(m[which][1], f"{key}.{which}") if which in m else False
            for which in ("follow_symlinks", "one_file_system")
        }
        given = os.path.abspath(base / raw)
        root = Root(name=name, path=resolved, include=patterns["include"],
                    exclude=patterns["exclude"], **flags,
                    given=given if given != str(resolved) else None)
        return root, nnode

    def stages(self, node: yaml.Node) -> tuple[str, ...]:
        items = self.string_list(node, "stages")
        if not items:
            raise self.error(f"must name at least one stage ({', '.join(STAGES)})",
                             "stages", node)
        got: list[str] = []
        for i, (stage, snode) in enumerate(items):
            key = f"stages[{i}]"
            if stage not in STAGES:
                raise self.error(f"unknown stage {stage!r} (allowed: {', '.join(STAGES)})",
                                 key, snode)
            if stage in got:
                raise self.error(f"duplicate stage {stage!r}", key, snode)
            if got and STAGES.index(stage) < STAGES.index(got[-1]):
                raise self.error(f"stages must be in the order {', '.join(STAGES)}", key, snode)
            got.append(stage)
        return tuple(got)

    def limits(self, node: yaml.Node) -> dict[str, Any]:
        kinds = limit_keys()
        m = self.mapping(node, "limits", tuple(kinds))
        parsers: dict[str, Callable[[yaml.Node, str], Any]] = {
            "seconds": self.seconds, "size": self.size, "count": self.integer,
            "ratio": self.ratio, "engines": self.engines,
            "languages": lambda n, k: _ocr_languages(self, n, k),
        }
        return {name: parsers[kinds[name]](vnode, f"limits.{name}")
                for name, (_, vnode) in m.items()}

    def integer(self, node: yaml.Node, key: str) -> int:
        value: int = self.scalar(node, key, _INT)
        return self.bounded(value, node, key, str(value))

    def bounded(self, value: int, node: yaml.Node, key: str, shown: str) -> int:
        if value <= 0:
            raise self.error(f"must be positive, got {shown}", key, node)
        if value > MAX_INT:
            raise self.error(f"must be at most {MAX_INT}, got {shown}", key, node)
        return value

    def seconds(self, node: yaml.Node, key: str) -> float:
        value: float = self.scalar(node, key, _INT, _FLOAT)
        if not (math.isfinite(value) and value > 0):
            raise self.error(f"must be a positive number of seconds, got {value}", key, node)
        return float(value)

    def ratio(self, node: yaml.Node, key: str) -> float:
        value: float = self.scalar(node, key, _INT, _FLOAT)
        if not (math.isfinite(value) and value >= 1):
            raise self.error(f"must be a number of at least 1, got {value}", key, node)
        return float(value)

    def size(self, node: yaml.Node, key: str) -> int:
        value: int | str = self.scalar(node, key, _INT, _STR)
        if isinstance(value, int):
            return self.bounded(value, node, key, str(value))
        m = _SIZE_RE.fullmatch(value)
        if m is None or m.group(2) not in _SIZE_UNITS:
            raise self.error(
                f"bad size {value!r}: an integer with an optional unit "
                f"({', '.join(u for u in _SIZE_UNITS if u)}), e.g. '64MiB'", key, node)
        return self.bounded(int(m.group(1)) * _SIZE_UNITS[m.group(2)], node, key, repr(value))

    def engines(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        items = self.string_list(node, key)
        if not items:
            raise self.error(f"must name at least one engine ({', '.join(PDF_ENGINES)})",
                             key, node)
        got: list[str] = []
        for i, (engine, enode) in enumerate(items):
            if engine not in PDF_ENGINES:
                raise self.error(f"unknown engine {engine!r} (allowed: {', '.join(PDF_ENGINES)})",
                                 f"{key}[{i}]", enode)
            if engine in got:
                raise self.error(f"duplicate engine {engine!r}", f"{key}[{i}]", enode)
            got.append(engine)
        return tuple(got)


_PACK_RE = re.compile(r"[a-z][a-z0-9_]{1,30}")


def _ocr_languages(v: Any, node: yaml.Node, key: str) -> tuple[str, ...]:
    """``auto``, or a list of tesseract language packs (``[deu, eng]``)."""
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str"):
        if node.value != "auto":
            raise v.error(f"must be 'auto' or a list of language packs, got "
                          f"{node.value!r}", key, node)
        return ("auto",)
    items = v.string_list(node, key)
    if not items:
        raise v.error("must name at least one language pack (e.g. [deu, eng]) or be "
                      "'auto'", key, node)
    got: list[str] = []
    for i, (pack, pnode) in enumerate(items):
        if not _PACK_RE.fullmatch(pack) or pack == "osd":
            raise v.error(f"bad language pack {pack!r} (a tesseract language: eng, "
                          "deu, chi_sim, …)", f"{key}[{i}]", pnode)
        if pack in got:
            raise v.error(f"duplicate language pack {pack!r}", f"{key}[{i}]", pnode)
        got.append(pack)
    return tuple(got)


# How each manifest kind of limit is written (bastion.readers.base.LIMIT_KINDS, minus "internal").
MANIFEST_KINDS = ("seconds", "size", "count", "ratio", "engines", "languages")


def limit_keys() -> dict[str, str]:
    """The manifest's ``limits`` keys and their kinds: ``max_file_bytes`` (the walk's) and
    every :class:`bastion.readers.base.Limits` field whose metadata gives a manifest kind, in field
    order.  Derived from ``Limits`` on every call, so a new field is a key once it has a
    kind, and a field without one is refused as an unknown key, never a KeyError."""
    kinds = {"max_file_bytes": "size"}
    for name, kind in limit_kinds(Limits).items():
        if kind in MANIFEST_KINDS:
            kinds[name] = kind
    return kinds


def _join(key: str | None, name: str) -> str:
    return name if key is None else f"{key}.{name}"
