"""CSV and TSV: one line per row, fields separated by a tab.

Decoding: :func:`bastion.readers.text.textcodec.choose` (BOM, NUL pattern, strict UTF-8, the detector,
windows-1252; CSV declares no charset).

The dialect is sniffed with :class:`csv.Sniffer` on the first 8 KiB (cut at a line end; the
sniffer is quadratic on quote-heavy text, so not 64 KiB),
among ``, ; | tab``; when the sniffer gives up, the file is tab-separated if its MIME type or
extension says TSV, else comma-separated.  Tabs and line breaks inside a field become spaces.

The file is decoded and split into lines a chunk at a time, so memory follows the longest row,
and that is bounded too:

* a row whose source is longer than the characters left in the budget (plus 64 Ki) stops the
  document with ``max_chars`` after writing the part of the row that fits;
* a row with more than ``Limits.max_parts`` fields writes its first ``max_parts`` fields and
  stops with ``max_parts``.

Extractor ``tsv:<encoding>`` when the delimiter is a tab, else ``csv:<encoding>``; ``meta``
has ``charset``, ``encoding_source``, ``delimiter`` and ``rows``.
"""

from __future__ import annotations

import codecs
import csv
import re
from typing import Any, Iterator

from . import textcodec
from ..base import Context, Document, Reader, ReadResult, SinkBuffer, TextSink
from ..errors import CapReached, CorruptDocument
from ..render.events import CLOSE, LAYOUT, OPEN, TEXT, Cell, Row, Table

# csv.Sniffer's quote guess is quadratic on quote-heavy text (25 s for 64 KiB of '"",'),
# so the dialect is sniffed on a shorter sample: at most 0.3 s in that worst case.
_SNIFF = 8 * 1024
_CHUNK = 1 << 20  # bytes decoded at a time
_ROW_SLACK = 64 * 1024  # source characters a row may exceed the remaining budget by
_DELIMITERS = ",;|\t"
_TSV_MIMES = ("text/tab-separated-values",)
_TSV_EXTENSIONS = (".tsv", ".tab")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)")
# str.splitlines also breaks at these; csv and this reader only at CR, LF and CRLF
_OTHER_BREAKS = re.compile("[\v\f\x1c-\x1e\x85\u2028\u2029]")
_FIELD_SPACE = str.maketrans({"\t": " ", "\n": " ", "\r": " "})


class _RowLines:
    """The decoded lines (ends kept, as ``csv`` wants them) with a bound on one row's source.

    ``bound()`` is the most source characters the current row may take; past it the iterator
    raises :class:`_RowTooLong` carrying the start of the row.  The reader calls ``row_done``
    after each row (``csv.reader`` pulls exactly the lines of one record per ``next``).
    """

    def __init__(self, data: bytes, choice: textcodec.Choice, sink: TextSink) -> None:
        self.data = data
        self.choice = choice
        self.sink = sink
        self.row: list[str] = []  # source lines of the row being read
        self.row_chars = 0

    def bound(self) -> int:
        return self.sink.max_chars - self.sink.chars + _ROW_SLACK

    def row_done(self) -> None:
        self.row.clear()
        self.row_chars = 0

    def _too_long(self, piece: str) -> "_RowTooLong":
        return _RowTooLong([*self.row, piece[:max(0, self.bound() - self.row_chars)]])

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder(self.choice.codec)(self.choice.errors)
        view = memoryview(self.data)[self.choice.skip:]
        rest = ""
        for off in range(0, len(view) + 1, _CHUNK):
            final = off + _CHUNK >= len(view)
            text = rest + decoder.decode(view[off:off + _CHUNK], final=final)
            # lines end at the last CR/LF; a CR at the very end may be half a CRLF
            end = max(text.rfind("\n"), text.rfind("\r", 0, len(text) - (not final))) + 1
            head = text[:end]
            lines = (head.splitlines(True) if not _OTHER_BREAKS.search(head)
                     else _LINE.findall(head))
            bound = self.bound()
            row = self.row
            for line in lines:
                n = self.row_chars + len(line)
                if n > bound:
                    raise self._too_long(line)
                self.row_chars = n
                row.append(line)
                yield line
            pos = end
            rest = text[pos:]
            if self.row_chars + len(rest) > self.bound():
                raise self._too_long(rest)
            if final:
                break
        if rest:
            yield rest


class _RowTooLong(Exception):
    """A row's source passed ``_RowLines.bound()``; ``lines`` is the part read so far."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("row too long")
        self.lines = lines


def _dialect(data: bytes, choice: textcodec.Choice,
             tsv: bool) -> type[csv.Dialect] | csv.Dialect:
    skip = choice.skip
    sample = data[skip:skip + _SNIFF].decode(choice.codec, "replace")
    cut = max(sample.rfind("\n"), sample.rfind("\r"))
    if cut > 0 and len(data) - skip > _SNIFF:
        sample = sample[:cut + 1]
    default: type[csv.Dialect] = csv.excel_tab if tsv else csv.excel
    if tsv and "\t" in sample:
        return default
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        return default
    if tsv and dialect.delimiter != "\t":
        return default
    return dialect


class _Writer:
    """Rows to the sink, buffered so a large table is a few big writes, not one per row (a
    structured sink: the rows of one table, the first its header)."""

    def __init__(self, sink: TextSink) -> None:
        self.out = SinkBuffer(sink)
        self.rows = 0
        self.structured = sink.structured
        self.table_open = False

    def row(self, fields: list[str]) -> None:
        line = "\t".join(fields)
        if line.count("\t") != max(len(fields) - 1, 0) or "\n" in line or "\r" in line:
            fields = [f.translate(_FIELD_SPACE) for f in fields]
            line = "\t".join(fields)
        self.rows += 1
        if not self.structured:
            self.out.put(line + "\n")
            return
        events: list[tuple[int, Any]] = [] if self.table_open else [(OPEN, Table())]
        self.table_open = True
        events.append((OPEN, Row()))
        for i, field in enumerate(fields):
            if i:
                events.append((LAYOUT, "\t"))
            events += [(OPEN, Cell()), (TEXT, field), (CLOSE, None)]
        events += [(CLOSE, None), (LAYOUT, "\n")]
        self.out.put_events(events, len(line) + 1)

    def flush(self) -> None:
        """Write what is buffered (at the end, or before a cap: the table ends there)."""
        if self.table_open:
            self.out.event(CLOSE)
            self.table_open = False
        self.out.flush()


def _convert(doc: Document, choice: textcodec.Choice, dialect, sink: TextSink,
             max_parts: int, out: _Writer) -> None:
    lines = _RowLines(doc.data, choice, sink)
    reader = csv.reader(lines, dialect)
    try:
        for row in reader:
            lines.row_done()
            if len(row) > max_parts:
                out.row(row[:max_parts])
                out.flush()
                raise CapReached("max_parts", f"a row of more than {max_parts} fields")
            out.row(row)
    except _RowTooLong as long_row:
        try:
            partial = next(csv.reader(long_row.lines, dialect), [])
        except csv.Error:
            partial = []
        out.row(partial[:max_parts])
        out.flush()
        raise CapReached("max_chars", "a row longer than the character budget") from None
    except csv.Error as e:
        out.flush()
        raise CorruptDocument(f"line {reader.line_num}: {e}") from None
    out.flush()


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    limits = ctx.limits
    tsv = doc.mime in _TSV_MIMES or doc.name.lower().endswith(_TSV_EXTENSIONS)
    choice = textcodec.choose(doc.data)
    dialect = _dialect(doc.data, choice, tsv)
    extractor = ("tsv:" if dialect.delimiter == "\t" else "csv:") + choice.codec
    details: dict[str, Any] = {"charset": choice.codec, "delimiter": dialect.delimiter}
    # A field cannot be longer than its row, and _RowLines bounds the row first.
    csv.field_size_limit(max(csv.field_size_limit(), limits.max_chars + 2 * _ROW_SLACK))
    out = _Writer(sink)
    try:
        _convert(doc, choice, dialect, sink, limits.max_parts, out)
    except CapReached as cap:
        cap.extractor = cap.extractor or extractor
        cap.keep(ReadResult(extractor, encoding_source=choice.source,
                            details={**details, "rows": out.rows}))
        raise
    return ReadResult(extractor, encoding_source=choice.source,
                      details={**details, "rows": out.rows},
                      warnings=tuple(textcodec.warnings(choice)))


READER = Reader(
    name="delimited",
    version=2,
    mimes=("text/csv", "text/tab-separated-values"),
    extensions=(".csv", ".tsv", ".tab"),
    read=read,
    libraries=("charset-normalizer",),
)
