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
    codec = _codec(data)
    texts: dict[bytes, list[str]] = {}
    times: dict[bytes, dict[bytes, int]] = {}
    counts: dict[str, Any] = {}
    depth = 0
    dest: bytes | None = None  # the destination being read, and the depth it opened at
    dest_depth = 0
    pending = bytearray()
    skip = 0  # fallback characters to skip after \uN
    uc = 1

    def flush() -> None:
        if pending and dest in _TEXT:
            texts.setdefault(dest, []).append(pending.decode(codec, "replace"))
        pending.clear()

    for m in _TOKEN.finditer(data, start, min(len(data), start + MAX_INFO)):
        word, param, hexa, sym, brace, run = m.groups()
        if brace is not None:
            flush()
            if brace == b"{":
                depth += 1
            else:
                depth -= 1
                if dest is not None and depth < dest_depth:
                    dest = None
                if depth <= 0:
                    break
            continue
        if word is not None:
            if word in _TEXT or word in _TIMES:
                flush()
                dest, dest_depth = word, depth
            elif word in _COUNTS and param is not None:
                counts[_COUNTS[word]] = int(param)
            elif dest in _TIMES and param is not None:
                times.setdefault(dest, {})[word] = int(param)
            elif word == b"u" and param is not None and dest in _TEXT:
                flush()
                unit = int(param)
                texts.setdefault(dest, []).append(chr(unit + 65536 if unit < 0 else unit))
                skip = uc
            elif word == b"uc" and param is not None:
                uc = max(0, int(param))
            continue
        if skip:
            skip -= 1
            if run is not None and len(run) > 1:
                pending.extend(run[1:])
            continue
        if hexa is not None:
            pending.append(int(hexa, 16))
        elif sym is not None and sym in b"\\{}":
            pending.extend(sym)
        elif run is not None:
            pending.extend(run)
    flush()

    def text(key: bytes) -> str | None:
        return "".join(texts.get(key, ())) or None

    def when(key: bytes) -> datetime | None:
        t = times.get(key)
        try:
            return datetime(t[b"yr"], t.get(b"mo", 1), t.get(b"dy", 1), t.get(b"hr", 0),
                            t.get(b"min", 0), t.get(b"sec", 0)) if t and b"yr" in t else None
        except ValueError:
            return None

    return DocMeta.make(
        title=text(b"title"), authors=split_people(text(b"author")),
        created=when(b"creatim"), modified=when(b"revtim"), subject=text(b"subject"),
        description=text(b"doccomm"), keywords=split_keywords(text(b"keywords")),
        fields={"last_modified_by": text(b"operator"), "company": text(b"company"),
                "category": text(b"category"), "manager": text(b"manager")},
        **counts)
