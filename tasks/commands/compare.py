"""Reproducibility check: do two output directories hold the same records and texts?

Compared: ``extract.jsonl`` record by record without ``reused`` (which says whether a verdict
was kept from an earlier run, so a re-run never matches a fresh run on it), every file of the text
store (``extract/``) byte for byte, and ``walk.jsonl`` without ``mtime_ns`` and ``inode`` (which
differ between two copies of a tree).  ``strict=True`` compares both record files byte for byte
as well.  Summaries are not compared: they hold timestamps and durations by design.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterator

STAT_FIELDS = ("mtime_ns", "inode")
RUN_FIELDS = ("reused",)


def _records(path: Path, drop: tuple[str, ...] = ()) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    with open(path, "rb") as f:
        for line in f:
            r = json.loads(line)
            for k in drop:
                r.pop(k, None)
            out[(r["root"], r["path"])] = r
    return out


def _diff_records(name: str, a: Path, b: Path, drop: tuple[str, ...] = ()) -> Iterator[str]:
    try:
        ra = _records(a / name, drop)
        rb = _records(b / name, drop)
    except OSError as e:
        yield f"{name}: cannot read: {e}"
        return
    for key in sorted(ra.keys() | rb.keys()):
        label = f"{key[0]}/{key[1]}"
        if key not in rb:
            yield f"{name}: {label}: only in {a}"
        elif key not in ra:
            yield f"{name}: {label}: only in {b}"
        elif ra[key] != rb[key]:
            fields = sorted(k for k in ra[key].keys() | rb[key].keys()
                            if ra[key].get(k) != rb[key].get(k))
            for f in fields:
                yield f"{name}: {label}: {f}: {ra[key].get(f)!r} != {rb[key].get(f)!r}"
    if not drop and (a / name).read_bytes() != (b / name).read_bytes():
        if ra == rb:
            yield f"{name}: same records, different bytes (order or encoding)"


def _store_files(out: Path) -> dict[str, str]:
    root = out / "extract"
    files: dict[str, str] = {}
    if not root.is_dir():
        return files
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            files[str(p.relative_to(out))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return files


def not_an_output(path: Path) -> str | None:
    """Why ``path`` is not a bastion output to compare (not a directory, or no bastion
    ``CACHEDIR.TAG`` in it); None when it is one."""
    from ..output.tag import OUTPUT_TAG, is_tagged

    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        return e.strerror or str(e)
    try:
        if not is_tagged(fd):
            return f"not a bastion output (no bastion {OUTPUT_TAG})"
    finally:
        os.close(fd)
    return None


def compare_outputs(a: Path, b: Path, strict: bool = False) -> list[str]:
    """Every difference between two output directories, one line each (empty: identical)."""
    differences: list[str] = []
    differences += _diff_records("walk.jsonl", a, b, () if strict else STAT_FIELDS)
    differences += _diff_records("extract.jsonl", a, b, () if strict else RUN_FIELDS)
    fa, fb = _store_files(a), _store_files(b)
    for rel in sorted(fa.keys() | fb.keys()):
        if rel not in fb:
            differences.append(f"store: {rel}: only in {a}")
        elif rel not in fa:
            differences.append(f"store: {rel}: only in {b}")
        elif fa[rel] != fb[rel]:
            differences.append(f"store: {rel}: contents differ")
    return differences
