"""The index's SQLite file, ``.bastion/index.sqlite``: its schema, opened to write (through
the output's checked descriptor, with the output's modes) or to read.

Two tables and an FTS5 index::

    texts      (id, stem, key, chars, body)   one row per text in the index: its store name
                                              (``stem``), the task key it was read under, its
                                              length, and the text itself, zlib-compressed
    texts_fts  FTS5, contentless              the words of each ``texts`` row, by ``id``
    state      (name, value)                  ``synced``: the identity of the extract.jsonl
                                              the index was last brought in step with;
                                              ``settings``: the tokenizer and the layout

The FTS5 table keeps no copy of the text (``content=''``): the one copy is ``texts.body``,
compressed (about a third of the text's size), which FTS5's ``delete`` needs to take a text's
words out again (SQLite before 3.43 cannot delete from a contentless table otherwise, and the
store may have removed the text by then) and which a search reads for its snippets, so that a
search never opens the store.  Any SQLite client can query the file: ``SELECT t.stem,
bm25(texts_fts) FROM texts_fts JOIN texts t ON t.id = texts_fts.rowid WHERE texts_fts MATCH
'pump' ORDER BY 2``.

The index is derived data: a file of another layout or tokenizer is emptied and built again.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from typing import Any

from bastion.errors import OutputError, PrerequisiteError

from ..database import open_sqlite
from ..output.directory import OutputDir
from ..output.readonly import ReadOutput

__all__ = ["INDEX_DB", "TOKENIZER", "SETTINGS", "open_index", "read_index", "get_state",
           "set_state", "pack", "unpack"]

INDEX_DB = ".bastion/index.sqlite"
LAYOUT = 1
# unicode61: words are runs of letters and digits (Unicode's categories), case-folded;
# remove_diacritics 2: "Zoë", "Zoe" and "zoe" are one word
TOKENIZER = "unicode61 remove_diacritics 2"
SETTINGS = {"layout": LAYOUT, "tokenizer": TOKENIZER}
COMPRESSION = 6  # zlib's level for texts.body

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS texts (
        id INTEGER PRIMARY KEY,
        stem TEXT NOT NULL UNIQUE,
        key TEXT NOT NULL,
        chars INTEGER NOT NULL,
        body BLOB NOT NULL
    )""",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS texts_fts USING fts5(body, content='', "
    f"tokenize='{TOKENIZER}')",
    "CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
TABLES = ("texts", "texts_fts", "state")


def pack(text: bytes) -> bytes:
    """A text as ``texts.body`` keeps it."""
    return zlib.compress(text, COMPRESSION)


def unpack(body: bytes) -> str:
    return zlib.decompress(body).decode("utf-8", "replace")


def get_state(db: sqlite3.Connection, name: str) -> Any:
    row = db.execute("SELECT value FROM state WHERE name = ?", (name,)).fetchone()
    return None if row is None else json.loads(row[0])


def set_state(db: sqlite3.Connection, name: str, value: Any) -> None:
    db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (name, json.dumps(value)))


def open_index(od: OutputDir) -> sqlite3.Connection:
    """The index of the output ``od`` opened to write (made if missing; emptied when its
    layout or tokenizer is not :data:`SETTINGS`).  OutputError when it cannot be."""
    try:
        db = open_sqlite(od, INDEX_DB)
    except (OSError, sqlite3.Error) as e:
        raise OutputError(f"cannot open the index {od.path / INDEX_DB}: {e}") from None
    try:
        with db:
            db.execute("BEGIN IMMEDIATE")
            if _settings(db) not in (None, SETTINGS):
                for table in TABLES:  # an index of another layout: built again
                    db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in SCHEMA:
                db.execute(statement)
            set_state(db, "settings", SETTINGS)
    except sqlite3.Error as e:
        db.close()
        if "fts5" in str(e).lower():
            raise OutputError(f"cannot make the index: this Python's SQLite "
                              f"({sqlite3.sqlite_version}) has no FTS5 ({e})") from None
        raise OutputError(f"cannot open the index {od.path / INDEX_DB}: {e}") from None
    return db


def _settings(db: sqlite3.Connection) -> Any:
    try:
        return get_state(db, "settings")
    except sqlite3.Error:  # no state table: a new file
        return None


def read_index(out: ReadOutput) -> sqlite3.Connection:
    """The index of an output opened read-only; PrerequisiteError when there is none (or it
    is of another layout: the next index stage builds it again)."""
    if not out.exists(INDEX_DB):
        raise PrerequisiteError(f"no index in {out.path}: add index to the manifest's stages "
                                "(stages: [walk, extract, index]) and sweep, or run bastion "
                                "index")
    db = out.sqlite(INDEX_DB)
    try:
        settings = get_state(db, "settings")
    except sqlite3.Error as e:
        db.close()
        raise PrerequisiteError(f"the index in {out.path} cannot be read ({e}): run the "
                                "index stage") from None
    if settings != SETTINGS:
        db.close()
        raise PrerequisiteError(f"the index in {out.path} is of another layout: run the "
                                "index stage to build it again")
    return db
