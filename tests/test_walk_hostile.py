"""The walk parses nothing beyond fixed-size signatures (issue 32): a ZIP's directory is read
within fixed caps (bastion.readers.zipdir), an OLE2 directory within its sector caps, and
detection reads through the descriptor the walk opened (a FIFO put in a file's place cannot
block it).  The hostile ZIP is real: an end record that claims one entry in front of a
central directory holding a million, walked by ``bastion walk`` in a subprocess whose peak
memory and time are measured."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bastion.readers import detect, zipdir
from bastion.readers.detect import detect_bytes, detect_file
from procutil import before_a_writer  # tests/ is on sys.path

REPO = Path(__file__).resolve().parent.parent


def docx_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("[Content_Types].xml", b"<Types/>")
        z.writestr("word/document.xml", b"<w:document/>")
    return buf.getvalue()


def odt_bytes(mimetype: bytes = b"application/vnd.oasis.opendocument.text") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), mimetype, compress_type=zipfile.ZIP_STORED)
        z.writestr("content.xml", b"<office:document-content/>")
    return buf.getvalue()


def lying_zip(entries: int, name: bytes = b"word/document.xml") -> bytes:
    """A ZIP of one stored member whose central directory repeats that member's entry
    ``entries`` times, behind an end record that claims a single entry."""
    body = b"<w:document/>"
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, len(body),
                        len(body), len(name), 0) + name + body
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0,
                          len(body), len(body), len(name), 0, 0, 0, 0, 0, 0) + name
    directory = central * entries
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), len(local), 0)
    return local + directory + end


def test_an_end_record_that_lies_about_the_entries_stops_at_the_cap() -> None:
    """A directory holding more entries than MAX_ENTRIES is not inspected (plain ZIP), and a
    directory over MAX_DIR_BYTES is not even read; one that fits is, whatever it claims."""
    small = lying_zip(3)
    assert detect_bytes(small, "x") == detect.DOCX  # the same directory, within the caps
    over_entries = lying_zip(zipdir.MAX_ENTRIES + 1, b"a")
    assert len(over_entries) - len(small) < zipdir.MAX_DIR_BYTES  # the entry cap decides
    assert detect_bytes(over_entries, "x") == detect.ZIP
    over_bytes = lying_zip(zipdir.MAX_DIR_BYTES // 60 + 1)
    assert detect_bytes(over_bytes, "x") == detect.ZIP


class CountingReader:
    """A source for detection that counts what it was asked to read."""

    def __init__(self, data: bytes) -> None:
        self.data, self.read = data, 0

    def size(self) -> int:
        return len(self.data)

    def read_at(self, offset: int, n: int) -> bytes:
        chunk = self.data[offset:offset + n]
        self.read += len(chunk)
        return chunk


def test_detection_reads_a_bounded_tail_of_a_huge_directory() -> None:
    """A 40 MB directory: the end record's tail is read, the directory itself is not."""
    data = lying_zip(zipdir.MAX_DIR_BYTES // 60 * 2)
    src = CountingReader(data)
    assert detect._zip_kind(src) == detect.ZIP
    assert src.read <= 2 * (65535 + 22), src.read


@pytest.mark.parametrize("make, expected", [
    (docx_bytes, detect.DOCX),
    (odt_bytes, "application/vnd.oasis.opendocument.text"),
    (lambda: odt_bytes(b"application/x-not-odf"), detect.ZIP),
])
def test_the_zip_kinds_read_through_a_descriptor(make, expected, tmp_path: Path) -> None:
    data = make()
    p = tmp_path / "f"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        assert detect_file(fd, "f", data[:detect.HEAD_BYTES]) == expected
        assert os.lseek(fd, 0, os.SEEK_CUR) == 5  # pread: the caller's offset is left alone
    finally:
        os.close(fd)
    assert detect_bytes(data, "f") == expected == detect_file(p, "f", data[:detect.HEAD_BYTES])


def test_a_mimetype_member_with_a_bad_crc_makes_a_plain_zip() -> None:
    """zipfile's rule, kept: a damaged mimetype member makes the file a ZIP."""
    data = bytearray(odt_bytes())
    at = data.index(b"application/vnd.oasis")
    data[at] ^= 1
    assert detect_bytes(bytes(data), "f") == detect.ZIP


def test_detect_file_by_path_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    """A FIFO where a ZIP's path was: detection by path opens it without blocking and reads
    nothing (the walk itself passes its descriptor; this is the path form's guarantee)."""
    fifo = tmp_path / "victim.zip"
    os.mkfifo(fifo)
    assert before_a_writer(fifo, lambda: detect_file(fifo, "victim.zip", docx_bytes())) \
        == detect.ZIP


@pytest.mark.slow
def test_walking_a_zip_whose_directory_lies_stays_small_and_quick(tmp_path: Path) -> None:
    """``bastion walk`` over a 63 MB ZIP whose end record claims 1 entry and whose directory
    holds a million: the walk (a real subprocess) peaks under 400 MB, and records the file as
    a plain ZIP.  (zipfile read the whole directory: 3 million entries took the walk to 2 GB,
    and minutes.  The peak is what shows the directory was not read: a wall-clock bound
    flaked under load.)"""
    root = tmp_path / "root"
    root.mkdir()
    (root / "bomb.docx").write_bytes(lying_zip(1_000_000))
    m = tmp_path / "manifest.yaml"
    m.write_text(yaml.safe_dump({"version": 1, "roots": [{"name": "r", "path": "root"}],
                                 "stages": ["walk"]}))
    out = tmp_path / "out"
    code = ("import resource, sys\n"
            "from bastion.tasks.cli import main\n"
            "rc = main(['walk', sys.argv[1], '--out', sys.argv[2], '-q'])\n"
            # VmHWM: this exec'd image's peak (ru_maxrss may carry the forking parent's)
            "print(next(ln for ln in open('/proc/self/status')\n"
            "           if ln.startswith('VmHWM:')).split()[1])\n"
            "sys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, str(m), str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)  # a net against a hang
    assert r.returncode == 0, r.stderr
    peak_mb = int(r.stdout.split()[-1]) / 1024
    assert peak_mb < 400, peak_mb
    rec = json.loads((out / "walk.jsonl").read_text())
    assert rec["mime"] == detect.ZIP and rec["sha256"], rec
