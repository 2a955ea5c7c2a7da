"""A document's answer, trusted for nothing: parsed and checked field by field, its text file the parent's own.

The parent (:class:`bastion.readers.runtime.pool.WorkerPool`) makes each job's text file
(:meth:`Answers.text_file`: in a directory only it can reach; the document's process gets a
write-only descriptor of it, never its path) and reads each answer line through
:class:`Answers`: :func:`parse` (the one place an answer's bytes become a value: the one schema
of answers, :mod:`bastion.readers.runtime.schema`, bounds the bytes before the parse and types
and bounds every field), then the job it names, its ``chars`` against its text's size, and the
text named, which must be the file this job was given, still a regular file of one link within
the output cap.  Whatever fails — and any exception at all while an answer is read — is a
:class:`~bastion.readers.runtime.worker.Misbehaved` of kind ``worker``: that document's
``error`` record; the pool kills and replaces the worker, and the run goes on.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import Limits
from .verdict import Status, Verdict
from .handout import Misbehaved, Sent
from .job import Job
from . import schema

_TEXT_NAME = re.compile(r"t[0-9]{1,12}\.txt")
_MARKDOWN_NAME = re.compile(r"m[0-9]{1,12}\.md")


@dataclass(frozen=True)
class JobResult:
    """A job and its verdict: its process's, or the parent's when the process failed it."""

    job: Job
    verdict: Verdict
    text_path: Path | None = None  # the text to move into the store (status ok only)
    sidecar: dict[str, Any] = field(default_factory=dict)  # outline, page sources, …
    markdown_path: Path | None = None  # its Markdown, when the job asked for it (ok only)

    # the verdict's fields, read through (callers that only look at one)
    @property
    def status(self) -> str:
        return self.verdict.status.value

    @property
    def extractor(self) -> str | None:
        return self.verdict.extractor

    @property
    def error(self) -> str | None:
        return self.verdict.error

    @property
    def error_kind(self) -> str | None:
        return self.verdict.error_kind

    @property
    def limit(self) -> str | None:
        return self.verdict.limit

    @property
    def chars(self) -> int:
        return self.verdict.chars

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.verdict.warnings


def parse(line: bytes) -> dict[str, Any]:
    """One answer line as a value checked against the one schema of answers
    (:func:`bastion.readers.runtime.schema.answer`: the bytes bounded before the parse, then
    every field typed and bounded); :class:`Misbehaved` naming the field and the bound when
    it is not one.  The only place the bytes a document's process wrote are parsed."""
    try:
        return schema.answer(line)
    except schema.Invalid as e:
        raise Misbehaved("worker", f"reader worker broke the protocol: {e}"[:600]) from None


class Answers:
    """Documents' answers, trusted for nothing: every field checked against its job, its type
    and its bounds; its text a file of this process's own in ``path`` (a directory only it
    can reach, made at the first text).  Anything else is a :class:`Misbehaved` of kind
    ``worker``: that document's error, the worker replaced."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path
        self.limits = limits
        self._made = False

    def text_file(self, worker: str, seq: int, markdown: bool = False) -> tuple[Path, int]:
        """A new, empty text file (``markdown``: Markdown file) for job ``seq`` of ``worker``
        and a write-only descriptor of it for the document's process (OSError when the
        output's filesystem refuses it)."""
        if not self._made:
            self.path.mkdir(mode=0o700, exist_ok=True)
            self._made = True
        path = self.path / (f"{worker}-m{seq}.md" if markdown else f"{worker}-t{seq}.txt")
        return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                             | os.O_NOFOLLOW, 0o600)

    def result(self, sent: Sent, line: bytes) -> tuple[JobResult | None, dict[str, Any]]:
        """The result the answer ``line`` gives for the job ``sent`` (None: a pure job that
        asks for a process of its own; its text file gone), and the answer itself.  Any
        failure at all while reading it is a :class:`Misbehaved` of kind ``worker`` (that
        document's error, its process killed): never an exception that stops the run."""
        try:
            return self._result(sent, line)
        except Misbehaved:
            raise
        except Exception as e:  # a check that missed: still this document's error alone
            sent.close()
            raise Misbehaved("worker", f"reader worker sent an answer that could not be read "
                                       f"({type(e).__name__}: {e})"[:600]) from None

    def _result(self, sent: Sent, line: bytes) -> tuple[JobResult | None, dict[str, Any]]:
        msg = parse(line)
        if msg.get("alone") is True and sent.pure and msg.get("id") == sent.job.id \
                and not isinstance(msg.get("id"), bool):
            sent.close()
            return None, msg
        verdict, text_path, sidecar, markdown_path = self.read(sent, msg)
        return JobResult(job=sent.job, verdict=verdict, text_path=text_path, sidecar=sidecar,
                         markdown_path=markdown_path), msg

    def read(self, sent: Sent, msg: dict[str, Any]
             ) -> tuple[Verdict, Path | None, dict[str, Any], Path | None]:
        """The verdict, text file, sidecar and Markdown file (a job that asked for it) that
        the answer ``msg`` gives for the job ``sent``
        (:class:`~bastion.readers.runtime.worker.Misbehaved` when it is not an answer to it).
        The files are kept only for an ``ok`` verdict."""
        kept = False
        try:
            if msg.get("id") != sent.job.id or isinstance(msg.get("id"), bool):
                raise Misbehaved("worker", "reader worker answered a job it was not given")
            try:
                verdict = Verdict.from_json(msg.get("verdict"))
            except ValueError as e:
                raise Misbehaved("worker", f"reader worker sent an invalid verdict ({e})") \
                    from None
            sidecar = _sidecar(msg.get("sidecar"))
            text_path = markdown_path = None
            if verdict.status is Status.OK:
                _named(msg.get("text"), _TEXT_NAME, f"t{sent.seq}.txt", "text")
                if sent.md is not None:  # its Markdown: named and checked like the text
                    _named(msg.get("markdown"), _MARKDOWN_NAME, f"m{sent.seq}.md", "Markdown")
                    markdown_path = self.take(sent, markdown=True)
                text_path = self.take(sent)
                if verdict.chars > os.fstat(sent.out).st_size:  # a character is a byte or more
                    raise Misbehaved("worker", f"reader worker sent {verdict.chars} chars for a "
                                               f"text of {os.fstat(sent.out).st_size} bytes")
                kept = True
            return verdict, text_path, sidecar, markdown_path
        finally:
            sent.close(keep=kept)

    def take(self, sent: Sent, markdown: bool = False) -> Path:
        """The text file made for ``sent``, only if it is still a regular file of one link
        within the output cap, and still the file at its path; :class:`Misbehaved` otherwise
        (and whatever is at the path removed).  Checked on the parent's own descriptor of it
        (a document's process only ever had one too), and the path against it without
        following a link: the directory is this process's alone, but a process of the same
        user without Landlock could reach it."""
        path, out = (sent.md, sent.md_out) if markdown and sent.md is not None else (
            sent.text, sent.out)
        st = os.fstat(out)
        try:
            at = os.lstat(path)
            why = None
        except OSError as e:
            why = f"gone ({e.strerror})"
        if why is not None:
            pass
        elif (at.st_dev, at.st_ino) != (st.st_dev, st.st_ino):
            why = "no longer the file made for it"
        elif st.st_nlink != 1:
            why = "a file with other links"
        elif st.st_size > self.limits.max_output_bytes:
            why = f"over the {self.limits.max_output_bytes} byte output limit"
        if why is not None:
            _remove(path)
            raise Misbehaved("worker", f"reader worker's {'Markdown' if markdown else 'text'} "
                                       f"file is {why}")
        return path

    def discard(self, sent: Sent) -> None:
        """The text file of a job that will not be answered here (sent again, or failed)."""
        sent.close()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _named(name: Any, pattern: re.Pattern[str], expected: str, what: str) -> None:
    """The file an answer names is the one its job was given (:class:`Misbehaved` if not)."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise Misbehaved("worker", f"reader worker named no valid {what} file")
    if name != expected:
        raise Misbehaved("worker", f"reader worker's {what} file is missing (it named {name}, "
                                   f"its job's is {expected})")


def _sidecar(v: dict[str, Any] | None) -> dict[str, Any]:
    """What a worker sends beside a text (its keys and types checked by the schema: its
    :data:`~bastion.readers.runtime.schema.SIDECAR`), the document's metadata (and its
    embedded documents') made again here through
    :class:`~bastion.readers.metadata.DocMeta` (strings cleaned and capped, dates checked),
    never taken as the worker wrote it."""
    from ..metadata import DocMeta

    if not v:
        return {}
    out = dict(v)
    if "metadata" in out:
        out["metadata"] = DocMeta.from_json(out["metadata"]).to_json()
    if "embedded" in out:
        out["embedded"] = [{"path": e["path"],
                            "metadata": DocMeta.from_json(e["metadata"]).to_json()}
                           for e in out["embedded"]]
    return out


def _remove(path: Path) -> None:
    """Remove whatever a worker left at ``path`` (a directory, a link, a FIFO, a file)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass
