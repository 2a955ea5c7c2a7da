"""One document at a time from Python, through the same sandboxed workers as a sweep.

An :class:`Extractor` owns a :class:`bastion.readers.runtime.pool.WorkerPool` (long-lived workers in their
sandbox: deadline, output cap, memory cap, Landlock) with a private scratch root
(``tempfile.mkdtemp``, mode 0700).  The parent picks the reader as the extract stage does
(:func:`bastion.readers.detect.detect_file`, then :meth:`bastion.readers.dispatch.Registry.select`
on the extractor's registry), hashes the file, and the worker re-checks the sha256 before reading, so what was read is what was hashed.  The
verdict is the extract stage's own (:class:`bastion.readers.runtime.verdict.Verdict`, from the worker), so a :class:`Result`
says exactly what an ``extract.jsonl`` record would.

:func:`bastion.extract_file` and :func:`bastion.extract_bytes` use one module-level extractor
per (limits, tools): a loop over 10k files starts no interpreter per file.  It is closed at
exit; a forked child forgets its parent's workers (and starts its own on first use).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import os
import shutil
import stat
import tempfile
import threading
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from bastion.readers.base import Limits
from bastion.readers.metadata import DocMeta
from bastion.readers.pdf.pages import OutlineEntry  # one PDF bookmark (title, page, level)
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import KNOWN_TOOLS, Tool
from bastion.readers.runtime.verdict import Status, Verdict


__all__ = ["DocMeta", "Extractor", "OutlineEntry", "Result", "Tools", "default_extractor"]

READ_CHUNK = 1 << 20
Tools = str | Sequence[str] | None  # "auto", a list of tool names, or None / () for none


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """What became of one document: the fields of its ``extract.jsonl`` record, and the text.

    ``status`` is ``ok`` (``text`` holds it; ``limit`` names the cap when it was cut short),
    ``empty``, ``unsupported`` (no reader, or its tool is absent: ``error`` says which) or
    ``error`` (``error_kind`` from the fixed vocabulary of docs/records.md).
    """

    name: str  # the file name the reader was chosen by
    status: Status
    text: str  # "" unless ok
    mime: str
    extractor: str | None
    sha256: str
    size: int
    chars: int
    pages: int | None
    title: str | None
    outline: tuple[OutlineEntry, ...]
    error: str | None
    error_kind: str | None
    limit: str | None
    tools_used: tuple[str, ...]
    warnings: tuple[str, ...]
    pages_ocr: int | None
    members: dict[str, int] | None
    encoding_source: str | None
    verdict: Verdict  # the same fields as the store and the records keep them
    metadata: DocMeta = DocMeta()  # what the document declares about itself (the sidecar's)
    embedded: tuple[tuple[str, DocMeta], ...] = ()  # its embedded documents' own, by path
    # the text's Markdown (an extractor made with markdown=True; ok only): CommonMark with
    # GFM tables, from the same reading as ``text`` (docs/readers.md)
    markdown: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


def _outline(meta: dict[str, Any]) -> tuple[OutlineEntry, ...]:
    items = meta.get("outline")
    if not isinstance(items, list):
        return ()
    entries = []
    for item in items:
        if (isinstance(item, dict) and isinstance(item.get("title"), str)
                and isinstance(item.get("page"), int) and isinstance(item.get("level"), int)):
            entries.append(OutlineEntry(item["title"], item["page"], item["level"]))
    return tuple(entries)


def _result(name: str, mime: str, sha256: str, size: int, verdict: Verdict, text: str,
            meta: dict[str, Any], markdown: str | None = None) -> Result:
    return Result(
        name=name, status=verdict.status, text=text if verdict.status is Status.OK else "",
        mime=mime, extractor=verdict.extractor, sha256=sha256, size=size, chars=verdict.chars,
        pages=verdict.pages, title=verdict.title, outline=_outline(meta), error=verdict.error,
        error_kind=verdict.error_kind, limit=verdict.limit, tools_used=verdict.tools_used,
        warnings=verdict.warnings, pages_ocr=verdict.pages_ocr, members=verdict.members,
        encoding_source=verdict.encoding_source, verdict=verdict,
        metadata=DocMeta.from_json(meta.get("metadata")), embedded=_embedded(meta),
        markdown=markdown if verdict.status is Status.OK else None)


def _embedded(meta: dict[str, Any]) -> tuple[tuple[str, DocMeta], ...]:
    items = meta.get("embedded")
    if not isinstance(items, list):
        return ()
    return tuple((item["path"], DocMeta.from_json(item.get("metadata"))) for item in items
                 if isinstance(item, dict) and isinstance(item.get("path"), str))


_PROBE_LOCK = threading.Lock()


@functools.cache
def _probed() -> dict[str, Tool]:
    """Every known tool on PATH, with its version: asked once per process."""
    from bastion.readers.runtime.toolset import ToolProbe

    return ToolProbe().result()


def find_tools(tools: Tools, *, versions: bool = True) -> dict[str, Tool]:
    """The external tools an extractor may hand to readers: ``"auto"`` every known tool on
    PATH (asked once per process; none under ``BASTION_NO_EXTERNAL=1``), ``None`` or ``()``
    none, or the named ones that are on PATH (a name bastion does not know is a ValueError).
    ``versions=False`` finds them on PATH without asking their versions (nothing is keyed on
    them: ``bastion text``), which saves starting each tool once."""
    if tools is None or (not isinstance(tools, str) and len(tools) == 0):
        return {}
    if isinstance(tools, str) and tools != "auto":
        raise ValueError(f"tools must be 'auto', None or a list of names, not {tools!r}")
    names = None if isinstance(tools, str) else list(tools)
    unknown = sorted(set(names or ()) - set(KNOWN_TOOLS))
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}: bastion knows "
                         f"{', '.join(KNOWN_TOOLS)}")
    if not versions:
        from bastion.readers.runtime.toolset import ToolProbe

        found = {n: Tool(n, p, None) for n, p in ToolProbe().paths.items()}
        return found if names is None else {n: t for n, t in found.items() if n in names}
    with _PROBE_LOCK:  # one probe, whichever thread asks first
        found = dict(_probed())
    return found if names is None else {n: t for n, t in found.items() if n in names}


def _hash_and_type(path: str | os.PathLike[str], name: str | None,
                   registry: Any) -> tuple[str, str, str, str, int, Any]:
    """Hash and type one file (symlinks followed: the worker opens the target): its real
    path, name, MIME type, sha256, size and reader, chosen on ``registry`` (a
    :class:`bastion.readers.dispatch.Registry`) as the workers choose."""
    from bastion.readers.detect import HEAD_BYTES, detect_file

    real = os.path.realpath(os.fspath(path))
    st = os.stat(real)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", os.fspath(path))
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{os.fspath(path)}: not a regular file")
    digest = hashlib.sha256()
    head = b""
    size = 0
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb", buffering=0) as f:
        while chunk := f.read(READ_CHUNK):
            if len(head) < HEAD_BYTES:
                head += chunk[:HEAD_BYTES - len(head)]
            digest.update(chunk)
            size += len(chunk)
    name = name or os.path.basename(os.fspath(path))
    mime = detect_file(real, name, head)
    return real, name, mime, digest.hexdigest(), size, registry.select(mime, name)


def pool_module() -> Any:
    """The module of ``WorkerPool`` and ``WorkerError``."""
    from bastion.readers.runtime import pool

    return pool


_LIVE: "weakref.WeakSet[Extractor]" = weakref.WeakSet()


class Extractor:
    """Sandboxed workers for documents handed one by one (or as an iterable).

    ``limits`` are the per-document budgets (:class:`bastion.readers.base.Limits`, the manifest's
    ``limits``); ``tools`` as :func:`find_tools`; ``jobs`` the number of workers (used by
    :meth:`extract_files`; one document at a time needs one).  Thread-safe: calls from
    several threads take turns.  Use it as a context manager, or call :meth:`close`.
    ``extra_readers`` names modules whose ``READER`` goes before the registry (an embedding
    program's own readers; the tests' misbehaving one), as ``WorkerPool`` takes them.
    ``tool_versions=False``: the tools are found on PATH but not asked their versions.
    ``markdown=True``: each :class:`Result` holds the text's Markdown too (``markdown``),
    rendered from the same reading.
    """

    def __init__(self, *, limits: Limits | None = None, tools: Tools = "auto",
                 jobs: int = 1, extra_readers: tuple[str, ...] = (),
                 tool_versions: bool = True, markdown: bool = False) -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        from bastion.readers.dispatch import Registry

        self.extra_readers = tuple(extra_readers)
        # the registry the reader of each document is chosen on, built once (the workers
        # build the same: the extra readers first)
        self.registry = Registry.with_modules(self.extra_readers)
        self.limits = limits if limits is not None else Limits()
        if tools is None or (not isinstance(tools, str) and len(tools) == 0) or (
                tools == "auto" and os.environ.get("BASTION_NO_EXTERNAL") == "1"):
            # built-in readers only: a record says a tool was not used for that reason
            self.limits = dataclasses.replace(self.limits, external_off=True)
        self.tools = find_tools(tools, versions=tool_versions)
        self.jobs = jobs
        self.markdown = markdown
        self._lock = threading.RLock()
        self._pool: Any = None
        self._tmp: Path | None = None
        self._pid = os.getpid()
        self._seq = 0
        self._done: dict[int, tuple[Verdict, str, dict[str, Any], str | None]] = {}
        self.closed = False
        _LIVE.add(self)

    def start(self) -> None:
        """Start the workers now rather than at the first document: they boot (an
        interpreter each, entering its sandbox) while the caller hashes and types its
        first file (``bastion text``)."""
        with self._lock:
            self._ensure_pool()

    # -- one document -----------------------------------------------------------------------------

    def extract_file(self, path: str | os.PathLike[str], *, name: str | None = None) -> Result:
        """Read one file (``name``: the name to choose its reader by, default its own)."""
        return self._run([self._prepare(path, name)])[0]

    def extract_bytes(self, data: bytes, name: str | None = None) -> Result:
        """Read a document held in memory; ``name`` (e.g. ``"report.docx"``) helps choose the
        reader as a file name would.  The bytes go to a private temporary file."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("extract_bytes takes bytes")
        with self._lock:
            inputs = self._scratch() / "input"
            inputs.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=inputs)
            try:
                with open(fd, "wb") as f:
                    f.write(data)
                return self._run([self._prepare(tmp, name or "document")])[0]
            finally:
                os.unlink(tmp)

    def extract_files(self, paths: Iterable[str | os.PathLike[str]]) -> Iterator[Result]:
        """Read many files on :attr:`jobs` workers; results in the order of ``paths``."""
        with self._lock:
            pending: dict[int, Job] = {}
            order: list[int] = []
            for path in paths:
                order.append(self._submit(self._prepare(path, None), pending))
                while order and order[0] in self._done:
                    yield self._collect(order.pop(0), pending)
            self._drain()
            while order:
                yield self._collect(order.pop(0), pending)

    # -- the pool ---------------------------------------------------------------------------------

    def _prepare(self, path: str | os.PathLike[str], name: str | None) -> Job:
        """The job of one file, hashed and typed here (:func:`_hash_and_type`)."""
        return self._job(*_hash_and_type(path, name, self.registry))

    def _job(self, path: str, name: str, mime: str, sha256: str, size: int,
             reader: Any) -> Job:
        """The job of a file hashed and typed (:func:`_hash_and_type`): its reader's deadline and
        tools here.  Its id is given when it is submitted; no reader (``None``): the file is
        ``unsupported``, never submitted."""
        if reader is None:
            return Job(0, path, name, mime, sha256, size, self.limits.deadline_s)
        present = sorted(t for t in reader.tools if t in self.tools)
        deadline = self.limits.deadline_s
        if reader.uses_tool_deadline and present:
            deadline = self.limits.tool_deadline_s
        return Job(0, path, name, mime, sha256, size, deadline,
                   {t: self.tools[t].path for t in present}, reader.name,
                   markdown=self.markdown)

    def _run(self, jobs: list[Job]) -> list[Result]:
        with self._lock:
            pending: dict[int, Job] = {}
            ids = [self._submit(j, pending) for j in jobs]
            self._drain()
            return [self._collect(i, pending) for i in ids]

    def _submit(self, job: Job, pending: dict[int, Job]) -> int:
        self._seq += 1
        job = replace(job, id=self._seq)
        pending[job.id] = job
        if job.reader is None:
            self._done[job.id] = (Verdict(status=Status.UNSUPPORTED,
                                          error=f"no reader for {job.mime}"), "", {}, None)
            return job.id
        self._ensure_pool().submit(job)
        return job.id

    def _drain(self) -> None:
        if self._pool is not None:
            self._pool.drain()

    def _collect(self, job_id: int, pending: dict[int, Job]) -> Result:
        job = pending.pop(job_id)
        verdict, text, meta, markdown = self._done.pop(job_id)
        return _result(job.name, job.mime, job.sha256, job.size, verdict, text, meta, markdown)

    def _on_result(self, result: Any) -> None:
        verdict = result.verdict  # the worker's (or the pool's) Verdict, and the sidecar
        meta = result.sidecar or {}
        text = ""
        markdown = None
        if verdict.status is Status.OK and result.text_path is not None:
            text = Path(result.text_path).read_bytes().decode("utf-8", "replace")
            if result.markdown_path is not None:
                markdown = Path(result.markdown_path).read_bytes().decode("utf-8", "replace")
                verdict = replace(verdict, markdown=True)
        self._done[result.job.id] = (verdict, text, meta, markdown)

    def _scratch(self) -> Path:
        if self.closed:
            raise RuntimeError("this Extractor is closed")
        if self._pid != os.getpid():  # a forked child: the parent's workers are not ours
            self._abandon()
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="bastion-api-"))  # mode 0700
        return self._tmp

    def _ensure_pool(self) -> Any:
        scratch = self._scratch()
        if self._pool is None:
            WorkerPool = pool_module().WorkerPool

            work = scratch / "workers"
            work.mkdir(mode=0o700, exist_ok=True)
            self._pool = WorkerPool(self.jobs, self.limits, work, self._on_result,
                                    extra_readers=self.extra_readers)
        return self._pool

    def _abandon(self) -> None:
        """In a forked child: forget the parent's pool without touching its workers (closing
        only this process's copies of their pipes) and its scratch directory."""
        pool, self._pool, self._tmp = self._pool, None, None
        self._pid = os.getpid()
        self._done.clear()
        if pool is None:
            return
        pool.abandon()  # its copies of the workers' descriptors closed, no process touched

    def close(self) -> None:
        """Stop the workers and remove the scratch directory (idempotent)."""
        with self._lock:
            if self._pid != os.getpid():
                self._abandon()
            pool, self._pool = self._pool, None
            try:
                if pool is not None:
                    pool.close()
            finally:
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
                    self._tmp = None
                self.closed = True

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the live workers (none before the first document)."""
        return [] if self._pool is None else self._pool.pids()

    def __enter__(self) -> "Extractor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_DEFAULTS: dict[tuple[Any, ...], Extractor] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_extractor(limits: Limits | None, tools: Tools,
                      markdown: bool = False) -> Extractor:
    """The module-level extractor for these limits, tools and renderings (made on first
    use, reused)."""
    limits = limits if limits is not None else Limits()
    key = (limits, tools if isinstance(tools, str) or tools is None else tuple(tools),
           markdown)
    with _DEFAULTS_LOCK:
        ex = _DEFAULTS.get(key)
        if ex is None or ex.closed:
            ex = _DEFAULTS[key] = Extractor(limits=limits, tools=tools, markdown=markdown)
        return ex


def close_all() -> None:
    """Close every extractor of this process (at exit; tests)."""
    for ex in list(_LIVE):
        try:
            ex.close()
        except Exception:  # noqa: BLE001 — exit cleanup must go on
            pass
    _DEFAULTS.clear()


def _after_fork_in_child() -> None:
    global _PROBE_LOCK, _DEFAULTS_LOCK
    _PROBE_LOCK, _DEFAULTS_LOCK = threading.Lock(), threading.Lock()  # maybe held at the fork
    for ex in list(_LIVE):
        ex._lock = threading.RLock()
        ex._abandon()
    _DEFAULTS.clear()


atexit.register(close_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
