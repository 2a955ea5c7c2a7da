"""A worker's answer, trusted for nothing: checked field by field, its text taken out of its reach.

The parent (:class:`bastion.readers.runtime.pool.WorkerPool`) reads each answer through
:class:`Answers`: the job it names, the verdict's types, vocabulary and bounds, the sidecar's
keys and types, and the text, which must be a regular file of the worker's own, in its
directory, within the output cap.  Whatever fails is a
:class:`~bastion.readers.runtime.worker.Misbehaved` of kind ``worker``: that document's
``error`` record; the pool kills and replaces the worker, and the run goes on.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from ..base import Limits
from .verdict import Status, Verdict
from .worker import Misbehaved, Worker
from ..base import SIDECAR

_TEXT_NAME = re.compile(r"t[0-9]{1,12}\.txt")
_MARKDOWN_NAME = re.compile(r"m[0-9]{1,12}\.md")


class Answers:
    """A worker's answer, trusted for nothing: every field checked against its job, its type
    and its bounds, its text moved out of the worker's reach into ``path`` (a directory only
    this process can reach, made at the first text) and checked there.  Anything else is a
    :class:`Misbehaved` of kind ``worker``: that document's error, the worker replaced."""

    def __init__(self, path: Path, limits: Limits, foreign: bool) -> None:
        self.path = path
        self.limits = limits
        self.foreign = foreign  # the workers run as other uids: texts are made ours
        self._made = False

    def read(self, w: Worker, msg: dict[str, Any]
             ) -> tuple[Verdict, Path | None, dict[str, Any], Path | None]:
        """The verdict, text file, sidecar and Markdown file (a job that asked for it)
        ``w``'s answer ``msg`` gives for its job
        (:class:`~bastion.readers.runtime.worker.Misbehaved` when it is not an answer to it)."""
        job = w.job
        if job is None or msg.get("id") != job.id or isinstance(msg.get("id"), bool):
            raise Misbehaved("worker", "reader worker answered a job it was not given")
        try:
            verdict = Verdict.from_json(msg.get("verdict"))
        except ValueError as e:
            raise Misbehaved("worker", f"reader worker sent an invalid verdict ({e})") from None
        _check_verdict(verdict)
        if not isinstance(msg.get("fatal", False), bool) or not _count(msg.get("rss", 0)):
            raise Misbehaved("worker", "reader worker sent a malformed answer (fatal, rss)")
        sidecar = _sidecar(msg.get("sidecar"))
        text_path = markdown_path = None
        if verdict.status is Status.OK:
            text_path = self.take(w, msg.get("text"))
            if job.markdown:  # taken like the text, with the same checks
                try:
                    markdown_path = self.take(w, msg.get("markdown"), _MARKDOWN_NAME)
                except Misbehaved:
                    _remove(text_path)
                    raise
        return verdict, text_path, sidecar, markdown_path

    def take(self, w: Worker, name: Any, pattern: re.Pattern[str] = _TEXT_NAME) -> Path:
        """The worker's text file, only if it is a plain regular file in its own directory,
        within the output cap; :class:`Misbehaved` otherwise.

        It is first renamed out of the worker's directory, into one only this process can
        reach, then opened there without following a link (``O_NOFOLLOW``, ``O_NONBLOCK``:
        a FIFO does not block) and checked on the descriptor: checked in place, a worker
        could swap it between the check and the store's rename.  A worker's text then
        belongs to us; whatever else it named (a directory, a link, a FIFO) is removed."""
        if not isinstance(name, str) or not pattern.fullmatch(name):
            raise Misbehaved("worker", "reader worker named no valid text file")
        if not self._made:
            self.path.mkdir(mode=0o700, exist_ok=True)
            self._made = True
        path = self.path / f"{w.dir.name}-{name}"
        try:
            os.rename(w.dir / name, path)
        except OSError as e:
            raise Misbehaved("worker", f"reader worker's text file is missing ({e.strerror})") \
                from None
        why = None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                         | os.O_NOCTTY)
        except OSError as e:
            why = f"cannot be opened without following links ({e.strerror})"
        else:
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    why = "not a regular file"
                elif st.st_nlink != 1:
                    why = "a file with other links"
                elif st.st_size > self.limits.max_output_bytes:
                    why = f"over the {self.limits.max_output_bytes} byte output limit"
                elif self.foreign:
                    os.fchown(fd, os.geteuid(), os.getegid())
                    os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
        if why is not None:
            _remove(path)
            raise Misbehaved("worker", f"reader worker's text file is {why}")
        return path

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


MAX_FIELD = 4096  # characters of a verdict's error, extractor, title; a sidecar's strings


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
