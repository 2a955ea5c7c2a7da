"""PowerPoint 97–2003 (``.ppt``) text: the records of the ``PowerPoint Document`` stream
([MS-PPT]).

The slides are found the way PowerPoint finds them: the ``Current User`` stream points at the
last ``UserEditAtom``; the chain of edits gives the persist directory (persist id → offset of
the record); the edit's document container holds the ``SlideListWithText`` lists of slides
(instance 0) and notes (instance 2), whose ``SlidePersistAtom``s name each slide's container in
presentation order.  Per slide:

* the text the slide list holds for it (titles and body placeholders: ``TextCharsAtom``
  UTF-16LE, ``TextBytesAtom`` 8-bit), then the text of the slide's own shapes (text boxes,
  table cells, grouped shapes), each text once;
* the slide's notes page (by the slide's ``notesIdRef``) under ``## notes``.

Master slides and layouts are not read.  When the persist chain is broken, the top-level
``Slide``/``Notes`` containers are read in stream order instead (with a warning).  Text
atoms: ``\\r`` ends a paragraph, ``\\v`` is a line break; a lone ``*`` (a slide-number
placeholder) is dropped.  An encrypted presentation (``CryptSession10Container``) raises
:class:`EncryptedDocument`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptDocument, EncryptedDocument

RT_DOCUMENT = 0x03E8
RT_SLIDE = 0x03EE
RT_SLIDE_ATOM = 0x03EF
RT_NOTES = 0x03F0
RT_NOTES_ATOM = 0x03F1
RT_SLIDE_PERSIST = 0x03F3
RT_MAIN_MASTER = 0x03F8
RT_TEXT_HEADER = 0x0F9F
RT_TEXT_CHARS = 0x0FA0
RT_TEXT_BYTES = 0x0FA8
RT_SLIDE_LIST = 0x0FF0
RT_USER_EDIT = 0x0FF5
RT_CURRENT_USER = 0x0FF6
RT_PERSIST_DIR = 0x1772
RT_CRYPT_SESSION = 0x2F14

MAX_RECORDS = 2_000_000  # records visited per presentation (a loop guard)
MAX_EDITS = 10_000


@dataclass(frozen=True)
class Slide:
    texts: tuple[str, ...]
    notes: tuple[str, ...]


class _Walker:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.visited = 0

    def header(self, at: int) -> tuple[int, int, int, int]:
        """(version, instance, type, length) of the record at ``at``."""
        if at < 0 or at + 8 > len(self.data):
            raise CorruptDocument(f"PowerPoint record at {at} outside the stream")
        vi, rtype, length = struct.unpack_from("<HHI", self.data, at)
        self.visited += 1
        if self.visited > MAX_RECORDS:
            raise CorruptDocument("PowerPoint stream has too many records")
        return vi & 0xF, vi >> 4, rtype, length

    def children(self, at: int):
        """(offset, version, instance, type, length) of each child of the container at ``at``."""
        _, _, _, length = self.header(at)
        pos, end = at + 8, min(at + 8 + length, len(self.data))
        while pos + 8 <= end:
            ver, inst, rtype, ln = self.header(pos)
            yield pos, ver, inst, rtype, ln
            pos += 8 + ln

    def texts_in_order(self, at: int) -> list[str]:
        """Text atoms anywhere below the container at ``at``, in record order (iterative)."""
        out: list[str] = []
        stack = [iter(list(self.children(at)))]
        while stack:
            for pos, ver, _inst, rtype, ln in stack[-1]:
                if ver == 0xF:
                    stack.append(iter(list(self.children(pos))))
                    break
                if rtype in (RT_TEXT_CHARS, RT_TEXT_BYTES):
                    out.append(self.atom_text(pos, rtype, ln))
            else:
                stack.pop()
        return out

    def atom_text(self, pos: int, rtype: int, ln: int) -> str:
        body = self.data[pos + 8:pos + 8 + ln]
        if rtype == RT_TEXT_CHARS:
            return body.decode("utf-16-le", "replace")
        return body.decode("latin-1")


def _persist_directory(w: _Walker, current_edit: int) -> tuple[dict[int, int], int, bool]:
    """persist id → offset (newest edit wins), the document's persist id, encrypted?"""
    directory: dict[int, int] = {}
    doc_ref = None
    encrypted = False
    at = current_edit
    seen: set[int] = set()
    while at and at not in seen and len(seen) < MAX_EDITS:
        seen.add(at)
        _, _, rtype, ln = w.header(at)
        if rtype != RT_USER_EDIT or ln < 28:
            raise CorruptDocument("PowerPoint edit chain points at no UserEditAtom")
        body = w.data[at + 8:at + 8 + ln]
        last_edit, persist_dir, doc_persist = struct.unpack_from("<III", body, 8)
        if doc_ref is None:
            doc_ref = doc_persist
        if ln >= 36 and struct.unpack_from("<I", body, 32)[0]:
            encrypted = True  # encryptSessionPersistIdRef
        _, _, ptype, pln = w.header(persist_dir)
        if ptype != RT_PERSIST_DIR:
            raise CorruptDocument("PowerPoint edit without a persist directory")
        pos, end = persist_dir + 8, min(persist_dir + 8 + pln, len(w.data))
        while pos + 4 <= end:
            entry = struct.unpack_from("<I", w.data, pos)[0]
            first, count = entry & 0xFFFFF, entry >> 20
            pos += 4
            for i in range(count):
                if pos + 4 > end:
                    break
                directory.setdefault(first + i, struct.unpack_from("<I", w.data, pos)[0])
                pos += 4
        at = last_edit
    if doc_ref is None:
        raise CorruptDocument("PowerPoint stream without an edit")
    return directory, doc_ref, encrypted


def _paragraphs(texts: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    seen: set[str] = set()
    for t in texts:
        t = t.replace("\r\n", "\r").replace("\x0b", "\n").replace("\r", "\n")
        key = t.strip()
        if not key or key == "*" or key in seen:
            continue
        seen.add(key)
        out.append(t.strip("\n"))
    return tuple(out)


def slides(stream: bytes, current_user: bytes | None) -> tuple[list[Slide], list[str]]:
    """The slides of a presentation, and warnings."""
    w = _Walker(stream)
    warnings: list[str] = []
    if current_user and len(current_user) >= 20:
        offset = struct.unpack_from("<I", current_user, 16)[0]
        try:
            return _by_persist(w, offset), warnings
        except (CorruptDocument, struct.error) as e:
            if isinstance(e, EncryptedDocument):
                raise
            warnings.append(f"PowerPoint edit chain unreadable ({e}); slides in stream order")
    else:
        warnings.append("PowerPoint file without a Current User stream; slides in stream order")
    w.visited = 0
    return _by_scan(w), warnings


def _by_persist(w: _Walker, current_edit: int) -> list[Slide]:
    directory, doc_ref, encrypted = _persist_directory(w, current_edit)
    if encrypted:
        raise EncryptedDocument("encrypted PowerPoint presentation")
    doc_at = directory.get(doc_ref)
    if doc_at is None or w.header(doc_at)[2] != RT_DOCUMENT:
        raise CorruptDocument("PowerPoint document container not found")
    lists = _slide_lists(w, doc_at)
    notes_by_id: dict[int, int] = {}
    for persist, slide_id, _texts in lists.get(2, []):
        if persist in directory:
            notes_by_id[slide_id] = directory[persist]
    out: list[Slide] = []
    for persist, _slide_id, outline in lists.get(0, []):
        at = directory.get(persist)
        own: list[str] = []
        notes: list[str] = []
        if at is not None and w.header(at)[2] == RT_SLIDE:
            own = w.texts_in_order(at)
            notes = _slide_notes(w, at, notes_by_id)
        out.append(Slide(_paragraphs(outline + own), _paragraphs(notes)))
    return out


def _slide_lists(w: _Walker, doc_at: int) -> dict[int, list[tuple[int, int, list[str]]]]:
    """The document's slide lists by instance (0: slides, 2: notes), each entry
    ``(persist id, slide id, outline texts)``."""
    lists: dict[int, list[tuple[int, int, list[str]]]] = {}
    for pos, ver, inst, rtype, ln in w.children(doc_at):
        if rtype != RT_SLIDE_LIST or ver != 0xF:
            continue
        entries = lists.setdefault(inst, [])
        for cpos, _cver, _ci, ctype, cln in w.children(pos):
            if ctype == RT_SLIDE_PERSIST and cln >= 16:
                persist, _flags, _ntexts, slide_id = struct.unpack_from(
                    "<IIII", w.data, cpos + 8)
                entries.append((persist, slide_id, []))
            elif ctype in (RT_TEXT_CHARS, RT_TEXT_BYTES) and entries:
                entries[-1][2].append(w.atom_text(cpos, ctype, cln))
    return lists


def _slide_notes(w: _Walker, at: int, notes_by_id: dict[int, int]) -> list[str]:
    """The texts of the notes the slide at ``at`` names in its SlideAtom (none: [])."""
    for cpos, _v, _i, ctype, cln in w.children(at):
        if ctype == RT_SLIDE_ATOM and cln >= 24:
            notes_id = struct.unpack_from("<I", w.data, cpos + 8 + 16)[0]
            notes_at = notes_by_id.get(notes_id)
            if notes_at is not None and w.header(notes_at)[2] == RT_NOTES:
                return w.texts_in_order(notes_at)
            break
    return []


def _by_scan(w: _Walker) -> list[Slide]:
    out: list[Slide] = []
    pos = 0
    while pos + 8 <= len(w.data):
        ver, _inst, rtype, ln = w.header(pos)
        if rtype == RT_SLIDE and ver == 0xF:
            out.append(Slide(_paragraphs(w.texts_in_order(pos)), ()))
        elif rtype == RT_NOTES and ver == 0xF and out:
            last = out[-1]
            out[-1] = Slide(last.texts, last.notes + _paragraphs(w.texts_in_order(pos)))
        pos += 8 + ln
    return out


def text(found: list[Slide]) -> str:
    """``# slide N`` per slide, its paragraphs, then ``## notes`` and the notes' paragraphs
    (as the PPTX reader writes them)."""
    lines: list[str] = []
    for n, slide in enumerate(found, 1):
        lines.append(f"# slide {n}")
        lines.extend(slide.texts)
        if slide.notes:
            lines.append("## notes")
            lines.extend(slide.notes)
    return "\n".join(lines) + ("\n" if lines else "")
