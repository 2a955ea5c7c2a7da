"""The records bastion writes, one typed dataclass each, and their JSON Lines form.

Paths are POSIX and relative to their root.  A name that is not valid UTF-8 is decoded with
``surrogateescape`` and written as a JSON ``\\udcXX`` escape (every record is ASCII JSON), so
``os.fsencode(record["path"])`` gives back the exact bytes.  docs/records.md has every field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fsio import atomic_write, dumps

STATUSES = ("ok", "empty", "unsupported", "error", "skipped")


# Not frozen: a frozen dataclass's __init__ costs ~3x (object.__setattr__ per field), and
# 100k records are built per run.
@dataclass
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


@dataclass
class ExtractRecord:
    root: str
    path: str
    sha256: str | None
    mime: str | None
    status: str  # ok | empty | unsupported | error | skipped
    extractor: str | None
    chars: int
    error: str | None
    error_kind: str | None
    limit: str | None  # the budget reached when the text was cut short (status ok)
    v: int  # EXTRACT_VERSION
    reused: bool
    tools: list[str] | None  # tools present, on unsupported records
    pages: int | None = None
    title: str | None = None


def to_line(record: WalkRecord | ExtractRecord) -> bytes:
    # vars() rather than asdict(): fields are flat, and asdict's deep copy costs 5x the dump
    return (dumps(vars(record)) + "\n").encode("ascii")


def write_jsonl(path: Path, records: list[Any]) -> None:
    """Write records (already sorted by the caller) atomically."""
    atomic_write(path, (to_line(r) if not isinstance(r, bytes) else r for r in records))


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every record of a JSON Lines file as dicts, parsed in one call (records hold no raw
    newlines: JSON escapes them)."""
    with open(path, "rb") as f:
        data = f.read().strip()
    if not data:
        return []
    return json.loads(b"[" + data.replace(b"\n", b",") + b"]")
