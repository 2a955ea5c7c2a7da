"""A hostile reader that takes the name ``text``, so that the worker batches its documents as
plain text (:data:`bastion.readers.runtime.batch.PURE_READERS`): the tests' way to see the
batch's bounds from inside.  Each document answers JSON: its process's pid (as the pool sees
it) and whether the mark an earlier document of its process left is there; then it leaves one.
A document whose first line is ``memscan`` instead scans its process's memory for the markers
the rest names (:func:`tests.hostile_readers.memscan`), as the first document of a batch; one
whose first line is ``segv`` kills its process with SIGSEGV, ``sleep`` sleeps for ever.
"""

from __future__ import annotations

import json

from bastion.readers.base import Context, Document, Reader, ReadResult, TextSink

_MARKS: list[str] = []


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    from bastion.readers.runtime.procs import host_pid

    if doc.data.startswith(b"segv\n"):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    if doc.data.startswith(b"sleep\n"):
        import time

        time.sleep(3600)
    if doc.data.startswith(b"memscan\n"):
        from tests.hostile_readers import memscan

        sink.write(json.dumps(memscan(doc.data.partition(b"\n")[2].decode()), sort_keys=True))
        return ReadResult(extractor="hostile-text")
    sink.write(json.dumps({"pid": host_pid(), "marks": len(_MARKS)}) + "\n")
    _MARKS.append(doc.name)
    return ReadResult(extractor="hostile-text")


READER = Reader(name="text", version=1, mimes=("text/plain",), extensions=(".txt",), read=read)
