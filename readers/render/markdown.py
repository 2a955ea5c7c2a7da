"""The Markdown rendering of a reader's event stream: CommonMark, with GFM tables.

:class:`Markdown` takes the events of :mod:`bastion.readers.render.events` as they come and
keeps only what one block needs (the open paragraph's text, the open table's rows), so a
document of any length renders in bounded memory (a table is held until it ends, or until
:data:`TABLE_ROWS` rows / :data:`TABLE_CHARS` characters, then written as it goes).

The rules:

* every character of the document's text is escaped so that it stays text: ``\\ ` * [ ] < |
  ~`` always, ``_`` unless it sits between two letters or digits (where it cannot open
  emphasis), ``&`` before what would read as an entity; at the start of a line ``# > + - =``
  and a number's ``.``/``)``; leading blanks and trailing spaces dropped (no code block, no
  hard break appears by accident).  No link, emphasis, HTML, table or heading can come from
  the text itself: only from the events.
* a heading is ``#`` × level (at most 6); a paragraph's line breaks are hard breaks
  (a backslash at the line's end); text outside any block is paragraphs split at blank lines,
  its lines kept as written (soft breaks).
* a list item is ``- `` (a bullet, or a label that is not a number: ``- a) text``) or ``N. ``
  (a numeric label), indented under its parent item's text; a deeper level than the next
  one down is shown one level down.
* a table is a GFM table: its first row is the header row (GFM has exactly one), every row
  as wide as the widest (short rows padded, a ``colspan`` followed and a ``rowspan`` carried
  down by empty cells), so merged and ragged tables stay valid.  A cell's paragraphs are
  joined by ``<br>``; a table inside a cell is flattened into it, its cells joined by
  `` \\| `` and its rows by ``<br>`` (GFM cells cannot hold tables).  A block met between a
  table's rows (a spreadsheet's comment after its row) is written after the table.
* a link is ``[text](target)``, for the schemes ``http``, ``https``, ``mailto``, ``ftp``,
  ``ftps``, ``tel`` and targets without a scheme (``#anchor``, a relative path); any other
  target (``javascript:``, ``file:``) keeps its text without the link.  The target is
  percent-encoded where CommonMark would end or split it.
* preformatted text is a fenced code block (a fence longer than any backtick run in it);
  a note or comment is a block quote; a caption or alt text is emphasised; a page break is
  ``<!-- page N -->``; an embedded document's Markdown (:class:`~.events.Fragment`) is put in
  as it is.
"""

from __future__ import annotations

import re
from typing import Any

from .events import (Break, Caption, Cell, Code, Fragment, Heading, LineBreak, Link, ListItem,
                     Note, PageBreak, Paragraph, Row, Section, Table)

MAX_DEPTH = 256  # open nodes kept; deeper ones are read as their parent's text
TABLE_ROWS = 5000  # rows held to find a table's width before its header is written
TABLE_CHARS = 4 << 20
MAX_SPAN = 1000  # a colspan or rowspan counts at most this many
MAX_COLUMNS = 16384  # a row's cells past this are joined into its last one
MAX_TARGET = 4096  # characters of a link target; a longer one keeps only its text

_HARD = "\x00"  # a hard line break inside a block's rendered text (NUL is never text here)
_ESCAPE = re.compile(r"[\\`*\[\]<|~]|_(?![^\W_])|(?<![^\W_])_|&(?=#?[0-9A-Za-z]+;)")
_LEAD = re.compile(r"[#>+=-]|(\d{1,9})[.)]")
_NUMERIC = re.compile(r"(\d{1,9})[.)]?")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}):")
_SAFE_SCHEMES = frozenset({"http", "https", "mailto", "ftp", "ftps", "tel"})
_TARGET_ENCODE = {ord(c): f"%{ord(c):02X}" for c in " <>()\\`"}
_TRAILING_HASHES = re.compile(r"(^|\s)(#+)$")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_LEAVES = (Heading, Paragraph, ListItem, Caption, Code, Note)


def escape(text: str) -> str:
    """``text`` with every character that could become Markdown syntax inside a line
    escaped (the line starts are :func:`line_start`'s)."""
    return _ESCAPE.sub(r"\\\g<0>", text)


def line_start(line: str) -> str:
    """One line of a block: leading blanks dropped, a first character that would start a
    block (heading, quote, list, setext rule, ordered list) escaped, trailing spaces dropped."""
    line = line.strip(" \t")
    m = _LEAD.match(line)
    if m is None:
        return line
    if m.group(1) is not None:
        cut = m.end(1)
        return line[:cut] + "\\" + line[cut:]
    return "\\" + line


def link_target(target: str) -> str | None:
    """The destination to write for ``target``, or None when it is not kept (a scheme that
    is not plainly a link, too long, or empty)."""
    target = "".join(ch for ch in target.strip() if ch >= " " and ch != "\x7f")
    if not target or len(target) > MAX_TARGET:
        return None
    m = _SCHEME.match(target)
    if m is not None and m.group(1).lower() not in _SAFE_SCHEMES:
        return None
    return target.translate(_TARGET_ENCODE)


class _Frame:
    """One open node: a leaf block collecting its inline text (``inline``: ``("t", text)``,
    ``("lo", target)``, ``("lc", None)``, ``("br", None)``), a cell (its inline text and the
    blocks met in it, ``parts``), a row (``cells``), a table (``rows``, and the blocks met
    between its rows, ``deferred``), a section, a link."""

    __slots__ = ("node", "inline", "parts", "cells", "rows", "deferred", "absorbed",
                 "flushed", "implicit", "header", "grid", "blocks", "layout")

    def __init__(self, node: Any, implicit: bool = False) -> None:
        self.node = node
        self.inline: list[tuple[str, Any]] = []
        self.parts: list[str] = []
        self.cells: list[tuple[str, int, int]] = []
        self.rows: list[tuple[list[tuple[str, int, int]], bool]] = []
        self.deferred: list[str] = []
        self.absorbed = False  # a paragraph read as the text of the leaf it opened in
        self.flushed = False  # a leaf whose text so far is written (its next text continues)
        self.implicit = implicit  # a table or row no event opened (a row or cell outside one)
        self.header = False
        self.grid = _Grid() if isinstance(node, Table) else _NO_GRID  # a table's
        # what a cell holds as blocks (a row's, a table's: per cell, per row), for a table
        # found to be one of layout (:func:`_is_layout`), whose blocks are written as blocks
        self.blocks: list[Any] = []
        self.layout = False  # it holds structure: a heading, a list, code, a table


class _Grid:
    """A table's columns as its rows come: its width, the columns still covered by a
    rowspan, the characters held, and whether it streams (its header is written: its rows
    go out as they come)."""

    __slots__ = ("width", "carry", "chars", "streaming")

    def __init__(self) -> None:
        self.width = 0
        self.carry: dict[int, int] = {}
        self.chars = 0
        self.streaming = False


_NO_GRID = _Grid()  # (a frame that is not a table's: never written to)


def _has_text(inline: list[tuple[str, Any]]) -> bool:
    return any(kind == "t" and not value.isspace() for kind, value in inline)


class Markdown:
    """Renders one document's event stream (see the module docstring); :meth:`finish`
    closes what is open and gives the Markdown."""

    def __init__(self) -> None:
        self.writer = _Writer()
        self.frames = _Frames()
        self.implicit: _Frame | None = None  # text met outside any block
        self.overflow = 0  # opens past MAX_DEPTH, whose closes are ignored

    # -- events ---------------------------------------------------------------------------------

    def text(self, s: str) -> None:
        if not s:
            return
        if "\x00" in s:
            s = s.replace("\x00", "")
        self._inline_frame().inline.append(("t", s))

    def open(self, node: Any) -> None:
        if len(self.frames) >= MAX_DEPTH:
            self.overflow += 1
            return
        if isinstance(node, Link):
            self._inline_frame().inline.append(("lo", node.target))
            self.frames.append(_Frame(node))
            return
        self._end_implicit_table(node)
        self._flush_implicit()
        if isinstance(node, _LEAVES):
            self._open_leaf(node)
        elif isinstance(node, (Row, Cell)):
            self.frames.open_in_table(node)
        elif isinstance(node, Table):
            self._flush_open_leaf()
            frame = _Frame(node)
            frame.grid.width = min(max(node.columns, 0), MAX_COLUMNS)
            self.frames.append(frame)
        else:  # Section and anything else: a container with no mark of its own
            self.frames.append(_Frame(node))

    def close(self) -> None:
        if self.overflow:
            self.overflow -= 1
            return
        if self.frames and isinstance(self.frames[-1].node, Link):
            self.frames.pop()
            self._inline_frame(create=False, into=True).inline.append(("lc", None))
            return
        self._end_implicit_table(None)
        self._flush_implicit()
        if not self.frames:
            return
        frame = self.frames.pop()
        node = frame.node
        if isinstance(node, _LEAVES):
            if not frame.absorbed:
                self._render_leaf(frame)
        elif isinstance(node, Cell):
            self.frames.close_cell(frame)
        elif isinstance(node, Row):
            self._close_row(frame)
        elif isinstance(node, Table):
            self._close_table(frame)

    def mark(self, point: Any) -> None:
        if isinstance(point, LineBreak):
            target = self._inline_frame(create=False)
            if target is not None:
                target.inline.append(("br", None))
            return
        if isinstance(point, Break):
            target = self._inline_frame(create=False)
            if target is not None and target is not self.implicit:
                if _has_text(target.inline):  # a block boundary inside a block or cell
                    target.inline.append(("br", None))
                return
        self._end_implicit_table(None)
        self._flush_implicit()
        if isinstance(point, Break):
            return
        if isinstance(point, PageBreak):
            if not self.frames.inside(Cell):
                self._flush_open_leaf()
                self._place(f"<!-- page {int(point.page)} -->")
        elif isinstance(point, Fragment):
            body = point.markdown.strip("\n")
            if body:
                self._flush_open_leaf()
                if self.frames.inside(Cell):
                    self.frames.cell_part(_flatten_fragment(body))
                else:
                    self._place(body)

    def finish(self) -> str:
        """Close everything still open; the Markdown (ending with a line break, or empty)."""
        self.overflow = 0
        while self.frames:
            self.close()
        self._flush_implicit()
        text = "".join(self.writer.out)
        return text + "\n" if text else ""

    def note(self, line: str) -> None:
        """A line of bastion's own after the document (a cap's note), as a paragraph."""
        self.finish()
        self.frames, self.implicit = _Frames(), None
        self._place(line_start(escape(line)))

    # -- frames -----------------------------------------------------------------------------------

    def _inline_frame(self, create: bool = True, into: bool = False) -> Any:
        """The frame text goes to: the innermost leaf or cell, else the text outside any
        block (made here when ``create``)."""
        found = self.frames.leaf()
        if found is not None:
            return found
        if self.implicit is None:
            if not create:
                return _Frame(Paragraph()) if into else None
            self._end_implicit_table(None)
            self.implicit = _Frame(Paragraph(), implicit=True)
        return self.implicit

    def _end_implicit_table(self, opening: Any) -> None:
        """A table or row no event opened ends at anything but the next row or cell."""
        while self.frames and self.frames[-1].implicit:
            frame = self.frames[-1]
            if isinstance(frame.node, Row) and isinstance(opening, Cell):
                return
            if isinstance(frame.node, Table) and isinstance(opening, (Row, Cell)):
                return
            self.frames.pop()
            if isinstance(frame.node, Row):
                self._close_row(frame)
            else:
                self._close_table(frame)

    def _open_leaf(self, node: Any) -> None:
        cur = self._inline_frame(create=False)
        frame = _Frame(node)
        if cur is None:
            pass
        elif isinstance(cur.node, Cell):
            pass  # its blocks join its parts (:meth:`_cell_part`) after its text so far
        elif (isinstance(node, Paragraph) and not isinstance(cur.node, Code)
              and not _has_text(cur.inline)):
            frame.absorbed = True  # <li><p>…: the paragraph is the item's text
        else:
            self._flush_leaf(cur)
        self.frames.append(frame)

    def _flush_open_leaf(self) -> None:
        cur = self._inline_frame(create=False)
        if cur is not None and not isinstance(cur.node, Cell):
            self._flush_leaf(cur)

    def _flush_leaf(self, frame: _Frame) -> None:
        """Write what a leaf holds so far; its later text continues it."""
        if _has_text(frame.inline):
            self._render_leaf(frame)
            frame.flushed = True
        frame.inline = []

    def _flush_implicit(self) -> None:
        frame, self.implicit = self.implicit, None
        if frame is not None:
            self._render_leaf(frame)

    # -- leaves -----------------------------------------------------------------------------------

    def _render_leaf(self, frame: _Frame) -> None:
        node = frame.node
        if self.frames.inside(Cell):
            text = _inline(frame, cell=True)
            if isinstance(node, ListItem) and text and not frame.flushed:
                label = node.label.strip()
                text = (escape(label) + " " if label else "") + text
            if text:
                self.frames.cell_part(text, _leaf_item(frame), not isinstance(node, Paragraph))
            return
        self._place_items([_leaf_item(frame)], self._in_item())

    def _in_item(self) -> bool:
        return any(isinstance(f.node, ListItem) for f in self.frames)

    # -- tables -----------------------------------------------------------------------------------

    def _close_row(self, frame: _Frame) -> None:
        table = self.frames.top()
        if table is None or not isinstance(table.node, Table):
            return
        table.layout = table.layout or frame.layout
        if self.frames.inside(Cell):  # a table inside a cell: flattened when it ends
            table.rows.append((frame.cells, frame.header))
            table.blocks.append(frame.blocks)
        else:
            _table_row(table, frame.cells, frame.header, self.writer, frame.blocks)

    def _close_table(self, frame: _Frame) -> None:
        layout = _is_layout(frame)
        if self.frames.inside(Cell):
            flat = _flat_table(frame)
            if flat:
                self.frames.cell_part(flat, ("blocks", [i for row in frame.blocks
                                                        for cell in row for i in cell])
                                      if layout else ("raw", _table_text(frame)), True)
        elif layout and not frame.grid.streaming:  # a layout table: its cells' blocks, in order
            for row in frame.blocks:
                for cell in row:
                    self._place_items(cell)
        elif not frame.grid.streaming and frame.rows:  # (a streaming one's rows are written)
            _write_table(frame, self.writer)
        for block in frame.deferred:
            self._place(block)

    def _place_items(self, items: list[Any], in_item: bool = False) -> None:
        """Leaves as blocks (:func:`_leaf_item`'s form: a leaf, or what a layout table's
        cell held), each written where it belongs."""
        for item in items:
            if item[0] == "raw":
                if item[1]:
                    self._place(item[1])
            elif item[0] == "blocks":
                self._place_items(item[1], in_item)
            elif isinstance(item[1], ListItem) and not item[3] and not self.frames.inside(Table):
                self.writer.item(item[1], list(item[2]))
            else:
                continues = in_item or (isinstance(item[1], ListItem) and item[3])
                self._place(_block(item[1], item[2], item[3]), continues=continues)

    # -- output -----------------------------------------------------------------------------------

    def _place(self, block: str, continues: bool = False) -> None:
        """Write a rendered block where it belongs: into the open cell (flattened), after
        the open table (when it came between its rows), else at the top level."""
        if self.frames.inside(Cell):
            self.frames.cell_part(_flatten_fragment(block))
            return
        for frame in reversed(self.frames):
            if isinstance(frame.node, Table):
                frame.deferred.append(block)
                return
        if continues and self.writer.continuation(block):
            return
        self.writer.write(block, "block")


class _Frames(list[_Frame]):
    """The open nodes, innermost last."""

    def top(self) -> _Frame | None:
        """The innermost open node that is not a link."""
        for frame in reversed(self):
            if not isinstance(frame.node, Link):
                return frame
        return None

    def inside(self, kind: type) -> bool:
        """Whether the innermost container of ``kind``'s sort is open: a cell (for Cell), a
        table (for Table: one not inside a cell that is inside it)."""
        for frame in reversed(self):
            if isinstance(frame.node, kind):
                return True
            if kind is Table and isinstance(frame.node, Cell):
                return False
        return False

    def open_in_table(self, node: Row | Cell) -> None:
        """Open a row or a cell, in a table (and a row) no event opened when none is."""
        top = self.top()
        if isinstance(node, Cell) and top is not None and isinstance(top.node, Row):
            self.append(_Frame(node))
            return
        if not self.inside(Table):
            self.append(_Frame(Table(), implicit=True))
        if isinstance(node, Cell):
            self.append(_Frame(Row(), implicit=True))
        frame = _Frame(node)
        frame.header = isinstance(node, Row) and node.header
        self.append(frame)

    def cell_part(self, text: str, item: Any = None, structure: bool = False) -> None:
        """A block met in the open cell, after the cell's own text so far; ``item`` its
        form as a block (``structure``: a heading, a list item, code, a table)."""
        for frame in reversed(self):
            if isinstance(frame.node, Cell):
                if _has_text(frame.inline):
                    _own_text(frame)
                frame.parts.append(text)
                frame.blocks.append(item if item is not None else ("raw", text))
                frame.layout = frame.layout or structure
                return

    def close_cell(self, frame: _Frame) -> None:
        """A cell ends (``frame``, just taken off): its text, its parts joined by ``<br>``,
        joins its row."""
        if _has_text(frame.inline):
            _own_text(frame)
        text = "<br>".join(p for p in frame.parts if p)
        node = frame.node
        colspan = min(max(int(node.colspan), 1), MAX_SPAN)
        rowspan = min(max(int(node.rowspan), 1), MAX_SPAN)
        row = self.top()
        if row is not None and isinstance(row.node, Row):
            row.cells.append((text, colspan, rowspan))
            row.blocks.append(frame.blocks)
            row.layout = row.layout or frame.layout

    def leaf(self) -> _Frame | None:
        """The innermost open leaf or cell (what its absorbed paragraphs write into), None
        when a container (a table, a row, a section) is innermost."""
        for frame in reversed(self):
            node = frame.node
            if isinstance(node, Link):
                continue
            if isinstance(node, _LEAVES) or isinstance(node, Cell):
                while frame.absorbed:  # an absorbed paragraph writes into its leaf
                    frame = self._absorber(frame)
                return frame
            return None
        return None

    def _absorber(self, frame: _Frame) -> _Frame:
        i = self.index(frame)
        for outer in reversed(self[:i]):
            if isinstance(outer.node, _LEAVES) or isinstance(outer.node, Cell):
                return outer
        frame.absorbed = False
        return frame


class _Writer:
    """The Markdown written so far, and what the next block's separator and indentation
    depend on: the open list items (their level and the column their text starts at) and
    the kind of the last block written."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.lists: list[tuple[int, int]] = []  # open list items: (level, text column)
        self.last = ""  # the kind of the last block written: "", "block", "item", "itemcont"

    def item(self, node: ListItem, lines: list[str]) -> None:
        level = max(node.level, 0)
        if self.last not in ("item", "itemcont"):
            self.lists.clear()
        while self.lists and self.lists[-1][0] >= level:
            self.lists.pop()
        indent = self.lists[-1][1] if self.lists else 0
        label = node.label.strip()
        m = _NUMERIC.fullmatch(label)
        if m is not None:
            marker = f"{int(m.group(1))}. "
        else:
            marker = "- "
            if label and any(ch.isalnum() for ch in label):
                lines[0] = line_start(escape(label)) + " " + lines[0]
        self.lists.append((level, indent + len(marker)))
        pad = " " * (indent + len(marker))
        body = (" " * indent + marker + lines[0]
                + "".join("\\\n" + pad + ln for ln in lines[1:]))
        self.write(body, "item")

    def continuation(self, block: str) -> bool:
        """Write ``block`` as a further paragraph of the open list item; False when no item
        is open."""
        if self.last not in ("item", "itemcont") or not self.lists:
            return False
        pad = " " * self.lists[-1][1]
        self.out.append("\n\n" + "\n".join(pad + ln if ln else ln for ln in block.split("\n")))
        self.last = "itemcont"  # the next item after a blank line (a "2." cannot interrupt
        return True             # a paragraph)

    def write(self, block: str, kind: str) -> None:
        if self.out:
            self.out.append("\n" if kind == "item" and self.last == "item" else "\n\n")
        self.out.append(block)
        self.last = kind
        if kind != "item":
            self.lists.clear()




def _inline(frame: _Frame, cell: bool, soft: bool = False) -> str:
    """A leaf's inline text: escaped text, links, breaks (``<br>`` in a cell, else
    :data:`_HARD`, or a line break in text outside any block)."""
    out: list[str] = []
    link: list[str] | None = None
    target: str | None = None
    brk = "<br>" if cell else _HARD
    newline = brk if not soft else ("<br>" if cell else "\n")
    for kind, value in frame.inline:
        dest = link if link is not None else out
        if kind == "t":
            s = escape(value)
            if "\n" in s:
                s = s.replace("\r", "").replace("\n", newline)
            if "\t" in s and cell:
                s = s.replace("\t", " ")
            dest.append(s)
        elif kind == "br":
            dest.append(brk)
        elif kind == "lo":
            if link is None:
                link, target = [], link_target(value)
        elif link is not None:  # "lc"
            out.append(_link(link, target))
            link = None
    if link is not None:
        out.append(_link(link, target))
    text = "".join(out)
    if cell:
        parts = [p.strip() for p in text.replace(_HARD, "<br>").split("<br>")]
        return "<br>".join(p for p in parts if p)
    return text.strip(" \t\n" + _HARD)


def _block(node: Any, lines: list[str], flushed: bool) -> str:
    """A leaf block's Markdown from its text's lines (escaped, hard breaks between them)."""
    if isinstance(node, Heading):
        body = _TRAILING_HASHES.sub(r"\1\\\2", " ".join(lines))
        return "#" * min(max(node.level, 1), 6) + " " + body
    if isinstance(node, ListItem) and not flushed:  # an item between a table's rows
        return "- " + "\\\n".join(lines)
    if isinstance(node, Caption):
        return "*" + " ".join(lines) + "*"
    if isinstance(node, Note):
        return "\\\n".join("> " + ln for ln in lines)
    return "\\\n".join(lines)


def _own_text(cell: _Frame) -> None:
    """A cell's own text so far (outside any block of it) made one of its parts."""
    cell.parts.append(_inline(cell, cell=True))
    lines = [ln for ln in (line_start(ln) for ln in _inline(cell, cell=False).split(_HARD))
             if ln.strip()]
    cell.blocks.append(("leaf", Paragraph(), lines, False) if lines else ("raw", ""))
    cell.inline = []


def _leaf_item(frame: _Frame) -> Any:
    """A leaf met in a cell, in its form as a block: ``("leaf", node, lines, flushed)``, or
    ``("raw", markdown)`` for code and text outside any block."""
    node = frame.node
    if isinstance(node, Code):
        body = "".join(v for k, v in frame.inline if k == "t").strip("\n")
        return ("raw", _fence(body, node.language) if body.strip() else "")
    if frame.implicit:  # paragraphs split at blank lines, their lines kept
        paras = ["\n".join(ln for ln in (line_start(x) for x in para.split("\n")) if ln.strip())
                 for para in _BLANK_LINES.split(_inline(frame, cell=False, soft=True))]
        return ("blocks", [("raw", para) for para in paras if para])
    lines = [ln for ln in (line_start(ln) for ln in _inline(frame, cell=False).split(_HARD))
             if ln.strip()]
    return ("leaf", node, lines, frame.flushed) if lines else ("raw", "")


def _is_layout(table: _Frame) -> bool:
    """Whether a table is one of layout, not of data: a single column whose cells hold
    structure (a heading, a list, code, another table) — a page or a message laid out in a
    table; its cells are then written as the blocks they hold."""
    return table.layout and bool(table.rows) and all(
        sum(1 for text, _, _ in cells if text) <= 1 for cells, _ in table.rows)


def _table_text(table: _Frame) -> str:
    """A table inside a cell as a table of its own (when the cell's table is written as
    blocks)."""
    carry: dict[int, int] = {}
    rows = [_lay_out(cells, carry) for cells, _ in table.rows]
    if not rows:
        return ""
    width = min(max(len(r) for r in rows), MAX_COLUMNS) or 1
    return "\n".join(_table_lines(rows, width))


def _table_row(table: _Frame, cells: list[tuple[str, int, int]], header: bool,
               writer: _Writer, blocks: list[Any]) -> None:
    """A row of a top-level table: held (its spans laid out) until the table's width is
    known, or, once a long table is written as it goes, written fitted to its width."""
    grid = table.grid
    laid = _lay_out(cells, grid.carry)
    if grid.streaming:
        writer.out.append("\n" + _row_line(_fit(laid, grid.width)))
        return
    table.blocks.append(blocks)
    table.rows.append(([(c, 1, 1) for c in laid], header))
    grid.chars += sum(len(c) for c in laid) + len(laid)
    if len(table.rows) >= TABLE_ROWS or grid.chars >= TABLE_CHARS:
        _write_table(table, writer)  # its header and rows so far; the next as they come
        table.rows, table.blocks = [], []
        grid.streaming = True


def _write_table(table: _Frame, writer: _Writer) -> None:
    """The rows held as a GFM table, as wide as the widest row (or the declared width)."""
    rows = [[c for c, _, _ in cells] for cells, _ in table.rows]
    grid = table.grid
    grid.width = min(max([grid.width] + [len(r) for r in rows]), MAX_COLUMNS) or 1
    writer.write("\n".join(_table_lines(rows, grid.width)), "block")


def _flat_table(table: _Frame) -> str:
    """A table inside a cell, as the cell's text: cells joined by `` \\| ``, rows by
    ``<br>``."""
    lines = []
    for cells, _ in table.rows:
        texts = [c for c, _, _ in cells]
        while texts and not texts[-1]:
            texts.pop()
        if texts:
            lines.append(" \\| ".join(texts))
    return "<br>".join(lines)


def _link(inner: list[str], target: str | None) -> str:
    whole = "".join(inner)
    text = whole.strip()
    if not text or target is None:
        return whole
    before = " " if whole[:1].isspace() else ""
    after = " " if whole[-1:].isspace() else ""
    return f"{before}[{text}]({target}){after}"


def _fence(body: str, language: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    info = re.sub(r"[^A-Za-z0-9+#._-]", "", language)[:32]
    return f"{fence}{info}\n{body}\n{fence}"


def _lay_out(cells: list[tuple[str, int, int]], carry: dict[int, int]) -> list[str]:
    """A row's cells in their columns: a colspan followed by empty cells, the columns a
    rowspan from above still covers left empty (``carry``: column -> rows left)."""
    out: list[str] = []
    col = 0

    def covered() -> None:
        nonlocal col
        while carry.get(col, 0) > 0 and col < MAX_COLUMNS:
            carry[col] -= 1
            out.append("")
            col += 1

    for text, colspan, rowspan in cells:
        covered()
        for k in range(colspan):
            out.append(text if k == 0 else "")
            if rowspan > 1:
                carry[col] = rowspan - 1
            col += 1
    last = max((c for c, n in carry.items() if n > 0), default=-1)
    while col <= last and col < MAX_COLUMNS:  # a short row under a rowspan: its places kept
        if carry.get(col, 0) > 0:
            carry[col] -= 1
        out.append("")
        col += 1
    return out


def _fit(cells: list[str], width: int) -> list[str]:
    """A row made exactly ``width`` cells: padded, or its extra cells joined into its last."""
    if len(cells) > width:
        cells = cells[:width - 1] + [" \\| ".join(c for c in cells[width - 1:] if c)]
    return cells + [""] * (width - len(cells))


def _row_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table_lines(rows: list[list[str]], width: int) -> list[str]:
    lines = [_row_line(_fit(rows[0], width)), _row_line(["---"] * width)]
    lines.extend(_row_line(_fit(r, width)) for r in rows[1:])
    return lines


_FENCE_LINE = re.compile(r"(`{3,}|~{3,})")
_DELIMITER_ROW = re.compile(r"\|(?:\s*:?-+:?\s*\|)+")


def _flatten_fragment(block: str) -> str:
    """Rendered Markdown blocks as the text of one table cell: lines joined by ``<br>``, a
    table's rows with their cells joined by `` \\| ``, code lines escaped, page marks and
    fences left out."""
    out: list[str] = []
    fence: str | None = None
    for line in block.split("\n"):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            elif stripped:
                out.append(escape(stripped))
            continue
        m = _FENCE_LINE.match(stripped)
        if m is not None:
            fence = m.group(1)
            continue
        if not stripped or stripped.startswith("<!-- page "):
            continue
        if _DELIMITER_ROW.fullmatch(stripped):
            continue
        if stripped.startswith("| ") and stripped.endswith(" |"):
            cells = stripped[2:-2].split(" | ")
            while cells and not cells[-1].strip():
                cells.pop()
            stripped = " \\| ".join(c.strip() for c in cells)
        elif stripped.startswith("> "):
            stripped = stripped[2:]
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            stripped = stripped[:-1]  # a hard break: the lines are joined by <br> here
        if stripped:
            out.append(stripped)
    return "<br>".join(out)


__all__ = ["Markdown", "escape", "line_start", "link_target", "Section"]


CAPPED_NOTE = "[bastion: markdown truncated, max_output_bytes reached]"


def capped(markdown: str, max_bytes: int) -> bytes:
    """The Markdown as UTF-8 within ``max_bytes`` (the output cap the text is under too): a
    Markdown longer than the cap (its syntax and escapes make it longer than the text) is cut
    at a line's end, and a paragraph of :data:`CAPPED_NOTE` says so."""
    data = markdown.encode("utf-8", "replace")  # (lone surrogates as "?", as the text)
    if len(data) <= max_bytes:
        return data
    note = ("\n\n" + escape(CAPPED_NOTE) + "\n").encode("ascii")
    cut = data.rfind(b"\n", 0, max(max_bytes - len(note), 0))
    return data[:max(cut, 0)] + note if len(note) <= max_bytes else b""
