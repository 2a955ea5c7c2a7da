"""The warm OCR engine (readers/ocr/engine.py): the real libtesseract against the real
``tesseract`` command on the repository's images and scanned PDF pages, its fallback to the
command when the library cannot be loaded, and a crash inside the library in a worker."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from bastion.readers.ocr import reader as ocr, engine as tessapi
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document
from bastion.readers.errors import ToolFailed
from bastion.readers.runtime.context import LocalContext
from bastion.readers.runtime.pool import Job, WorkerPool
from bastion.readers.runtime.procs import CHILD_ENV

ROOT = Path(__file__).resolve().parent.parent
TESSERACT = shutil.which("tesseract")
NOTE = ROOT / "examples" / "docs" / "scanned-note.png"
SCANS = [ROOT / "tests" / "samples" / "pdf" / n
         for n in ("ocrmypdf-linn-scan.pdf", "ocrmypdf-type3-font-nomapping.pdf")]

pytestmark = [pytest.mark.skipif(TESSERACT is None, reason="tesseract not installed"),
              pytest.mark.slow]  # a real tesseract in every test


@pytest.fixture()
def warm():
    """The engine, loaded fresh (and forgotten after the test)."""
    tessapi.reset()
    engine = tessapi.engine(cli_version())
    assert engine is not None, f"{tessapi.LIBRARY} did not load"
    yield engine
    tessapi.reset()


def cli_version() -> str:
    out = subprocess.run([TESSERACT, "--version"], capture_output=True).stdout.decode()
    return out.split()[1].lstrip("v")


def cli_tsv(image: bytes, dpi: int | None = None) -> str:
    argv = [TESSERACT, "stdin", "stdout", "-l", "eng"] + (["--dpi", str(dpi)] if dpi else [])
    got = subprocess.run(argv + ["tsv"], input=image, capture_output=True, env=CHILD_ENV,
                         check=True)
    return got.stdout.decode("utf-8", "replace")


def scanned_pages() -> list[tuple[str, bytes, int]]:
    """The scanned PDF pages as the PDF reader renders them for OCR (PGM, ocr_dpi)."""
    import pypdfium2 as pdfium

    dpi = Limits().ocr_dpi
    pages = []
    for path in SCANS:
        pdf = pdfium.PdfDocument(path)
        for n, page in enumerate(pdf):
            im = page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
            pgm = b"P5\n%d %d\n255\n" % im.size + im.tobytes()
            pages.append((f"{path.name}#{n + 1}", pgm, dpi))
        pdf.close()
    return pages


def pnm(im: Image.Image) -> bytes:
    """``im`` as the readers write PNM (readers/ocr/reader.py, the PDF page images)."""
    return (b"P6" if im.mode == "RGB" else b"P5") + b"\n%d %d\n255\n" % im.size + im.tobytes()


def images() -> list[tuple[str, bytes, int | None]]:
    note = NOTE.read_bytes()
    with Image.open(NOTE) as im:
        rgb = im.convert("RGB")
    jpeg, tiff = io.BytesIO(), io.BytesIO()
    rgb.save(jpeg, "JPEG", quality=90)
    rgb.save(tiff, "TIFF", save_all=True, append_images=[rgb.rotate(180)])  # two pages
    tinted = Image.merge("RGB", [rgb.getchannel(0), rgb.getchannel(1).point(lambda v: v // 2),
                                 rgb.getchannel(2)])  # colour, so that P6 is not gray
    return [("scanned-note.png", note, None), ("scanned-note.jpg", jpeg.getvalue(), None),
            ("scanned-note-2pages.tif", tiff.getvalue(), None),
            ("scanned-note.ppm", pnm(tinted), None), ("scanned-note.pgm", pnm(rgb.convert("L")), 150),
            *scanned_pages()]


def test_warm_engine_writes_the_commands_tsv_byte_for_byte(warm):
    """Same image, same version: the library's TSV is the command's, on every real image and
    scanned page of the repository (PNG, JPEG, a two-page TIFF, PDF pages as PGM)."""
    assert warm.version == cli_version()
    for name, data, dpi in images():
        got = warm.tsv(data, dpi=dpi)
        assert got == cli_tsv(data, dpi), name
        assert ocr.parse_tsv(got).words > 0, name


def test_pnm_pixels_go_to_tesseract_as_they_are_only_when_written_as_bastion_writes_them():
    """The PGM and PPM bastion writes are handed over as pixels (no parse); anything else —
    a comment, another maxval, pixels missing or extra — is leptonica's to read."""
    with Image.open(NOTE) as im:
        gray = im.convert("L")
    data = pnm(gray)
    assert tessapi._pnm(data) == (len(data) - gray.width * gray.height, gray.width,
                                  gray.height, 1)
    assert tessapi._pnm(pnm(gray.convert("RGB")))[3] == 3
    head = b"\n%d %d\n255\n" % gray.size
    for other in (b"P5\n# made by hand" + head + gray.tobytes(), data[:-1], data + b"\0",
                  b"P5\n%d %d\n65535\n" % gray.size + gray.tobytes() * 2,
                  b"P2" + head + b"0 " * 10, b"P5\n0 0\n255\n", b"\x89PNG\r\n"):
        assert tessapi._pnm(other) is None, other[:30]


def cli_rotation(image: bytes, dpi: int | None = None) -> int | None:
    argv = [TESSERACT, "stdin", "stdout", "--psm", "0"] + (["--dpi", str(dpi)] if dpi else [])
    got = subprocess.run(argv, input=image, capture_output=True, env=CHILD_ENV)
    if got.returncode:
        return None
    for line in got.stdout.decode().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "Rotate":
            return int(value) % 360
    return None


def test_the_osd_engine_answers_what_the_psm_0_command_answers():
    """The orientation asked of the warm ``osd`` model is the command's ``Rotate:``, on the
    note turned every way and on the scanned pages (upright and upside down), and None where
    the command finds none (a blank page)."""
    tessapi.reset()
    osd = tessapi.engine(cli_version(), tessapi.OSD)
    assert osd is not None and osd.language == "osd"
    with Image.open(NOTE) as im:
        gray = im.convert("L")
    cases = [(f"note@{d}", pnm(gray.rotate(-d, expand=True)), None) for d in (0, 90, 180, 270)]
    for name, page, dpi in scanned_pages():
        cases.append((name, page, dpi))
        with Image.open(io.BytesIO(page)) as im:
            cases.append((name + "@180", pnm(im.rotate(180)), dpi))
    cases.append(("blank", pnm(Image.new("L", (600, 400), 255)), 200))
    answers = {name: osd.rotation(data, dpi) for name, data, dpi in cases}
    assert answers == {name: cli_rotation(data, dpi) for name, data, dpi in cases}
    assert answers["note@90"] == 270 and answers["note@180"] == 180 and answers["blank"] is None
    tessapi.reset()


def test_two_runs_give_the_same_text(warm):
    for name, data, dpi in images()[:1] + scanned_pages():
        assert warm.tsv(data, dpi=dpi) == warm.tsv(data, dpi=dpi), name


def test_the_image_reader_reads_the_same_text_warm_and_by_the_command(tmp_path, monkeypatch):
    doc = Document(NOTE.read_bytes(), NOTE.name, "image/png")
    tessapi.reset()
    warm_ctx = LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path / "a")
    warm = read_document(doc, warm_ctx)
    loaded = tessapi._loaded.cache_info()  # the library ran: its engine is loaded already
    assert tessapi.engine(cli_version()) is not None
    assert tessapi._loaded.cache_info()[:2] == (loaded.hits + 1, loaded.misses)
    monkeypatch.setattr(ocr, "USE_LIBRARY", False)
    cold = read_document(doc, LocalContext(Limits(), {"tesseract": TESSERACT},
                                           tmpdir=tmp_path / "b"))
    assert warm.status == cold.status == "ok"
    assert warm.text == cold.text and "bastion" in warm.text
    assert warm.result == cold.result
    assert warm_ctx.tools_used == {"tesseract"}
    tessapi.reset()


def test_without_the_library_the_command_runs(tmp_path, monkeypatch):
    """The loader pointed at a missing file: no engine, and the reader runs ``tesseract``."""
    tessapi.reset()
    monkeypatch.setattr(tessapi, "LIBRARY", str(tmp_path / "libtesseract-missing.so.5"))
    assert tessapi.engine(cli_version()) is None
    ctx = LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path / "s")
    ran: list[list[str]] = []
    real = LocalContext.run_tool

    def spy(self, argv, **kw):
        ran.append(argv)
        return real(self, argv, **kw)

    # (on the class: a context's attributes are declared, its methods not replaceable)
    monkeypatch.setattr(LocalContext, "run_tool", spy)
    out = read_document(Document(NOTE.read_bytes(), NOTE.name, "image/png"), ctx)
    assert out.status == "ok" and "bastion" in out.text
    assert any(a[0] == TESSERACT and "tsv" in a for a in ran), ran
    tessapi.reset()


def test_a_library_of_another_version_is_not_used():
    tessapi.reset()
    assert tessapi.engine("0.0.0-not-this-one") is None
    assert tessapi.engine(None) is None
    tessapi.reset()


def test_bytes_leptonica_cannot_read_are_a_tool_failure(warm, tmp_path):
    with pytest.raises(tessapi.EngineError):
        warm.tsv(b"P5\n10 10\n255\n")  # a PGM header without its pixels
    ctx = LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path)
    with pytest.raises(ToolFailed) as e:
        ocr.ocr_image(b"not an image at all", ctx)
    assert e.value.message.startswith("tesseract: ")


def test_the_deadline_stops_recognition(warm, tmp_path):
    page = scanned_pages()[0][1]
    with pytest.raises(tessapi.Timeout):
        warm.tsv(page, dpi=200, timeout=0.001)
    assert warm.tsv(NOTE.read_bytes())  # the engine is still usable afterwards


# -- in the worker pool: one record per document, whatever the library does -----------------


def job(n: int, path: Path, mime: str) -> Job:
    data = path.read_bytes()
    return Job(id=n, path=str(path), name=path.name, mime=mime,
               sha256=hashlib.sha256(data).hexdigest(), size=len(data), deadline_s=30.0,
               tools={"tesseract": TESSERACT})


def test_in_the_pool_a_crash_inside_the_library_is_one_record(tmp_path):
    """An image read warm in a worker; a corrupt image; a crash inside libtesseract in the
    worker (tests/tessapi_crash_reader.py): one verdict each, and the next image still reads
    (in a new worker, which loads its engine again)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    good = docs / "note.png"
    good.write_bytes(NOTE.read_bytes())
    bad = docs / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    crash = docs / "note.tesscrash"
    crash.write_bytes(NOTE.read_bytes())
    results = []
    pool = WorkerPool(1, Limits(), tmp_path / "pool", results.append,
                      extra_readers=("tests.tessapi_crash_reader",))
    try:
        for n, (path, mime) in enumerate([(good, "image/png"), (bad, "image/png"),
                                          (crash, "application/x-tess-crash"),
                                          (good, "image/png")], 1):
            pool.submit(job(n, path, mime))
        pool.drain()
    finally:
        pool.close()
    by_id = {}
    for r in results:
        assert r.job.id not in by_id, f"two verdicts for job {r.job.id}"
        by_id[r.job.id] = r
    assert sorted(by_id) == [1, 2, 3, 4]
    assert by_id[1].status == "ok" and by_id[4].status == "ok"
    assert (by_id[2].status, by_id[2].error_kind) == ("error", "corrupt")
    assert (by_id[3].status, by_id[3].error_kind) == ("error", "crash"), by_id[3]
    assert "SIGSEGV" in (by_id[3].error or "")


def test_in_the_pool_the_same_image_in_several_documents_reads_alike(tmp_path):
    """One worker, its OCR memo (readers/ocr/memo.py) across documents: the note on its own
    and attached to two e-mails gives the same text every time, in one record each."""
    from email.message import EmailMessage

    docs = tmp_path / "docs"
    docs.mkdir()
    paths = [(docs / "note.png", NOTE.read_bytes(), "image/png")]
    for n in (1, 2):
        m = EmailMessage()
        m["From"], m["Subject"] = "a@example.org", f"note {n}"
        m.set_content("The scan.\n")
        m.add_attachment(NOTE.read_bytes(), maintype="image", subtype="png", filename="n.png")
        paths.append((docs / f"m{n}.eml", bytes(m), "message/rfc822"))
    results, texts = [], {}

    def done(r):  # the text is read as the pool hands it over (it clears it afterwards)
        results.append(r)
        texts[r.job.id] = r.text_path.read_text() if r.text_path else None

    pool = WorkerPool(1, Limits(), tmp_path / "pool", done)
    try:
        for n, (path, data, mime) in enumerate(paths, 1):
            path.write_bytes(data)
            pool.submit(job(n, path, mime))
        pool.drain()
    finally:
        pool.close()
    for r in results:
        assert r.status == "ok" and r.verdict.tools_used == ("tesseract",), r
    assert sorted(texts) == [1, 2, 3]
    alone = texts[1].strip()
    assert "bastion" in alone
    for n in (2, 3):
        assert f"Subject: note {n - 1}" in texts[n] and alone in texts[n]
