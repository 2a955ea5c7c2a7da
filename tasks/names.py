"""doit task names for file paths: a reversible escaping of what doit refuses or misreads.

A file's task is ``extract:<name>`` with ``<name> = task_name(root, path)``.  An ordinary
name is the path itself (``docs/readme.txt``); a character doit cannot take is written as
``%XX`` per byte of its UTF-8 form, upper-case hex, as in a URL:

- ``=``: ``Task()`` refuses the name ("must not use the char '='"), and on every command line
  (``run``, ``list``, ``info``, ``forget``, ``clean``) an argument holding ``=`` that does not
  start with ``-`` is taken as a variable ``x=y``;
- ``*``: ``run`` and ``clean`` take an argument holding ``*`` as an ``fnmatch`` pattern, so
  ``extract:docs/a*b`` would also select ``docs/axb``;
- ``%``: the escape character itself;
- control characters U+0000–U+001F, U+007F, U+0080–U+009F: a newline splits ``doit list``'s
  lines, an ESC drives the terminal that shows them;
- U+DC80–U+DCFF, a byte of a name that is not valid UTF-8 (the surrogate escape Python reads
  such names as, see tasks/records.py), written as ``%XX`` of that byte: printed raw, doit's
  ``list`` and ``-v 2`` crash on a strict UTF-8 stdout, and doit's ``dbm`` and ``sqlite3``
  backends cannot store it;
- line separators and bidirectional controls U+061C, U+200E, U+200F, U+2028–U+202E,
  U+2066–U+2069: the name would display as another one.

Everything else is kept, spaces and colons included (doit looks the whole name up before it
splits ``basename:name``), and a name never starts with ``-``: the ``extract:`` basename comes
first, so nothing is read as an option.  So ``a=b.txt`` is ``docs/a%3Db.txt``, a byte ``\\xff``
is ``%FF``, ``50%.txt`` is ``50%25.txt``.  An escaped name holds no control character, no
surrogate, no ``=`` and no ``*``; a user types it as doit lists it::

    doit -a "extract:docs/enc-XI-R6,V5,U%3Dview.pdf"

A name shown to a person (a walk problem, an error line, the report's text) goes through
:func:`shown` instead: control, invisible and bidirectional characters and the bytes of a
name that is not UTF-8 as ``\\xNN`` / ``\\uNNNN``, so a file name never moves the cursor,
recolours the terminal, starts a line of its own or reorders the line it is on.

Escaping is deterministic and reversible: :func:`parse_task_name` gives back the exact root and
path (``os.fsencode(path)`` the exact bytes), and refuses a name that :func:`task_name` would
not have made (a lower-case ``%3d``, a stray ``%``, an escaped ordinary character).
"""

from __future__ import annotations

import os
import re

# every character task_name writes as %XX (one per byte of its UTF-8 / surrogate-escaped form)
_ESCAPED = re.compile(
    "[%=*\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPECIAL = re.compile(_ESCAPED.pattern[:-1] + "\ud800-\udfff]")  # escaped, or a surrogate
_HEX_ESCAPE = re.compile("%([0-9A-F]{2})")


# what shown() writes as an escape: C0/C1 controls, DEL, invisible and bidirectional
# characters, line separators, the BOM, and lone surrogates (bytes of a non-UTF-8 name)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                     "\ufeff\ud800-\udfff]")


# the same, but for a tab and a line feed: what a line of a document may hold on a terminal
_UNSAFE_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f"
                             "\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown_text(text: str) -> str:
    """A document's text made safe to show on a terminal: as :func:`shown`, but its tabs and
    line feeds kept (ESC as ``\\x1b``, a carriage return as ``\\x0d``, a C1 control as
    ``\\x9b``, a bidirectional override as ``\\u202e``).  Text without them is returned
    unchanged (one regex search)."""
    if _UNSAFE_IN_TEXT.search(text) is None:
        return text
    return _UNSAFE_IN_TEXT.sub(_escape, text)


def shown(value: object) -> str:
    """A value (a file name, a message holding one) made safe to show: a byte of a name that
    is not UTF-8 (a lone surrogate) as ``\\xNN``, control, invisible and bidirectional
    characters as escapes, so a name cannot move the cursor, recolour a terminal or reorder
    the line it is on.  Text without them is returned unchanged."""
    text = str(value)
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


class TaskNameError(ValueError):
    """A string that is not a task name :func:`task_name` makes, or a path no file can have."""


def _quote(match: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in match.group().encode("utf-8", "surrogateescape"))


def escape(text: str) -> str:
    """``text`` with every character doit refuses or misreads as ``%XX`` (see the module
    docstring); ordinary text is returned unchanged (one regex search)."""
    if _ESCAPED.search(text) is None:
        return text
    return _ESCAPED.sub(_quote, text)


def unescape(text: str) -> str:
    """The inverse of :func:`escape`; :class:`TaskNameError` unless ``escape`` made ``text``."""
    if "%" not in text:
        raw = text
    else:
        data = bytearray()
        pos = 0
        for m in _HEX_ESCAPE.finditer(text):
            data += text[pos:m.start()].encode("utf-8", "surrogateescape")
            data.append(int(m.group(1), 16))
            pos = m.end()
        data += text[pos:].encode("utf-8", "surrogateescape")
        raw = data.decode("utf-8", "surrogateescape")
    canonical = escape(raw)
    if canonical != text:
        raise TaskNameError(f"{text!r} is not an escaped task name (it would be written "
                            f"{canonical!r})")
    return raw


def task_name(root: str, path: str) -> str:
    """The doit name of the file ``path`` of root ``root`` (the part after ``extract:``).

    ``path`` is a record's path: POSIX, relative, surrogate-escaped where the bytes are not
    UTF-8 (what ``os.fsdecode`` makes of them).  A string that no file name can be (a lone
    surrogate ``os.fsdecode`` never makes) is refused with :class:`TaskNameError`, so that
    every name maps back to exactly one path.
    """
    name = f"{root}/{path}"
    if root and "/" not in root and _SPECIAL.search(name) is None:
        return name  # the ordinary case: one regex search (~0.25 µs a name)
    if not root or "/" in root:
        raise TaskNameError(f"root name {root!r} is empty or holds '/'")
    for part in (root, path):
        if _SURROGATE.search(part) is not None:
            try:
                ok = os.fsdecode(os.fsencode(part)) == part
            except UnicodeError:
                ok = False
            if not ok:
                raise TaskNameError(f"{part!r} is not a file name (lone surrogate)")
    return f"{escape(root)}/{escape(path)}"


def parse_task_name(name: str) -> tuple[str, str]:
    """``(root, path)`` of a name made by :func:`task_name` (without doit's ``extract:``)."""
    root, sep, path = name.partition("/")
    if not sep or not root:
        raise TaskNameError(f"{name!r} is not a task name: expected <root>/<path>")
    return unescape(root), unescape(path)
