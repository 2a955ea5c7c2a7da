"""A worker: the zygote (:mod:`bastion.readers.runtime.zygote`), and the documents' processes it forks.

Started by :class:`bastion.readers.runtime.pool.WorkerPool` as ``python -I -S`` with no other
argument and no environment: what it runs, and its settings (its private directory, the
limits, how it holds its descendants, its environment), come on its stdin, read whole before
it starts; its command line is then emptied
(:func:`bastion.readers.runtime.procs.blank_cmdline`).  It enters the sandbox first
(:func:`main`), then becomes the zygote, which forks each document's process:
a spare waiting on its own channel to the parent (:func:`serve`), which reads the documents
the parent hands it (:func:`handle`) and answers the parent directly.  The zygote's own
control messages are in :mod:`bastion.readers.runtime.zygote`.

**Jobs** come on the child's ``SOCK_SEQPACKET`` socket, one message holding one or more, with
descriptors attached (``SCM_RIGHTS``; ``doc`` and ``out`` index them): the document's,
read-only (the parent opened the file, so the child needs no access to its path), and the text
file's, write-only (a file of the parent's own, in a directory the child cannot reach)::

    {"jobs": [{"id": 7, "seq": 3, "name": "a.pdf", "mime": "application/pdf", "reader": "pdf",
               "sha256": "…", "size": 1234, "tools": {"pdftotext": "/usr/bin/pdftotext"},
               "deadline": 300, "pure": false, "text": "t3.txt", "doc": 1, "out": 0}]}

(``"doc": null`` and ``"open_error": "…"`` when the parent could not open the document; a job
that asks for the Markdown too has ``"markdown": "m3.md"`` and ``"md_out"``, the index of a
second write-only descriptor, of the parent's file for it.)
The parent closes its end after the last job it gives a process: then the process ends.  A
process given one job (``pure`` false) reads it with every reader; one given many (documents
of :data:`bastion.readers.runtime.batch.PURE_READERS`, each ``pure``) reads them in turn and
never lets a native reader run (:mod:`bastion.readers.runtime.batch`).

**Answers** go on the child's pipe, one line of JSON per job, in order::

    {"id": 7, "verdict": {"status": "ok", "extractor": "pdfium", "chars": 99, …},
     "text": "t3.txt", "sidecar": {"outline": […], "page_sources": […]},
     "rss": 51234816, "fatal": false}
    {"id": 7, "alone": true}     a pure job that needs a process of its own (nothing written)

(a job that asked for its Markdown: ``"markdown": "m3.md"`` too, written beside the text.)

The reader is the one the parent chose (``reader``; none: the registry chooses, as for a
document handed over without a plan); ``verdict`` is a :class:`bastion.readers.runtime.verdict.
Verdict` in its JSON form; ``text`` names the text file the job gave (written only when the
verdict is ``ok``; the parent makes it durable with one ``syncfs`` per batch); ``fatal``: the
process ran out of memory or recursion, and ``rss`` (its peak resident memory) past half the
memory cap: a shared one takes no more documents.  What the parent
believes of an answer is :mod:`bastion.readers.runtime.answers`'s.

Each document has an :class:`bastion.readers.ocr.memo.OcrMemo` of its own: an image OCRed
twice in one document (a logo on every page) is recognised once; nothing is kept across
documents (what one document's process learnt could be forged for the next).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (a worker imports what it needs when it needs it)
    from ..base import Limits
    from ..dispatch import Outcome

MAX_JOB = 1 << 18  # bytes of one job message (names, types, the tools): the pool's cap too
MAX_FDS = 128  # descriptors one job message may carry (two a job): the pool's cap too


def _rss() -> int:
    """The most memory this process has held resident (a system call, no file to read)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _read_checked(fd: int, size: int, sha256: str) -> bytes:
    """The bytes of the document the parent opened (``fd``, closed here), or ChangedSinceWalk
    when they are not what the walk hashed."""
    from ..errors import ChangedSinceWalk

    try:
        import stat

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ChangedSinceWalk("no longer a regular file")
        if st.st_size != size:
            raise ChangedSinceWalk(f"size changed since the walk ({size} -> {st.st_size} bytes)")
        buf = bytearray(size + 1)
        view = memoryview(buf)
        got = 0
        while got <= size:
            n = os.readv(fd, [view[got:]])
            if n == 0:
                break
            got += n
        if got != size:
            raise ChangedSinceWalk("size changed while reading")
        data = bytes(view[:size])  # one copy (a bytearray slice would make a second)
        del view
        del buf
    finally:
        os.close(fd)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ChangedSinceWalk("content changed since the walk (sha256 mismatch)")
    return data


def handle(job: dict[str, Any], fd: int | None, scratch: Path, limits: Limits, seq: int,
           text_fd: int, ocr_memo: Any = None, registry: Any = None,
           md_fd: int | None = None) -> dict[str, Any]:
    """Read one document (in a process the zygote forked) with a reader of ``registry`` (the
    worker's, built once in :func:`main`; default the built-in one): the text goes to
    ``text_fd`` (the file the job names, the parent's), its Markdown, when the job asks for
    it, to ``md_fd`` (``m<seq>.md``, the parent's too), the scratch is ``scratch``.  A
    ``pure`` job's embedded documents are read only by pure readers
    (:func:`bastion.readers.runtime.batch.pure_nested`): where another would be needed, the
    answer asks for a process of its own instead."""
    result: dict[str, Any] = {"id": job["id"], "fatal": False, "text": None}
    read = _read(job, fd, scratch, limits, ocr_memo, registry, md_fd is not None)
    if read is None:
        return {"id": job["id"], "alone": True}
    outcome, used, result["fatal"] = read
    if outcome.status == "ok":
        outcome = _write_text(outcome, text_fd, limits)
        if outcome.status == "ok":
            result["text"] = job.get("text") or f"t{seq}.txt"
    if outcome.status == "ok" and md_fd is not None and outcome.markdown is not None:
        outcome = _write_markdown(outcome, md_fd, limits)
        if outcome.status == "ok":
            result["markdown"] = job.get("markdown") or f"m{seq}.md"
        else:
            result["text"] = None
    result.update(_verdict(outcome, used), rss=_rss())
    return result


def _read(job: dict[str, Any], fd: int | None, scratch: Path, limits: Limits, ocr_memo: Any,
          registry: Any, markdown: bool) -> tuple[Outcome, set[str], bool] | None:
    """The job's document read (:func:`_read_document`), whatever its reader did: (its
    outcome, the tools it used, whether this process is spent — out of memory or recursion —
    and may take no other document); None when a pure job needs a process of its own
    (:class:`~bastion.readers.runtime.batch.OwnProcess`)."""
    from .batch import OwnProcess

    try:
        return _read_document(job, fd, scratch, limits, ocr_memo, registry, markdown)
    except OwnProcess:
        return None
    except MemoryError:
        return _error("reader ran out of memory (memory cap)", "memory"), set(), True
    except RecursionError:
        return _error("reader recursed too deep", "crash"), set(), True
    except Exception as e:  # a reader bug: still exactly one record
        return _error(f"reader failed: {type(e).__name__}: {e}"[:500], "internal"), set(), False


def _error(message: str, kind: str, extractor: str | None = None) -> Outcome:
    """The outcome of a document that could not be read (or its text not written)."""
    from ..dispatch import Outcome

    return Outcome("error", extractor=extractor, error=message, error_kind=kind)


def _read_document(job: dict[str, Any], fd: int | None, scratch: Path, limits: Limits,
                   ocr_memo: Any, registry: Any, markdown: bool
                   ) -> tuple[Outcome, set[str], bool]:
    """The document behind ``fd`` (closed here) checked against the walk's size and sha256,
    then read by the reader the parent chose, with a context of the job's tools, deadline and
    scratch: (its outcome, the tools it used, False); a document that is not what the walk
    saw is an error outcome."""
    from ..base import Document
    from .batch import pure_nested
    from .context import LocalContext
    from ..dispatch import BUILTIN, read_document, read_nested
    from ..errors import ChangedSinceWalk, ReaderError

    try:
        if fd is None:  # the parent could not open it
            raise ChangedSinceWalk(job.get("open_error") or "no document descriptor")
        data = _read_checked(fd, job["size"], job["sha256"])  # (which closes fd)
    except ReaderError as e:
        return _error(e.message, e.kind), set(), False
    registry = registry or BUILTIN
    ctx = LocalContext(limits, job.get("tools") or {}, scratch,
                       deadline=time.monotonic() + float(job.get("deadline", 60)),
                       nested=pure_nested if job.get("pure") else read_nested,
                       ocr_memo=ocr_memo, registry=registry)
    reader = registry.by_name(job.get("reader"))  # chosen by the parent, not again here
    if reader is None and job.get("reader") is not None:
        raise RuntimeError(f"no reader named {job.get('reader')!r} in this worker")
    outcome = read_document(Document(data, job["name"], job["mime"]), ctx, reader,
                            markdown=markdown)
    return outcome, ctx.tools_used, False


def _write_text(outcome: Outcome, text_fd: int, limits: Limits) -> Outcome:
    """``outcome``'s text written to the parent's file ``text_fd`` (made durable by the
    parent: syncfs), within the output cap: the same outcome, or the error that stopped it
    (the file emptied)."""
    try:
        encoded = outcome.text.encode("utf-8", "replace")  # lone surrogates → "?"
        if len(encoded) > limits.max_output_bytes:
            raise OSError(27, "File too large")
        _write_all(text_fd, encoded)
        return outcome
    except OSError as e:
        if e.errno == 27:  # EFBIG: over RLIMIT_FSIZE / the output cap
            failed = _error(f"text over the {limits.max_output_bytes} byte output limit",
                            "output_limit", outcome.extractor)
        else:
            failed = _error(f"cannot write text: {e.strerror}", "internal", outcome.extractor)
        try:
            os.ftruncate(text_fd, 0)
        except OSError:
            pass
        return failed


def _write_markdown(outcome: Outcome, md_fd: int, limits: Limits) -> Outcome:
    """``outcome``'s Markdown written to the parent's file ``md_fd``, within the output cap
    (cut at a line, a note says so: docs/readers.md): the same outcome, or the error that
    stopped it."""
    from ..render.markdown import capped

    assert outcome.markdown is not None
    try:
        _write_all(md_fd, capped(outcome.markdown, limits.max_output_bytes))
        return outcome
    except OSError as e:
        return _error(f"cannot write text: {e.strerror}", "internal", outcome.extractor)


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` written to ``fd`` (a pipe or a file may take it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _verdict(outcome: Outcome, used: set[str]) -> dict[str, Any]:
    """The answer's ``verdict`` (its JSON form) and ``sidecar`` (the outline, the pages'
    sources) of ``outcome``, whose reader called the tools ``used``."""
    from .verdict import Verdict

    verdict = Verdict.of_outcome(
        outcome.status, chars=len(outcome.text), extractor=outcome.extractor,
        error=outcome.error, error_kind=outcome.error_kind, limit=outcome.limit,
        result=outcome.result, warnings=outcome.warnings, tools_used=used)
    sidecar = outcome.result.sidecar() if outcome.result is not None else {}
    return {"verdict": verdict.to_json(), "sidecar": sidecar}


def serve(jobs: socket.socket, answers: int, scratch: Path, limits: Limits,
          registry: Any) -> None:
    """A document's process, after the zygote forked it: its jobs from the parent's
    messages, one answer line each on its pipe, until the parent closes its end."""
    import shutil

    from ..ocr.memo import OcrMemo
    from .schema import encode

    room = socket.CMSG_SPACE(MAX_FDS * array("i").itemsize)
    while True:
        data, ancillary, flags, _ = jobs.recvmsg(MAX_JOB, room, socket.MSG_CMSG_CLOEXEC)
        fds = array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            return  # the parent gives it no more
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            os._exit(2)  # not the parent's protocol: it sees this process die
        for job in json.loads(data)["jobs"]:
            seq = int(job["seq"])
            doc = job.get("doc")
            text_fd = fds[job["out"]]
            md_fd = fds[job["md_out"]] if job.get("md_out") is not None else None
            try:
                answer = handle(job, None if doc is None else fds[doc], scratch / f"job{seq}",
                                limits, seq, text_fd, OcrMemo(), registry, md_fd)
            finally:
                os.close(text_fd)
                if md_fd is not None:
                    os.close(md_fd)
            # within the answer cap: a sidecar too big is cut (schema.py)
            _write_all(answers, encode(answer))
            own = scratch / f"job{seq}"
            if job.get("pure") and os.path.isdir(own):  # the next document of this process
                shutil.rmtree(own, ignore_errors=True)  # starts without this one's files (the
                # zygote clears the whole scratch after the process)


def main(settings: str) -> None:
    """The worker, started as ``python -I -S`` with no environment, reading what to run from
    its stdin (:data:`bastion.readers.runtime.worker._BOOT`): ``settings`` are its JSON."""
    config = json.loads(settings)
    workdir = Path(config["dir"])
    from .procs import NAMESPACES, blank_cmdline, contain_descendants, host_pid

    # first, before anything else runs: nothing a reader starts may outlive this worker
    contained = contain_descendants(config.get("contain", ""))
    # and nothing it or a document's process says can be read in /proc/<pid>/cmdline
    blank_cmdline()
    os.environ.clear()
    os.environ.update(config.get("env") or {})
    from ..base import Limits
    from .sandbox import DocumentRules, bind_worker_dir, enter_sandbox, mount_scratch

    limits = Limits.from_dict(config["limits"])
    if config.get("bind"):  # it gives up root: its directory where its user can reach it
        workdir = bind_worker_dir(config["bind"])
    user = config.get("user")
    scratch = Path(config["scratch"])
    if user:  # its scratch: a tmpfs of its own, capped, seen by no other process
        mount_scratch(scratch, scratch_bytes(limits), *user)
    else:
        scratch.mkdir(mode=0o700, exist_ok=True)
    pid = host_pid()  # before anything can change what /proc says
    from ..text import langid

    if limits.name_languages:  # the language model's cache, mapped before the sandbox hides it
        langid.map_model()
    control, abi, filtered = enter_sandbox(workdir, limits, tuple(user) if user else None,
                                           config.get("view") or (), scratch)
    sys.setrecursionlimit(10_000)
    from ..dispatch import Registry  # the readers: imported when the parent names them
    from .zygote import Zygote
    from . import batch, context, verdict  # what every child uses, imported once here
    from ..ocr import memo

    del batch, context, verdict, memo

    # the worker's registry, built once: the readers the embedding program put first (the
    # tests' misbehaving readers), then the registry's own
    registry = Registry.with_modules(config.get("extra_readers", ()))

    try:  # before the ready message, where no job's clock runs yet: every child inherits it
        if limits.name_languages:  # (a model that does not fit the cap is remembered so)
            langid.preload()
    except langid.Unavailable:
        pass  # every child keeps its text without languages, and says why

    # made once (again when a prepare names a tool it does not cover), enforced by each
    # document's process (one system call): it may write only in its scratch (and its text,
    # through the descriptor the parent gave), and read only what reading needs
    rules = DocumentRules(scratch, read_paths())
    # and a seccomp filter of its own, stacked on the zygote's (readers/runtime/seccomp.py)
    from . import seccomp

    document_filter = seccomp.prepared(seccomp.document_program()) if filtered else None

    def narrow() -> None:
        rules.enforce()
        if document_filter is not None:
            document_filter()

    # what it says of itself is informative only: the pool measures it from /proc
    ready = {"ready": True, "contained": contained, "pid": pid, "landlock": abi,
             "seccomp": filtered}
    control.sendmsg([json.dumps(ready).encode()])
    def prepared(spec: dict[str, Any]) -> None:
        tools = spec.get("tools")
        if isinstance(tools, dict):
            rules.add_tools([p for p in tools.values() if isinstance(p, str)])
        prepare(spec, limits, scratch, registry)

    Zygote(control, scratch=scratch, pid1=contained in NAMESPACES, narrow=narrow,
           child_main=lambda jobs, answers: serve(jobs, answers, scratch, limits, registry),
           prepare=prepared).run()


def read_paths() -> list[str]:
    """What a document's process must read of this interpreter: the program, the standard
    library and every directory on its module path (bastion's tree, the environment's
    packages), as written and as their links lead."""
    return [p for p in (sys.executable, os.path.realpath(sys.executable), sys.base_prefix,
                        *sys.path) if p and os.path.isabs(p)]


def scratch_bytes(limits: Limits) -> int:
    """The bytes a document may put in its scratch: what it may unpack, and its text."""
    return limits.max_unpacked_bytes + limits.max_output_bytes


_PREPARED: set[tuple[str, str]] = set()

# modules a family's documents import as they read (not at the family module's import):
# loaded by the zygote with the family, so that no document's process pays for them
WARM: dict[str, tuple[str, ...]] = {
    "mail": ("email.parser", "email.policy", "email.message", "email.utils",
             "email.headerregistry", "email._header_value_parser", "email.contentmanager",
             "email.generator", "email.iterators", "mimetypes"),
}


def prepare(spec: dict[str, Any], limits: Limits, scratch: Path,
            registry: Any = None) -> None:
    """What the zygote loads when the parent first names a reader family (``spec``: its
    ``reader``, or for a job naming none its ``mime`` to choose one by, and its ``tools``):
    the family's module and what its documents import (:data:`WARM`), and, for the PDF and
    OCR families, the warm tesseract engines, PDFium's and pdfplumber's modules and the
    engines' versions (``pdftotext -v`` is a process).  (The language model that names every
    text's languages is loaded before the ready message: :func:`main`.)  None of it reads a
    document; each child forked afterwards inherits it, so no child pays for it again.
    (What a child learns — its OCR memo — dies with it.)"""
    import importlib

    from ..dispatch import BUILTIN

    registry = registry or BUILTIN
    name = spec.get("reader")
    try:
        if name is None:  # the child chooses on the registry's SPECS: that family, imported here
            chosen = registry.select(str(spec.get("mime") or ""), "")
            name = chosen.name if chosen is not None else None
        else:
            registry.by_name(name)
    except Exception:
        return  # the child meets the same error and reports it
    for module in WARM.get(name or "", ()):
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    tools = spec.get("tools") or {}
    key = (name or "", json.dumps(tools, sort_keys=True))
    if name not in ("ocr", "pdf") or key in _PREPARED:
        return
    _PREPARED.add(key)
    from .context import LocalContext

    ctx = LocalContext(limits, tools, scratch / "warm")
    try:
        if tools.get("tesseract"):  # the warm engines, and the version that keys them
            from ..ocr import engine as tessapi
            from ..ocr.reader import installed_packs, tessdata, tesseract_version, warm_engine

            warm_engine(ctx)
            tessapi.engine(tesseract_version(ctx), tessapi.OSD, tessdata(ctx))
            installed_packs(ctx)  # the packs' identities (SHA-256), not hashed per document
        if name == "pdf":  # its engines' modules, and their versions (pdftotext -v: a process)
            from ..pdf.engines import engine_version

            for module in ("pypdfium2", "pypdfium2.raw", "pdfplumber", "pdfminer.pdfpage",
                           "pdfminer.pdftypes", "pdfminer.pdfdocument"):
                try:
                    importlib.import_module(module)
                except ImportError:
                    pass
            for engine in (*limits.pdf_engines, "pdftotext"):
                engine_version(engine, ctx)
    except Exception:
        pass  # the child meets the same error and reports it


if __name__ == "__main__":
    main(sys.stdin.read())
