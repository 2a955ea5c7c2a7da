"""``bastion text FILE…``: each file's text on stdout, read by the same sandboxed worker as a sweep.

The files go through :class:`bastion.extractor.Extractor` (the Python API's ``extract_file``
path): the parent detects and hashes each file, one worker in its sandbox reads it under the
same deadline, output and memory caps and with the same external tools (found on PATH; their
versions are not asked, since nothing is keyed on them).  ``-`` reads a document from stdin.
Nothing is written but stdout and stderr: no output directory, and the private scratch
directory (``bastion-api-*`` in the temporary directory) is removed before the command
returns, also on Ctrl-C and SIGTERM.

stdout: the text exactly as a sweep stores it (UTF-8, LF, NFC); with several files each is
preceded by a ``==> FILE <==`` line, as ``head`` does.  On a terminal, the control,
invisible and bidirectional characters a document holds are shown as escapes (ESC as
``\\x1b``, a C1 control as ``\\x9b``; tabs and line feeds kept; ``--json``: as JSON's
``\\u001b``), so a document cannot set the window's title, clear the screen or send the
terminal a device control string (:mod:`bastion.tasks.commands.stdout`); a pipe or a file gets
the stored bytes, and ``--raw`` gets them on a terminal too.  ``--json``: one JSON object per
file and line instead: the record's fields (the verdict), the file's path, size, sha256 and
MIME type, its ``metadata``, its ``embedded`` documents' metadata and its ``outline`` (as the
sidecar keeps them) and its ``text``.  ``--markdown``: the text's Markdown instead (CommonMark
with GFM tables: headings, lists, tables, links as the document has them; docs/readers.md),
read from the same reading; with ``--json``, a ``markdown`` field beside the ``text``.
stderr: one line per file that gave no text (``empty``, ``unsupported``, ``error``) or was
cut short (made safe to show, whatever it quotes).  Exit codes as for a sweep: 0, 2 when a file is an ``error``, 3 when a FILE could
not be read at all (missing, a directory), 1 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, BinaryIO, NoReturn, Sequence

from ..names import shown, shown_text
from .stdout import RAW_HELP, json_shown

EXIT_OK, EXIT_INVALID, EXIT_ERRORS, EXIT_PARTIAL = 0, 1, 2, 3
STDIN = "-"


HELP = "print each file's text (no manifest, no output directory)"
DESCRIPTION = ("read each FILE in a sandboxed worker, as a sweep does, and print its text on "
               "stdout ('-': read stdin); exit 0, 2 when a file is an error, 3 when a FILE "
               "cannot be opened")


def add_parser(sub: Any) -> None:
    """The ``text`` subcommand in ``bastion``'s parser (its help and usage)."""
    add_arguments(sub.add_parser("text", help=HELP, description=DESCRIPTION))


class _Parser(argparse.ArgumentParser):
    """A usage error exits 1 (2 means "a file is an error"), as ``bastion``'s parser."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str]) -> int:
    """``bastion text …`` (from :mod:`bastion.tasks.commands.entry`, before the pipeline loads)."""
    p = _Parser(prog="bastion text", description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(list(argv))
    try:
        return run(args)
    except KeyboardInterrupt:
        print("bastion: interrupted", file=sys.stderr)
        return 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``text`` command's arguments."""
    p.add_argument("files", nargs="+", metavar="FILE", help="a file to read, or - for stdin")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per file (verdict, metadata, text) instead of the text")
    p.add_argument("--markdown", action="store_true",
                   help="print the text's Markdown (headings, lists, tables, links) instead")
    p.add_argument("--name", default=None,
                   help="the file name to choose stdin's reader by (e.g. report.docx)")
    p.add_argument("--no-external", action="store_true",
                   help="built-in readers only: never run pdftotext, tesseract, … "
                        "(also BASTION_NO_EXTERNAL=1)")
    p.add_argument("--raw", action="store_true", help=RAW_HELP)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no line on stderr for empty, unsupported or cut-short files "
                        "(errors are still reported)")


def _record(label: str, path: str | None, result: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"path": path if path is not None else label, "name": result.name,
                         "size": result.size, "sha256": result.sha256, "mime": result.mime}
    d.update(result.verdict.to_json())
    d["metadata"] = result.metadata.to_json()
    d["embedded"] = [{"path": path, "metadata": m.to_json()} for path, m in result.embedded]
    d["outline"] = [{"title": e.title, "page": e.page, "level": e.level}
                    for e in result.outline]
    d["text"] = result.text if result.ok else None
    d.pop("markdown", None)  # (the verdict's flag)
    if result.markdown is not None:
        d["markdown"] = result.markdown
    return d


def _note(label: str, result: Any, quiet: bool) -> None:
    """A line on stderr for a file that is not plainly ok (what a reader says of a document
    may quote it: made safe to show, as every diagnostic is)."""
    v = result.verdict
    if v.status == "error":
        line = f"{label}: error ({v.error_kind}): {v.error}"
    elif quiet:
        return
    elif v.status != "ok":
        line = f"{label}: {v.status}" + (f": {v.error}" if v.error else "")
    elif v.limit:
        line = f"{label}: text cut short ({v.limit})"
    else:
        return
    print(f"bastion: {shown(line)}", file=sys.stderr)


def _read_stdin(stream: BinaryIO) -> bytes:
    chunks = []
    while chunk := stream.read(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def run(args: Any) -> int:
    """Read ``args.files`` and print them; the exit code."""
    if args.files.count(STDIN) > 1:
        print("bastion: error: '-' (stdin) may be given once", file=sys.stderr)
        return EXIT_INVALID
    if args.name is not None and STDIN not in args.files:
        print("bastion: error: --name names stdin's document: give '-' too", file=sys.stderr)
        return EXIT_INVALID
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the Extractor: workers and scratch go


def _run(args: Any) -> int:
    from bastion.extractor import Extractor
    from bastion.readers.base import Limits

    out = sys.stdout.buffer
    # a terminal gets a document's control characters as escapes (--raw: as they are)
    tty = not getattr(args, "raw", False) and _isatty(sys.stdout)
    several = len(args.files) > 1
    code = EXIT_OK
    printed = 0
    tools = None if args.no_external else "auto"
    # the text's languages only when they are printed (--json): their model costs a worker
    # ≈ 0.6 s of CPU to load, three times the rest of a small file's reading
    limits = Limits(name_languages=bool(args.json), external_off=tools is None
                    or os.environ.get("BASTION_NO_EXTERNAL") == "1")
    with Extractor(limits=limits, tools=tools, tool_versions=False,
                   markdown=bool(args.markdown)) as ex:
        ex.start()  # the worker boots while this process hashes and types the first file
        for label in args.files:
            try:
                result, path = _extract(ex, label, args)
            except (OSError, ValueError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                print(f"bastion: {label}: cannot read: {why}", file=sys.stderr)
                code = EXIT_PARTIAL
                continue
            if result.verdict.status == "error" and code == EXIT_OK:
                code = EXIT_ERRORS
            _note(label, result, args.quiet)
            try:
                _print(out, label, path, result, args, tty,
                       header=several, first=not printed)
                printed += 1
            except BrokenPipeError:  # `bastion text big.pdf | head`: the reader has enough
                _quiet_stdout()
                return code
    return code


def _extract(ex: Any, label: str, args: Any) -> tuple[Any, str | None]:
    """The result of reading ``label`` (a file, or ``-``: standard input), and its absolute
    path (None for standard input)."""
    if label == STDIN:
        return ex.extract_bytes(_read_stdin(sys.stdin.buffer), args.name or "stdin"), None
    return ex.extract_file(label), os.path.abspath(label)


def _print(out: Any, label: str, path: str | None, result: Any, args: Any, tty: bool, *,
           header: bool, first: bool) -> None:
    """One document's output: its record (``--json``), or its text or Markdown after a
    ``==>`` header when several are printed; escaped on a terminal."""
    if args.json:
        line = json.dumps(_record(label, path, result), ensure_ascii=False, sort_keys=False)
        out.write(((json_shown(line) if tty else line) + "\n").encode("utf-8", "replace"))
    else:
        if header:
            out.write(f"{'' if first else chr(10)}==> {shown(label) if tty else label} <==\n"
                      .encode("utf-8", "surrogateescape"))
        text = (result.markdown if args.markdown else result.text) or ""
        if tty and text:
            text = shown_text(text) + ("" if text.endswith("\n") else "\n")
        out.write(text.encode("utf-8", "replace"))
    out.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _quiet_stdout() -> None:
    """stdout's reader went away: point it at /dev/null so the interpreter's final flush
    does not complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

