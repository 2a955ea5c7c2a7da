"""An output's records and texts as the commands that read them see them (``show``, ``grep``,
``search``): the output found, a walked file's record by the path a person gives, the texts.

They read the output's database (``.bastion/verdicts.sqlite``, the system of record:
extract.jsonl is the export of its ``records`` table), opened read-only with no lock, so they
work while a sweep writes the output; each query sees the last committed state.  While an
extract run rewrites the records (or after one was killed) the table may not be whole:
:meth:`Stored.whole` says so, and the commands warn.

A path is named as ``grep`` and ``search`` print it, ``ROOT/PATH`` (the root's name in the
manifest, then the path relative to the root), or as a path relative to a root when only one
root has it, or as the file's path on disk (absolute, or relative to the current directory)
under a root's directory.  Without OUT, the output is the one ``manifest.yaml`` in the
current directory names (as the stage commands find it).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bastion.errors import NotAnOutputError, PrerequisiteError

from ..database import DB_NAME
from ..output.atomic import identity
from ..output.readonly import ReadOutput, open_read
from ..walk.table import decode, encode

__all__ = ["Stored", "Named", "default_output", "open_stored", "RECORDS"]

RECORDS = "extract.jsonl"


def default_output() -> Path:
    """The output of ``manifest.yaml`` in the current directory (PrerequisiteError when
    there is none, or it has several roots and so no default output)."""
    from ..config import RunConfig, load

    here = Path("manifest.yaml")
    if not here.is_file():
        raise PrerequisiteError(f"no output directory given and no manifest.yaml in "
                                f"{os.getcwd()} to find one: name the output (OUT)")
    _, out = load(RunConfig(manifest=here.resolve()))
    return out


@dataclass(frozen=True)
class Named:
    """A walked file whose record names a text: its root, path and the text's store name,
    and how many records name that text."""

    root: str
    path: str
    stem: str
    count: int


class Stored:
    """The records and texts of one output, read-only (see the module)."""

    def __init__(self, out: ReadOutput) -> None:
        self.out = out
        self.path = out.path
        if not out.exists(DB_NAME):
            raise NotAnOutputError(f"{out.path} holds no records (no {DB_NAME}): sweep it "
                                   "first")
        self.db = out.sqlite(DB_NAME)
        try:
            self.db.execute("SELECT 1 FROM records LIMIT 1").fetchall()
        except sqlite3.Error as e:
            self.db.close()
            raise NotAnOutputError(f"{out.path}: the database has no records ({e}): run "
                                   "the extract stage") from None

    def close(self) -> None:
        self.db.close()
        self.out.close()

    def __enter__(self) -> "Stored":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------

    def whole(self) -> bool:
        """Whether the records are whole: extract.jsonl is their export (no extract run is
        writing them, none was killed while it did)."""
        try:
            row = self.db.execute("SELECT value FROM records_state WHERE name = 'export'"
                                  ).fetchone()
        except sqlite3.Error:
            return False
        return row is not None and json.loads(row[0]) == identity(self.out.od, RECORDS) \
            and json.loads(row[0]) is not None

    def run(self) -> int:
        """The number of the last extract run (a repeat offender's backoff counts from it)."""
        row = self.db.execute("SELECT value FROM counters WHERE name = 'runs'").fetchone()
        return int(row[0]) if row else 0

    def roots(self) -> dict[str, Path]:
        """The walked roots: name → directory (as the walk recorded them)."""
        found: dict[str, Path] = {}
        try:
            for name, settings in self.db.execute("SELECT root, settings FROM walk_roots"):
                try:
                    found[name] = Path(json.loads(settings)[0])
                except (ValueError, IndexError, TypeError):
                    continue
        except sqlite3.Error:
            pass
        return found

    # -- one file ---------------------------------------------------------------------------

    def record_row(self, root: str, path: str) -> tuple | None:
        """The row extract.jsonl's line of ``root/path`` is made from (tasks/extract/table.py
        ``SELECT``), or None when there is no record of it."""
        from ..extract.table import BY_KEY, SELECT

        rel, _, name = path.rpartition("/")
        return self.db.execute(SELECT + BY_KEY, (root, encode(rel), encode(name))).fetchone()

    def record(self, row: tuple) -> dict:
        """The record of a :meth:`record_row` row, exactly as extract.jsonl holds it."""
        from ..extract.table import line_of

        return json.loads(line_of(row, self.run()))

    def walked(self, root: str, path: str) -> bool:
        rel, _, name = path.rpartition("/")
        try:
            return self.db.execute("SELECT 1 FROM walk WHERE root = ? AND dir = ? AND name = ?",
                                   (root, encode(rel), encode(name))).fetchone() is not None
        except sqlite3.Error:
            return False

    def resolve(self, given: str) -> list[tuple[str, str]]:
        """The (root, path) pairs ``given`` may name (see the module): one, several (an
        ambiguous relative path), or none."""
        roots = self.roots()
        on_disk = self._on_disk(given, roots)
        if on_disk:
            return on_disk
        head, _, rest = given.strip("/").partition("/")
        if head in roots and rest and self._known(head, rest):
            return [(head, rest)]
        rel = given.removeprefix("./").strip("/")
        return [(root, rel) for root in sorted(roots) if rel and self._known(root, rel)]

    def _known(self, root: str, path: str) -> bool:
        return self.record_row(root, path) is not None or self.walked(root, path)

    def _on_disk(self, given: str, roots: dict[str, Path]) -> list[tuple[str, str]]:
        """``given`` as a path on disk under a root's directory (absolute, or relative to the
        current directory and existing there)."""
        if not (os.path.isabs(given) or os.path.lexists(given)):
            return []
        found = []
        candidates = {os.path.abspath(given)}
        try:
            candidates.add(str(Path(os.path.realpath(os.path.dirname(os.path.abspath(given))))
                               / os.path.basename(given)))
        except OSError:
            pass
        for name, top in sorted(roots.items()):
            for where in sorted(candidates):
                try:
                    rel = Path(where).relative_to(top).as_posix()
                except ValueError:
                    continue
                if rel != "." and (name, rel) not in found and self._known(name, rel):
                    found.append((name, rel))
        return found

    # -- texts ------------------------------------------------------------------------------

    def text(self, stem: str) -> bytes:
        """The stored text ``stem`` (OSError when the store does not hold it)."""
        return self.out.read(f"extract/{stem[:2]}/{stem}.txt")

    def named(self) -> Iterator[Named]:
        """Every record that names a text, in (root, path) order, with how many records
        name the same text (an indexed count), streamed."""
        cursor = self.db.execute(
            "SELECT r.root, r.path, r.stem, (SELECT count(*) FROM records o "
            "WHERE o.stem = r.stem) FROM records r WHERE r.stem IS NOT NULL "
            "ORDER BY r.root, r.path")
        try:
            while rows := cursor.fetchmany(1000):
                for root, path, stem, count in rows:
                    yield Named(root, decode(path), stem, count)
        finally:
            cursor.close()


def open_stored(out: str | os.PathLike[str] | None) -> Stored:
    """The records and texts of the output ``out`` (None: :func:`default_output`)."""
    read = open_read(default_output() if out is None else out)
    try:
        return Stored(read)
    except BaseException:
        read.close()
        raise
