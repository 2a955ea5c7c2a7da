"""``bastion search [OUT] QUERY``: the texts of the index that match a full-text query, best
first (tasks/index/query.py).

For each hit, the walked files that name its text, one ``ROOT/PATH`` per line, then its
snippet indented by four spaces (the matched words in bold on a terminal), then a blank line;
``--json`` prints one object per hit and line instead (rank, score, text, paths, path_count,
snippet, highlights).  ``--limit N`` (default 10) caps the hits.  Exit codes as grep's: 0 a
text matched, 1 none did, 2 trouble (a query FTS5 refuses, no index, no output: one line on
stderr).  OUT (the first of two arguments) defaults to the output of ``manifest.yaml`` in the
current directory.  When the index is behind the records (an extract ran since the index
stage), a warning says so: run the index stage (``bastion index``, or a sweep).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bastion.errors import BastionError

from ..names import shown
from .stdout import RAW_HELP, Stdout, safe

__all__ = ["add_parser", "run"]

EXIT_FOUND, EXIT_NONE, EXIT_TROUBLE = 0, 1, 2
SHOWN_PATHS = 10  # paths printed per hit (--json lists up to query.MAX_PATHS)
BOLD, PLAIN = "\x1b[1m", "\x1b[0m"

HELP = "full-text search of the index (the index stage): ranked files and snippets"
DESCRIPTION = ("search the output's full-text index (SQLite FTS5 query syntax: words, "
               "\"a phrase\", OR, NOT, NEAR(), prefix*) and print the files that match, best "
               "first (bm25), each with a snippet; OUT defaults to the output of "
               "./manifest.yaml; exit 0 found, 1 none, 2 trouble")


def add_parser(sub: Any) -> Any:
    p = sub.add_parser("search", help=HELP, description=DESCRIPTION)
    p.add_argument("args", nargs="+", metavar="[OUT] QUERY",
                   help="the output directory (optional), then the query (quote it: one "
                        "argument)")
    p.add_argument("--json", action="store_true", help="one JSON object per hit")
    p.add_argument("--limit", type=int, default=10, metavar="N",
                   help="at most N hits (default 10)")
    p.add_argument("--raw", action="store_true", help=RAW_HELP)
    p.usage_exit = EXIT_TROUBLE
    return p


def _say(line: str) -> None:
    print(f"bastion: search: {shown(line)}", file=sys.stderr)


def run(args: Any) -> int:
    from ..index.query import MAX_LIMIT, search
    from ..output.readonly import open_read
    from .stored import default_output

    if len(args.args) > 2:
        _say(f"give OUT and one QUERY (quote a query of several words): got {len(args.args)} "
             "arguments")
        return EXIT_TROUBLE
    if not 1 <= args.limit <= MAX_LIMIT:
        _say(f"--limit must be between 1 and {MAX_LIMIT}")
        return EXIT_TROUBLE
    out, query = (args.args[0], args.args[1]) if len(args.args) == 2 else (None, args.args[0])
    try:
        with open_read(default_output() if out is None else out) as read:
            results = search(read, query, args.limit)
    except BastionError as e:
        _say(str(e))
        return EXIT_TROUBLE
    if results.behind:
        _say("warning: the index is behind the records (an extract ran since the index "
             "stage): run bastion index, or sweep")
    stdout = Stdout(raw=getattr(args, "raw", False))
    for hit in results.hits:
        if args.json:
            stdout.write(json.dumps(hit.to_json()) + "\n")
        else:
            _print_hit(stdout, hit)
        if stdout.closed:
            break
    stdout.flush()
    return EXIT_FOUND if results.hits else EXIT_NONE


def _print_hit(stdout: Stdout, hit: Any) -> None:
    for place in hit.paths[:SHOWN_PATHS]:
        stdout.line(str(place))
    if hit.path_count > SHOWN_PATHS:
        stdout.write(f"    (and {hit.path_count - SHOWN_PATHS} more files with the same text)\n")
    stdout.write("    " + _marked(hit.snippet, hit.highlights, stdout.tty) + "\n\n")


def _marked(snippet: str, spans: tuple[tuple[int, int], ...], tty: bool) -> str:
    """The snippet, made safe on a terminal, its matched words in bold there."""
    if not tty:
        return snippet
    parts, at = [], 0
    for start, end in spans:
        parts.append(safe(snippet[at:start]))
        parts.append(BOLD + safe(snippet[start:end]) + PLAIN)
        at = end
    parts.append(safe(snippet[at:]))
    return "".join(parts)
