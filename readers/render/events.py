"""The typed structure events a reader emits beside its text, and their recorded form.

A reader writes into a :class:`~bastion.readers.base.TextSink` one stream of three kinds of
characters and a few structure events (the shape of Tika's ``ContentHandler`` stream, where
``characters`` are the text and ``ignorableWhitespace`` the plain text's own layout):

* ``write(s)``: the document's text, in both renderings;
* ``layout(s)``: what only the plain text shows: its line breaks and tabs between blocks and
  cells, its marker prefixes (``# ``, ``## ``, a list label ``1) ``), a page's form feed;
* ``md(s)``: what only the Markdown shows, where structure puts text elsewhere than the plain
  text's line order (a table nested in a Word cell: in its cell in Markdown, on lines of its
  own after the row in the plain text);
* ``open(node)`` / ``close()`` around a block or an inline span, and ``mark(node)`` for a
  point (a page break, a line break): the nodes below, frozen values.

The plain text is the ``write`` and ``layout`` characters in order, nothing else: structure
never changes it.  The Markdown renderer (:mod:`bastion.readers.render.markdown`) reads the
nodes and the ``write`` and ``md`` characters.  A stream recorded for later (a line the office
readers hold until its paragraph ends) is a list of ``(op, value)`` pairs, :data:`TEXT` …
:data:`MARK`, replayed into a sink with :func:`replay`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Union

# The ops of a recorded stream: (op, value)
TEXT, LAYOUT, MD, OPEN, CLOSE, MARK = range(6)
Event = tuple[int, Any]


# -- blocks ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Heading:
    """A heading, ``level`` 1 (the top) to 6 (deeper levels are shown as 6)."""

    level: int = 1


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph of running text."""


@dataclass(frozen=True, slots=True)
class ListItem:
    """A list item: its nesting ``level`` (0 at the top) and its ``label`` as the document
    shows it (``1.``, ``a)``, ``iv.``, ``2.3.1``, ``•``; empty: a bullet)."""

    level: int = 0
    label: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    """A table: rows of cells.  ``columns`` is the width the document declares, 0 when it
    declares none (a hint; the widest row decides)."""

    columns: int = 0


@dataclass(frozen=True, slots=True)
class Row:
    """A table row; ``header``: a header row (``<th>`` cells, ``w:tblHeader``, a sheet's
    declared header rows)."""

    header: bool = False


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell spanning ``colspan`` columns and ``rowspan`` rows (1 each by default).
    Cells a span covers are not sent: the renderer fills their places."""

    colspan: int = 1
    rowspan: int = 1


@dataclass(frozen=True, slots=True)
class Caption:
    """A caption or a picture's alternative text (``kind``: ``caption``, ``alt text``)."""

    kind: str = "caption"


@dataclass(frozen=True, slots=True)
class Code:
    """Preformatted text (``<pre>``, source code), kept as it is; ``language`` when known."""

    language: str = ""


@dataclass(frozen=True, slots=True)
class Note:
    """A note, comment or annotation beside the body text (``kind``: ``comment``,
    ``annotation``, ``note``, ``quote``)."""

    kind: str = "comment"


@dataclass(frozen=True, slots=True)
class Section:
    """A part of the document that is not its body: ``header``, ``footer``, ``footnotes``,
    ``endnotes``, ``notes`` (a slide's), ``comments``, ``master page``, ``metadata``,
    ``attachment``, ``member`` (an archive's), ``embedded`` (a document inside the document).
    Its title, when it shows one, is a :class:`Heading` inside it."""

    kind: str


# -- inline ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Link:
    """A hyperlink around its text; ``target`` as the document writes it."""

    target: str


# -- points ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PageBreak:
    """The start of page ``page`` (1-based; the first page has none)."""

    page: int


@dataclass(frozen=True, slots=True)
class LineBreak:
    """A line break inside a block (``<br>``, ``w:br``)."""


@dataclass(frozen=True, slots=True)
class Break:
    """The end of a run of text that has no block of its own (HTML's ``<div>`` boundaries):
    the text after it starts a new paragraph."""


@dataclass(frozen=True, slots=True)
class Fragment:
    """Markdown already rendered (an embedded document's, read into a sink of its own), put
    in its place as blocks (flattened, in a table cell)."""

    markdown: str


Block = Union[Heading, Paragraph, ListItem, Table, Row, Cell, Caption, Code, Note, Section]
Node = Union[Block, Link]
Point = Union[PageBreak, LineBreak, Break, Fragment]


class Sink(Protocol):
    """What receives the stream (:class:`bastion.readers.base.TextSink` and its kin)."""

    def write(self, s: str) -> None: ...
    def layout(self, s: str) -> None: ...
    def md(self, s: str) -> None: ...
    def open(self, node: Any) -> None: ...
    def close(self) -> None: ...
    def mark(self, node: Any) -> None: ...


def replay(events: Iterable[Event], sink: Sink) -> None:
    """Send a recorded stream into ``sink``, in order."""
    for op, value in events:
        if op == TEXT:
            sink.write(value)
        elif op == LAYOUT:
            sink.layout(value)
        elif op == MD:
            sink.md(value)
        elif op == OPEN:
            sink.open(value)
        elif op == CLOSE:
            sink.close()
        else:
            sink.mark(value)


def plain_of(events: Iterable[Event]) -> str:
    """The plain text a recorded stream gives: its ``write`` and ``layout`` characters."""
    return "".join(v for op, v in events if op == TEXT or op == LAYOUT)
