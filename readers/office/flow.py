"""The office readers' line builder: paragraphs, rows and cells as lines, and their structure.

:class:`Flow` turns the readers' paragraph, row and cell events into lines written to the
sink, holding only the open paragraph/row (and text boxes or notes waiting for the end of
their paragraph) in memory, and enforces ``Limits.max_parts``.  For a sink that renders
structure (``sink.structured``: the Markdown), :func:`flow` gives a :class:`StructuredFlow`
instead: the same lines, each a :class:`Line` holding its plain text and its events
(:mod:`bastion.readers.render.events`): a paragraph's heading level or list item, a row's
cells, a link around its runs, a comment as a note.  Its plain text is the plain flow's,
character for character (the events carry it as ``write`` and ``layout``).

Where the plain text and the structure place a text differently, the line carries each its
own: a table nested in a Word table cell is written on lines of its own after the row that
holds it (``nested_apart``), and in its cell in the Markdown.
"""

from __future__ import annotations

import re
from typing import Any, Callable, TypeVar

from ..base import Limits, TextSink
from ..errors import CapReached
from ..render.events import (CLOSE, LAYOUT, MARK, MD, OPEN, TEXT, Caption, Cell, Event,
                             Fragment, Heading, ListItem, Note, Paragraph, Row, Section, Table,
                             replay)
from .xmlsafe import clean, one_line

T = TypeVar("T")

_PARA, _ROW, _CELL = 0, 1, 2
_MARKER = re.compile(r"(#{1,6}) ")


class _Frame:
    """An open paragraph, row or cell: its parts and, for a paragraph, the lines it defers."""

    __slots__ = ("kind", "parts", "deferred", "pending", "label")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.parts: list[Any] = []
        self.deferred: list[Any] = []
        self.pending: Any = 0  # a row's empty cells not yet materialised
        self.label = ""  # a paragraph's list label ("1. ", "• "), shown if it has text

    def text(self) -> str:
        if self.kind == _ROW:
            return "\t".join(self.parts)
        if self.kind == _CELL:
            return " ".join(p for p in self.parts if p)
        return "".join(self.parts)


class Flow:
    """Builds lines from paragraph, table and text events and writes them to the sink.

    A finished line goes to the innermost open frame: a paragraph defers it until the
    paragraph ends (a text box, a footnote body, nested in the paragraph), a cell takes it as
    part of its text (a nested table is flattened into its cell, or with ``nested_apart``
    written on lines of its own after the row holding the cell), and with no open frame it
    is written.  ``max_parts`` bounds the parts of one paragraph, cell or row: reaching it
    writes what is open and raises ``CapReached("max_parts")``.

    The structure hooks (``open_table``, ``set_block``, ``link_start`` …) and the typed line
    makers (``note``, ``caption``, ``table_lines`` …) do nothing here: they are
    :class:`StructuredFlow`'s.
    """

    structured = False

    def __init__(self, sink: TextSink, limits: Limits, *, nested_apart: bool = False) -> None:
        self.sink = sink
        self.max_parts = limits.max_parts
        self.frames: list[Any] = []  # the open frames (_Frame; a structured flow's _Block)
        self.parts: list[Any] | None = None  # the innermost frame's parts, for add()
        self._pending: str | None = None
        self.nested_apart = nested_apart

    @property
    def pending_heading(self) -> str | None:
        """A marker line (``## header``) written before the next line, if one comes."""
        return self._pending

    @pending_heading.setter
    def pending_heading(self, value: str | None) -> None:
        self._pending = value

    # -- building --------------------------------------------------------------------------

    def add(self, s: str) -> None:
        """Append text to the open paragraph (or cell); ignored outside any frame."""
        parts = self.parts
        if parts is not None:
            parts.append(s)
            if len(parts) > self.max_parts:
                self._overflow()

    def _push(self, kind: int) -> _Frame:
        frame = _Frame(kind)
        self.frames.append(frame)
        self.parts = frame.parts
        return frame

    def _pop(self) -> Any:  # (a _Frame; a structured flow's _Block)
        frame = self.frames.pop()
        self.parts = self.frames[-1].parts if self.frames else None
        return frame

    def open_para(self) -> None:
        self._push(_PARA)

    def set_label(self, label: str, level: int = 0) -> None:
        """Give the open paragraph a list label, written before its text (if it has any);
        ``level``: its list level (0 at the top)."""
        if self.frames and self.frames[-1].kind == _PARA:
            self.frames[-1].label = label

    def close_para(self) -> None:
        if not self.frames or self.frames[-1].kind != _PARA:
            return
        frame = self._pop()
        line = "".join(frame.parts)
        if line and not line.isspace():
            self.emit(frame.label + line if frame.label else line)
        for d in frame.deferred:
            self.emit(d)

    def hold(self) -> None:
        """Hold the lines finished from here on (a sheet's drawing, a slide's notes) until
        :meth:`release`, instead of writing them; bounded by ``max_parts`` like a paragraph's."""
        self._push(_PARA)

    def release(self) -> list[Any]:
        """End the innermost hold (or paragraph): the lines it held, for the caller to emit."""
        if not self.frames or self.frames[-1].kind != _PARA:
            return []
        return self._pop().deferred

    def lines(self, text: str, sub: TextSink | None = None) -> None:
        """Emit every non-blank line of ``text`` (an embedded document's text, a block; the
        text of ``sub``, which a structured flow puts in as its Markdown)."""
        for line in text.splitlines():
            if line and not line.isspace():
                self.emit(line)

    def open_row(self) -> None:
        self._push(_ROW)

    def close_row(self, repeat: int = 1) -> None:
        if not self.frames or self.frames[-1].kind != _ROW:
            return
        frame = self._pop()
        line = "\t".join(frame.parts) if frame.parts else None
        if self.nested_apart and self.frames and self.frames[-1].kind == _CELL:
            cell = self.frames[-1]  # a table in a cell: its rows after the row holding it
            if line is not None:
                cell.deferred.append(line)
            cell.deferred.extend(frame.deferred)
            return
        if line is not None:
            self.emit(line, repeat)
        for d in frame.deferred:
            self.emit(d)

    def open_cell(self) -> None:
        self._push(_CELL)

    def close_cell(self, repeat: int = 1, value: str | None = None,
                   fallback: str | None = None) -> None:
        """End a cell; ``value`` replaces its text, ``fallback`` stands in for an empty one.

        ``repeat`` copies of it join the row; empty cells are only counted, so trailing
        empty cells (a spreadsheet's 16384 repeated columns) are never materialised.
        """
        if not self.frames or self.frames[-1].kind != _CELL:
            return
        cell = self._pop()
        text = value if value else (" ".join(p for p in cell.parts if p) or fallback or "")
        if "\t" in text or "\n" in text:
            text = text.replace("\t", " ").replace("\n", " ")
        if not self.frames or self.frames[-1].kind != _ROW:
            if text:
                self.emit(text)
            for d in cell.deferred:
                self.emit(d)
            return
        row = self.frames[-1]
        row.deferred.extend(cell.deferred)
        if not text or text.isspace():
            row.pending += repeat
            return
        if row.pending:
            self._extend(row, "", row.pending)
            row.pending = 0
        self._extend(row, text, repeat)

    def _extend(self, row: _Frame, text: Any, n: int) -> None:
        room = self.max_parts - len(row.parts)
        row.parts.extend([text] * min(n, max(room, 0)))
        if n > room:
            self._overflow()

    def heading(self, line: str) -> None:
        """A structural line (``# sheet``, ``# slide N``) written straight to the sink."""
        self.pending_heading = None
        self.sink.write(one_line(line) + "\n")

    # -- structure (a structured flow's; nothing here) -------------------------------------

    def open_table(self, columns: int = 0) -> None:
        """A table starts (its rows follow)."""

    def close_table(self) -> None:
        """The table ends."""

    def set_block(self, node: Any) -> None:
        """The open paragraph is this block (a heading, a list item shown without a label)."""

    def set_row(self, header: bool = True) -> None:
        """The open row is a header row."""

    def set_cell(self, colspan: int) -> None:
        """The open cell spans ``colspan`` columns (the cells it covers are not sent)."""

    def link_start(self, target: str) -> None:
        """A hyperlink to ``target`` starts at the open paragraph's next text."""

    def link_end(self) -> None:
        """The open hyperlink ends."""

    def note(self, line: str) -> Any:
        """A comment or annotation line, typed as a note."""
        return line

    def caption(self, line: str) -> Any:
        """An alt text or caption line, typed as such."""
        return line

    def table_lines(self, rows: list[list[str]]) -> list[Any]:
        """Rows of cells (a chart's data) as lines: their cells joined by tabs."""
        return ["\t".join(r) for r in rows]

    def fragment(self, lines: list[str], sub: TextSink | None) -> list[Any]:
        """An embedded document's lines (its text in ``sub``), as the lines to emit."""
        return lines

    # -- output ----------------------------------------------------------------------------

    def emit(self, line: Any, repeat: int = 1) -> None:
        """Send a finished line to the innermost frame, or write it."""
        if self.frames:
            frame = self.frames[-1]
            target = frame.deferred if frame.kind == _PARA else frame.parts
            target.extend([line] * min(repeat, self.max_parts + 1))
            if len(target) > self.max_parts:
                self._overflow()
            return
        sink = self.sink
        if self._pending is not None:
            sink.write(self._pending + "\n")
            self._pending = None
        if not line.isascii():
            line = clean(line)
        line += "\n"
        if repeat > 1:
            room = sink.max_chars - sink.chars
            sink.write(line * min(repeat, room // len(line) + 1))
        else:
            sink.write(line)

    def flush(self) -> None:
        """Write whatever is still open (on a cap), outermost first."""
        frames, self.frames, self.parts = self.frames, [], None
        for frame in frames:
            text = frame.text()
            if text and not text.isspace():
                self.emit(text)
            for d in frame.deferred:
                self.emit(d)

    def _overflow(self) -> None:
        self.flush()
        raise CapReached("max_parts", f"{self.max_parts} parts in one paragraph or row")


class _Block(_Frame):
    """A frame of a :class:`StructuredFlow`: besides, its block node, its inline marks
    (links, as ``(part index, event)``), a row's header flag and a cell's span."""

    __slots__ = ("node", "marks", "links", "header", "colspan")

    def __init__(self, kind: int) -> None:
        super().__init__(kind)
        self.node: Any = None
        self.marks: list[tuple[int, Event]] = []
        self.links = 0
        self.header = False
        self.colspan = 1


class Line:
    """A finished line of a :class:`StructuredFlow`: its plain text and its events (whose
    ``write`` and ``layout`` characters are that text), and whether writing it ends a line of
    the plain text (``newline``; False for a line of structure alone, such as a table's
    start)."""

    __slots__ = ("text", "events", "newline")

    def __init__(self, text: str, events: list[Event], newline: bool = True) -> None:
        self.text = text
        self.events = events
        self.newline = newline

    def __repr__(self) -> str:
        return f"Line({self.text!r}, {self.events!r})"


def block_line(node: Any, text: str) -> Line:
    """A line that is one block holding ``text``."""
    return Line(text, [(OPEN, node), (TEXT, text), (CLOSE, None)])


def _mapped(events: list[Event], fn: Callable[[str], str]) -> list[Event]:
    """``events`` with ``fn`` applied to the characters (write, layout, md)."""
    return [(op, fn(v)) if op <= MD else (op, v) for op, v in events]


def _spaced(s: str) -> str:
    return s.replace("\t", " ").replace("\n", " ") if "\t" in s or "\n" in s else s


def _joined(parts: list[Line]) -> list[Event]:
    """The parts' events one after another, a layout space between two that hold text."""
    events: list[Event] = []
    first = True
    for part in parts:
        if part.text:
            if not first:
                events.append((LAYOUT, " "))
            first = False
        events += part.events
    return events


def _cleaned(s: str) -> str:
    return s if s.isascii() else clean(s)


def _md_only(events: list[Event]) -> list[Event]:
    """The events as the Markdown alone sees them: the text made Markdown-only, the
    plain text's layout left out."""
    return [(MD, v) if op == TEXT else (op, v) for op, v in events if op != LAYOUT]


_EMPTY_CELL = Line("", [(OPEN, Cell()), (CLOSE, None)])


def _cell_line(cell: _Block, value: str | None,
               fallback: str | None) -> tuple[str, list[Event]]:
    """A closed cell's text (its value, else its parts' text, else the fallback; tabs and
    newlines as spaces) and its events (a Cell node around them)."""
    texted = [p for p in cell.parts if p.text]
    text = value if value else (" ".join(p.text for p in texted) or fallback or "")
    events: list[Event] = [(OPEN, Cell(cell.colspan))]
    if value or (not texted and fallback):
        events.append((TEXT, value or fallback))
    else:
        events += _joined(cell.parts)
    events.append((CLOSE, None))
    if "\t" in text or "\n" in text:
        text = text.replace("\t", " ").replace("\n", " ")
    return text, _mapped(events, _spaced)


def _hold_empty_cell(row: _Block, cell: _Block, events: list[Event], repeat: int) -> None:
    """An empty cell held in its row until a cell with text comes (counted like an empty
    cell of the plain flow; its structure, a table nested in it, kept for the Markdown)."""
    empty = (Line("", _md_only(events)) if len(events) > 2 or cell.colspan > 1
             else _EMPTY_CELL)
    pending = row.pending or []
    if pending and pending[-1][0] is empty:
        pending[-1][1] += repeat
    else:
        pending.append([empty, repeat])
    row.pending = pending


class StructuredFlow(Flow):
    """A :class:`Flow` whose lines carry their structure (:class:`Line`); the plain text it
    writes is the plain flow's."""

    structured = True

    def __init__(self, sink: TextSink, limits: Limits, *, nested_apart: bool = False) -> None:
        self._held: list[Line] = []  # structure waiting for the pending heading's line
        super().__init__(sink, limits, nested_apart=nested_apart)

    def _push(self, kind: int) -> _Frame:
        frame = _Block(kind)
        self.frames.append(frame)
        self.parts = frame.parts
        return frame

    @property
    def pending_heading(self) -> str | None:
        return self._pending

    @pending_heading.setter
    def pending_heading(self, value: str | None) -> None:
        if self._held and not self.frames:  # structure held for a heading never written
            held, self._held = self._held, []
            for line in held:
                self._write(line)
        self._pending = value

    # -- structure -------------------------------------------------------------------------

    def set_label(self, label: str, level: int = 0) -> None:
        if self.frames and self.frames[-1].kind == _PARA:
            frame = self.frames[-1]
            frame.label = label
            if not isinstance(frame.node, Heading):
                frame.node = ListItem(max(level, 0), label.strip())

    def set_block(self, node: Any) -> None:
        if self.frames and self.frames[-1].kind == _PARA:
            self.frames[-1].node = node

    def set_row(self, header: bool = True) -> None:
        for frame in reversed(self.frames):
            if frame.kind == _ROW:
                frame.header = header
                return

    def set_cell(self, colspan: int) -> None:
        if self.frames and self.frames[-1].kind == _CELL:
            self.frames[-1].colspan = min(max(colspan, 1), 1000)

    def link_start(self, target: str) -> None:
        if self.frames and self.frames[-1].kind == _PARA and target:
            frame = self.frames[-1]
            if frame.links:
                return
            frame.marks.append((len(frame.parts), (OPEN, _link(target))))
            frame.links = 1

    def link_end(self) -> None:
        if self.frames and self.frames[-1].kind == _PARA and self.frames[-1].links:
            frame = self.frames[-1]
            frame.marks.append((len(frame.parts), (CLOSE, None)))
            frame.links = 0

    def open_table(self, columns: int = 0) -> None:
        self.emit(Line("", [(OPEN, Table(columns))], newline=False))

    def close_table(self) -> None:
        self.emit(Line("", [(CLOSE, None)], newline=False))

    def note(self, line: str) -> Any:
        return block_line(Note("comment"), line)

    def caption(self, line: str) -> Any:
        return block_line(Caption("alt text"), line)

    def table_lines(self, rows: list[list[str]]) -> list[Any]:
        out: list[Any] = [Line("", [(OPEN, Table())], newline=False)]
        for row in rows:
            events: list[Event] = [(OPEN, Row())]
            for i, cell in enumerate(row):
                if i:
                    events.append((LAYOUT, "\t"))
                events += [(OPEN, Cell()), (TEXT, cell), (CLOSE, None)]
            events.append((CLOSE, None))
            out.append(Line("\t".join(row), events))
        out.append(Line("", [(CLOSE, None)], newline=False))
        return out

    def fragment(self, lines: list[str], sub: TextSink | None) -> list[Any]:
        rendered = sub.markdown() if sub is not None else None
        if rendered is None:
            return lines
        return [Line("", [(MARK, Fragment(rendered))], newline=False)] + [
            Line(ln, [(LAYOUT, ln)]) for ln in lines]

    def lines(self, text: str, sub: TextSink | None = None) -> None:
        kept = [ln for ln in text.splitlines() if ln and not ln.isspace()]
        if kept:
            for line in self.fragment(kept, sub):
                self.emit(line)

    # -- lines -----------------------------------------------------------------------------

    def close_para(self) -> None:
        if not self.frames or self.frames[-1].kind != _PARA:
            return
        frame = self._pop()
        line = "".join(frame.parts)
        if line and not line.isspace():
            events: list[Event] = [(OPEN, frame.node or Paragraph())]
            if frame.label:  # a list item's label is its marker; a heading's number, text
                events.append((TEXT if isinstance(frame.node, Heading) else LAYOUT,
                               frame.label))
            events += _runs(frame)
            events.append((CLOSE, None))
            self.emit(Line(frame.label + line if frame.label else line, events))
        for d in frame.deferred:
            self.emit(d)

    def close_row(self, repeat: int = 1) -> None:
        if not self.frames or self.frames[-1].kind != _ROW:
            return
        frame = self._pop()
        line = _row_line(frame)
        if self.nested_apart and self.frames and self.frames[-1].kind == _CELL:
            cell = self.frames[-1]  # in its cell in the Markdown, after the row in the text
            if line is not None:
                cell.parts.append(Line("", _md_only(line.events), newline=False))
                cell.deferred.append(Line(line.text, [(LAYOUT, line.text)]))
            cell.deferred.extend(frame.deferred)
            return
        if line is not None:
            self.emit(line, repeat)
        for d in frame.deferred:
            self.emit(d)

    def close_cell(self, repeat: int = 1, value: str | None = None,
                   fallback: str | None = None) -> None:
        if not self.frames or self.frames[-1].kind != _CELL:
            return
        cell = self._pop()
        text, events = _cell_line(cell, value, fallback)
        if not self.frames or self.frames[-1].kind != _ROW:
            if text:
                events[0] = (OPEN, Paragraph())
                self.emit(Line(text, events))
            for d in cell.deferred:
                self.emit(d)
            return
        row = self.frames[-1]
        row.deferred.extend(cell.deferred)
        if not text or text.isspace():
            _hold_empty_cell(row, cell, events, repeat)
            return
        if row.pending:
            for empty, n in row.pending:
                self._extend(row, empty, n)
            row.pending = 0
        self._extend(row, Line(text, events), repeat)

    def heading(self, line: str) -> None:
        self.pending_heading = None
        self._write(_marker_line(one_line(line)), clean_text=False)

    def emit(self, line: Any, repeat: int = 1) -> None:
        if isinstance(line, str):
            line = block_line(Paragraph(), line)
        if self.frames:
            frame = self.frames[-1]
            target = frame.deferred if frame.kind == _PARA else frame.parts
            if frame.kind == _ROW and not line.text and not line.newline:
                target = frame.deferred  # a row's parts are its cells: structure goes after it
            target.extend([line] * min(repeat, self.max_parts + 1))
            if len(target) > self.max_parts:
                self._overflow()
            return
        if not line.text and not line.newline:  # structure alone
            if self._pending is not None:
                self._held.append(line)  # after the heading, if a line comes to write it
            else:
                self._write(line)
            return
        if self._pending is not None:
            heading, self._pending = self._pending, None
            self._write(_marker_line(heading), clean_text=False)
        if self._held:
            held, self._held = self._held, []
            for h in held:
                self._write(h)
        sink = self.sink
        if repeat > 1:
            room = sink.max_chars - sink.chars
            for _ in range(min(repeat, room // (len(line.text) + 1) + 1)):
                self._write(line)
        else:
            self._write(line)

    def _write(self, line: Line, clean_text: bool = True) -> None:
        events = _mapped(line.events, _cleaned) if clean_text else line.events
        replay(events, self.sink)
        if line.newline:
            self.sink.layout("\n")

    def flush(self) -> None:
        frames, self.frames, self.parts = self.frames, [], None
        for frame in frames:
            line = _open_line(frame)
            if line is not None and line.text and not line.text.isspace():
                self.emit(line)
            for d in frame.deferred:
                self.emit(d)


def flow(sink: TextSink, limits: Limits, *, nested_apart: bool = False) -> Flow:
    """The flow for ``sink``: a :class:`StructuredFlow` when it renders structure."""
    cls = StructuredFlow if sink.structured else Flow
    return cls(sink, limits, nested_apart=nested_apart)


def _link(target: str) -> Any:
    from ..render.events import Link

    return Link(target)


def _runs(frame: _Block) -> list[Event]:
    """A paragraph's runs as text events, its links around them."""
    parts = frame.parts
    if not frame.marks:
        return [(TEXT, "".join(parts))]
    out: list[Event] = []
    at = 0
    for pos, event in frame.marks:
        if pos > at:
            out.append((TEXT, "".join(parts[at:pos])))
            at = pos
        out.append(event)
    if at < len(parts):
        out.append((TEXT, "".join(parts[at:])))
    if frame.links:
        out.append((CLOSE, None))
    return out


def _row_line(frame: _Block) -> Line | None:
    """A row's line: its cells joined by tabs (its trailing empty cells left out of the
    text; a table nested in one kept for the Markdown)."""
    trailing: list[Event] = []
    if frame.pending:
        for empty, n in frame.pending:
            if empty is not _EMPTY_CELL:
                trailing += empty.events * min(n, 1)
    if not frame.parts:
        if not trailing:
            return None
        return Line("", [(OPEN, Row(frame.header))] + trailing + [(CLOSE, None)],
                    newline=False)
    events: list[Event] = [(OPEN, Row(frame.header))]
    for i, cell in enumerate(frame.parts):
        if i:
            events.append((LAYOUT, "\t"))
        events += cell.events
    events += trailing
    events.append((CLOSE, None))
    return Line("\t".join(c.text for c in frame.parts), events)


def _open_line(frame: _Block) -> Line | None:
    """What an open frame holds, as a line (written when a cap stops the document)."""
    if frame.kind == _ROW:
        return _row_line(frame) if frame.parts else None
    if frame.kind == _CELL:
        text = " ".join(p.text for p in frame.parts if p.text)
        if not text or text.isspace():
            return None
        events: list[Event] = [(OPEN, Paragraph()), *_joined(frame.parts), (CLOSE, None)]
        return Line(text, events)
    text = "".join(frame.parts)
    if not text or text.isspace():
        return None
    return Line(text, [(OPEN, frame.node or Paragraph())] + _runs(frame) + [(CLOSE, None)])


def _marker_line(line: str) -> Line:
    """A marker line (``# slide 2``, ``## notes``) as a heading: the marker is the plain
    text's, the title the text of both."""
    m = _MARKER.match(line)
    if m is None:
        return block_line(Paragraph(), line)
    title = line[m.end():]
    kind = title if len(m.group(1)) > 1 else None
    events: list[Event] = [(OPEN, Heading(len(m.group(1)))), (LAYOUT, m.group(0)),
                           (TEXT, title), (CLOSE, None)]
    if kind is not None:  # "## header", "## notes": a section of the document
        events = [(OPEN, Section(kind))] + events + [(CLOSE, None)]
    return Line(line, events)


def run_capped(flow: Flow, fn: Callable[[], T]) -> T:
    """Run ``fn``; on a cap keep the open paragraph/row text (best effort), then re-raise."""
    try:
        return fn()
    except CapReached:
        if flow.frames:
            try:
                flow.flush()
            except CapReached:
                pass
        raise


def write_line(sink: TextSink, line: Any, clean_text: bool = False) -> None:
    """Write one line straight to ``sink``, without a flow: a string (its text, then a line
    break) or a :class:`Line`; ``clean_text``: with the format characters removed
    (:func:`~bastion.readers.office.xmlsafe.clean`)."""
    if isinstance(line, str):
        sink.write((clean(line) if clean_text and not line.isascii() else line) + "\n")
        return
    replay(_mapped(line.events, _cleaned) if clean_text else line.events, sink)
    if line.newline:
        sink.layout("\n")


def marker_line(line: str) -> Line:
    """A marker line (``# Sheet1``, ``## header``) as a heading (:func:`_marker_line`)."""
    return _marker_line(line)
