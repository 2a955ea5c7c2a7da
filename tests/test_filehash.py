"""bastion.tasks.walk.filehash: one file's sha256 and MIME type, or the reason it has none."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from bastion.tasks.walk.filehash import READ_CHUNK, hash_file

BIG = 1 << 30


def _hash(path: Path, st: os.stat_result | None = None, **kw):
    opts = {"max_file_bytes": BIG, "no_hash": False, "buf": bytearray(READ_CHUNK)} | kw
    return hash_file(os.fsencode(str(path)), path.name, st or os.lstat(path), **opts)


def test_hashes_across_chunks_with_a_small_buffer(tmp_path: Path) -> None:
    data = os.urandom(10_000) + b"end"
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    sha, reason, mime, error = _hash(f, buf=bytearray(1000))  # eleven reads and the end
    assert sha == hashlib.sha256(data).hexdigest() and reason is None and error is None
    assert mime == "application/octet-stream"


CASES = [
    # content, options, (sha256 is set, reason, error is set, mime)
    (b"hello\n", {}, (True, None, False, "text/plain")),
    (b"", {}, (True, None, False, "text/plain")),  # by its extension
    (b"hello\n", {"max_file_bytes": 5}, (False, "over max_file_bytes (5)", False, "text/plain")),
    (b"hello\n", {"no_hash": True}, (False, "no-hash", False, "text/plain")),
]


@pytest.mark.parametrize("content,opts,expected", CASES)
def test_outcomes(tmp_path: Path, content: bytes, opts: dict, expected: tuple) -> None:
    f = tmp_path / "f.txt"
    f.write_bytes(content)
    sha, reason, mime, error = _hash(f, **opts)
    assert (sha is not None, reason, error is not None, mime) == expected
    if sha is not None:
        assert sha == hashlib.sha256(content).hexdigest()


def test_never_follows_a_symlink_nor_blocks_on_a_fifo(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_bytes(b"t\n")
    link = tmp_path / "link.txt"
    os.symlink(target, link)
    sha, reason, _, error = _hash(link, os.stat(target))
    assert sha is None and reason == "read error" and "cannot open" in error
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sha, reason, _, error = _hash(fifo)  # opened without blocking, refused by its fstat
    assert sha is None and reason == "changed during the walk" and error


def test_a_file_that_changed_since_its_stat(tmp_path: Path) -> None:
    f = tmp_path / "grows.txt"
    f.write_bytes(b"first\n")
    stale = os.lstat(f)
    with open(f, "ab") as fh:
        fh.write(b"more\n")
    sha, reason, mime, error = _hash(f, stale)
    assert sha is None and reason == "changed during the walk" and mime == "text/plain"
    assert error == "file changed while it was hashed"
