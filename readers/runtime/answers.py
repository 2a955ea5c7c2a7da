"""A document's answer, trusted for nothing: parsed and checked field by field, its text file the parent's own.

The parent (:class:`bastion.readers.runtime.pool.WorkerPool`) makes each job's text file
(:meth:`Answers.text_file`: in a directory only it can reach; the document's process gets a
write-only descriptor of it, never its path) and reads each answer line through
:class:`Answers`: :func:`parse` (the one place an answer's bytes become a value), then the job
it names, the verdict's types, vocabulary and bounds, the sidecar's keys and types, and the
text named, which must be the file this job was given, still a regular file of one link within
the output cap.  Whatever fails is a :class:`~bastion.readers.runtime.worker.Misbehaved` of
kind ``worker``: that document's ``error`` record; the pool kills and replaces the worker, and
the run goes on.
"""

from __future__ import annotations

import json
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
from ..base import SIDECAR

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
    """One answer line as a value (:class:`Misbehaved` when it is none): the only place the
    bytes a document's process wrote are parsed."""
    try:
        msg = json.loads(line)
    except ValueError:
        raise Misbehaved("worker", "reader worker broke the protocol") from None
    if not isinstance(msg, dict):
        raise Misbehaved("worker", "reader worker broke the protocol")
    return msg


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
        asks for a process of its own; its text file gone), and the answer itself."""
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
            _check_verdict(verdict)
            if not isinstance(msg.get("fatal", False), bool) or not _count(msg.get("rss", 0)):
                raise Misbehaved("worker", "reader worker sent a malformed answer (fatal, rss)")
            sidecar = _sidecar(msg.get("sidecar"))
            text_path = markdown_path = None
            if verdict.status is Status.OK:
                _named(msg.get("text"), _TEXT_NAME, f"t{sent.seq}.txt", "text")
                if sent.md is not None:  # its Markdown: named and checked like the text
                    _named(msg.get("markdown"), _MARKDOWN_NAME, f"m{sent.seq}.md", "Markdown")
                    markdown_path = self.take(sent, markdown=True)
                text_path = self.take(sent)
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


MAX_FIELD = 4096  # characters of a verdict's error, extractor, title; a sidecar's strings


def _named(name: Any, pattern: re.Pattern[str], expected: str, what: str) -> None:
    """The file an answer names is the one its job was given (:class:`Misbehaved` if not)."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise Misbehaved("worker", f"reader worker named no valid {what} file")
    if name != expected:
        raise Misbehaved("worker", f"reader worker's {what} file is missing (it named {name}, "
                                   f"its job's is {expected})")


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_verdict(v: Verdict) -> None:
    from ..errors import ERROR_KINDS

    if v.error_kind is not None and v.error_kind not in ERROR_KINDS:
        raise Misbehaved("worker", f"reader worker sent an unknown error kind {v.error_kind!r}"[:200])
    for name in ("error", "extractor", "title", "limit", "encoding_source"):
        value = getattr(v, name)
        if value is not None and len(value) > MAX_FIELD:
            raise Misbehaved("worker", f"reader worker sent a {name} over {MAX_FIELD} characters")


def _sidecar(v: Any) -> dict[str, Any]:
    """What a worker sends beside a text, its known keys only, each of its type; the
    document's metadata (and its embedded documents') made again here through
    :class:`~bastion.readers.metadata.DocMeta` (strings cleaned and capped, dates checked),
    never taken as the worker wrote it."""
    from ..metadata import MAX_EMBEDDED, DocMeta

    if v is None:
        return {}
    if not isinstance(v, dict) or not set(v) <= set(SIDECAR):
        raise Misbehaved("worker", "reader worker sent a malformed sidecar")
    out: dict[str, Any] = {}
    for key, value in v.items():
        ok = (_count(value) if key == "pages" else
              isinstance(value, str) and len(value) <= MAX_FIELD if key == "title" else
              isinstance(value, dict) if key == "metadata" else
              isinstance(value, list) and len(value) <= MAX_EMBEDDED and all(
                  isinstance(e, dict) and isinstance(e.get("path"), str)
                  and len(e["path"]) <= MAX_FIELD and isinstance(e.get("metadata"), dict)
                  for e in value) if key == "embedded" else
              isinstance(value, list))
        if not ok:
            raise Misbehaved("worker", f"reader worker sent a malformed sidecar {key}")
        if key == "metadata":
            value = DocMeta.from_json(value).to_json()
        elif key == "embedded":
            value = [{"path": e["path"], "metadata": DocMeta.from_json(e["metadata"]).to_json()}
                     for e in value]
        out[key] = value
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
