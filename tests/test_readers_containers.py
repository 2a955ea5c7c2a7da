"""Archives (zip, tar, gzip/bzip2/xz, 7z) and EPUB: members read through the registry, caps.

Archives are built in code with a unique marker word per member (zipfile, tarfile, gzip), real
samples come from CPython's and py7zr's test suites (tests/samples/archive/ORIGIN.md), and the
bombs are generated here as streams.  The hostile cases run through a real sandboxed worker.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import shutil
import struct
import tarfile
import time
import zipfile
import zlib
from email.message import EmailMessage
from pathlib import Path

import pytest

import officegen as og  # tests/ is on sys.path
from bastion.readers.base import Document, Limits, MiB
from bastion.readers.detect import detect_bytes
from bastion.readers.dispatch import read_document, select
from bastion.readers.runtime.context import LocalContext
from bastion.readers.runtime.pool import Job, JobResult, WorkerPool

SAMPLES = Path(__file__).parent / "samples" / "archive"
SEVEN = shutil.which("7zz") or shutil.which("7z")
needs_7z = pytest.mark.skipif(SEVEN is None, reason="7zz (Debian package 7zip) not installed")


def tools() -> dict[str, str]:
    return {os.path.basename(SEVEN): SEVEN} if SEVEN else {}


def read(data: bytes, name: str, limits: Limits | None = None, tool_map=None, tmp=None):
    ctx = LocalContext(limits or Limits(), tools() if tool_map is None else tool_map, tmp)
    return read_document(Document(data, name, detect_bytes(data, name)), ctx)


def make_zip(members: dict[str, bytes | str], method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def make_tar(members: dict[str, bytes], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def mark_encrypted(data: bytes, name: str) -> bytes:
    """Set the "encrypted" flag of one member in the central directory (zipfile writes none)."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", out, at + 28)[0]
        if out[at + 46:at + 46 + n] == name.encode():
            out[at + 8] |= 0x1
        at = out.find(b"PK\x01\x02", at + 46)
    return bytes(out)


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("=== member: ")]


# -- zip --------------------------------------------------------------------------------------

def test_zip_members_are_read_in_order_with_headers_and_counts():
    eml = EmailMessage()
    eml["From"] = "a@example.org"
    eml["Subject"] = "mailsubjectword"
    eml.set_content("mailbodyword\n")
    data = make_zip({
        "dir/a.txt": "alphaword\n",
        "b.html": "<html><body><p>betaword</p></body></html>",
        "c.bin": bytes(range(256)) * 4,
        "d/empty.txt": "",
        "e.docx": og.docx(og.w_p("docxword")),
        "f.eml": eml.as_bytes(),
    })
    out = read(data, "bundle.zip")
    assert out.status == "ok" and out.extractor == "zip" and out.limit is None
    assert out.result.members == {"ok": 4, "unsupported": 1, "error": 0, "empty": 1}
    assert headers(out.text) == [
        "=== member: dir/a.txt ===",
        "=== member: b.html ===",
        "=== member: c.bin [unsupported: no reader for application/octet-stream] ===",
        "=== member: d/empty.txt [empty] ===",
        "=== member: e.docx ===",
        "=== member: f.eml ===",
    ]
    lines = out.text.splitlines()
    for word, member in [("alphaword", "dir/a.txt"), ("betaword", "b.html"),
                         ("docxword", "e.docx"), ("mailbodyword", "f.eml")]:
        at = lines.index(f"=== member: {member} ===")
        assert any(word in line for line in lines[at + 1:at + 6]), (word, lines)
    assert read(data, "bundle.zip").text == out.text  # deterministic


def test_zip_encrypted_and_damaged_members_are_counted_not_fatal():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("good.txt", "goodword\n")
        zf.writestr("locked.txt", "secretword")
        zf.writestr("broken.txt", "brokenword " * 100)
    # locked.txt declares traditional PKWARE encryption
    data = bytearray(mark_encrypted(buf.getvalue(), "locked.txt"))
    # flip compressed bytes of broken.txt: its CRC check fails
    at = data.index(b"broken.txt") + len("broken.txt")
    data[at + 5:at + 15] = bytes(10)
    out = read(bytes(data), "mixed.zip")
    assert out.status == "ok"
    assert out.result.members == {"ok": 1, "unsupported": 0, "error": 2, "empty": 0}
    assert "goodword" in out.text and "secretword" not in out.text
    hs = headers(out.text)
    assert hs[1] == "=== member: locked.txt [error: encrypted: the member needs a password] ==="
    assert hs[2].startswith("=== member: broken.txt [error: corrupt: damaged zip member")


def test_archive_whose_members_all_fail_is_not_ok():
    out = read(mark_encrypted(make_zip({"locked.txt": "x"}), "locked.txt"), "locked.zip")
    assert (out.status, out.error_kind) == ("error", "encrypted")
    out = read(make_zip({"a.bin": bytes(range(256))}), "bin.zip")
    assert out.status == "unsupported" and "a.bin" in out.error
    out = read(make_zip({"a.txt": "", "b.txt": "  \n"}), "blank.zip")
    assert out.status == "empty"
    assert read(make_zip({}), "none.zip").status == "empty"
    out = read(b"PK\x03\x04" + b"\x00" * 100, "trunc.zip")
    assert (out.status, out.error_kind) == ("error", "corrupt")


def test_member_paths_are_data_never_files(tmp_path: Path):
    data = make_zip({
        "../../escape.txt": "escapeword\n",
        "/abs/path.txt": "absword\n",
        "evil\n=== member: forged.txt ===\nx.txt": "evilword\n",
        "ctl\x1b[31m.txt": "ctlword\n",
    })
    scratch = tmp_path / "scratch"
    out = read(data, "paths.zip", tmp=scratch)
    assert out.status == "ok"
    assert headers(out.text) == [
        "=== member: ../../escape.txt ===",
        "=== member: /abs/path.txt ===",
        "=== member: evil\\x0a=== member: forged.txt ===\\x0ax.txt ===",
        "=== member: ctl\\x1b[31m.txt ===",
    ]
    assert not (tmp_path / "escape.txt").exists() and not Path("/abs/path.txt").exists()
    assert not scratch.exists() or not any(scratch.iterdir())


def test_cp437_names_and_directories_from_cpython_samples():
    out = read((SAMPLES / "zip_cp437_header.zip").read_bytes(), "zip_cp437_header.zip")
    assert out.status == "ok"
    assert headers(out.text) == ["=== member: filename_with_æoå.txt ===",
                                 "=== member: filename_without.txt ==="]
    out = read((SAMPLES / "zipdir.zip").read_bytes(), "zipdir.zip")
    assert out.status == "empty"
    assert out.result.members == {"ok": 0, "unsupported": 0, "error": 0, "empty": 1}


def legacy_zip(members: dict[bytes, bytes], unicode_path: dict[bytes, str] | None = None
               ) -> bytes:
    """A zip whose member names are the given bytes without the UTF-8 flag, as DOS and older
    Windows tools wrote them (zipfile flags any non-ASCII name it writes): written under
    ASCII placeholders of the same length, replaced in the local headers and the central
    directory.  ``unicode_path``: Info-ZIP's Unicode Path field (0x7075) for some names."""
    buf = io.BytesIO()
    marks = {}
    with zipfile.ZipFile(buf, "w") as zf:
        for i, (raw, body) in enumerate(members.items()):
            mark = (f"@{i:03}@" + "x" * len(raw))[:len(raw)].encode()
            marks[mark] = raw
            info = zipfile.ZipInfo(mark.decode())
            name = (unicode_path or {}).get(raw)
            if name is not None:
                field = b"\x01" + struct.pack("<I", zlib.crc32(raw)) + name.encode("utf-8")
                info.extra = struct.pack("<HH", 0x7075, len(field)) + field
            zf.writestr(info, body)
    data = buf.getvalue()
    for mark, raw in marks.items():
        assert data.count(mark) == 2
        data = data.replace(mark, raw)
    return data


@pytest.mark.parametrize("names,encoding", [
    (["Отчет за 2021.txt", "план работ.txt"], "cp866"),  # Russian DOS
    (["Café.txt", "Größe und Maße.txt"], "cp437"),  # the zip standard's own
    (["naïve.txt", "Отчет.txt"], "utf-8"),  # UTF-8 written without the flag
])
def test_zip_names_without_the_utf8_flag_are_read_in_their_encoding(names, encoding):
    members = {n.encode(encoding): f"marker {i}".encode() for i, n in enumerate(names)}
    inner = legacy_zip(members)
    out = read(inner, "legacy.zip")
    assert headers(out.text) == [f"=== member: {n} ===" for n in names], out.text
    # a nested zip: the same names inside it
    outer = make_zip({"outer.txt": "outer marker", "inner.zip": inner})
    got = headers(read(outer, "outer.zip").text)
    assert [f"=== member: inner.zip!/{n} ===" for n in names] == got[1:], got


def test_zip_unicode_path_field_gives_the_name_when_its_crc_matches():
    raw = "Отчет.txt".encode("cp866")
    data = legacy_zip({raw: b"body", b"other.txt": b"x"}, unicode_path={raw: "Отчёт.txt"})
    assert headers(read(data, "u.zip").text)[0] == "=== member: Отчёт.txt ==="
    # a field whose CRC does not match the header's name (renamed since): not trusted
    stale = legacy_zip({raw: b"body"}, unicode_path={raw: "Отчёт.txt"})
    stale = stale.replace(struct.pack("<I", zlib.crc32(raw)), b"\0\0\0\0")
    assert headers(read(stale, "u.zip").text) == ["=== member: Отчет.txt ==="]


# -- tar and single-file compression -----------------------------------------------------------

@pytest.mark.parametrize("mode,name,extractor", [
    ("w", "t.tar", "tar"), ("w:gz", "t.tar.gz", "tar+gzip"), ("w:gz", "t.tgz", "tar+gzip"),
    ("w:bz2", "t.tar.bz2", "tar+bzip2"), ("w:xz", "t.tar.xz", "tar+xz"),
])
def test_tar_in_every_compression(mode, name, extractor):
    data = make_tar({"one.txt": b"tarword one\n", "sub/two.csv": b"a,b\ncsvword,2\n"}, mode)
    out = read(data, name)
    assert (out.status, out.extractor) == ("ok", extractor)
    assert headers(out.text) == ["=== member: one.txt ===", "=== member: sub/two.csv ==="]
    assert "tarword one" in out.text and "csvword\t2" in out.text
    if mode != "w":  # (a plain tar is told by content once detection knows application/x-tar)
        # the same bytes under a name that says nothing: found by content
        assert read(data, "blob").extractor == extractor


def test_tar_links_devices_and_fifos_are_not_members():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("real.txt")
        info.size = 9
        tf.addfile(info, io.BytesIO(b"realword\n"))
        for kind, name in [(tarfile.SYMTYPE, "sym"), (tarfile.LNKTYPE, "hard"),
                           (tarfile.FIFOTYPE, "fifo"), (tarfile.CHRTYPE, "chr")]:
            link = tarfile.TarInfo(name)
            link.type = kind
            link.linkname = "/etc/passwd"
            tf.addfile(link)
    out = read(buf.getvalue(), "links.tar")
    assert out.result.members["ok"] == 1 and headers(out.text) == ["=== member: real.txt ==="]
    assert "root:" not in out.text


def test_cpython_tar_samples():
    out = read((SAMPLES / "testtar.tar.xz").read_bytes(), "testtar.tar.xz")
    assert (out.status, out.extractor) == ("empty", "tar+xz")
    assert out.result.members["empty"] == 1
    out = read((SAMPLES / "recursion.tar").read_bytes(), "recursion.tar")
    assert (out.status, out.error_kind) == ("error", "corrupt")


@pytest.mark.parametrize("compress,name,extractor", [
    (gzip.compress, "report.txt.gz", "gzip"), (bz2.compress, "report.txt.bz2", "bzip2"),
    (lzma.compress, "report.txt.xz", "xz"),
])
def test_single_file_compression_is_one_member(compress, name, extractor):
    out = read(compress(b"singleword in a compressed file\n"), name)
    assert (out.status, out.extractor) == ("ok", extractor)
    assert headers(out.text) == ["=== member: report.txt ==="]
    assert out.result.members == {"ok": 1, "unsupported": 0, "error": 0, "empty": 0}


def test_truncated_tgz_keeps_the_members_before_the_damage():
    data = make_tar({"first.txt": b"firstword\n", "second.bin": os.urandom(200_000)}, "w:gz")
    out = read(data[: len(data) // 2], "cut.tgz")
    assert out.status == "ok" and "firstword" in out.text
    assert out.result.members["error"] == 1
    assert "=== member: second.bin [error: corrupt: damaged tar member" in out.text


def test_concatenated_gzip_members_are_one_stream():
    out = read(gzip.compress(b"firstpart ") + gzip.compress(b"secondpart\n"), "two.txt.gz")
    assert "firstpart secondpart" in out.text


def test_truncated_gzip_is_an_error():
    data = gzip.compress(os.urandom(5000))[:-2000]
    out = read(data, "cut.bin.gz")
    assert out.status == "error" and out.error_kind == "corrupt"


# -- nesting ----------------------------------------------------------------------------------

def test_email_in_zip_in_tar_with_docx_attachment():
    eml = EmailMessage()
    eml["From"] = "a@example.org"
    eml["Subject"] = "nestedsubject"
    eml.set_content("nestedbody\n")
    eml.add_attachment(og.docx(og.w_p("attachedword")), maintype="application",
                       subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
                       filename="att.docx")
    inner = make_zip({"mail/m.eml": eml.as_bytes()})
    outer = make_tar({"in.zip": inner, "top.txt": b"topword\n"}, "w:gz")
    out = read(outer, "outer.tgz")
    assert out.status == "ok"
    assert headers(out.text) == ["=== member: in.zip!/mail/m.eml ===", "=== member: top.txt ==="]
    for word in ("nestedsubject", "nestedbody", "attachedword", "topword"):
        assert word in out.text
    # the inner archive's members are counted, not the archive itself
    assert out.result.members == {"ok": 2, "unsupported": 0, "error": 0, "empty": 0}


def test_an_emails_html_body_beside_its_plain_one_is_body_not_an_attachment():
    """Plain and HTML bodies side by side in a multipart/mixed (no multipart/alternative),
    and an HTML body followed by a list's plain footer: every unnamed text part is body
    text, none is called an attachment; a named HTML file still is."""
    mixed = EmailMessage()
    mixed["Subject"] = "mixedsubject"
    mixed.set_content("plainbodyword\n")
    mixed.add_attachment("<p>htmlbodyword</p>", subtype="html", disposition="inline")
    mixed.add_attachment("<p>namedhtmlword</p>", subtype="html", filename="page.html")
    out = read(mixed.as_bytes(), "m.eml")
    assert out.status == "ok"
    assert "plainbodyword" in out.text and "htmlbodyword" in out.text
    assert "[attachment: (unnamed)" not in out.text, out.text
    assert "[attachment: page.html (text/html" in out.text and "namedhtmlword" in out.text
    assert out.text.index("htmlbodyword") < out.text.index("[attachment: page.html")

    footer = EmailMessage()
    footer["Subject"] = "listsubject"
    footer.set_content("<p>the real htmlbodyword</p>", subtype="html")
    footer.make_mixed()
    footer.attach(EmailMessage())
    footer.get_payload()[1].set_content("list footer: unsubscribe here\n")
    out = read(footer.as_bytes(), "f.eml")
    assert "htmlbodyword" in out.text and "unsubscribe" in out.text
    assert "[attachment:" not in out.text, out.text


def test_nesting_depth_cap_is_a_named_limit():
    data = make_zip({"leaf.txt": "depthword\n"})
    for level in range(5):
        data = make_zip({f"level{level}.zip": data, f"side{level}.txt": f"side{level}word\n"})
    out = read(data, "deep.zip")  # leaf.txt sits 6 levels down
    assert out.status == "ok" and out.limit == "max_depth"
    assert "side4word" in out.text and "side2word" in out.text  # depths 1 and 3
    assert "side1word" not in out.text and "depthword" not in out.text
    assert "[limit: max_depth" in out.text
    assert read(data, "deep.zip", Limits(max_depth=10)).limit is None
    assert "depthword" in read(data, "deep.zip", Limits(max_depth=10)).text


def test_near_the_deadline_no_new_member_is_started():
    data = make_zip({f"m{i}.txt": f"member{i}\n" for i in range(3)})
    ctx = LocalContext(Limits(), {}, deadline=time.monotonic() + 1.0)  # < the 2 s reserve
    out = read_document(Document(data, "late.zip", "application/zip"), ctx)
    assert out.status == "ok" and out.limit == "deadline_s"
    assert "member0" not in out.text
    assert out.text.startswith("[bastion: text truncated, deadline_s reached")


def test_attachment_too_deep_in_an_email_is_a_limit_and_the_message_goes_on():
    data = make_zip({"leaf.txt": "leafword\n"})
    for level in range(4):
        data = make_zip({f"z{level}.zip": data})
    eml = EmailMessage()
    eml["Subject"] = "deepmail"
    eml.set_content("mailbody\n")
    eml.add_attachment(data, maintype="application", subtype="zip", filename="deep.zip")
    eml.add_attachment(b"afterword\n", maintype="text", subtype="plain", filename="after.txt")
    out = read(eml.as_bytes(), "m.eml")
    assert out.status == "ok" and out.limit == "max_depth"
    assert "afterword" in out.text and "leafword" not in out.text
    assert "[attachment: after.txt" in out.text


def test_member_count_cap():
    data = make_zip({f"m{i:02}.txt": f"word{i:02}\n" for i in range(20)})
    out = read(data, "many.zip", Limits(max_members=5))
    assert out.limit == "max_members" and out.status == "ok"
    assert "word04" in out.text and "word05" not in out.text
    assert out.result.members["ok"] == 5


def test_member_size_cap_skips_that_member_only():
    data = make_zip({"big.txt": "x" * (3 * MiB), "small.txt": "smallword\n"})
    out = read(data, "big.zip", Limits(max_member_bytes=1 * MiB))
    assert out.status == "ok" and out.limit == "max_member_bytes"
    assert "smallword" in out.text
    assert "=== member: big.txt [limit: max_member_bytes: declares 3145728 bytes" in out.text
    assert out.result.members == {"ok": 1, "unsupported": 0, "error": 0, "empty": 0,
                                   "limit": 1}


def test_unpacked_bytes_cap_ends_the_document():
    # hex digests: text that compresses about 2:1, far from the ratio cap
    data = make_zip({f"f{i}.txt": "".join(hashlib.sha256(f"{i}:{n}".encode()).hexdigest() + "\n"
                                          for n in range(20_000)) + f"fill{i}\n"
                     for i in range(6)})
    out = read(data, "fill.zip", Limits(max_unpacked_bytes=3 * MiB))
    assert out.status == "ok" and out.limit == "max_unpacked_bytes"
    assert "fill0" in out.text and "fill1" in out.text and "fill5" not in out.text
    assert out.text.rstrip().endswith("reached: over 3145728 bytes decompressed at f2.txt]")


def test_a_member_over_the_ratio_is_not_inflated():
    # its first deflate byte is poisoned: a reader that started to inflate it would say so
    data = og.poison_member(make_zip({"zeros.bin": bytes(50 * MiB), "note.txt": "noteword\n"}),
                            "zeros.bin")
    assert len(data) < MiB
    with pytest.raises(zlib.error, match="invalid block type"):
        zipfile.ZipFile(io.BytesIO(data)).read("zeros.bin")
    out = read(data, "ratio.zip")
    assert out.limit == "max_compression_ratio" and "noteword" in out.text
    assert "[limit: max_compression_ratio: declares 52428800 bytes" in out.text
    assert out.result.members == {"ok": 1, "unsupported": 0, "error": 0, "empty": 0,
                                   "limit": 1}


# -- bombs, in a real sandboxed worker -----------------------------------------------------------

def _gf2_times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[i]) for i in range(32)]


def _crc32_of_zeros(n: int) -> int:
    """zlib.crc32(bytes(n)) without the bytes: the CRC register advanced over n zero bytes by
    squaring the one-zero-bit operator (zlib's crc32_combine method)."""
    op = [0xEDB88320] + [1 << i for i in range(31)]  # one zero bit
    for _ in range(3):
        op = _gf2_square(op)  # 2, 4, 8 bits: one zero byte
    crc = 0xFFFFFFFF
    while n:
        if n & 1:
            crc = _gf2_times(op, crc)
        n >>= 1
        if n:
            op = _gf2_square(op)
    return crc ^ 0xFFFFFFFF


def zeros_gzip(total: int, block: int = 1 << 20) -> bytes:
    """A valid gzip stream of ``total`` zero bytes, made without holding them: one deflate
    block of ``block`` zeros (flushed so it stands alone) repeated, then the trailer."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = comp.compress(bytes(block)) + comp.flush(zlib.Z_FULL_FLUSH)
    again = zlib.compressobj(9, zlib.DEFLATED, -15)
    again.compress(bytes(block))
    assert again.flush(zlib.Z_FULL_FLUSH) == piece
    body = piece * (total // block) + b"\x03\x00"  # an empty final block
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + body
            + struct.pack("<II", _crc32_of_zeros(total), total & 0xFFFFFFFF))


def poisoned_tail(gz: bytes) -> bytes:
    """A :func:`zeros_gzip` stream whose empty final block is one of the reserved type."""
    assert gz[-10:-8] == b"\x03\x00"
    return gz[:-10] + b"\x07\x00" + gz[-8:]


def test_zero_gzip_generator_is_a_real_gzip():
    small = zeros_gzip(3 << 20)
    assert gzip.decompress(small) == bytes(3 << 20)
    assert _crc32_of_zeros(12345) == zlib.crc32(bytes(12345))


def forty_two_zip() -> bytes:
    """42.zip's shape: 16 copies of an archive of 16 copies … five levels over a 1 GiB
    member of zeros: 16**5 GiB unpacked from about 30 KB."""
    data = _leaf_zip()
    for _ in range(5):
        data = make_zip({f"{i:x}.zip": data for i in range(16)})
    return data


def _leaf_zip() -> bytes:
    # a deflate stream of 1 GiB of zeros, built block by block like zeros_gzip
    block = 1 << 20
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = comp.compress(bytes(block)) + comp.flush(zlib.Z_FULL_FLUSH)
    body = piece * 1024 + b"\x03\x00"
    total = 1 << 30
    crc = _crc32_of_zeros(total)
    name = b"0.dat"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(body), total,
                        len(name), 0) + name
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(body),
                          total, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central),
                      len(local) + len(body), 0)
    return local + body + central + end


@pytest.fixture()
def worker(tmp_path: Path):
    results: list[JobResult] = []
    limits = Limits(memory_bytes=768 * MiB)
    pool = WorkerPool(1, limits, tmp_path / "pool", results.append)
    docs = tmp_path / "docs"
    docs.mkdir()

    def run(data: bytes, name: str, deadline: float = 60.0) -> JobResult:
        path = docs / name
        path.write_bytes(data)
        job = Job(id=len(results) + 1, path=str(path), name=name,
                  mime=detect_bytes(data, name), sha256=hashlib.sha256(data).hexdigest(),
                  size=len(data), deadline_s=deadline)
        pool.submit(job)
        pool.drain()
        return [r for r in results if r.job.id == job.id][0]

    yield run
    pool.close()


def test_ten_gib_of_zeros_gzip_ends_bounded(worker):
    # its last block is poisoned: a reader that inflated the 10 GiB to the end before its
    # caps stopped it would end in an error there
    with pytest.raises(zlib.error, match="invalid block type"):
        gzip.decompress(poisoned_tail(zeros_gzip(3 << 20)))
    data = poisoned_tail(zeros_gzip(10 << 30))
    assert len(data) < 12 * MiB
    result = worker(data, "zeros.bin.gz")
    assert result.status == "ok" and result.limit == "max_compression_ratio", result
    assert result.verdict.members["limit"] == 1


def test_forty_two_zip_ends_bounded(worker):
    data = forty_two_zip()
    assert len(data) < 200_000
    result = worker(data, "42.zip")
    assert result.status == "ok" and result.limit in ("max_compression_ratio", "max_depth",
                                                      "max_unpacked_bytes"), result
    assert result.error_kind is None
    members = result.verdict.members
    assert members["ok"] == 0 and members["limit"] > 0
    # stopped before the end of the tree: even under the depth cap (3), 16**4 members lie
    # too deep, each recorded as a limit once its archive is inflated and listed
    assert members["limit"] < 16 ** 4, members


# -- 7z ---------------------------------------------------------------------------------------

def test_7z_without_the_tool_is_unsupported_naming_it():
    out = read((SAMPLES / "solid.7z").read_bytes(), "solid.7z", tool_map={})
    assert out.status == "unsupported" and "7zz" in out.error
    assert out.error.endswith("on this machine")
    off = read((SAMPLES / "solid.7z").read_bytes(), "solid.7z", tool_map={},
               limits=Limits(external_off=True))
    assert off.status == "unsupported"
    assert off.error == ("7z archives need 7zz or 7z (7-Zip), not used: external tools are "
                         "off (--no-external)")


@needs_7z
def test_7z_samples_from_py7zr():
    out = read((SAMPLES / "solid.7z").read_bytes(), "solid.7z")
    assert (out.status, out.extractor) == ("ok", "7z")
    assert headers(out.text) == ["=== member: test/test2.txt ===", "=== member: test1.txt ==="]
    assert "This file is located in a folder." in out.text
    out = read((SAMPLES / "test_1.7z").read_bytes(), "test_1.7z")
    assert out.result.members["ok"] == 3 and "max-line-length = 125" in out.text
    out = read((SAMPLES / "umlaut-solid.7z").read_bytes(), "umlaut-solid.7z")
    assert headers(out.text) == ["=== member: täst.txt ==="]


@needs_7z
def test_7z_encrypted_and_corrupt():
    out = read((SAMPLES / "encrypted_1.7z").read_bytes(), "encrypted_1.7z")
    assert (out.status, out.error_kind) == ("error", "encrypted")
    out = read((SAMPLES / "filename_encryption.7z").read_bytes(), "filename_encryption.7z")
    assert (out.status, out.error_kind) == ("error", "encrypted")
    out = read((SAMPLES / "crc_corrupted.7z").read_bytes(), "crc_corrupted.7z")
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert "CRC Failed" in out.error


@needs_7z
def test_7z_built_here_with_a_nested_zip(tmp_path: Path):
    import subprocess

    (tmp_path / "a.txt").write_text("sevenword\n")
    (tmp_path / "in.zip").write_bytes(make_zip({"z.txt": "zipinsevenword\n"}))
    subprocess.run([SEVEN, "a", "-bd", "x.7z", "a.txt", "in.zip"], cwd=tmp_path, check=True,
                   capture_output=True)
    out = read((tmp_path / "x.7z").read_bytes(), "x.7z")
    assert out.status == "ok"
    assert "sevenword" in out.text and "zipinsevenword" in out.text
    assert "=== member: in.zip!/z.txt ===" in out.text
    # the unpacked-bytes cap: the members that fit are read, then the document stops
    (tmp_path / "b.txt").write_text("bigword " * 300_000)  # 2.4 MB
    subprocess.run([SEVEN, "a", "-bd", "y.7z", "a.txt", "b.txt"], cwd=tmp_path, check=True,
                   capture_output=True)
    out = read((tmp_path / "y.7z").read_bytes(), "y.7z",
               Limits(max_unpacked_bytes=1 << 20, max_compression_ratio=1e6))
    assert out.status == "ok" and out.limit == "max_unpacked_bytes"
    assert "sevenword" in out.text and "bigword" not in out.text


# -- EPUB -------------------------------------------------------------------------------------

def make_epub(spine: list[tuple[str, str]], order: list[str], title: str = "Booktitleword",
              extra: dict[str, str] | None = None, linear_no: tuple[str, ...] = ()) -> bytes:
    items = "".join(f'<item id="{i}" href="text/{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i, _ in spine)
    no = ' linear="no"'
    refs = "".join(f'<itemref idref="{i}"{no if i in linear_no else ""}/>' for i in order)
    opf = ('<?xml version="1.0" encoding="UTF-8"?>'
           '<package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:title>{title}</dc:title></metadata>'
           f'<manifest>{items}<item id="css" href="s.css" media-type="text/css"/></manifest>'
           f'<spine>{refs}</spine></package>')
    members = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": (
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" '
            'media-type="application/oebps-package+xml"/></rootfiles></container>'),
        "OEBPS/content.opf": opf,
        "OEBPS/s.css": "p { color: red }",
        **{f"OEBPS/text/{i}.xhtml": (
            '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html>'
            f'<html xmlns="http://www.w3.org/1999/xhtml"><head><meta charset="utf-8"/></head>'
            f'<body><p>{body}</p></body></html>') for i, body in spine},
        **(extra or {}),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mimetype", members.pop("mimetype"), compress_type=zipfile.ZIP_STORED)
        for name, text in members.items():
            zf.writestr(name, text, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def test_epub_spine_order_title_and_non_linear_last():
    data = make_epub([("c1", "firstchapter"), ("c2", "secondchapter"), ("c3", "notesword")],
                     order=["c3", "c2", "c1"], linear_no=("c3",))
    assert detect_bytes(data, "book.epub") == "application/epub+zip"
    out = read(data, "book.epub")
    assert (out.status, out.extractor) == ("ok", "epub")
    assert out.result.title == "Booktitleword"
    assert out.text.split() == ["secondchapter", "firstchapter", "notesword"]


def test_epub_drm_is_encrypted_and_missing_container_corrupt():
    enc = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
           'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
           '<enc:CipherData><enc:CipherReference URI="OEBPS/text/c1.xhtml"/></enc:CipherData>'
           '</enc:EncryptedData></encryption>')
    data = make_epub([("c1", "lockedword")], ["c1"], extra={"META-INF/encryption.xml": enc})
    out = read(data, "drm.epub")
    assert (out.status, out.error_kind) == ("error", "encrypted")
    bare = make_zip({"mimetype": "application/epub+zip", "x.xhtml": "<p>x</p>"},
                    zipfile.ZIP_STORED)
    out = read(bare, "bare.epub")
    assert (out.status, out.error_kind) == ("error", "corrupt")


def test_epub_written_by_libreoffice():
    out = read((SAMPLES / "hdr-header-footer.epub").read_bytes(), "hdr-header-footer.epub")
    assert out.status == "ok" and out.result.details["spine_items"] == 2
    assert out.text.split("\n")[:2] == ["section with header",
                                        "section without header of its own."]


def test_readers_are_selected_by_mime_and_by_extension():
    for mime in ("application/zip", "application/x-tar", "application/gzip",
                 "application/x-bzip2", "application/x-xz", "application/x-7z-compressed"):
        assert select(mime).name == "archive"
    for name in ("a.zip", "a.tar", "a.tgz", "a.tar.gz", "a.gz", "a.bz2", "a.xz", "a.7z"):
        assert select("application/octet-stream", name).name == "archive"
    assert select("application/epub+zip").name == "epub"
    assert select("application/octet-stream", "b.epub").name == "epub"
