"""``bastion show [OUT] PATH…``: the stored text of walked files, by the path a person gives.

A PATH is ``ROOT/PATH`` as ``grep`` and ``search`` print it, a path relative to a root (when
one root only has it), or the file's own path on disk under a root (tasks/commands/stored.py);
OUT (the first argument, when it is a bastion output and a PATH follows) defaults to the
output of ``manifest.yaml`` in the current directory.  The text is printed as the store holds
it (UTF-8, LF, NFC; a PDF's pages separated by a form feed); with several PATHs each after a
``==> ROOT/PATH <==`` line, as ``head`` does.  On a terminal, control characters in the text are
shown as escapes (tasks/commands/stdout.py).  ``--json``: one object per PATH and line instead,
``{"root", "path", "record", "text"}``: the record exactly as extract.jsonl holds it, and the
text (``null`` unless the record is ``ok``).  ``--markdown``: the Markdown rendering stored
beside the text (an output swept with ``markdown: true``) instead; a record without one is a
line on stderr and exit 1.

A PATH that names no walked file, names several (a relative path under two roots), was walked
but not extracted yet, or whose record is not ``ok`` (empty, unsupported, error, skipped) is
one line on stderr, and the exit code is 1; the other PATHs are still shown.  The stored file
a record is shown by is :data:`TEXT`'s choice (a function of the record), so another view of
the same record (a Markdown rendering) is one more such function.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from bastion.errors import BastionError

from ..names import shown
from .stdout import RAW_HELP, Stdout
from .stored import Stored, open_stored

__all__ = ["add_parser", "run", "TEXT", "MARKDOWN", "FileOf"]

EXIT_OK, EXIT_NOT_SHOWN = 0, 1

# the store file a record is shown by (relative to the output), or None: the plain text
FileOf = Callable[[dict[str, Any]], "str | None"]


def TEXT(record: dict[str, Any]) -> str | None:
    return record.get("text") if record.get("status") == "ok" else None


def MARKDOWN(record: dict[str, Any]) -> str | None:
    """The record's Markdown rendering (a run with ``markdown: true``), a name of the store's
    own form only (tasks/extract/table.py's ``markdown_of``)."""
    from ..extract.table import markdown_of

    found = markdown_of(Path(""), record) if record.get("status") == "ok" else None
    return str(found) if found is not None else None


HELP = "print the stored text of walked files (by path)"
DESCRIPTION = ("print the text bastion stored for each walked PATH (ROOT/PATH as grep prints "
               "it, a path relative to a root, or the file's path on disk); OUT defaults to "
               "the output of ./manifest.yaml; exit 1 when a PATH was not walked or its "
               "record is not ok")


def add_parser(sub: Any) -> Any:
    p = sub.add_parser("show", help=HELP, description=DESCRIPTION)
    p.add_argument("args", nargs="+", metavar="[OUT] PATH",
                   help="the output directory (optional), then the walked files")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per PATH: its record (as extract.jsonl holds it) "
                        "and its text")
    p.add_argument("--markdown", action="store_true",
                   help="the Markdown rendering stored beside the text (an output swept with "
                        "'markdown: true' in its manifest) instead of the plain text")
    p.add_argument("--raw", action="store_true", help=RAW_HELP)
    return p


def split_out(args: list[str]) -> tuple[str | None, list[str]]:
    """(OUT, PATHs): the first argument is OUT when a PATH follows and it is a directory
    holding a bastion output."""
    from ..output.tag import is_tagged

    if len(args) >= 2 and os.path.isdir(args[0]):
        try:
            fd = os.open(args[0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None, args
        try:
            if is_tagged(fd):
                return args[0], args[1:]
        finally:
            os.close(fd)
    return None, args


def _say(line: str) -> None:
    print(f"bastion: show: {shown(line)}", file=sys.stderr)


def run(args: Any, file_of: FileOf | None = None) -> int:
    if file_of is None:
        file_of = MARKDOWN if getattr(args, "markdown", False) else TEXT
    out, paths = split_out(list(args.args))
    try:
        stored = open_stored(out)
    except BastionError as e:
        _say(str(e))
        return EXIT_NOT_SHOWN
    with stored:
        if not stored.whole():
            _say(f"warning: the records in {stored.path} are being written (an extract run is "
                 "going on, or one was killed): what is shown may change")
        return _show(stored, paths, args.json, file_of, getattr(args, "raw", False))


def _show(stored: Stored, paths: list[str], as_json: bool, file_of: FileOf,
          raw: bool = False) -> int:
    stdout = Stdout(raw=raw)
    code = EXIT_OK
    printed = 0
    for given in paths:
        found = _one_walked(stored, given)
        row = stored.record_row(*found) if found is not None else None
        if found is not None and row is None:
            _say(f"{found[0]}/{found[1]}: walked, not extracted yet (run the extract stage)")
        if found is None or row is None:
            code = EXIT_NOT_SHOWN
            continue
        root, path = found
        record = stored.record(row)
        text = _text_of(stored, f"{root}/{path}", record, file_of)
        if text is None:
            code = EXIT_NOT_SHOWN
        if as_json:
            stdout.write(json.dumps({"root": root, "path": path, "record": record,
                                     "text": text}) + "\n")
        elif text is not None:
            if len(paths) > 1:
                label = f"{root}/{path}"
                shown_label = shown(label) if stdout.tty else label
                stdout.write(("\n" if printed else "") + f"==> {shown_label} <==\n")
            stdout.text(text)
            printed += 1
        if stdout.closed:
            return code
    stdout.flush()
    return code


def _one_walked(stored: Stored, given: str) -> tuple[str, str] | None:
    """The one walked file (root, path) ``given`` names; None (said on stderr) when it
    names none or several."""
    found = stored.resolve(given)
    if not found:
        _say(f"{given}: no walked file of that name in {stored.path}")
        return None
    if len(found) > 1:
        names = ", ".join(f"{r}/{p}" for r, p in found)
        _say(f"{given}: names {len(found)} walked files ({names}): give ROOT/PATH")
        return None
    root, path = found[0]
    return root, path


def _text_of(stored: Stored, label: str, record: dict[str, Any],
             file_of: FileOf) -> str | None:
    """The stored file ``file_of`` chooses for a record, read; None (said on stderr) when
    the record has none (not ok, no Markdown) or it cannot be read."""
    rel = file_of(record)
    if rel is None and file_of is MARKDOWN and record.get("status") == "ok":
        _say(f"{label}: no Markdown stored (sweep with 'markdown: true' in the manifest)")
        return None
    if rel is None:
        why = record.get("error")
        kind = f" ({record['error_kind']})" if record.get("error_kind") else ""
        _say(f"{label}: {record.get('status')}{kind}{': ' + why if why else ''}: no text")
        return None
    try:
        return stored.out.read(rel).decode("utf-8", "replace")
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        _say(f"{label}: cannot read its text {rel}: {why}")
        return None
