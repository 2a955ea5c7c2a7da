"""The records bastion writes, one typed dataclass each, and their JSON Lines form.

Paths are POSIX and relative to their root.  A name that is not valid UTF-8 is decoded with
``surrogateescape`` and written as a JSON ``\\udcXX`` escape (every record is ASCII JSON), so
``os.fsencode(record["path"])`` gives back the exact bytes.  docs/records.md has every field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from bastion.readers.runtime.verdict import Status, Verdict

from .output.atomic import dumps

STATUSES = tuple(s.value for s in Status)


# Not frozen: a frozen dataclass's __init__ costs ~3x (object.__setattr__ per field), and
# 100k records are built per walk.
@dataclass(slots=True)
class WalkRecord:
    root: str
    path: str
    kind: str  # "file" | "symlink" | "other" (FIFO, socket, device: recorded, never opened)
    size: int | None
    mtime_ns: int | None
    inode: int | None
    sha256: str | None
    reason: str | None  # why sha256 is null: "over max_file_bytes", "no-hash", "symlink", …
    mime: str | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "path": self.path, "kind": self.kind, "size": self.size,
                "mtime_ns": self.mtime_ns, "inode": self.inode, "sha256": self.sha256,
                "reason": self.reason, "mime": self.mime, "error": self.error}


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractRecord:
    """One line of extract.jsonl: a walked file and the verdict on its content."""

    root: str
    path: str
    sha256: str | None
    mime: str | None
    verdict: Verdict
    v: int  # EXTRACT_VERSION
    reused: bool  # the verdict was not produced for this record in this run
    text: str | None = None  # the store file holding the text (ok only), relative to out
    # a repeat offender's backoff (tasks/extract/store.py): {"failures": n in a row,
    # "next_try_in_runs": k}; only on such an error record (absent from every other)
    retry: dict[str, int] | None = None
    # the store file holding the text's Markdown (ok records of a run with ``markdown:
    # true``), relative to out; absent from every other record
    markdown: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = self.verdict.to_json()
        d.pop("markdown", None)  # (the verdict's flag: the record names the file)
        d.update(root=self.root, path=self.path, sha256=self.sha256, mime=self.mime, v=self.v,
                 reused=self.reused, text=self.text)
        if self.retry is not None:
            d["retry"] = self.retry
        if self.markdown is not None:
            d["markdown"] = self.markdown
        return d


def to_line(record: WalkRecord | ExtractRecord) -> bytes:
    return (dumps(record.to_json()) + "\n").encode("ascii")


def iter_jsonl(path: Path, chunk: int = 4 << 20) -> Iterator[dict[str, Any]]:
    """The records of a JSON Lines file as dicts, a few MiB at a time (records hold no raw
    newlines: JSON escapes them): each chunk is parsed in one call, and memory stays bounded
    whatever the file's size."""
    with open(path, "rb") as f:
        rest = b""
        while True:
            data = f.read(chunk)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1:]
            body = data[:cut].strip()
            if body:
                yield from json.loads(b"[" + body.replace(b"\n", b",") + b"]")
        if rest.strip():
            yield json.loads(rest)

