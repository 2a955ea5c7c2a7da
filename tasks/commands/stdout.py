"""What a command prints on stdout: made safe on a terminal, quiet when the reader goes away.

``bastion grep PATTERN OUT | head`` closes the pipe after a few lines; the next write then
fails with ``EPIPE``.  :class:`Stdout` takes that as the reader's choice, as grep and
ripgrep do: it stops writing, points file descriptor 1 at ``/dev/null`` (so the interpreter's
last flush is quiet too) and says so in :attr:`Stdout.closed`, which a command asks to stop
its work early; the command then exits with its own code (``compare``: 5 when the outputs
differ), never with a ``BrokenPipeError`` traceback.

File names and lines of text come from the documents.  On a terminal they are written with
control, invisible and bidirectional characters as escapes (:func:`bastion.tasks.names.shown`,
:func:`bastion.tasks.names.shown_text`: ESC as ``\\x1b``, a C1 control as ``\\x9b``, an
override as ``\\u202e``; a tab and a line feed kept in a text), so a name or a line cannot set
the window's title, clear the screen, send a device control string, move the cursor,
recolour the terminal or reorder what is shown; a JSON line gets them as JSON's own
``\\u001b`` escapes (:func:`json_shown`), still JSON.  Into a pipe or a file they are written
as they are (a name that is not UTF-8 as its original bytes), as grep writes them; ``--raw``
writes them as they are on a terminal too (:class:`Stdout` ``raw``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from ..names import _UNSAFE, shown, shown_text

__all__ = ["Stdout", "json_shown", "safe", "quiet_pipe", "RAW_HELP"]

RAW_HELP = ("on a terminal too, write the documents' text and names as they are (control "
            "characters and escape sequences included; by default a terminal gets them as "
            "escapes such as \\x1b)")


def json_shown(line: str) -> str:
    """A JSON line with every character a terminal would act on (C0 and C1 controls,
    invisible and bidirectional characters, lone surrogates) as JSON's ``\\uXXXX`` escape:
    the same JSON value, safe to show.  (They can only be inside its strings.)"""
    if _UNSAFE.search(line) is None:
        return line
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def safe(text: str, *, tab: bool = False) -> str:
    """``text`` as a terminal may show it (``tab``: a tab kept as it is)."""
    if tab and "\t" in text:
        return "\t".join(shown(part) for part in text.split("\t"))
    return shown(text)


def quiet_pipe(stream: Any = None) -> None:
    """The reader of stdout went away: whatever is still buffered, and anything written
    later, goes to ``/dev/null`` instead (no second ``EPIPE`` at exit)."""
    stream = stream if stream is not None else sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class Stdout:
    """stdout for a command that prints many lines (see the module)."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 raw: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stdout
        if raw:  # --raw: as a pipe gets it, even on a terminal
            tty = False
        if tty is None:
            try:
                tty = self.stream.isatty()
            except (AttributeError, ValueError, OSError):
                tty = False
        self.tty = tty
        self.closed = False
        self._bytes = getattr(self.stream, "buffer", None)
        if self._bytes is not None:  # what was written as text first goes out first
            try:
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                self._bytes = None

    def write(self, text: str) -> bool:
        """Write ``text`` as it is (the caller made it safe); False once the pipe closed."""
        if self.closed:
            return False
        try:
            if self._bytes is not None:
                self._bytes.write(text.encode("utf-8", "surrogateescape"))
            else:
                self.stream.write(text.encode("utf-8", "surrogateescape")
                                  .decode("utf-8", "replace"))
        except BrokenPipeError:
            self._closed()
            return False
        return True

    def text(self, text: str) -> bool:
        """A document's whole text: as it is into a pipe; on a terminal made safe
        (:func:`~bastion.tasks.names.shown_text`: tabs and line feeds kept) and ended by a
        line feed.  False once the pipe closed."""
        if not self.tty:
            return self.write(text)
        return self.write(shown_text(text) + ("\n" if text and not text.endswith("\n")
                                              else ""))

    def json(self, line: str) -> bool:
        """A JSON line (without its end): on a terminal with :func:`json_shown`'s escapes."""
        return self.write((json_shown(line) if self.tty else line) + "\n")

    def line(self, *parts: str, text: str | None = None, sep: str = ":") -> bool:
        """One line: ``parts`` (names) joined by ``sep``, then ``text`` (a line of a
        document) if given; each made safe on a terminal.  False once the pipe closed."""
        if self.tty:
            fields = [safe(p) for p in parts]
            if text is not None:
                fields.append(safe(text, tab=True))
        else:
            fields = list(parts) + ([text] if text is not None else [])
        return self.write(sep.join(fields) + "\n")

    def flush(self) -> None:
        if self.closed:
            return
        try:
            if self._bytes is not None:
                self._bytes.flush()
            self.stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        self.closed = True
        quiet_pipe(self.stream)
