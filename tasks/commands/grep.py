"""``bastion grep [-i] [-l] [-c] PATTERN [OUT]``: a regular expression over the stored texts.

Every walked file whose record is ``ok`` is searched in its stored text, line by line (lines
split at LF; a PDF's form feed stays in its line), and each matching line is printed as
``ROOT/PATH:LINE:TEXT``, line numbers from 1; ``-l`` prints each matching file's
``ROOT/PATH`` once, ``-c`` its ``ROOT/PATH:COUNT`` (files without a match are not listed, as
ripgrep does), ``-i`` ignores case.  PATTERN is a Python regular expression (the ``re``
module's syntax: docs/search.md).  Exit codes are grep's: 0 a line matched, 1 none did, 2
trouble (a PATTERN that does not compile, no output, a text the store does not hold: said on
stderr, one line each; the search goes on).

The files come in (root, path) order (extract.jsonl's) from the output's records, streamed:
memory stays bounded at a million files.  Each distinct text is read once, though several
files name it (copies of the same bytes): the matches of a text that more records name are
kept in a private temporary SQLite file (on disk, removed at the end) until its last file has
been printed, so every such file is printed with its lines, in its place in the order.

A closed pipe (``| head``) ends the search quietly with the exit code so far
(tasks/commands/stdout.py); names and lines are escaped on a terminal.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from typing import Any, Iterator

from bastion.errors import BastionError

from ..names import shown
from .stdout import RAW_HELP, Stdout
from .stored import Named, Stored, open_stored

__all__ = ["add_parser", "run", "matching_lines"]

EXIT_FOUND, EXIT_NONE, EXIT_TROUBLE = 0, 1, 2

HELP = "search the stored texts for a regular expression (grep's output and exit codes)"
DESCRIPTION = ("print ROOT/PATH:LINE:TEXT for every line of a stored text that matches "
               "PATTERN (a Python regular expression), for every walked file that names the "
               "text; OUT defaults to the output of ./manifest.yaml; exit 0 found, 1 none, 2 "
               "trouble")

# constructs that see past a line's ends: a whole text searched at once could miss a line
# that matches alone (\A, \Z, lookarounds), so those patterns are tried line by line only
_LINE_ONLY = re.compile(r"\\[AZz]|\(\?<?[=!]")


def add_parser(sub: Any) -> Any:
    p = sub.add_parser("grep", help=HELP, description=DESCRIPTION)
    p.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    p.add_argument("-l", "--files-with-matches", action="store_true",
                   help="print only the paths of files with a matching line")
    p.add_argument("-c", "--count", action="store_true",
                   help="print ROOT/PATH:COUNT, the matching lines of each file with any")
    p.add_argument("--raw", action="store_true", help=RAW_HELP)
    p.add_argument("pattern", metavar="PATTERN")
    p.add_argument("out", nargs="?", metavar="OUT",
                   help="the output directory (default: the output of ./manifest.yaml)")
    p.usage_exit = EXIT_TROUBLE  # grep's code for a usage error
    return p


def _say(line: str) -> None:
    print(f"bastion: grep: {shown(line)}", file=sys.stderr)


def run(args: Any) -> int:
    flags = re.IGNORECASE if args.ignore_case else 0
    try:
        rx = re.compile(args.pattern, flags | re.MULTILINE)
    except (re.error, OverflowError, RecursionError) as e:
        _say(f"the pattern {args.pattern!r} is not a regular expression: {e}")
        return EXIT_TROUBLE
    try:
        stored = open_stored(args.out)
    except BastionError as e:
        _say(str(e))
        return EXIT_TROUBLE
    with stored:
        if not stored.whole():
            _say(f"warning: the records in {stored.path} are being written (an extract run is "
                 "going on, or one was killed): files may be missing")
        mode = "files" if args.files_with_matches else "count" if args.count else "lines"
        return Grep(stored, rx, mode, raw=getattr(args, "raw", False)).run()


def matching_lines(rx: re.Pattern[str], text: str, first: bool = False
                   ) -> Iterator[tuple[int, str]]:
    """(line number, line) of each line of ``text`` that ``rx`` matches (per line, as grep
    matches; the LF that ends the last line starts no line of its own), in order; only the
    first when ``first``."""
    if not text:
        return
    stop = len(text) - 1 if text.endswith("\n") else len(text)  # where the last line ends
    if _LINE_ONLY.search(rx.pattern):
        for n, line in enumerate(text[:stop].split("\n"), 1):
            if rx.search(line):
                yield n, line
                if first:
                    return
        return
    pos, lineno, counted = 0, 1, 0
    while pos <= stop:
        m = rx.search(text, pos, stop)
        if m is None:
            return
        start = max(text.rfind("\n", 0, m.start()) + 1, pos)
        end = text.find("\n", start, stop)
        end = stop if end < 0 else end
        line = text[start:end]
        lineno += text.count("\n", counted, start)
        counted = start
        if rx.search(line):  # matched within the line alone, not only across lines
            yield lineno, line
            if first:
                return
        pos = end + 1


class Grep:
    """One search (see the module)."""

    def __init__(self, stored: Stored, rx: re.Pattern[str], mode: str, *,
                 raw: bool = False) -> None:
        self.stored = stored
        self.rx = rx
        self.mode = mode
        self.stdout = Stdout(raw=raw)
        self.found = False
        self.trouble = False
        self._kept: sqlite3.Connection | None = None

    @property
    def kept(self) -> sqlite3.Connection:
        """The matches of texts that more records name, until their last file is printed:
        a private temporary database on disk (SQLite's, removed when closed)."""
        if self._kept is None:
            self._kept = sqlite3.connect("", isolation_level=None)
            self._kept.execute("CREATE TABLE texts (stem TEXT PRIMARY KEY, matches INTEGER, "
                               "left INTEGER) WITHOUT ROWID")
            self._kept.execute("CREATE TABLE lines (stem TEXT, n INTEGER, line TEXT, "
                               "PRIMARY KEY (stem, n)) WITHOUT ROWID")
        return self._kept

    def run(self) -> int:
        try:
            for named in self.stored.named():
                self._file(named)
                if self.stdout.closed:
                    break
            self.stdout.flush()
        finally:
            if self._kept is not None:
                self._kept.close()
        if self.trouble:
            return EXIT_TROUBLE
        return EXIT_FOUND if self.found else EXIT_NONE

    def _file(self, named: Named) -> None:
        label = f"{named.root}/{named.path}"
        if named.count > 1:
            row = self.kept.execute("SELECT matches, left FROM texts WHERE stem = ?",
                                    (named.stem,)).fetchone()
            if row is not None:
                self._print_kept(named, label, row[0], row[1])
                return
        try:
            text = self.stored.text(named.stem).decode("utf-8", "replace")
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            _say(f"{label}: cannot read its text extract/{named.stem[:2]}/{named.stem}.txt: "
                 f"{why}")
            self.trouble = True
            return
        keep = named.count > 1
        matches = 0
        lines = matching_lines(self.rx, text, first=self.mode == "files" and not keep)
        for n, line in lines:
            matches += 1
            self.found = True
            if keep and self.mode == "lines":
                self.kept.execute("INSERT INTO lines VALUES (?, ?, ?)", (named.stem, n, line))
            if self.mode == "lines":
                self.stdout.line(label, str(n), text=line)
                if self.stdout.closed:
                    return
            elif self.mode == "files" and not keep:
                break
        if keep:
            self.kept.execute("INSERT INTO texts VALUES (?, ?, ?)",
                              (named.stem, matches, named.count - 1))
        self._summary(label, matches)

    def _print_kept(self, named: Named, label: str, matches: int, left: int) -> None:
        if matches:
            self.found = True
        if self.mode == "lines" and matches:
            cursor = self.kept.execute("SELECT n, line FROM lines WHERE stem = ? ORDER BY n",
                                       (named.stem,))
            while rows := cursor.fetchmany(1000):
                for n, line in rows:
                    if not self.stdout.line(label, str(n), text=line):
                        return
        self._summary(label, matches)
        if left <= 1:  # its last file: the text's matches can go
            self.kept.execute("DELETE FROM texts WHERE stem = ?", (named.stem,))
            self.kept.execute("DELETE FROM lines WHERE stem = ?", (named.stem,))
        else:
            self.kept.execute("UPDATE texts SET left = ? WHERE stem = ?",
                              (left - 1, named.stem))

    def _summary(self, label: str, matches: int) -> None:
        if not matches:
            return
        self.found = True
        if self.mode == "files":
            self.stdout.line(label)
        elif self.mode == "count":
            self.stdout.line(label, str(matches))
