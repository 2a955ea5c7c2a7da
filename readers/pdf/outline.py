"""A PDF's outline (its bookmarks) walked into :class:`~bastion.readers.pdf.pages.OutlineEntry`
values (title, page, level), the same from PDFium as from pdfminer, within
:data:`MAX_OUTLINE_ITEMS`."""

from __future__ import annotations

import ctypes
from typing import Any, Hashable, Protocol

from .pages import OutlineEntry
from .pdfium import pdfium_bookmarks
from .text import decode_text_string

MAX_OUTLINE_ITEMS = 10_000
MAX_TITLE = 500  # characters of an entry's title (the answer schema's bound: runtime/schema.py)


class OutlineSource(Protocol):
    """How one engine exposes outline items to :func:`walk_outline`."""

    def first_child(self, node: Any) -> Any: ...  # None at the end; ``node`` None = the root
    def next_sibling(self, node: Any) -> Any: ...
    def key(self, node: Any) -> Hashable: ...  # the same object gives the same key
    def title(self, node: Any) -> str: ...
    def page(self, node: Any) -> int | None: ...  # 1-based, None when unresolvable


def walk_outline(src: OutlineSource) -> list[OutlineEntry]:
    """The outline in reading order, level 1 at the top.

    Depth first without recursion; an object seen before ends its chain (outlines can loop);
    at most ``MAX_OUTLINE_ITEMS`` items are visited, each title cut at ``MAX_TITLE``
    characters; items without a resolvable page are left out, their children are not.
    """
    items: list[OutlineEntry] = []
    seen: set[Hashable] = set()
    stack: list[tuple[Any, int]] = [(src.first_child(None), 1)]
    while stack and len(seen) < MAX_OUTLINE_ITEMS:
        node, level = stack.pop()
        if node is None:
            continue
        key = src.key(node)
        if key in seen:
            continue
        seen.add(key)
        stack.append((src.next_sibling(node), level))
        stack.append((src.first_child(node), level + 1))
        page = src.page(node)
        if page is not None:
            items.append(OutlineEntry(src.title(node)[:MAX_TITLE], page, level))
    return items


class PdfiumOutline:
    """Outline items as PDFium bookmarks (PDFium resolves named destinations itself), raw
    handles (ints) through :class:`~bastion.readers.pdf.pdfium.PdfiumBookmarks`' plain
    prototypes."""

    def __init__(self, pdf: Any) -> None:
        self.api = pdfium_bookmarks()
        self.pdf = ctypes.cast(pdf.raw, ctypes.c_void_p).value

    def first_child(self, node: int | None) -> int | None:
        return self.api.first_child(self.pdf, node) or None

    def next_sibling(self, node: int) -> int | None:
        return self.api.next_sibling(self.pdf, node) or None

    def key(self, node: int) -> Hashable:
        return node

    def title(self, node: int) -> str:
        n = self.api.title(node, None, 0)
        buf = ctypes.create_string_buffer(n)
        self.api.title(node, buf, n)
        return buf.raw[: max(n - 2, 0)].decode("utf-16-le", "replace").strip()

    def page(self, node: int) -> int | None:
        api = self.api
        dest = api.dest(self.pdf, node)
        if not dest:
            action = api.action(node)
            if action and api.action_type(action) == api.ACTION_GOTO:
                dest = api.action_dest(self.pdf, action)
        if not dest:
            return None
        index = api.dest_page(self.pdf, dest)
        return index + 1 if index >= 0 else None


class MinerOutline:
    """Outline items as pdfminer objects, page references mapped through the page tree."""

    def __init__(self, doc: Any, page_numbers: dict[int, int]) -> None:
        from pdfminer.pdftypes import PDFObjRef, resolve1
        from pdfminer.psparser import PSLiteral

        self.doc = doc
        self.page_numbers = page_numbers
        self.ref_type, self.resolve, self.literal = PDFObjRef, resolve1, PSLiteral
        self.root = self._dict(doc.catalog.get("Outlines"))

    def _dict(self, obj: Any) -> dict[str, Any]:
        obj = self.resolve(obj)
        return obj if isinstance(obj, dict) else {}

    def first_child(self, node: Any) -> Any:
        return (self.root if node is None else self._dict(node)).get("First")

    def next_sibling(self, node: Any) -> Any:
        return self._dict(node).get("Next")

    def key(self, node: Any) -> Hashable:
        return node.objid if isinstance(node, self.ref_type) else id(node)

    def title(self, node: Any) -> str:
        raw = self.resolve(self._dict(node).get("Title"))
        return decode_text_string(raw) if isinstance(raw, bytes) else ""

    def _name(self, obj: Any) -> str | bytes | None:
        if isinstance(obj, self.literal):
            return obj.name
        return obj if isinstance(obj, (bytes, str)) else None

    def page(self, node: Any) -> int | None:
        item = self._dict(node)
        dest = self.resolve(item.get("Dest"))
        if dest is None:
            action = self._dict(item.get("A"))
            if self._name(self.resolve(action.get("S"))) == "GoTo":
                dest = self.resolve(action.get("D"))
        name = self._name(dest)
        if name is not None:
            try:
                dest = self.resolve(self.doc.get_dest(name))
            except Exception:  # pdfminer raises KeyError, or worse on a broken name tree
                return None
        if isinstance(dest, dict):
            dest = self.resolve(dest.get("D"))
        if isinstance(dest, list) and dest and isinstance(dest[0], self.ref_type):
            return self.page_numbers.get(dest[0].objid)
        return None
