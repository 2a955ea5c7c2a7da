"""The one schema of a document's answer: its bytes bounded before they are parsed, then every
field typed and bounded before anything uses it.

A document's process answers each job with one JSON line on its answer pipe
(:mod:`bastion.readers.runtime.workermain`); the parent takes it through :func:`answer`, the
only place those bytes become a value:

1. the line is at most :data:`MAX_ANSWER` bytes (the pipe's reader stops there too:
   :data:`bastion.readers.runtime.handout.MAX_RESULT_LINE`), strict UTF-8;
2. its nesting is at most :data:`MAX_DEPTH` and it opens at most :data:`MAX_CONTAINERS`
   objects and arrays, counted on the bytes before the parse (:func:`load`): a
   200,000-deep line never reaches the JSON parser's recursion, a line of ``[]`` repeated
   never becomes millions of objects;
3. the parsed value matches :data:`ANSWER` (or :data:`ALONE`): known keys only, each of its
   type, every string, list and map within its bound, every integer from 0 to 2**53, every
   number finite and in its range.

Whatever fails is :class:`Invalid` (a :class:`ValueError`) naming the field and the bound:
the parent makes it the job's ``worker`` error (:mod:`bastion.readers.runtime.answers`).

The bounds are those of the worker's own answers (:meth:`Verdict.of_outcome`, the readers'
caps at the source), so an honest answer always passes; an honest document whose sidecar
would not fit the line gets it cut by :func:`encode` (the worker's side), with a warning
naming the cap.  Hand-written rather than ``jsonschema``: the bounds that matter are on the
bytes before the parse (a schema library sees the value only after it was built), and a
check costs a few µs per answer (docs/security.md).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

MAX_ANSWER = 4 << 20  # bytes of one answer line, before it is parsed
MAX_DEPTH = 12  # nesting of an answer (an honest one: 7, an embedded document's fields)
MAX_CONTAINERS = 200_000  # objects and arrays in one answer
MAX_INT = 1 << 53  # the largest integer (a count, a page, an id) an answer may hold
MAX_FIELD = 4096  # characters of a verdict's error, extractor, title, limit
MAX_MAIN = 500  # characters of a verdict's main metadata strings and warnings
MAX_WARNINGS = 20  # a verdict's warnings (Verdict.MAX_WARNINGS)
MAX_NAME = 256  # characters of a tool's, a pack's, an engine's name
MAX_OUTLINE = 10_000  # outline entries (readers/pdf/outline.py visits no more)
MAX_OUTLINE_TITLE = 500  # characters of an outline entry's title (cut at the source)
MAX_PAGE_SOURCES = 100_000  # page sources (one per page read: Limits.max_pages)
MAX_META_STRING = 2000  # readers/metadata.py's MAX_STRING
MAX_META_ITEMS = 100  # readers/metadata.py's MAX_ITEMS
MAX_META_FIELDS = 40  # readers/metadata.py's MAX_FIELDS
MAX_EMBEDDED = 1000  # readers/metadata.py's MAX_EMBEDDED

STATUSES = ("ok", "empty", "unsupported", "error")
PAGE_SOURCES = ("native", "ocr", "failed", "dropped")
COUNTS = ("pages", "slides", "sheets", "words", "characters", "paragraphs", "attachments")


class Invalid(ValueError):
    """An answer that is not one: ``where`` names the field (``verdict.languages[3].code``),
    ``why`` what is wrong with it."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}" if where else why)
        self.where = where
        self.why = why

    def within(self, outer: str) -> "Invalid":
        """The same, one level up: ``outer`` is the field that holds this one."""
        where = outer + self.where if self.where.startswith("[") or not outer else \
            f"{outer}.{self.where}" if self.where else outer
        return Invalid(where, self.why)


def _kind(v: Any) -> str:
    return "null" if v is None else {bool: "boolean", int: "integer", float: "number",
                                     str: "string", list: "list", dict: "object"}.get(
        type(v), type(v).__name__)


# -- the types ----------------------------------------------------------------------------------
# Each is a callable check(value) raising Invalid; they nest into the schema below, and a
# container names the field of an Invalid as it passes up (nothing is formatted on the way
# down: a field's name costs only when it is wrong).


class Spec:
    def __call__(self, v: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class Str(Spec):
    """A string of at most ``most`` characters (one of ``among`` when given), no surrogates."""

    def __init__(self, most: int, among: Iterable[str] | None = None) -> None:
        self.most = most
        self.among = frozenset(among) if among is not None else None

    def __call__(self, v: Any) -> None:
        if type(v) is not str:
            raise Invalid("", f"a string expected, got {_kind(v)}")
        if len(v) > self.most:
            raise Invalid("", f"over {self.most} characters")
        if not v.isascii() and _SURROGATE.search(v):
            raise Invalid("", "a lone surrogate")
        if self.among is not None and v not in self.among:
            raise Invalid("", f"unknown value {v[:40]!r}")


_SURROGATE = re.compile("[\ud800-\udfff]")


class Int(Spec):
    """An integer (never a boolean) from ``least`` to ``most`` (2**53)."""

    def __init__(self, least: int = 0, most: int = MAX_INT) -> None:
        self.least, self.most = least, most

    def __call__(self, v: Any) -> None:
        if type(v) is not int:
            raise Invalid("", f"an integer expected, got {_kind(v)}")
        if not self.least <= v <= self.most:
            raise Invalid("", f"out of range {self.least}..{self.most}")


class Num(Spec):
    """A finite number (an integer or not, never a boolean) from ``least`` to ``most``."""

    def __init__(self, least: float, most: float) -> None:
        self.least, self.most = least, most

    def __call__(self, v: Any) -> None:
        if type(v) not in (int, float):
            raise Invalid("", f"a number expected, got {_kind(v)}")
        if not (math.isfinite(v) and self.least <= v <= self.most):
            raise Invalid("", f"out of range {self.least:g}..{self.most:g}")


class Bool(Spec):
    def __init__(self, only: bool | None = None) -> None:
        self.only = only

    def __call__(self, v: Any) -> None:
        if type(v) is not bool or (self.only is not None and v is not self.only):
            raise Invalid("", "true expected" if self.only else
                          f"a boolean expected, got {_kind(v)}")


class Opt(Spec):
    """Null or ``spec``."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def __call__(self, v: Any) -> None:
        if v is not None:
            self.spec(v)


class Either(Spec):
    """One of two types, told apart by the value's own type: ``strs`` for a string,
    ``lists`` for a list."""

    def __init__(self, strs: Spec, lists: Spec) -> None:
        self.strs, self.lists = strs, lists

    def __call__(self, v: Any) -> None:
        (self.lists if type(v) is list else self.strs)(v)


class List(Spec):
    """A list of at most ``most`` items, each ``item``."""

    def __init__(self, item: Spec, most: int) -> None:
        self.item, self.most = item, most

    def __call__(self, v: Any) -> None:
        if type(v) is not list:
            raise Invalid("", f"a list expected, got {_kind(v)}")
        if len(v) > self.most:
            raise Invalid("", f"over {self.most} items")
        item = self.item
        i = 0
        try:
            for i, x in enumerate(v):
                item(x)
        except Invalid as e:
            raise e.within(f"[{i}]") from None


class Map(Spec):
    """An object of at most ``most`` keys, each ``key``, their values ``value``."""

    def __init__(self, key: Str, value: Spec, most: int) -> None:
        self.key, self.value, self.most = key, value, most

    def __call__(self, v: Any) -> None:
        if type(v) is not dict:
            raise Invalid("", f"an object expected, got {_kind(v)}")
        if len(v) > self.most:
            raise Invalid("", f"over {self.most} keys")
        key, value = self.key, self.value
        for k, x in v.items():
            try:
                key(k)
            except Invalid as e:
                raise Invalid("", f"a key: {e.why}") from None
            try:
                value(x)
            except Invalid as e:
                raise e.within(k[:40]) from None


class Obj(Spec):
    """An object of the keys ``fields`` names (``required`` among them), each of its type."""

    def __init__(self, fields: dict[str, Spec], required: Iterable[str] = ()) -> None:
        self.fields = fields
        self.required = tuple(required)

    def __call__(self, v: Any) -> None:
        if type(v) is not dict:
            raise Invalid("", f"an object expected, got {_kind(v)}")
        fields = self.fields
        for k, x in v.items():
            spec = fields.get(k)
            if spec is None:
                raise Invalid("", f"unknown key {k[:40]!r}")
            try:
                spec(x)
            except Invalid as e:
                raise e.within(k) from None
        for k in self.required:
            if k not in v:
                raise Invalid("", f"{k} missing")


# -- the schema ---------------------------------------------------------------------------------


def _error_kinds() -> tuple[str, ...]:
    from ..errors import ERROR_KINDS

    return tuple(ERROR_KINDS)


_main, _name, _field = Opt(Str(MAX_MAIN)), Str(MAX_NAME), Opt(Str(MAX_FIELD))
_count = Opt(Int())

# the verdict's JSON form (readers/runtime/verdict.py, Verdict.to_json), as a worker makes it
VERDICT = Obj({
    "status": Str(16, STATUSES), "extractor": _field, "chars": Int(), "error": _field,
    "error_kind": Opt(Str(32, _error_kinds())), "limit": _field,
    "tools_used": List(_name, 64), "pages": _count, "title": _field, "pages_ocr": _count,
    "members": Opt(Map(Str(32), Int(), 16)), "encoding_source": _field,
    "warnings": List(Str(MAX_MAIN), MAX_WARNINGS), "authors": List(Str(MAX_MAIN), 20),
    "created": _main, "modified": _main, "subject": _main, "declared_language": _main,
    "languages": List(Obj({"code": Str(20), "confidence": Num(0, 1)},
                          required=("code", "confidence")), 10),
    "ocr_languages": List(_name, 256), "ocr_missing": List(_name, 256),
    "ocr_packs": Opt(Map(_name, Opt(Str(MAX_NAME)), 256)),
}, required=("status",))

_meta_str = Str(MAX_META_STRING)
_meta_list = List(_meta_str, MAX_META_ITEMS)
# a DocMeta's JSON form (readers/metadata.py, DocMeta.to_json)
METADATA = Obj({
    "title": _meta_str, "authors": _meta_list, "created": Str(64), "modified": Str(64),
    "subject": _meta_str, "description": _meta_str, "keywords": _meta_list,
    "language": Str(64), **{name: Int() for name in COUNTS},
    "fields": Map(Str(MAX_NAME), Either(_meta_str, _meta_list), MAX_META_FIELDS),
})

# one page's provenance (readers/pdf/pages.py, PageSource.to_json)
PAGE_SOURCE = Obj({
    "page": Int(1), "source": Str(16, PAGE_SOURCES), "engine": Opt(_name),
    "version": Opt(_name), "confidence": Opt(Num(0, 100)), "renderer": Opt(_name),
    "dpi": Opt(Int()), "languages": List(_name, 256), "script": _name, "language": _name,
    "missing": List(_name, 256), "turned": Int(0, 360), "reason": Str(MAX_FIELD),
    "ocr_unused": Str(MAX_FIELD), "blank": Bool(True), "not_ocred": Str(MAX_FIELD),
    "annotations": Int(),
}, required=("page", "source"))

# what a worker sends beside a text (readers/result.py, ReadResult.sidecar)
SIDECAR = Obj({
    "pages": Int(), "title": Str(MAX_FIELD),
    "outline": List(Obj({"title": Str(MAX_OUTLINE_TITLE), "page": Int(1), "level": Int(1)},
                        required=("title", "page", "level")), MAX_OUTLINE),
    "page_sources": List(PAGE_SOURCE, MAX_PAGE_SOURCES),
    "metadata": METADATA,
    "embedded": List(Obj({"path": Str(MAX_FIELD), "metadata": METADATA},
                         required=("path", "metadata")), MAX_EMBEDDED),
})

_file = Opt(Str(32))
# one answer: a verdict on the job (readers/runtime/workermain.py, handle) …
ANSWER = Obj({"id": Int(), "verdict": VERDICT, "text": _file, "markdown": _file,
              "sidecar": Opt(SIDECAR), "rss": Int(), "fatal": Bool()},
             required=("id", "verdict"))
# … or, for a pure job whose document needs a process of its own, that request
ALONE = Obj({"id": Int(), "alone": Bool(True)}, required=("id", "alone"))


# -- the bytes ----------------------------------------------------------------------------------

_BRACKETS_ONLY = bytes(range(256)).translate(None, b"[]{}")  # what to delete: all else
_SQUARE = bytes.maketrans(b"{}", b"[]")


def load(line: bytes) -> Any:
    """The value an answer line holds, bounded before it is parsed: :class:`Invalid` when it
    is over :data:`MAX_ANSWER` bytes, not UTF-8, nested deeper than :data:`MAX_DEPTH`,
    opening more than :data:`MAX_CONTAINERS` objects and arrays, or not JSON (``NaN`` and
    ``Infinity`` are not)."""
    if len(line) > MAX_ANSWER:
        raise Invalid("", f"an answer over the {MAX_ANSWER} byte cap")
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH:  # else it cannot nest deeper
        brackets = _outside_strings(line).translate(_SQUARE, _BRACKETS_ONLY)
        containers = len(brackets) // 2
        for _ in range(MAX_DEPTH):  # each pass takes the innermost level
            if not brackets:
                break
            brackets = brackets.replace(b"[]", b"")
        if brackets:
            raise Invalid("", f"an answer nested deeper than {MAX_DEPTH} levels "
                              "(or not JSON)")
        if containers > MAX_CONTAINERS:
            raise Invalid("", f"an answer of over {MAX_CONTAINERS} objects and arrays")
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise Invalid("", f"not JSON ({str(e)[:100]})") from None


def _outside_strings(line: bytes) -> bytes:
    """What of ``line`` is outside its JSON strings: escaped backslashes, then escaped quotes
    taken out, every quote left opens or closes a string (bytes operations only: 5x a regex
    over the strings).  Exact up to the first byte that is not JSON, where the parser stops."""
    if b"\\" in line:
        line = line.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(line.split(b'"')[::2])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def answer(line: bytes) -> dict[str, Any]:
    """An answer line as a value checked against :data:`ANSWER` (or :data:`ALONE`):
    :class:`Invalid` naming the field and the bound when it is not one."""
    msg = load(line)
    if type(msg) is not dict:
        raise Invalid("", f"an object expected, got {_kind(msg)}")
    (ALONE if "alone" in msg else ANSWER)(msg)
    return msg


# -- the worker's side --------------------------------------------------------------------------

_CUT_FIRST = ("outline", "embedded", "page_sources", "metadata")  # what may be cut
_MOST = {"outline": MAX_OUTLINE, "embedded": MAX_EMBEDDED, "page_sources": MAX_PAGE_SOURCES}
_ROOM = 16 << 10  # bytes kept free under the cap for the warnings that name a cut


def encode(msg: dict[str, Any], cap: int = MAX_ANSWER) -> bytes:
    """An answer's line (the worker's side), within ``cap`` bytes with its end of line.  An
    honest document whose sidecar would not fit (tens of thousands of outline entries, the
    metadata of many attachments) keeps what fits: a list over its schema bound is cut to
    it, then, while the line is over the cap, the biggest of the outline, the embedded
    documents' metadata, the page sources and the metadata is halved (a list) or left out;
    each cut named in the verdict's warnings (the record's).  (The bounds on each string
    are the readers' own, at the source: outline titles, metadata, the verdict's fields.)"""
    sidecar = msg.get("sidecar")
    if not isinstance(sidecar, dict):
        return _dumps(msg)
    sidecar = dict(sidecar)
    notes = _to_bounds(sidecar)
    msg = dict(msg, sidecar=sidecar)
    whole = {k: len(v) for k, v in sidecar.items() if isinstance(v, list)}
    had = set(sidecar)
    line = _to_cap(msg, sidecar, cap)
    notes += _cap_notes(sidecar, had, whole, cap)
    verdict = msg.get("verdict")
    if notes and isinstance(verdict, dict):
        warnings = list(verdict.get("warnings") or ())
        notes = notes[:MAX_WARNINGS]
        msg["verdict"] = dict(verdict, warnings=warnings[:MAX_WARNINGS - len(notes)] + notes)
        line = _dumps(msg)
    return line


def _to_bounds(sidecar: dict[str, Any]) -> list[str]:
    """Cut each list of ``sidecar`` over its schema bound to it (in place); the cuts named."""
    notes = []
    for key, most in _MOST.items():
        value = sidecar.get(key)
        if isinstance(value, list) and len(value) > most:
            sidecar[key] = value[:most]
            notes.append(f"sidecar {key} cut to {most} of {len(value)} entries: its cap reached")
    return notes


def _to_cap(msg: dict[str, Any], sidecar: dict[str, Any], cap: int) -> bytes:
    """``msg``'s line, its ``sidecar``'s biggest part halved (a list) or left out (in place)
    while the line is over the cap."""
    line = _dumps(msg)
    while len(line) >= cap - _ROOM:
        sizes = {k: len(_dumps(sidecar[k])) for k in _CUT_FIRST if k in sidecar}
        if not sizes:
            break
        key = max(sizes, key=lambda k: sizes[k])  # the biggest first
        value = sidecar[key]
        if isinstance(value, list) and len(value) > 1:
            sidecar[key] = value[: len(value) // 2]
        else:
            del sidecar[key]
        line = _dumps(msg)
    return line


def _cap_notes(sidecar: dict[str, Any], had: set[str], whole: dict[str, int],
               cap: int) -> list[str]:
    """What :func:`_to_cap` cut, in words."""
    notes = []
    for key in _CUT_FIRST:
        if key in had and key not in sidecar:
            notes.append(f"sidecar {key} left out: answer cap of {cap >> 20} MiB reached")
        elif key in whole and len(sidecar[key]) < whole[key]:
            notes.append(f"sidecar {key} cut to {len(sidecar[key])} of {whole[key]} entries: "
                         f"answer cap of {cap >> 20} MiB reached")
    return notes


def _dumps(msg: Any) -> bytes:
    return json.dumps(msg, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
