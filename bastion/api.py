"""bastion's Python API: one document (:func:`extract_file`, :func:`extract_bytes`), a whole
manifest (:func:`sweep`), and an output directory read back (:func:`records`,
:func:`read_summary`, a walked file's stored text :func:`show`, the full-text index
:func:`search`).  docs/api.md shows each with a runnable example.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from bastion.readers.base import Limits

from .errors import LockedError, OutputError
from .extractor import Result, Tools, default_extractor
from .outputs import Summary, extract_record, read_summary, records

if TYPE_CHECKING:
    from bastion.tasks.index.query import SearchResults
    from bastion.tasks.records import ExtractRecord

__all__ = ["extract_file", "extract_bytes", "sweep", "records", "read_summary", "search",
           "show", "Shown"]


def extract_file(path: str | os.PathLike[str], *, limits: Limits | None = None,
                 tools: Tools = "auto", name: str | None = None,
                 markdown: bool = False) -> Result:
    """Read one file in a sandboxed worker (deadline, output and memory caps) and return its
    :class:`Result`.  A document that cannot be read is a result with ``status`` ``error``,
    never an exception; a path that is missing, a directory or not a regular file raises
    OSError or ValueError as ``open`` would.

    ``limits``: the per-document budgets (default :class:`bastion.readers.base.Limits`); ``tools``:
    ``"auto"`` (the known tools on PATH), ``None`` (built-in readers only) or a list of tool
    names; ``name``: the file name to choose the reader by (default the path's);
    ``markdown=True``: the result holds the text's Markdown too (``Result.markdown``).  The
    workers are kept for the next call with the same settings, and stopped at exit.
    """
    return default_extractor(limits, tools, markdown).extract_file(path, name=name)


def extract_bytes(data: bytes, name: str | None = None, *, limits: Limits | None = None,
                  tools: Tools = "auto", markdown: bool = False) -> Result:
    """:func:`extract_file` for a document in memory; ``name`` (e.g. ``"q3.xlsx"``) helps
    choose the reader as a file name would (the content decides first)."""
    return default_extractor(limits, tools, markdown).extract_bytes(data, name)


class _Tee(io.TextIOBase):
    """stderr during a sweep: kept (for the error to raise), and shown unless quiet."""

    def __init__(self, stream: Any, show: bool) -> None:
        self.stream, self.show, self.lines = stream, show, io.StringIO()

    def write(self, text: str) -> int:
        self.lines.write(text)
        if self.show:
            self.stream.write(text)
        return len(text)

    def flush(self) -> None:
        if self.show:
            self.stream.flush()


def sweep(manifest: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
          jobs: int | None = None, *, no_external: bool = False, quiet: bool = True,
          stages: Sequence[str] | None = None, require_signed: bool = False,
          trusted_keys: str | os.PathLike[str] | None = None) -> Summary:
    """Run the manifest's stages (or ``stages``: ``["walk"]``, ``["extract"]`` to extract
    from the walk already in ``out``) exactly as ``bastion sweep`` does, and return the
    :class:`Summary` the run wrote.

    Where the command would exit 1 this raises (:mod:`bastion.errors`): ManifestError,
    SignatureError, PrerequisiteError, LockedError, OutputError.  ``error`` records (exit 2)
    and a walk that could not read everything (exit 3) are not exceptions: see
    ``Summary.errors``, ``Summary.partial`` and ``Summary.exit_code``.  ``quiet`` (default)
    prints nothing; ``quiet=False`` shows the progress and summary lines on stderr.
    """
    from bastion.tasks.cli import EXIT_INVALID, EXTRACT_SLICE, run_stages
    from bastion.tasks.config import RunConfig, forget_manifests, jobs_error, load
    from bastion.tasks.output.atomic import OutputLock
    from bastion.tasks.extract.run import check_stages
    from bastion.tasks.manifest import STAGES

    problem = jobs_error(jobs)
    if problem is not None:
        raise ValueError(problem)
    forget_manifests()  # a manifest edited (or re-signed) since the last call is read afresh
    only_extract = stages is not None and "walk" not in stages
    cfg = RunConfig(manifest=Path(manifest).resolve(),
                    out=Path(out).resolve() if out is not None else None,
                    no_external=no_external, require_signed=require_signed,
                    trusted_keys=Path(trusted_keys) if trusted_keys else None,
                    jobs=jobs or 0, quiet=quiet, walk="reuse" if only_extract else "run",
                    slice=EXTRACT_SLICE)
    loaded, out_dir = load(cfg)
    wanted = list(stages) if stages is not None else list(loaded.stages)
    run: list[str] = [s for s in STAGES if s in wanted]  # always in this order
    if not run or len(run) != len(set(wanted)):
        raise ValueError(f"stages must be among {', '.join(STAGES)}, not {wanted!r}")
    cfg = dataclasses.replace(cfg, stages=tuple(run))
    check_stages(loaded, out_dir, run)
    lock = OutputLock.acquire(out_dir)  # a held lock is a LockedError here, not a printed line
    tee = _Tee(sys.stderr, show=not quiet)
    saved = sys.stderr
    sys.stderr = tee
    try:
        rc = run_stages(cfg, run, lock=lock)
    finally:
        sys.stderr = saved
        lock.release()
    if rc == EXIT_INVALID:
        said = [ln.removeprefix("bastion: error: ") for ln in tee.lines.getvalue().splitlines()
                if ln.startswith("bastion: error: ")]
        message = said[-1] if said else f"the sweep of {loaded.path.name} failed"
        raise (LockedError if "another bastion run" in message else OutputError)(message)
    summary = read_summary(out_dir)
    if "extract" not in run:
        summary = Summary(summary.out, summary.walk, None)
    return summary


def search(out: str | os.PathLike[str], query: str, *, limit: int = 10) -> SearchResults:
    """The texts of the output ``out``'s full-text index (the index stage) that match
    ``query`` (SQLite FTS5's query syntax: docs/search.md), best first (bm25), at most
    ``limit``: a frozen :class:`bastion.SearchResults` of :class:`bastion.Hit` s, each with
    its rank, score (higher is better), store file, the walked paths that name it
    (:class:`bastion.Place`) and a snippet with the matched words' spans.

    Raises QueryError (a query FTS5 refuses, or an empty one), PrerequisiteError (no index
    in ``out``), NotAnOutputError (``out`` is not a bastion output); ValueError for a
    ``limit`` outside 1…10,000."""
    from bastion.tasks.index.query import search as search_index
    from bastion.tasks.output.readonly import open_read

    with open_read(out) as read:
        return search_index(read, query, limit)


@dataclass(frozen=True)
class Shown:
    """A walked file's record and its stored text (``None`` unless the record is ``ok``)."""

    record: ExtractRecord
    text: str | None


def show(out: str | os.PathLike[str], path: str) -> Shown:
    """The record and stored text of the walked file ``path`` of the output ``out``, named as
    ``bastion show`` takes it: ``ROOT/PATH``, a path relative to the one root that has it,
    or the file's path on disk under a root.  LookupError when it names no walked file,
    several, or one not extracted yet; NotAnOutputError when ``out`` is not an output."""
    from bastion.tasks.commands.show import TEXT
    from bastion.tasks.commands.stored import open_stored

    with open_stored(out) as stored:
        found = stored.resolve(path)
        if len(found) != 1:
            raise LookupError(f"{path}: names {'no' if not found else len(found)} walked "
                              f"file(s) in {out}" + ("" if not found else ": " + ", ".join(
                                  f"{r}/{p}" for r, p in found)))
        row = stored.record_row(*found[0])
        if row is None:
            raise LookupError(f"{path}: walked, not extracted yet")
        record = stored.record(row)
        rel = TEXT(record)
        text = stored.out.read(rel).decode("utf-8", "replace") if rel is not None else None
    return Shown(extract_record(record), text)
