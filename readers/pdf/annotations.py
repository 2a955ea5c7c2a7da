"""A page's annotation notes (sticky notes, free text, highlights, stamps …) and form field
values, as the lines of text that follow the page's own."""

from __future__ import annotations

import ctypes
from typing import Any

from .pdfium import PdfiumAnnots
from .text import clean_page, decode_text_string

# Annotations whose /Contents is text a reader wrote: every markup annotation (notes, free
# text, highlights, stamps, …).  Links and form widgets carry no such text, and a pop-up
# shows its parent's /Contents, which is read from the parent.
ANNOTATION_MARK = "[annotation] "
_NOT_NOTES = frozenset((2, 16))  # FPDF_ANNOT_LINK, _POPUP
_WIDGET = 20  # FPDF_ANNOT_WIDGET: a form field's widget, its value in /V
_UNSET = frozenset({"", "Off"})  # a check box or radio button that is not set


def field_line(name: str, value: str) -> str:
    """A form field's value as a line after its page: ``[form field: Name] value``."""
    name = " ".join(name.split())
    return f"[form field: {name}] {value}" if name else f"[form field] {value}"


def note_text(note: str) -> str:
    """A note's text; a form field's value (pdftotext draws the fields' appearances)."""
    return note.split("] ", 1)[1] if note.startswith("[form field") and "] " in note else note


def note_line(note: str) -> str:
    return note if note.startswith("[form field") else ANNOTATION_MARK + note


def _clean_note(text: str) -> str:
    return clean_page(text.replace("\x00", ""))


class Notes:
    """The /Contents of a page's annotations, in the page's /Annots order, through plain
    prototypes of PDFium's functions (most pages have none, or only links: the checked
    bindings cost ≈ 50 µs a page for the count alone)."""

    def __init__(self, api: PdfiumAnnots) -> None:
        self._count, self._get = api.count, api.get
        self._subtype, self._value, self._close = api.subtype, api.value, api.close

    def _string(self, annot: int, key: bytes) -> str:
        size = self._value(annot, key, None, 0)
        if size <= 2:
            return ""
        buf = ctypes.create_string_buffer(size)
        self._value(annot, key, buf, size)
        return buf.raw[: size - 2].decode("utf-16-le", "replace")

    def read(self, handle: int) -> list[str]:
        """The notes of the page ``handle`` (a raw ``FPDF_PAGE``), and the values of its
        form fields (a widget's own /V, as :func:`field_line`)."""
        notes = []
        for k in range(self._count(handle)):
            annot = self._get(handle, k)
            if not annot:
                continue
            try:
                subtype = self._subtype(annot)
                if subtype in _NOT_NOTES:
                    continue
                if subtype == _WIDGET:
                    value = _clean_note(self._string(annot, b"V"))
                    if value.strip() not in _UNSET:
                        notes.append(field_line(_clean_note(self._string(annot, b"T")), value))
                    continue
                note = _clean_note(self._string(annot, b"Contents"))
                if note.strip():
                    notes.append(note)
            finally:
                self._close(annot)
        return notes


def miner_annotations(page: Any) -> list[str]:
    """The same, from pdfplumber's page (pdfminer objects)."""
    from pdfminer.pdftypes import resolve1

    notes = []
    for annot in page.annots or ():
        data = annot.get("data") or {}
        kind = getattr(data.get("Subtype"), "name", None)
        if kind == "Widget":
            value, name = resolve1(data.get("V")), resolve1(data.get("T"))
            value = getattr(value, "name", value)  # a check box's /Yes
            value = decode_text_string(value) if isinstance(value, bytes) else value
            name = decode_text_string(name) if isinstance(name, bytes) else ""
            if isinstance(value, str) and _clean_note(value).strip() not in _UNSET:
                notes.append(field_line(_clean_note(name), _clean_note(value)))
            continue
        if kind in ("Link", "Popup"):
            continue
        contents = annot.get("contents")
        if isinstance(contents, bytes):
            contents = decode_text_string(contents)
        if isinstance(contents, str):
            note = _clean_note(contents)
            if note.strip():
                notes.append(note)
    return notes
