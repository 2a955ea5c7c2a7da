"""A worker: the zygote that forks one process per document (:mod:`bastion.readers.runtime.zygote`).

Started by :class:`bastion.readers.runtime.pool.WorkerPool` as ``python -I -S -c …`` with one JSON argument
(its private directory, the limits, how it holds its descendants).  It enters the sandbox
first, then answers one JSON line per job, importing a reader family's module when its first
job comes (:meth:`bastion.readers.dispatch.Registry.by_name`, :func:`prepare`) and reading each document
in a process it forks for it (:mod:`bastion.readers.runtime.zygote`).  Jobs come on a ``SOCK_SEQPACKET`` socket,
one message each, with the document's read-only descriptor attached (``SCM_RIGHTS``: the parent
opened the file, so the worker needs no access to its path)::

    job    {"id": 7, "name": "a.pdf", "mime": "application/pdf", "reader": "pdf",
            "sha256": "…", "size": 1234, "tools": {"pdftotext": "/usr/bin/pdftotext"},
            "deadline": 300}
           (no descriptor and "open_error": "…" when the parent could not open it)
    result {"id": 7, "verdict": {"status": "ok", "extractor": "pdfium", "chars": 99, …},
            "text": "t7.txt", "sidecar": {"outline": […], "page_sources": […]},
            "rss": 51234816, "fatal": false}
           (a job with "markdown": true: and "markdown": "m7.md", its Markdown)

The reader is the one the parent chose (``reader``; none: the registry chooses, as for a
document handed over without a plan); ``verdict`` is a :class:`bastion.readers.runtime.verdict.Verdict` in its
JSON form.

``text`` names a file in the worker's directory holding the normalised UTF-8 text (written by
the document's process through a descriptor the zygote opened; the parent moves it into the
store and makes it durable with one ``syncfs`` per batch).  ``fatal`` asks the parent to
replace this worker.  A line starting ``!`` is the zygote's own report on a document whose
process ended without an answer (:func:`bastion.readers.runtime.zygote.report`).  The first
line, before any job, is ``{"ready": true, "contained": …, "pid": …, "landlock": …,
"seccomp": …}``: how it holds what its readers start
(:func:`bastion.readers.runtime.procs.containment`), its pid as the pool numbers it, and what it
says of its sandbox (informative: the pool measures its identity in ``/proc``).

Each document's process has an :class:`bastion.readers.ocr.memo.OcrMemo` of its own: an image
OCRed twice in one document (a logo on every page) is recognised once; nothing is kept across
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
from typing import Any

READ_CHUNK = 1 << 20
MAX_JOB = 1 << 20  # bytes of one job message (a path, a name, the tools)


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


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


def handle(job: dict[str, Any], fd: int | None, scratch: Path, limits, seq: int,
           text_fd: int, ocr_memo: Any = None, registry: Any = None,
           md_fd: int | None = None) -> dict[str, Any]:
    """Read one document (in the child the zygote forked for it) with a reader of
    ``registry`` (the worker's, built once in :func:`main`; default the built-in one): the
    text goes to ``text_fd`` (``t<seq>.txt``, opened by the zygote), its Markdown, when the
    job asks for it, to ``md_fd`` (``m<seq>.md``), the scratch is ``scratch``."""
    from ..base import Document
    from .context import LocalContext
    from ..dispatch import BUILTIN, Outcome, read_document, read_nested
    from ..errors import ChangedSinceWalk, ReaderError

    from .verdict import Verdict

    result: dict[str, Any] = {"id": job["id"], "fatal": False, "text": None}
    used: set[str] = set()
    try:
        try:
            if fd is None:  # the parent could not open it
                raise ChangedSinceWalk(job.get("open_error") or "no document descriptor")
            owned, fd = fd, None  # _read_checked closes it
            data = _read_checked(owned, job["size"], job["sha256"])
        except ReaderError as e:
            outcome = Outcome("error", extractor=None, error=e.message, error_kind=e.kind)
        else:
            registry = registry or BUILTIN
            ctx = LocalContext(limits, job.get("tools") or {}, scratch,
                               deadline=time.monotonic() + float(job.get("deadline", 60)),
                               nested=read_nested, ocr_memo=ocr_memo, registry=registry)
            reader = registry.by_name(job.get("reader"))  # chosen by the parent, not again here
            if reader is None and job.get("reader") is not None:
                raise RuntimeError(f"no reader named {job.get('reader')!r} in this worker")
            outcome = read_document(Document(data, job["name"], job["mime"]), ctx, reader,
                                    markdown=md_fd is not None)
            used = ctx.tools_used
            del data
    except MemoryError:
        outcome = Outcome("error", error="reader ran out of memory (memory cap)",
                          error_kind="memory")
        result["fatal"] = True
    except RecursionError:
        outcome = Outcome("error", error="reader recursed too deep", error_kind="crash")
        result["fatal"] = True
    except Exception as e:  # a reader bug: still exactly one record
        outcome = Outcome("error", error=f"reader failed: {type(e).__name__}: {e}"[:500],
                          error_kind="internal")
    finally:
        if fd is not None:
            os.close(fd)
    if outcome.status == "ok":
        name = f"t{seq}.txt"
        try:
            encoded = outcome.text.encode("utf-8", "replace")  # lone surrogates → "?"
            if len(encoded) > limits.max_output_bytes:
                raise OSError(27, "File too large")
            view = memoryview(encoded)  # made durable by the parent (syncfs)
            while view:
                view = view[os.write(text_fd, view):]
            result["text"] = name
        except OSError as e:
            if e.errno == 27:  # EFBIG: over RLIMIT_FSIZE / the output cap
                outcome = Outcome("error", extractor=outcome.extractor,
                                  error=f"text over the {limits.max_output_bytes} byte output "
                                        "limit", error_kind="output_limit")
            else:
                outcome = Outcome("error", extractor=outcome.extractor,
                                  error=f"cannot write text: {e.strerror}", error_kind="internal")
            try:
                os.ftruncate(text_fd, 0)
            except OSError:
                pass
    if outcome.status == "ok" and md_fd is not None and outcome.markdown is not None:
        from ..render.markdown import capped

        try:  # within the output cap (cut at a line, a note says so): docs/readers.md
            view = memoryview(capped(outcome.markdown, limits.max_output_bytes))
            while view:
                view = view[os.write(md_fd, view):]
            result["markdown"] = f"m{seq}.md"
        except OSError as e:
            outcome = Outcome("error", extractor=outcome.extractor,
                              error=f"cannot write text: {e.strerror}", error_kind="internal")
            result["text"] = None
    verdict = Verdict.of_outcome(
        outcome.status, chars=len(outcome.text), extractor=outcome.extractor,
        error=outcome.error, error_kind=outcome.error_kind, limit=outcome.limit,
        result=outcome.result, warnings=outcome.warnings, tools_used=used)
    sidecar = outcome.result.sidecar() if outcome.result is not None else {}
    result.update(verdict=verdict.to_json(), sidecar=sidecar, rss=_rss())
    return result


def main() -> None:
    config = json.loads(sys.argv[1])
    workdir = Path(config["dir"])
    from .procs import NAMESPACES, contain_descendants, host_pid

    # first, before anything else runs: nothing a reader starts may outlive this worker
    contained = contain_descendants(config.get("contain", ""))
    from ..base import Limits
    from .sandbox import (bind_worker_dir, enter_sandbox, landlock_enforce, landlock_ruleset,
                          mount_scratch)

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
    jobs, results, abi, filtered = enter_sandbox(workdir, limits,
                                                 tuple(user) if user else None,
                                                 config.get("view") or (), scratch)
    sys.setrecursionlimit(10_000)
    from ..dispatch import Registry  # the readers: imported by the first job needing them
    from ..ocr.memo import OcrMemo
    from .zygote import BATCH_DOCS, BATCH_READERS, Batch, clear, read_in_child
    from . import context, verdict  # what every child uses, imported once here

    del context, verdict

    # the worker's registry, built once: the readers the embedding program put first (the
    # tests' misbehaving readers), then the registry's own
    registry = Registry.with_modules(config.get("extra_readers", ()))

    try:  # before the ready line, where no job's clock runs yet: every child inherits it
        if limits.name_languages:  # (a model that does not fit the cap is remembered so)
            langid.preload()
    except langid.Unavailable:
        pass  # every child keeps its text without languages, and says why

    # what it says of itself is informative only: the pool measures it from /proc
    ready = {"ready": True, "contained": contained, "pid": pid, "landlock": abi,
             "seccomp": filtered}
    results.write(json.dumps(ready).encode() + b"\n")
    pid1 = contained in NAMESPACES
    own = (jobs.fileno(), results.fileno())
    seq = 0
    batch: Batch | None = None  # the child reading a run of plain-text documents, if any

    _, narrower = landlock_ruleset([scratch])  # made once, enforced by each document's process

    def narrow() -> None:  # a document's process may write only in its scratch (and its text)
        if narrower is not None:
            landlock_enforce(narrower)
            os.close(narrower)

    def in_batch(msg: dict[str, Any], doc_fd: int | None, text_fd: int) -> dict[str, Any]:
        n = msg["seq"]
        return handle(msg["job"], doc_fd, scratch / f"job{n}", limits, n, text_fd, OcrMemo(),
                      registry)

    room = socket.CMSG_SPACE(4 * array("i").itemsize)
    while True:
        line, ancillary, flags, _ = jobs.recvmsg(MAX_JOB, room, socket.MSG_CMSG_CLOEXEC)
        if not line:
            return  # the pool closed its end
        fds = array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) > 1:
            os._exit(2)  # not the pool's protocol: the pool sees this worker die
        seq += 1
        job = json.loads(line)
        markdown = job.get("markdown") is True  # (a batch child has no descriptor for it)
        batched = job.get("reader") in BATCH_READERS and not markdown
        if batch is not None and (not batched or batch.count >= BATCH_DOCS):
            batch.end(pid1)  # and every process it started
            batch = None
        prepare(job, limits, scratch, registry)  # imports and engines, in the zygote
        clear(workdir, keep=scratch.name)  # what the last document left (its text is taken)
        clear(scratch)
        text_fd = os.open(workdir / f"t{seq}.txt",
                          os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        md_fd = os.open(workdir / f"m{seq}.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL
                        | os.O_CLOEXEC, 0o600) if markdown else None
        doc_fd = fds[0] if fds else None
        n = seq

        def work(job=job, doc_fd=doc_fd, text_fd=text_fd, n=n, md_fd=md_fd) -> dict[str, Any]:
            return handle(job, doc_fd, scratch / f"job{n}", limits, n, text_fd, OcrMemo(),
                          registry, md_fd)

        try:
            if batched:
                if batch is None:
                    batch = Batch(in_batch, own, narrow)
                got = batch.read({"job": job, "seq": n}, doc_fd, text_fd)
                if got is None:
                    out, batch = batch.ended(job["id"], pid1), None
                else:
                    out = got
            else:
                out = read_in_child(job["id"], work, own, narrow, pid1)
        finally:
            os.close(text_fd)
            if md_fd is not None:
                os.close(md_fd)
            if doc_fd is not None:
                os.close(doc_fd)
        view = memoryview(out)
        while view:
            view = view[results.write(view):]


def scratch_bytes(limits) -> int:
    """The bytes a document may put in its scratch: what it may unpack, and its text."""
    return limits.max_unpacked_bytes + limits.max_output_bytes


_PREPARED: set[tuple[str, str]] = set()


def prepare(job: dict[str, Any], limits, scratch: Path, registry: Any = None) -> None:
    """What the zygote loads before it forks a child for ``job``: the reader family's module
    (for a job naming none, the one the registry selects) and, for the PDF and OCR families, the warm
    tesseract engines, PDFium's and pdfplumber's modules and the engines' versions (``pdftotext
    -v`` is a process).  (The language model that names every text's languages is loaded
    before the ready line: :func:`main`.)  None of it reads a document; each child inherits
    it, so no child pays for it again.  (What a child learns — its OCR memo — dies with it.)"""
    from ..dispatch import BUILTIN

    registry = registry or BUILTIN
    name = job.get("reader")
    try:
        if name is None:  # the child chooses on the registry's SPECS: that family, imported here
            registry.select(str(job.get("mime") or ""), str(job.get("name") or ""))
        else:
            registry.by_name(name)
    except Exception:
        return  # the child meets the same error and reports it
    tools = job.get("tools") or {}
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
            import importlib

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
    main()
