"""The image reader: real tesseract on images drawn with Pillow in every supported format,
the missing-tool and hostile-image cases, and the OCR helper the PDF reader shares."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from bastion.readers.ocr import reader as ocr
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document, select
from bastion.readers.errors import ToolFailed
from bastion.readers.runtime.context import LocalContext
from bastion.readers.ocr.memo import MISSING, OcrMemo

TESSERACT = shutil.which("tesseract")
needs_tesseract = pytest.mark.skipif(TESSERACT is None, reason="tesseract not installed")

FORMATS = [  # (Pillow format, MIME type, file name)
    ("PNG", "image/png", "scan.png"),
    ("JPEG", "image/jpeg", "scan.jpg"),
    ("TIFF", "image/tiff", "scan.tif"),
    ("BMP", "image/bmp", "scan.bmp"),
    ("GIF", "image/gif", "scan.gif"),
    ("WEBP", "image/webp", "scan.webp"),
]


def picture(text: str, fmt: str, size: int = 48) -> bytes:
    """``text`` in black on white with Pillow's default font, saved as ``fmt``."""
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    im = Image.new("RGB", (right - left + 2 * size, bottom - top + 2 * size), "white")
    ImageDraw.Draw(im).text((size - left, size - top), text, font=font, fill="black")
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()


def ctx(tmp_path: Path, with_tesseract: bool = True) -> LocalContext:
    tools = {"tesseract": TESSERACT} if with_tesseract and TESSERACT else {}
    return LocalContext(Limits(), tools, tmpdir=tmp_path)


@needs_tesseract
@pytest.mark.parametrize("fmt, mime, name", FORMATS, ids=[f[0] for f in FORMATS])
def test_tesseract_reads_every_format(fmt, mime, name, tmp_path):
    doc = Document(picture("QUOKKA 42 zebra", fmt), name, mime)
    assert select(mime, name) is ocr.READER
    out = read_document(doc, ctx(tmp_path))
    assert out.status == "ok", out.error
    assert out.extractor == "tesseract"
    assert "QUOKKA" in out.text
    assert list(tmp_path.iterdir()) == []  # the scratch copy is gone


@pytest.mark.parametrize("fmt, mime, name", FORMATS[:2], ids=["PNG", "JPEG"])
def test_without_tesseract_is_unsupported(fmt, mime, name, tmp_path):
    out = read_document(Document(picture("x", fmt), name, mime), ctx(tmp_path, False))
    assert (out.status, out.error) == ("unsupported", "needs tesseract on this machine")


@needs_tesseract
def test_blank_image_is_empty(tmp_path):
    buf = io.BytesIO()
    Image.new("L", (300, 200), 255).save(buf, "PNG")
    out = read_document(Document(buf.getvalue(), "blank.png", "image/png"), ctx(tmp_path))
    assert (out.status, out.error) == ("empty", "no text recognised in the image")


@needs_tesseract
@pytest.mark.parametrize("data", [b"", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, b"not an image"],
                         ids=["empty", "png-header-only", "text"])
def test_broken_image_is_corrupt(data, tmp_path):
    out = read_document(Document(data, "bad.png", "image/png"), ctx(tmp_path))
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert out.error.startswith("unreadable image")


@needs_tesseract
@pytest.mark.parametrize("fmt, name", [("PNG", "big.png"), ("GIF", "big.gif")])
@pytest.mark.parametrize("share", [3.0, 1.5], ids=["over-2x-error", "over-1x-warning"])
def test_decompression_bomb_is_refused(fmt, name, share, tmp_path, monkeypatch):
    """An image over Pillow's pixel limit (lowered here so the test image stays small) never
    reaches tesseract, whether it would be converted or passed as it is: past twice the limit
    Pillow raises, past the limit it warns, and both are refused."""
    data = picture("BOMB", fmt)
    width, height = Image.open(io.BytesIO(data)).size
    limit = int(width * height / share)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", limit)
    out = read_document(Document(data, name, f"image/{fmt.lower()}"), ctx(tmp_path))
    assert (out.status, out.error_kind) == ("error", "error")
    assert out.error == f"image too large to OCR (over {limit} pixels)"


@needs_tesseract
def test_ocr_image_file_reports_the_tool_failure(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ToolFailed) as e:
        ocr.ocr_image_file(bad, ctx(tmp_path))
    assert e.value.message.startswith("tesseract: ")
    assert e.value.kind == "tool_failed"


@needs_tesseract
def test_ocr_image_file_reads_text(tmp_path):
    path = tmp_path / "page.png"
    path.write_bytes(picture("WOMBAT", "PNG"))
    assert "WOMBAT" in ocr.ocr_image_file(path, ctx(tmp_path))


def test_parse_tsv_rebuilds_lines_paragraphs_and_the_mean_confidence():
    rows = ["level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight"
            "\tconf\ttext",
            "1\t1\t0\t0\t0\t0\t0\t0\t100\t100\t-1\t",
            "5\t1\t1\t1\t1\t1\t0\t0\t1\t1\t90.5\tHello",
            "5\t1\t1\t1\t1\t2\t0\t0\t1\t1\t80.5\tworld",
            "5\t1\t1\t1\t2\t1\t0\t0\t1\t1\t70\tsecond",
            "4\t1\t1\t2\t1\t0\t0\t0\t1\t1\t-1\t",
            "5\t1\t1\t2\t1\t1\t0\t0\t1\t1\t60\tnext",
            "5\t1\t2\t1\t1\t1\t0\t0\t1\t1\t-1\t "]
    got = ocr.parse_tsv("\n".join(rows) + "\n")
    assert got.text == "Hello world\nsecond\n\nnext"
    assert (got.confidence, got.words) == (75.2, 4)
    assert ocr.parse_tsv("level\n") == ocr.OcrText("", None, 0)


@needs_tesseract
def test_image_record_names_tesseract_and_its_confidence(tmp_path):
    out = read_document(Document(picture("WOMBAT 42", "PNG"), "scan.png", "image/png"),
                        ctx(tmp_path))
    assert out.status == "ok" and "WOMBAT" in out.text
    info = out.result.details["ocr"]
    assert info["engine"] == "tesseract" and info["version"][0].isdigit()
    assert 50 < info["confidence"] <= 100


def page(dpi: int, text: str = "THE QUOKKA SLEEPS AT NOON") -> bytes:
    """An A5-wide strip of ``text`` drawn at ``dpi`` (12-point type), saved as PNG with its dpi."""
    font = ImageFont.load_default(size=round(12 * dpi / 72))
    im = Image.new("L", (round(5.8 * dpi), round(1.2 * dpi)), 255)
    ImageDraw.Draw(im).text((dpi // 4, dpi // 4), text, font=font, fill=0)
    buf = io.BytesIO()
    im.save(buf, "PNG", dpi=(dpi, dpi))
    return buf.getvalue()


@needs_tesseract
def test_a_600_dpi_scan_is_read_at_300_dpi(tmp_path):
    out = read_document(Document(page(600), "scan.png", "image/png"), ctx(tmp_path))
    assert out.status == "ok" and "QUOKKA SLEEPS" in out.text
    with Image.open(io.BytesIO(page(600))) as im:
        assert out.result.details["ocr"]["scaled"] == [round(im.width / 2), round(im.height / 2)]
    same = read_document(Document(page(300), "scan.png", "image/png"), ctx(tmp_path))
    assert "scaled" not in same.result.details["ocr"] and "QUOKKA SLEEPS" in same.text


@needs_tesseract
def test_a_slightly_large_image_is_read_as_it_is(tmp_path, monkeypatch):
    """Scaling by 0.9 would gain nothing: the image goes to tesseract unchanged."""
    data = picture("QUOKKA 42 zebra", "PNG")
    with Image.open(io.BytesIO(data)) as im:
        pixels = im.width * im.height
    monkeypatch.setattr(ocr, "MAX_OCR_PIXELS", int(pixels * 0.81))  # a side x 0.9
    out = read_document(Document(data, "scan.png", "image/png"), ctx(tmp_path))
    assert "scaled" not in out.result.details["ocr"] and "QUOKKA" in out.text


@needs_tesseract
@pytest.mark.parametrize("mode, colour", [("L", 255), ("RGB", (30, 90, 200)), ("P", 3)])
def test_a_flat_image_is_not_sent_to_ocr(mode, colour, tmp_path, monkeypatch):
    buf = io.BytesIO()
    Image.new(mode, (1200, 900), colour).save(buf, "PNG")
    monkeypatch.setattr(ocr, "ocr_image", lambda *a, **k: pytest.fail("OCR ran"))
    out = read_document(Document(buf.getvalue(), "flat.png", "image/png"), ctx(tmp_path))
    assert (out.status, out.error) == ("empty", "no text recognised in the image")
    assert out.result.details["ocr"]["skipped"] == ocr.SKIPPED_BLANK


@needs_tesseract
def test_one_dark_speck_is_enough_to_ocr(tmp_path):
    im = Image.new("L", (400, 300), 255)
    im.putpixel((200, 150), 0)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    out = read_document(Document(buf.getvalue(), "speck.png", "image/png"), ctx(tmp_path))
    assert "skipped" not in out.result.details["ocr"] and out.status == "empty"


# -- the worker's OCR memo (readers/ocr/memo.py) ---------------------------------------------

def test_the_memo_keeps_the_most_recent_answers_within_its_bounds():
    memo = OcrMemo(entries=2, chars=10)
    memo.put("a", "A", 4)
    memo.put("b", "B", 4)
    assert memo.get("a") == "A"  # now the most recent
    memo.put("c", "C", 4)  # over 10 characters: the least recent ("b") goes
    assert memo.get("b") is MISSING and memo.get("a") == "A" and memo.get("c") == "C"
    memo.put("d", None, 0)  # over 2 entries: "a" goes; None is an answer too
    assert memo.get("a") is MISSING and memo.get("d") is None and len(memo) == 2
    memo.put("e", "E" * 11, 11)  # larger than the whole memo: not kept, nothing dropped
    assert memo.get("e") is MISSING and len(memo) == 2


def mail_with(image: bytes, subject: str) -> bytes:
    from email.message import EmailMessage

    m = EmailMessage()
    m["From"], m["Subject"] = "a@example.org", subject
    m.set_content("See the picture.\n")
    m.add_attachment(image, maintype="image", subtype="png", filename="logo.png")
    return bytes(m)


@needs_tesseract
@pytest.mark.parametrize("warm", [True, False], ids=["warm-engine", "command"])
@pytest.mark.slow
def test_an_image_seen_again_in_a_worker_is_not_recognised_again(warm, tmp_path, monkeypatch):
    """The same logo in two e-mails and on its own: one recognition with a memo (the
    worker's), the same texts as without one; another resolution is another answer; a
    failure is not kept."""
    monkeypatch.setattr(ocr, "USE_LIBRARY", warm)
    calls: list[str] = []
    real_warm, real_command = ocr._ocr_warm, ocr._ocr_command
    monkeypatch.setattr(ocr, "_ocr_warm", lambda *a: calls.append("warm") or real_warm(*a))
    monkeypatch.setattr(ocr, "_ocr_command",
                        lambda *a: calls.append("command") or real_command(*a))
    logo = picture("WOMBAT TRADING", "PNG")
    docs = [Document(mail_with(logo, "first"), "a.eml", "message/rfc822"),
            Document(mail_with(logo, "second"), "b.eml", "message/rfc822"),
            Document(logo, "logo.png", "image/png")]

    def read_all(memo):
        out = []
        for n, doc in enumerate(docs):
            c = LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path / str(n),
                             ocr_memo=memo)
            got = read_document(doc, c)
            assert got.status == "ok" and "WOMBAT" in got.text and c.tools_used == {"tesseract"}
            out.append((got.text, got.result))
        return out

    plain = read_all(None)
    assert len(calls) == 3
    calls.clear()
    memo = OcrMemo()
    assert read_all(memo) == plain
    assert calls == ["warm" if warm else "command"] and memo.hits == 2
    c = LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path / "d", ocr_memo=memo)
    assert ocr.ocr_image(logo, c, dpi=150).text == ocr.ocr_image(logo, c, dpi=150).text
    assert len(calls) == 2  # dpi 150: read once more, then kept
    for _ in range(2):
        with pytest.raises(ToolFailed):
            ocr.ocr_image(b"not an image at all", c)
    assert len(calls) == 4


@needs_tesseract
@pytest.mark.parametrize("fmt, name", [("GIF", "scan.gif"), ("WEBP", "scan.webp")])
def test_a_converted_image_reads_as_its_png_did(fmt, name, tmp_path):
    """GIF and WebP go to tesseract as PPM now (no PNG to encode and decode): the text is
    what tesseract reads in the RGB PNG of the same image, which they used to become."""
    data = picture("QUOKKA 42 zebra", fmt)
    out = read_document(Document(data, name, f"image/{fmt.lower()}"), ctx(tmp_path / "a"))
    with Image.open(io.BytesIO(data)) as im:
        buf = io.BytesIO()
        im.convert("RGB").save(buf, "PNG")
    as_png = ocr.ocr_image(buf.getvalue(), ctx(tmp_path / "b"))
    assert out.status == "ok" and out.text == as_png.text + "\n"
    assert out.result.details["ocr"]["confidence"] == as_png.confidence
    assert not (tmp_path / "a").exists()  # the warm engine needs no scratch file
