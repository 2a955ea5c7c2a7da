"""A search of the index: the texts that match an FTS5 query, ranked by bm25, each with the
walked paths that name it and a snippet.

The query is SQLite FTS5's query language (docs/search.md): words (``alder pump``: both),
``"a phrase"``, ``OR``, ``NOT``, ``NEAR(a b, 5)``, a prefix ``pum*``.  A query FTS5 refuses
is a :class:`~bastion.errors.QueryError` naming the problem, never a traceback.

Ranking is FTS5's ``bm25()`` (lower is better there; a :class:`Hit`'s ``score`` is its
negation, so higher is better), ties broken by the text's store name, so the order is the same
on every run and on an index kept up over edits as on one built fresh.  The paths come from the
records (``records.stem``, an indexed lookup), in (root, path) order; a text no record names
any more (the index is behind the records) is left out, and :class:`SearchResults` says the
index is behind.  The snippet is FTS5's own ``snippet()``, run on the hit's text alone in a private
in-memory FTS5 table (the index keeps no copy FTS5 could read back: tasks/index/database.py),
so it marks exactly the words the query matched; its marks come back as offsets
(``highlights``), not as characters in the text.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Iterator

from bastion.errors import QueryError

from ..database import DB_NAME
from ..output.readonly import ReadOutput
from ..walk.table import decode
from .database import TOKENIZER, read_index, unpack

__all__ = ["Place", "Hit", "SearchResults", "search", "MAX_PATHS", "SNIPPET_TOKENS"]

MAX_PATHS = 100  # paths listed per hit (``path_count`` says how many name it)
SNIPPET_TOKENS = 16
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class Place:
    """A walked file: its root's name and its path relative to the root."""

    root: str
    path: str

    def __str__(self) -> str:
        return f"{self.root}/{self.path}"


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One text that matches: its rank (1 first), score (the negated bm25: higher is better),
    its store file, the walked paths that name it (at most :data:`MAX_PATHS`; ``path_count``
    of them in all), and a snippet with the matched words' spans in it."""

    rank: int
    score: float
    text: str  # "extract/<aa>/<stem>.txt", as the records' ``text`` field
    paths: tuple[Place, ...]
    path_count: int
    snippet: str
    highlights: tuple[tuple[int, int], ...]

    def to_json(self) -> dict:
        return {"rank": self.rank, "score": self.score, "text": self.text,
                "paths": [{"root": p.root, "path": p.path} for p in self.paths],
                "path_count": self.path_count, "snippet": self.snippet,
                "highlights": [list(h) for h in self.highlights]}


@dataclass(frozen=True, kw_only=True)
class SearchResults:
    """The hits of one query, best first, and whether the index was behind the records."""

    query: str
    hits: tuple[Hit, ...]
    behind: bool  # the index is not in step with extract.jsonl: run the index stage

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


def _query_error(query: str, e: sqlite3.Error) -> QueryError:
    why = str(e)
    hint = ""
    if why.startswith("no such column"):
        hint = (": a word followed by ':' or '-' is read as a column filter; put such words "
                "in double quotes")
    elif "syntax error" in why or "unterminated" in why:
        hint = ": put words with punctuation in double quotes"
    return QueryError(f"the query {query!r} is not a valid FTS5 query ({why}){hint} "
                      "(docs/search.md)")


def search(out: ReadOutput, query: str, limit: int = 10) -> SearchResults:
    """The texts of the output ``out`` that match ``query``, best first, at most ``limit``.
    Raises QueryError (a query FTS5 refuses), PrerequisiteError (no index) or
    NotAnOutputError."""
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit!r}")
    if not query.strip():
        raise QueryError("the query is empty")
    index = read_index(out)
    records = out.sqlite(DB_NAME)
    try:
        try:
            rows = index.execute(
                "SELECT t.stem, t.body, bm25(texts_fts) AS s FROM texts_fts "
                "JOIN texts t ON t.id = texts_fts.rowid WHERE texts_fts MATCH ? "
                "ORDER BY s, t.stem LIMIT ?", (query, limit)).fetchall()
        except sqlite3.OperationalError as e:
            raise _query_error(query, e) from None
        from .stage import is_current

        behind = not is_current(out)
        hits: list[Hit] = []
        snipper = _Snipper()
        try:
            for stem, body, score in rows:
                count = records.execute("SELECT count(*) FROM records WHERE stem = ?",
                                        (stem,)).fetchone()[0]
                if not count:
                    behind = True  # a text no record names any more
                    continue
                paths = tuple(Place(root, decode(path)) for root, path in records.execute(
                    "SELECT root, path FROM records WHERE stem = ? ORDER BY root, path "
                    "LIMIT ?", (stem, MAX_PATHS)))
                snippet, spans = snipper.snippet(unpack(body), query)
                hits.append(Hit(rank=len(hits) + 1, score=-float(score),
                                text=f"extract/{stem[:2]}/{stem}.txt", paths=paths,
                                path_count=count, snippet=snippet, highlights=spans))
        finally:
            snipper.close()
    finally:
        index.close()
        records.close()
    return SearchResults(query=query, hits=tuple(hits), behind=behind)


_SPACE = re.compile(r"\s+")
# marks for snippet(): two private-use characters the text does not hold
_MARKS = [(chr(a), chr(a + 1)) for a in range(0xE000, 0xE100, 2)]


class _Snipper:
    """FTS5's ``snippet()`` of one text at a time, in a private in-memory table."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None)
        self.db.execute(f"CREATE VIRTUAL TABLE one USING fts5(body, tokenize='{TOKENIZER}')")

    def snippet(self, text: str, query: str) -> tuple[str, tuple[tuple[int, int], ...]]:
        """The snippet of ``text`` for ``query`` on one line (blanks collapsed), and the
        spans of the matched words in it.  A text over :data:`WINDOW` characters is looked
        at a window at a time (cut at a line's end), and the first window the query matches
        gives the snippet, so memory stays bounded by the window whatever the text's size;
        when no window matches alone (the words far apart), the text's start is shown."""
        start, end = next(((a, b) for a, b in _MARKS if a not in text and b not in text),
                          ("\x02", "\x03"))
        for window in _windows(text):
            self.db.execute("DELETE FROM one")
            self.db.execute("INSERT INTO one (rowid, body) VALUES (1, ?)", (window,))
            row = self.db.execute(
                "SELECT snippet(one, 0, ?, ?, '…', ?) FROM one WHERE one MATCH ?",
                (start, end, SNIPPET_TOKENS, query)).fetchone()
            if row and row[0]:
                return _unmark(row[0], start, end)
        return _unmark(_SPACE.sub(" ", text[:200]).strip(), start, end)

    def close(self) -> None:
        self.db.close()


WINDOW = 1 << 20  # characters of a long text handed to snippet() at once


def _windows(text: str) -> Iterator[str]:
    """``text`` whole when short, else consecutive windows of about :data:`WINDOW`
    characters cut after a line's end."""
    at = 0
    while at < len(text):
        cut = len(text) if len(text) - at <= 2 * WINDOW else text.find("\n", at + WINDOW)
        cut = len(text) if cut < 0 else cut + 1
        yield text[at:cut]
        at = cut


def _unmark(marked: str, start: str, end: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    length = 0
    space = False
    for ch in marked.strip():
        if ch == start:
            opened = length
            continue
        if ch == end:
            if opened is not None and length > opened:
                spans.append((opened, length))
            opened = None
            continue
        if ch.isspace():
            if space:
                continue
            ch, space = " ", True
        else:
            space = False
        out.append(ch)
        length += 1
    return "".join(out), tuple(spans)
