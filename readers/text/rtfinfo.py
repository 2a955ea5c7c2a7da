"""An RTF document's ``{\\info …}`` group as its metadata: title, author, dates, counts.

The group sits in the header, before the body (searched for in the first :data:`HEAD`
bytes).  Each of its destinations is read on its own: text ones (``\\title``, ``\\author``,
``\\operator``, ``\\subject``, ``\\keywords``, ``\\doccomm``, ``\\company``, ``\\category``,
``\\manager``) as text, their ``\\'hh`` escapes in the document's ``\\ansicpg`` code page,
``\\uN`` as the character (its fallback skipped); the time ones (``\\creatim``, ``\\revtim``)
from ``\\yr \\mo \\dy \\hr \\min \\sec`` (local time: RTF gives no offset); the counts
(``\\nofpages``, ``\\nofwords``, ``\\nofchars``) from their parameter.
"""

from __future__ import annotations

import codecs
import re
from datetime import datetime
from typing import Any

from ..metadata import DocMeta, split_keywords, split_people

HEAD = 1 << 20  # bytes searched for the info group
MAX_INFO = 1 << 16  # bytes of the info group read at most
_TEXT = {b"title", b"author", b"operator", b"subject", b"keywords", b"doccomm", b"company",
         b"category", b"manager"}
_TIMES = {b"creatim", b"revtim"}
_COUNTS = {b"nofpages": "pages", b"nofwords": "words", b"nofchars": "characters"}
_TOKEN = re.compile(rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])"
                    rb"|([^\\{}\r\n]+)|[\r\n]+", re.DOTALL)


def _codec(data: bytes) -> str:
    m = re.search(rb"\\ansicpg(\d{1,5})", data[:4096])
    name = f"cp{int(m.group(1))}" if m else "cp1252"
    try:
        codecs.lookup(name)
    except LookupError:
        return "cp1252"
    return name


def info_meta(data: bytes) -> DocMeta:
    """The metadata of the RTF document ``data`` (empty when it has no info group)."""
    start = data.find(b"{\\info", 0, HEAD)
    if start < 0:
        return DocMeta()
    info = _Info(_codec(data))
    for m in _TOKEN.finditer(data, start, min(len(data), start + MAX_INFO)):
        word, param, hexa, sym, brace, run = m.groups()
        if brace is not None:
            if not info.brace(brace):
                break
        elif word is not None:
            info.word(word, param)
        else:
            info.characters(hexa, sym, run)
    info.flush()
    text, when = info.text, info.when
    return DocMeta.make(
        title=text(b"title"), authors=split_people(text(b"author")),
        created=when(b"creatim"), modified=when(b"revtim"), subject=text(b"subject"),
        description=text(b"doccomm"), keywords=split_keywords(text(b"keywords")),
        fields={"last_modified_by": text(b"operator"), "company": text(b"company"),
                "category": text(b"category"), "manager": text(b"manager")},
        **info.counts)


class _Info:
    """The info group as read so far: the destination being read (and the depth it opened
    at), its characters pending decoding, the texts, times and counts found."""

    def __init__(self, codec: str) -> None:
        self.codec = codec
        self.texts: dict[bytes, list[str]] = {}
        self.times: dict[bytes, dict[bytes, int]] = {}
        self.counts: dict[str, Any] = {}
        self.depth = 0
        self.dest: bytes | None = None
        self.dest_depth = 0
        self.pending = bytearray()
        self.skip = 0  # fallback characters to skip after \uN
        self.uc = 1

    def flush(self) -> None:
        if self.pending and self.dest in _TEXT:
            self.texts.setdefault(self.dest, []).append(self.pending.decode(self.codec, "replace"))
        self.pending.clear()

    def brace(self, brace: bytes) -> bool:
        """A group opened or closed; False once the info group is closed."""
        self.flush()
        if brace == b"{":
            self.depth += 1
            return True
        self.depth -= 1
        if self.dest is not None and self.depth < self.dest_depth:
            self.dest = None
        return self.depth > 0

    def word(self, word: bytes, param: bytes | None) -> None:
        """A control word: a destination opened, a count, a time's part, a character."""
        if word in _TEXT or word in _TIMES:
            self.flush()
            self.dest, self.dest_depth = word, self.depth
        elif word in _COUNTS and param is not None:
            self.counts[_COUNTS[word]] = int(param)
        elif self.dest in _TIMES and param is not None:
            self.times.setdefault(self.dest, {})[word] = int(param)
        elif word == b"u" and param is not None and self.dest in _TEXT:
            self.flush()
            unit = int(param)
            self.texts.setdefault(self.dest, []).append(chr(unit + 65536 if unit < 0 else unit))
            self.skip = self.uc
        elif word == b"uc" and param is not None:
            self.uc = max(0, int(param))

    def characters(self, hexa: bytes | None, sym: bytes | None, run: bytes | None) -> None:
        """Text: an escape, a symbol, a run (a \\uN's fallback skipped first)."""
        if self.skip:
            self.skip -= 1
            if run is not None and len(run) > 1:
                self.pending.extend(run[1:])
            return
        if hexa is not None:
            self.pending.append(int(hexa, 16))
        elif sym is not None and sym in b"\\{}":
            self.pending.extend(sym)
        elif run is not None:
            self.pending.extend(run)

    def text(self, key: bytes) -> str | None:
        return "".join(self.texts.get(key, ())) or None

    def when(self, key: bytes) -> datetime | None:
        t = self.times.get(key)
        try:
            return datetime(t[b"yr"], t.get(b"mo", 1), t.get(b"dy", 1), t.get(b"hr", 0),
                            t.get(b"min", 0), t.get(b"sec", 0)) if t and b"yr" in t else None
        except ValueError:
            return None
