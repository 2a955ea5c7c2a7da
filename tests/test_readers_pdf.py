"""The PDF reader: every engine (PDFium, pdfplumber, pdftotext) on the same PDFs, built in code
by ``tests/pdfgen.py`` (plain, Flate, outlines, encryption, hostile files), on real sample PDFs,
and the ``pdftext`` child mode run as a real child process with its deadline and output cap."""

from __future__ import annotations

from dataclasses import replace
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import pdfgen  # noqa: E402
import pdftext_client  # noqa: E402
from procutil import eventually  # noqa: E402
from bastion.readers.pdf import reader as pdfreader  # noqa: E402
from bastion.readers.pdf import engines as pdfengines, ocrpass as pdfocr  # noqa: E402
from bastion.readers.pdf import outline as pdfoutline, pdfium as pdfiumc  # noqa: E402
from bastion.readers.pdf import text as pagetext  # noqa: E402
from bastion.readers.base import Document, Limits, ReadResult  # noqa: E402
from bastion.readers.runtime.context import LocalContext  # noqa: E402
from bastion.readers.dispatch import Outcome, read_document  # noqa: E402
from bastion.readers.errors import CorruptDocument, EncryptedDocument, ReaderError  # noqa: E402
from bastion.readers.runtime.toolcall import run_tool  # noqa: E402

PDFTOTEXT = shutil.which("pdftotext")
PDFTOPPM = shutil.which("pdftoppm")
TESSERACT = shutil.which("tesseract")
needs_pdftotext = pytest.mark.skipif(PDFTOTEXT is None, reason="pdftotext not installed")
needs_ocr = pytest.mark.skipif(PDFTOPPM is None or TESSERACT is None,
                               reason="pdftoppm or tesseract not installed")
SAMPLES = Path(__file__).parent / "samples" / "pdf"

ENGINES = [
    "pdfium",
    "pdfplumber",
    pytest.param("pdftotext", marks=needs_pdftotext),
]



def page_sources(out):
    """The pages' provenance in its JSON form (the sidecar's)."""
    return [s.to_json() for s in out.result.page_sources]


def outline_of(out):
    return [e.to_json() for e in out.result.outline]

def ctx_for(engine: str, tmp_path: Path, tools: tuple[str, ...] = (), **limits) -> LocalContext:
    """A context whose chain is just ``engine`` (pdftotext: the tool is given), plus ``tools``."""
    names = set(tools) | ({"pdftotext"} if engine == "pdftotext" else set())
    found = {n: shutil.which(n) for n in names}
    return LocalContext(Limits(pdf_engines=(engine,), **limits),
                        {n: p for n, p in found.items() if p}, tmpdir=tmp_path)


def read(data: bytes, ctx: LocalContext, name: str = "doc.pdf") -> Outcome:
    return read_document(Document(data, name, "application/pdf"), ctx)


# ------------------------------------------------------------------ text, pages, metadata

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "flate"])
def test_text_pages_and_title(engine, compress, tmp_path):
    data = pdfgen.make_text_pdf(["Hello marker alpha\nsecond line", "page two zebra"],
                                title="My Title", compress=compress)
    out = read(data, ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    assert out.extractor == engine
    pages = out.text.split("\f")
    assert len(pages) == 2
    assert "Hello marker alpha" in pages[0] and "second line" in pages[0]
    assert "page two zebra" in pages[1]
    sources = page_sources(out)
    assert out.result.metadata.to_json() == {"pages": 2, "title": "My Title"}
    assert replace(out.result, page_sources=None, metadata=None) == ReadResult(
        engine, pages=2, title="My Title", outline=(), pages_ocr=0,
        languages=())  # too few words to name a language
    assert [(s["page"], s["source"], s["engine"]) for s in sources] == [
        (1, "native", engine), (2, "native", engine)]
    assert all(s["version"] for s in sources)  # PDFium's build, pdfplumber's, poppler's


WORDS = [["words", "set", "apart", "without", "spaces"], ["second", "line", "of", "them"]] * 12


@pytest.mark.parametrize("engine", ENGINES)
def test_words_placed_without_space_characters(engine, tmp_path):
    """Words set one by one, 1.2 pt (0.12 em) apart, no space characters: PDFium's own text
    glues them ("wordssetapart"); bastion puts the word breaks back from the glyph boxes."""
    data = pdfgen.make_positioned_words(WORDS, gap=1.2, pages=3)
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    assert "wordssetapart" in pdf[0].get_textpage().get_text_bounded()  # what PDFium gives
    pdf.close()
    out = read(data, ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    pages = out.text.split("\f")
    assert len(pages) == 3
    for page in pages:  # every page, not only the probed one
        assert "words set apart without spaces" in page
        assert "second line of them" in page


@pytest.mark.parametrize("engine", ["pdfium"])
def test_letter_spaced_words_are_not_cut_into_letters(engine, tmp_path):
    """Letter-spacing (Tc) opens a gap between every two letters: a gap counts as a word
    break only against the run's usual spacing."""
    data = pdfgen.make_positioned_words(WORDS, gap=6.0, char_space=1.5)
    out = read(data, ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    assert "words set apart without spaces" in out.text
    assert "w o r d s" not in out.text


def test_word_gaps_probe_skips_documents_that_need_none(tmp_path, monkeypatch):
    """The glyph-box pass costs a PDFium call per character: a document whose first
    characters need no break gets no pass on its other pages."""
    data = pdfgen.make_text_pdf([f"page {i} with ordinary words and spaces " * 40
                                 for i in range(8)])
    calls: list[int] = []
    real = pdfiumc.Gaps.respace

    def spy(self, textpage, text, limit=None):
        calls.append(limit)
        return real(self, textpage, text, limit)

    monkeypatch.setattr(pdfiumc.Gaps, "respace", spy)
    out = read(data, ctx_for("pdfium", tmp_path))
    assert out.status == "ok" and "page 7 with ordinary words" in out.text
    assert 1 <= len(calls) < 8 and None not in calls  # probes only, never a whole page


def _pypdfium2_texts(data: bytes) -> list[tuple[str, str]]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    texts = []
    for i in range(len(pdf)):
        textpage = pdf[i].get_textpage()
        texts.append((textpage.get_text_bounded(), textpage.get_text_range()))
    return texts


def _raw_texts(data: bytes) -> list[tuple[str, str]]:
    import ctypes

    import pypdfium2 as pdfium

    api = pdfiumc.pdfium_api()
    pdf = pdfium.PdfDocument(data)
    handle = ctypes.cast(pdf.raw, ctypes.c_void_p).value
    texts = []
    for i in range(len(pdf)):
        page = api.load_page(handle, i)
        textpage = api.load_text(page)
        texts.append((api.text_bounded(page, textpage), api.text_range(textpage)))
        api.close_text(textpage)
        api.close_page(page)
    return texts


@pytest.mark.parametrize("name", ["surrogates", "rotated", "german", "samples"])
def test_raw_text_calls_give_what_pypdfium2_gives(name):
    """The plain prototypes' text (one call into a buffer of room for any page) is
    pypdfium2's, character for character, with characters beyond U+FFFF too."""
    if name == "samples":
        docs = [p.read_bytes() for p in sorted(SAMPLES.glob("*.pdf"))]
    else:
        docs = [{"surrogates": lambda: pdfgen.make_mapped_text(
                     ["Kangaroo \U0001f998 and \U0001d518\U0001d52b text", "next line"]),
                 "rotated": pdfgen.make_rotated_text, "german": pdfgen.make_german_prose}[name]()]
    texts = [_pypdfium2_texts(data) for data in docs]
    assert [_raw_texts(data) for data in docs] == texts
    with_text = sum(1 for doc in texts if any(bounded for bounded, _ in doc))
    assert with_text >= len(docs) - 1  # the samples hold one scan
    if name == "surrogates":
        assert "\U0001f998" in texts[0][0][0] and "\U0001f998" in texts[0][0][1]


@pytest.mark.parametrize("engine", ENGINES)
def test_utf16_title(engine, tmp_path):
    data = pdfgen.make_text_pdf(["body"], title=pdfgen.utf16_text("  Ünïcode 標題 🦘 "))
    assert read(data, ctx_for(engine, tmp_path)).result.title == "Ünïcode 標題 🦘"


@pytest.mark.parametrize("engine", ENGINES)
def test_nested_outline(engine, tmp_path):
    out = read(pdfgen.make_nested_outline(), ctx_for(engine, tmp_path))
    assert out.status == "ok"
    assert outline_of(out) == [
        {"title": "Introduction", "page": 1, "level": 1},
        {"title": "Part One", "page": 2, "level": 1},  # from a /A GoTo action
        {"title": "Section 1.1", "page": 2, "level": 2},
        {"title": "Section 1.2", "page": 3, "level": 2},
        {"title": "Deep item", "page": 4, "level": 3},
        {"title": "Appendix é", "page": 4, "level": 1},  # trimmed; "No destination" skipped
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_looping_outline_ends(engine, tmp_path):
    out = read(pdfgen.make_looping_outline(), ctx_for(engine, tmp_path))
    assert out.status == "ok"
    assert outline_of(out) == [
        {"title": "Loop A", "page": 1, "level": 1},
        {"title": "Loop child", "page": 2, "level": 2},
        {"title": "Loop B", "page": 2, "level": 1},
    ]


@pytest.mark.parametrize("engine", ["pdfium", "pdfplumber"])
@pytest.mark.slow
def test_outline_stops_at_10000_items(engine, tmp_path):
    out = read(pdfgen.make_long_outline(10_050), ctx_for(engine, tmp_path))
    outline = out.result.outline
    assert len(outline) == pdfoutline.MAX_OUTLINE_ITEMS
    assert outline[-1].title == "item 9999"


@pytest.mark.parametrize("engine", ENGINES)
def test_named_destinations(engine, tmp_path):
    """A named destination resolves through the /Names tree; an unknown name or a reference
    to a non-page is left out."""
    out = read(pdfgen.make_named_dests(), ctx_for(engine, tmp_path))
    assert outline_of(out) == [
        {"title": "By name", "page": 2, "level": 1},
        {"title": "By array", "page": 3, "level": 1},
    ]


# -------------------------------------------------------------------------------- encryption

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bits", [40, 128])
def test_user_password_is_encrypted(engine, bits, tmp_path):
    data = pdfgen.make_text_pdf(["secret text"], security=pdfgen.RC4Security(user=b"pw",
                                                                            bits=bits))
    out = read(data, ctx_for(engine, tmp_path))
    assert (out.status, out.error_kind, out.error) == (
        "error", "encrypted", "encrypted PDF (password required)")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bits", [40, 128])
def test_owner_password_only_is_readable(engine, bits, tmp_path):
    security = pdfgen.RC4Security(owner=b"pw", bits=bits, permissions=-3904)  # no copying
    data = pdfgen.make_text_pdf([f"owner only marker {bits}"], title="Locked title",
                                compress=True, security=security)
    out = read(data, ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    assert f"owner only marker {bits}" in out.text
    assert out.result.title == "Locked title"


# --------------------------------------------------------------------------- hostile files

@pytest.mark.parametrize("engine", ENGINES)
def test_a_failing_page_does_not_stop_the_others(engine, tmp_path):
    out = read(pdfgen.make_failing_page(), ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    assert "First good page" in out.text and "Third good page" in out.text
    if engine != "pdftotext":  # poppler reports page trouble on stderr only
        assert any(w.startswith("page ") for w in out.warnings), out.warnings


@pytest.mark.parametrize("engine", ENGINES)
def test_font_without_tounicode_is_not_stored(engine, tmp_path):
    """Glyph codes that map to control characters: never byte salad in the store."""
    out = read(pdfgen.make_no_tounicode(), ctx_for(engine, tmp_path))
    assert out.text == ""
    if engine == "pdftotext":
        assert (out.status, out.error_kind) == ("error", "error")
        assert out.error.startswith("pdf text is not readable")
    else:
        assert out.status == "unsupported"
        assert out.error == "needs pdftotext (poppler) on this machine"


@needs_pdftotext
def test_garbage_from_every_engine_names_each(tmp_path):
    ctx = LocalContext(Limits(), {"pdftotext": PDFTOTEXT}, tmpdir=tmp_path)
    out = read(pdfgen.make_no_tounicode(), ctx)
    assert out.status == "error"
    for engine in ("pdfium", "pdfplumber", "pdftotext"):
        assert f"{engine}: garbage text" in out.error


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cut", [40, 0.66], ids=["head", "two-thirds"])
def test_truncated_file_is_corrupt(engine, cut, tmp_path):
    full = pdfgen.make_text_pdf(["truncated marker", "page two"], compress=True)
    data = full[: cut if isinstance(cut, int) else int(len(full) * cut)]
    out = read(data, ctx_for(engine, tmp_path))
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert out.error.startswith("unreadable PDF: ")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n" + bytes(range(256)) * 20,
                                  b"not a pdf at all\n" * 50], ids=["empty", "binary", "text"])
def test_garbage_bytes_are_corrupt(engine, data, tmp_path):
    out = read(data, ctx_for(engine, tmp_path))
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert out.error.startswith("unreadable PDF: ")


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_pages_is_corrupt(engine, tmp_path):
    out = read(pdfgen.make_zero_pages(), ctx_for(engine, tmp_path))
    assert (out.status, out.error_kind) == ("error", "corrupt")


def test_an_engine_that_cannot_open_falls_back(tmp_path):
    """PDFium gives up on a header after 1 KiB of junk; pdfplumber reads it, and says so."""
    ctx = LocalContext(Limits(pdf_engines=("pdfium", "pdfplumber")), {}, tmpdir=tmp_path)
    out = read(pdfgen.make_junk_header("junk header marker"), ctx)
    assert out.status == "ok" and out.extractor == "pdfplumber"
    assert "junk header marker" in out.text
    assert out.warnings and out.warnings[0].startswith("skipped pdfium: unreadable PDF")


@needs_pdftotext
def test_pdftotext_is_the_last_resort(tmp_path):
    ctx = LocalContext(Limits(pdf_engines=("pdfium",)), {"pdftotext": PDFTOTEXT},
                       tmpdir=tmp_path)
    out = read(pdfgen.make_junk_header("junk header marker"), ctx)
    assert out.status == "ok" and out.extractor == "pdftotext"
    assert "junk header marker" in out.text
    assert out.result.pages == 1


def test_unknown_engine_is_skipped_with_a_warning(tmp_path):
    ctx = LocalContext(Limits(pdf_engines=("nosuch", "pdfium")), {}, tmpdir=tmp_path)
    out = read(pdfgen.make_text_pdf(["fallback marker"]), ctx)
    assert out.status == "ok" and out.extractor == "pdfium"
    assert "nosuch" in out.warnings[0]


# -------------------------------------------------------------------------------- budgets

@pytest.mark.parametrize("engine", ENGINES)
def test_max_pages_cap_keeps_pages_read(engine, tmp_path):
    out = read(pdfgen.make_many_pages(12), ctx_for(engine, tmp_path, max_pages=5))
    assert out.status == "ok" and out.limit == "max_pages"
    assert out.extractor == engine
    assert out.result.pages == 12
    assert out.text.rstrip("\n").endswith(
        "[bastion: text truncated, max_pages reached: 5 of 12 pages]")
    assert out.text.count("\f") == 4
    assert "end of page 5" in out.text and "page 6" not in out.text


@pytest.mark.parametrize("engine", ENGINES)
def test_max_chars_cap(engine, tmp_path):
    out = read(pdfgen.make_many_pages(20), ctx_for(engine, tmp_path, max_chars=1000))
    assert out.limit == "max_chars" and out.extractor == engine
    assert out.result.pages == 20
    assert len(out.text) < 1100


RSS_SCRIPT = """
import resource, sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from pdfgen import make_many_pages
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document
from bastion.readers.runtime.context import LocalContext
engine, pages, tools = sys.argv[1], int(sys.argv[2]), dict(a.split("=") for a in sys.argv[3:])
data = make_many_pages(pages)
import pdfplumber, pypdfium2  # imported before the baseline
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = read_document(Document(data, "big.pdf", "application/pdf"),
                    LocalContext(Limits(pdf_engines=(engine,)), tools))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(out.status, out.result.pages, out.text.count(chr(12)), before, after)
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.slow
def test_worker_rss_is_bounded_on_1000_pages(engine, tmp_path):
    """Peak RSS growth of a fresh process reading a 1,000-page PDF.  pdfplumber reads 250 of
    them here to keep the suite fast (its full figure is in docs/readers/pdf.md)."""
    pages = 250 if engine == "pdfplumber" else 1000
    script = RSS_SCRIPT.format(root=str(Path(__file__).parent.parent),
                               tests=str(Path(__file__).parent))
    tools = [f"pdftotext={PDFTOTEXT}"] if engine == "pdftotext" else []
    res = run_tool([sys.executable, "-c", script, engine, str(pages), *tools], timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    status, n, feeds, before, after = res.stdout.split()
    assert (status, int(n), int(feeds)) == (b"ok", pages, pages - 1)
    growth_mib = (int(after) - int(before)) / 1024
    assert growth_mib < 64, f"{engine}: RSS grew {growth_mib:.0f} MiB"


# ----------------------------------------------------------------------------------- OCR

@pytest.mark.parametrize("engine", ENGINES)
def test_image_only_page_is_empty_without_ocr(engine, tmp_path):
    out = read(pdfgen.make_image_only("QUOKKA 42"), ctx_for(engine, tmp_path))
    assert (out.status, out.error) == ("empty", "no text layer (scanned PDF?)")
    assert out.result.pages == 1


@needs_ocr
@pytest.mark.parametrize("engine", ENGINES)
def test_image_only_page_is_ocred(engine, tmp_path):
    ctx = ctx_for(engine, tmp_path, tools=("pdftoppm", "tesseract"), ocr_dpi=150)
    out = read(pdfgen.make_image_only("QUOKKA 42 zebra"), ctx)
    assert out.status == "ok", out.error
    assert out.extractor == f"{engine}+tesseract"  # the engine found no text layer
    assert "QUOKKA" in out.text
    assert out.result.pages == 1 and out.result.pages_ocr == 1
    (source,) = page_sources(out)
    assert source["source"] == "ocr" and source["renderer"] == "pdfium"
    assert list(tmp_path.iterdir()) == []  # rendered in memory, read by tesseract from stdin


@needs_ocr
def test_ocr_page_cap(tmp_path):
    b = pdfgen.PdfBuilder()
    gray, w, h = pdfgen.render_text_gray("WOMBAT")
    for _ in range(3):
        b.add_image_page(gray, w, h)
    ctx = ctx_for("pdfium", tmp_path, tools=("pdftoppm", "tesseract"), ocr_max_pages=1,
                  ocr_dpi=100)
    out = read(b.build(), ctx)
    assert out.limit == "ocr_max_pages" and out.extractor == "pdfium+tesseract"
    assert "WOMBAT" in out.text and "1 of 3 pages to OCR" in out.text
    assert out.result.pages_ocr == 1
    assert [s.get("not_ocred") for s in page_sources(out)] == [
        None, "ocr_max_pages reached", "ocr_max_pages reached"]


# ----------------------------------------------------------------------------- real PDFs

SAMPLE_PHRASES = {
    "pdflatex-outline.pdf": "the length of words should match the language",
    "crazyones.pdf": "the round pegs in the square holes",
    "libreoffice-form.pdf": "Name",
    "mpich-install.pdf": "MPICH Installer",
    "glpk-cnfsat.pdf": "CNF-SAT",
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(SAMPLE_PHRASES))
@pytest.mark.slow
def test_real_samples(engine, name, tmp_path):
    data = (SAMPLES / name).read_bytes()
    out = read(data, ctx_for(engine, tmp_path), name)
    assert out.status == "ok", out.error
    assert SAMPLE_PHRASES[name].lower() in " ".join(out.text.split()).lower()
    assert out.result.pages == out.text.count("\f") + 1


def test_real_outline_uses_named_destinations(tmp_path):
    """pdfTeX outlines point at named destinations; both engines resolve them alike."""
    data = (SAMPLES / "pdflatex-outline.pdf").read_bytes()
    outlines = [read(data, ctx_for(e, tmp_path)).result.outline for e in ("pdfium", "pdfplumber")]
    assert outlines[0] and outlines[0] == outlines[1]


# ---------------------------------------------------------------------- the pdftext child

def test_iter_pdf_protocol_shape():
    events = [e.to_json() for e in pdfengines.iter_pdf(pdfgen.make_many_pages(3), "pdfium", 2)]
    assert events[0] == {"meta": {"pages": 3, "title": None, "outline": []}}
    assert [e["page"] for e in events[1:]] == [1, 2]
    assert "page 2 begins here" in events[2]["text"]


@pytest.mark.parametrize("engine", ["pdfium", "pdfplumber"])
def test_pdftext_main_in_process(engine):
    out = io.StringIO()
    rc = pdfengines.pdftext_main(["-max-pages", "2", "-engine", engine],
                                io.BytesIO(pdfgen.make_many_pages(4)), out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rc == 0
    assert lines[0]["meta"]["pages"] == 4
    assert [line["page"] for line in lines[1:]] == [1, 2]


@pytest.mark.parametrize("data, code", [
    (pdfgen.make_text_pdf(["x"], security=pdfgen.RC4Security(user=b"pw")), 3),
    (b"garbage", 4),
    (b"", 4),
    (pdfgen.make_zero_pages(), 4),
])
def test_pdftext_main_exit_codes(data, code):
    assert pdfengines.pdftext_main([], io.BytesIO(data), io.StringIO()) == code


def test_pdftext_main_rejects_bad_flags():
    assert pdfengines.pdftext_main(["-max-pages"], io.BytesIO(b""), io.StringIO()) == 1
    assert pdfengines.pdftext_main(["-bogus", "1"], io.BytesIO(b""), io.StringIO()) == 1
    assert pdfengines.pdftext_main(["-engine", "nosuch"], io.BytesIO(
        pdfgen.make_text_pdf(["x"])), io.StringIO()) == 1


CHILD = ("import sys; from bastion.readers.pdf.engines import pdftext_main; "
         "sys.exit(pdftext_main(sys.argv[1:], sys.stdin.buffer, sys.stdout))")
# The deadline hook exists only here: a child that records its pid, starts a sleeping
# grandchild in its process group, sleeps, and only then becomes the real pdftext child.
SLOW_CHILD = ("import os, subprocess, sys, time; "
              "kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
              "open(sys.argv[1], 'w').write(f'{os.getpid()} {kid.pid}'); time.sleep(60); "
              "from bastion.readers.pdf.engines import pdftext_main; "
              "sys.exit(pdftext_main(sys.argv[2:], sys.stdin.buffer, sys.stdout))")


def child_argv(*flags: str) -> list[str]:
    return [sys.executable, "-c", CHILD, *flags]


@pytest.fixture
def in_repo(monkeypatch):
    """Children import ``readers`` from the repository (their cwd is inherited)."""
    monkeypatch.chdir(Path(__file__).parent.parent)


@pytest.mark.parametrize("engine", ["pdfium", "pdfplumber"])
def test_child_process_round_trip(engine, in_repo):
    data = pdfgen.make_nested_outline()
    doc = pdftext_client.run_pdftext(child_argv("-max-pages", "3", "-engine", engine), data,
                                     timeout=30, max_output=1 << 20)
    assert doc.pages == 4 and len(doc.texts) == 3
    assert "Chapter page 3" in doc.texts[2]
    assert doc.outline[0] == {"title": "Introduction", "page": 1, "level": 1}
    assert doc.empty_reason is None


def test_child_process_errors(in_repo):
    locked = pdfgen.make_text_pdf(["x"], security=pdfgen.RC4Security(user=b"pw"))
    with pytest.raises(EncryptedDocument, match=r"^encrypted PDF \(password required\)$"):
        pdftext_client.run_pdftext(child_argv(), locked, timeout=30, max_output=1 << 20)
    with pytest.raises(CorruptDocument, match=r"^unreadable PDF: .*Data format error"):
        pdftext_client.run_pdftext(child_argv(), b"garbage", timeout=30, max_output=1 << 20)
    doc = pdftext_client.run_pdftext(child_argv(), pdfgen.make_image_only("X"), timeout=30,
                                     max_output=1 << 20)
    assert doc.empty_reason == "no text layer (scanned PDF?)"


def test_child_process_output_cap(in_repo):
    with pytest.raises(ReaderError, match="pdf text over the output limit") as e:
        pdftext_client.run_pdftext(child_argv(), pdfgen.make_many_pages(50), timeout=30,
                                   max_output=2000)
    assert e.value.kind == "output_limit"


def _gone(pid: int) -> bool:
    """No such process, or a zombie whose parent has not reaped it yet (it runs no more)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (FileNotFoundError, IndexError):
        return True


def _group_empty(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_child_process_deadline_kills_the_group(in_repo, tmp_path):
    pidfile = tmp_path / "pids"
    argv = [sys.executable, "-c", SLOW_CHILD, str(pidfile), "-max-pages", "2"]
    # the child would answer after its 60 s sleep: a timeout shows the kill came first
    with pytest.raises(ReaderError, match="^pdf extraction timed out$") as e:
        pdftext_client.run_pdftext(argv, pdfgen.make_text_pdf(["x"]), timeout=1.5,
                                   max_output=1 << 20)
    assert e.value.kind == "timeout"
    child, grandchild = (int(p) for p in pidfile.read_text().split())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # killed and reaped before run_pdftext returned
    # The grandchild (a sleep of 600 s) got SIGKILL with the group; the kernel finishes it
    # and init reaps it a moment later
    eventually(lambda: _group_empty(child), "the child's process group outlived the kill")
    assert _gone(grandchild)


@pytest.mark.parametrize("stdout, code, stderr, error", [
    (b"", 3, b"", EncryptedDocument),
    (b"", 4, b"Data format error\nmore\n", CorruptDocument),
    (b"", -11, b"", CorruptDocument),
    (b"not json\n", 0, b"", CorruptDocument),
    (b'{"meta": {"pages": 2, "title": null, "outline": []}}\n{"page": 2, "text": "x"}\n', 0,
     b"", CorruptDocument),
])
def test_parse_pdftext_output_errors(stdout, code, stderr, error):
    with pytest.raises(error) as e:
        pdftext_client.parse_pdftext_output(stdout, code, stderr)
    if code == 4:
        assert e.value.message == "unreadable PDF: Data format error"
    if code == -11:
        assert e.value.message == "unreadable PDF: killed by signal 11"


def test_parse_pdftext_output_pages():
    lines = [{"meta": {"pages": 3, "title": "T", "outline": []}},
             {"page": 1, "text": " "}, {"page": 2, "error": "boom"}]
    doc = pdftext_client.parse_pdftext_output(
        "".join(json.dumps(x) + "\n" for x in lines).encode(), 0, b"")
    assert (doc.pages, doc.title, doc.failed, doc.texts) == (3, "T", {2: "boom"}, [" ", ""])
    assert doc.empty_reason == "no text layer (scanned PDF?)"


def test_printable_ratio():
    assert pagetext.printable_ratio("plain text\n\f") == 1.0
    assert pagetext.printable_ratio("") == 1.0
    assert pagetext.printable_ratio("(cid:3)(cid:4)ab") == 0.5
    assert pagetext.printable_ratio("\x01\x02\ue000x") == 0.25


def test_an_engine_refusing_a_password_falls_through_to_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PDFium refuses some AES-256 files with an empty user password that pdfminer and poppler
    open; its EncryptedDocument must not end the chain.  No such file can be written by
    tests/pdfgen.py (RC4 only), so PDFium's verdict is simulated here: pdfium is made to raise
    EncryptedDocument on a plain PDF, and the real pdfplumber engine then reads it."""
    real = pdfreader.iter_pdf

    def pdfium_refuses(data: bytes, engine: str, max_pages: int):
        if engine == "pdfium":
            raise EncryptedDocument("encrypted PDF (password required)")
        return real(data, engine, max_pages)

    monkeypatch.setattr(pdfreader, "iter_pdf", pdfium_refuses)
    data = pdfgen.make_text_pdf(["fallthroughmarker"])
    ctx = LocalContext(Limits(pdf_engines=("pdfium", "pdfplumber")), {}, tmpdir=tmp_path)
    out = read_document(Document(data, "a.pdf", "application/pdf"), ctx)
    assert out.status == "ok" and out.extractor == "pdfplumber"
    assert "fallthroughmarker" in out.text
    # every engine refusing it: the verdict stays "encrypted"
    ctx = LocalContext(Limits(pdf_engines=("pdfium",)), {}, tmpdir=tmp_path)
    out = read_document(Document(data, "a.pdf", "application/pdf"), ctx)
    assert out.status == "error" and out.error_kind == "encrypted"


# ------------------------------------------------------------------ OCR decided per page

OCR_TOOLS = ("pdftoppm", "tesseract")
COVER = "Typed cover page of the office scan"
CLOSING = "Closing page typed as text"


def mixed_scan() -> bytes:
    return pdfgen.make_mixed_scan([COVER, CLOSING], {1: "QUOKKA 42 zebra"})


@needs_ocr
@pytest.mark.parametrize("engine", ENGINES)
def test_mixed_pdf_ocrs_only_its_scanned_page(engine, tmp_path):
    ctx = ctx_for(engine, tmp_path, tools=OCR_TOOLS, ocr_dpi=150)
    out = read(mixed_scan(), ctx)
    assert out.status == "ok", out.error
    assert out.extractor == f"{engine}+tesseract" and list(out.warnings) == []
    pages = out.text.split("\f")
    assert len(pages) == 3
    assert COVER in pages[0] and CLOSING in pages[2]  # native text, in page order
    assert "QUOKKA" in pages[1] and COVER not in pages[1]
    sources = page_sources(out)
    assert [s["source"] for s in sources] == ["native", "ocr", "native"]
    assert sources[0]["engine"] == engine and sources[0]["version"]
    ocr = sources[1]
    assert (ocr["page"], ocr["engine"], ocr["renderer"], ocr["dpi"]) == (2, "tesseract",
                                                                         "pdfium", 150)
    assert ocr["version"] and ocr["version"][0].isdigit()  # "5.3.0"
    assert isinstance(ocr["confidence"], float) and 50 < ocr["confidence"] <= 100
    assert out.result.pages_ocr == 1


@needs_ocr
def test_ocr_is_deterministic(tmp_path):
    ctx = ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=150)
    first, second = read(mixed_scan(), ctx), read(mixed_scan(), ctx)
    assert first.text == second.text and first.result == second.result


@needs_ocr
def test_a_scan_ocr_finds_no_words_on_says_so_not_scanned_pdf(tmp_path):
    """A scan OCR read and found no words on, and a scan of blank pages: the record says
    what OCR made of it, not "scanned PDF?" (kept for a scan OCR has not looked at)."""
    ctx = ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=150)
    dots = read(pdfgen.make_mixed_scan([], {0: ".  ,  ."}), ctx)
    assert dots.status == "empty"
    assert dots.error == "no text layer, and OCR read no text on page 1"
    blank = read(pdfgen.make_mixed_scan([], {0: " "}), ctx)
    assert blank.status == "empty" and blank.error == "no text layer, and its pages are blank"
    unread = read(pdfgen.make_mixed_scan([], {0: "QUOKKA"}), ctx_for("pdfium", tmp_path))
    assert unread.status == "empty" and unread.error == "no text layer (scanned PDF?)"


def test_tesseract_turned_off_is_said_so(tmp_path):
    """--no-external (``Limits.external_off``): the page was not OCRed because the external
    tools are off, not because tesseract is missing."""
    ctx = LocalContext(Limits(pdf_engines=("pdfium",), external_off=True), {}, tmpdir=tmp_path)
    out = read(mixed_scan(), ctx)
    assert out.status == "ok"
    assert list(out.warnings) == ["page 2: no text layer, not OCRed: needs tesseract, not "
                                  "used: external tools are off (--no-external)"]


def test_mixed_pdf_without_tesseract_keeps_its_text_and_says_so(tmp_path):
    out = read(mixed_scan(), ctx_for("pdfium", tmp_path, tools=("pdftoppm",)))
    assert out.status == "ok" and out.extractor == "pdfium"
    assert out.text.split("\f")[1] == ""
    assert list(out.warnings) == [
        "page 2: no text layer, not OCRed: needs tesseract on this machine"]
    sources = page_sources(out)
    assert sources[1]["not_ocred"] == "needs tesseract on this machine"
    assert out.result.pages_ocr == 0


@needs_ocr
def test_blank_pages_are_not_sent_to_tesseract(tmp_path, monkeypatch):
    """A page with no text and no ink renders white: nothing to read, no tesseract run."""
    calls = []
    real = pdfocr.read_page
    monkeypatch.setattr(pdfocr, "read_page",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    b = pdfgen.PdfBuilder()
    b.add_text_page("A page of ordinary text before the blank one")
    b.add_page(b"")
    out = read(b.build(), ctx_for("pdfium", tmp_path, tools=OCR_TOOLS))
    assert out.status == "ok" and out.extractor == "pdfium" and calls == []
    assert out.result.pages_ocr == 0 and list(out.warnings) == []


def short_page_over_image(native: bytes, pictured: str) -> bytes:
    """A page whose text layer is ``native`` (a few characters) over an image of
    ``pictured``."""
    b = pdfgen.PdfBuilder()
    b.add_text_page("A page of ordinary text comes first")
    gray, w, h = pdfgen.render_text_gray(pictured)
    image = b.w.add(pdfgen.Stream({
        "Type": pdfgen.Name("XObject"), "Subtype": pdfgen.Name("Image"), "Width": w,
        "Height": h, "ColorSpace": pdfgen.Name("DeviceGray"), "BitsPerComponent": 8,
        "Filter": pdfgen.Name("FlateDecode")}, pdfgen.zlib.compress(gray)))
    content = (b"q 400 0 0 %.2f 72 400 cm /Im1 Do Q\n" % (400 * h / w)
               + b"BT /F1 10 Tf 300 40 Td (" + native + b") Tj ET")
    b.add_page(content, {"Font": {"F1": b.font}, "XObject": {"Im1": image}})
    return b.build()


@needs_ocr
def test_short_text_layer_without_an_image_is_not_ocred(tmp_path, monkeypatch):
    calls = []
    real = pdfocr.read_page
    monkeypatch.setattr(pdfocr, "read_page",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    b = pdfgen.PdfBuilder()
    b.add_text_page("A page of ordinary text comes first")
    b.add_text_page("p. 2")
    out = read(b.build(), ctx_for("pdfium", tmp_path, tools=OCR_TOOLS))
    assert out.status == "ok" and calls == []
    assert out.text.split("\f")[1] == "p. 2\n"


@needs_ocr
def test_short_text_layer_is_kept_when_ocr_reads_no_more(tmp_path):
    """A short text layer over an image without words: OCR reads the rendered layer again
    (at best); the layer stays, exactly."""
    data = short_page_over_image(b"Wombat", "")
    out = read(data, ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=150))
    assert out.status == "ok"
    assert out.text.split("\f")[1] == "Wombat\n"
    source = page_sources(out)[1]
    assert source["source"] == "native"
    assert source["ocr_unused"] in ("read no more than the text layer", "read nothing")


@needs_ocr
def test_short_text_layer_over_a_scan_takes_the_ocr_text(tmp_path):
    """A page number in the text layer over a scanned page: OCR reads far more; it is taken."""
    data = short_page_over_image(b"12", "QUOKKA 42 zebra\nwombats and koalas")
    out = read(data, ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=150))
    page = out.text.split("\f")[1]
    assert out.status == "ok" and "QUOKKA" in page and "koalas" in page
    assert page_sources(out)[1]["source"] == "ocr"


@needs_ocr
def test_ocr_stops_before_the_deadline_and_keeps_the_text(tmp_path):
    ctx = LocalContext(Limits(pdf_engines=("pdfium",)),
                       {n: shutil.which(n) for n in OCR_TOOLS}, tmpdir=tmp_path,
                       deadline=time.monotonic() + pdfocr.OCR_RESERVE_S - 1)
    out = read(mixed_scan(), ctx)
    assert out.status == "ok" and out.limit == "ocr_deadline"
    assert COVER in out.text and CLOSING in out.text
    assert "ocr_deadline reached: not OCRed: page 2" in out.text
    assert page_sources(out)[1]["not_ocred"] == "the deadline was near"


# ------------------------------------------------------------ garbage measured per page

@pytest.mark.parametrize("engine", ENGINES)
def test_german_prose_is_read(engine, tmp_path):
    """Umlauts, ß and „…“ through /WinAnsiEncoding are letters, not garbage."""
    out = read(pdfgen.make_german_prose(), ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    assert list(out.warnings) == []
    text = " ".join(out.text.split())
    assert "Größere Änderungen überließ man „den Fachleuten“ – so hieß es." in text
    assert "Süße Äpfel, bittere Öfen: Maßstäbe für Qualität" in text


def test_c1_bytes_are_read_as_windows_1252(tmp_path):
    """A font that leaves punctuation unmapped gives the raw codes (U+0084 …); they are the
    Windows-1252 marks, and the page is not garbage."""
    data = pdfgen.make_raw_code_punctuation("Er sagte „hallo“ – dann ging er nach Hause.")
    out = read(data, ctx_for("pdfium", tmp_path))
    assert out.status == "ok", out.error
    assert "Er sagte „hallo“ – dann ging er nach Hause." in out.text
    assert not any("\x80" <= c <= "\x9f" for c in out.text)


@pytest.mark.parametrize("engine", ENGINES)
def test_one_garbage_page_does_not_throw_away_the_document(engine, tmp_path):
    data = pdfgen.make_garbage_page_among_text(["first readable page", "third readable page"], 1)
    out = read(data, ctx_for(engine, tmp_path))
    assert out.status == "ok", out.error
    pages = out.text.split("\f")
    assert "first readable page" in pages[0] and "third readable page" in pages[2]
    assert pages[1] == ""  # never stored
    assert "page 2: garbage text dropped, not OCRed: needs tesseract on this machine" \
        in out.warnings
    dropped = page_sources(out)[1]
    assert dropped["source"] == "dropped" and dropped["reason"].startswith("garbage text (")


@needs_ocr
def test_garbage_page_is_ocred(tmp_path):
    data = pdfgen.make_garbage_page_among_text(["first readable page", "third readable page"],
                                               1, scanned="WOMBAT 77 koala")
    out = read(data, ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=150))
    assert out.status == "ok" and out.extractor == "pdfium+tesseract"
    assert "WOMBAT" in out.text.split("\f")[1]
    assert page_sources(out)[1]["source"] == "ocr" and list(out.warnings) == []


@needs_ocr
def test_all_garbage_is_ocred_when_tesseract_is_there(tmp_path):
    data = pdfgen.make_garbage_page_among_text([], 0, scanned="WOMBAT 77 koala")
    ctx = LocalContext(Limits(), {n: shutil.which(n) for n in OCR_TOOLS}, tmpdir=tmp_path)
    out = read(data, ctx)
    assert out.status == "ok" and out.extractor == "pdfium+tesseract"
    assert "WOMBAT" in out.text
    assert [w.split(" (")[0] for w in out.warnings] == [
        "skipped pdfium: garbage text", "skipped pdfplumber: garbage text"]


def test_page_kind():
    assert pagetext.page_kind("") == "blank"
    assert pagetext.page_kind(" \n\f ") == "blank"
    assert pagetext.page_kind("p. 12") == "short"
    assert pagetext.page_kind("Größe und Maß, überall") == "text"
    assert pagetext.page_kind("Ελληνικά και русский текст") == "text"
    assert pagetext.page_kind("(cid:3)(cid:4)(cid:5) ab") == "garbage"
    assert pagetext.page_kind("\ue000\ue001\ue002\ue003 text") == "garbage"


# ------------------------------------------------------------------------- annotations

NOTES = [("Text", "sticky NOTEMARKER one"), ("FreeText", "free TYPEDMARKER words"),
         ("Highlight", "highlight comment\nsecond line")]


@needs_ocr
@pytest.mark.parametrize("engine", ENGINES)
def test_annotation_only_pdf_is_ok_and_not_ocred(engine, tmp_path):
    out = read(pdfgen.make_annotated(None, NOTES), ctx_for(engine, tmp_path, tools=OCR_TOOLS))
    assert out.status == "ok", out.error
    assert out.extractor == engine and out.result.pages_ocr == 0
    if engine == "pdftotext":  # poppler draws the free text into the page, once
        assert out.text == ("free TYPEDMARKER words\n"
                            "[annotation] sticky NOTEMARKER one\n"
                            "[annotation] highlight comment\nsecond line\n"
                            "[form field: field] field value\n")
        return
    assert out.text == ("[annotation] sticky NOTEMARKER one\n"
                        "[annotation] free TYPEDMARKER words\n"
                        "[annotation] highlight comment\nsecond line\n"
                        "[form field: field] field value\n")
    assert page_sources(out)[0]["annotations"] == 4  # the form field's value too


@pytest.mark.parametrize("engine", ENGINES)
def test_annotations_follow_the_page_text(engine, tmp_path):
    out = read(pdfgen.make_annotated("Body text of the page", NOTES[:1]),
               ctx_for(engine, tmp_path))
    assert out.text == ("Body text of the page\n[annotation] sticky NOTEMARKER one\n"
                        "[form field: field] field value\n")  # a widget: its value only
    assert "link words" not in out.text and "widget words" not in out.text


# ------------------------------------------------------------------------- rotated text

def test_rotated_text_reads_in_order(tmp_path):
    out = read(pdfgen.make_rotated_text(), ctx_for("pdfium", tmp_path))
    assert out.status == "ok", out.error
    pages = out.text.split("\f")
    assert len(pages) == 6
    block = "\n".join(pdfgen.ROTATED_LINES)
    for n, page in enumerate(pages, 1):
        assert block in page, (n, page)
    assert pages[5].startswith("Heading above the side label\n")


@needs_ocr
@pytest.mark.parametrize("turned", [90, 180])
@pytest.mark.slow
def test_scan_lying_on_its_side_or_upside_down_is_turned(turned, tmp_path):
    """Tesseract reads a page turned 180° as garbage with a low confidence: its orientation
    detection says how to turn it, and the turned page is read again."""
    text = ("The quick brown fox jumps over\nthe lazy dog near the river bank\n"
            "while seven wombats watch quietly\nfrom the tall grass by the road")
    out = read(pdfgen.make_image_only(text, turned=turned),
               ctx_for("pdfium", tmp_path, tools=("tesseract",), ocr_dpi=150))
    assert out.status == "ok", out.error
    assert "seven wombats watch quietly" in out.text
    (source,) = page_sources(out)
    assert source["confidence"] > 80
    if turned == 180:  # at 90° tesseract's own reading may already be good enough
        assert source["turned"] == 180


# --------------------------------------------------------------- real samples of each class

def test_real_annotations(tmp_path):
    """xdvipdfmx text with two sticky notes added in a viewer, one of them with umlauts."""
    out = read((SAMPLES / "pypdf-commented.pdf").read_bytes(), ctx_for("pdfium", tmp_path))
    assert out.status == "ok", out.error
    assert "The round pegs in the square holes." in out.text
    assert out.text.index("The round pegs") < out.text.index("[annotation] Note in second")
    assert "[annotation] note over \"kinds\"\n\nLike in \"kinds of people\"" in out.text
    assert "Umlaut: äöüß" in out.text
    assert page_sources(out)[0]["annotations"] == 2


def test_real_font_without_mapping(tmp_path):
    data = (SAMPLES / "ocrmypdf-type3-font-nomapping.pdf").read_bytes()
    out = read(data, LocalContext(Limits(), {}, tmpdir=tmp_path))
    assert (out.status, out.error) == ("unsupported", "needs pdftotext (poppler) on this machine")


@needs_ocr
def test_real_font_without_mapping_is_ocred(tmp_path):
    data = (SAMPLES / "ocrmypdf-type3-font-nomapping.pdf").read_bytes()
    out = read(data, LocalContext(Limits(), {"tesseract": TESSERACT}, tmpdir=tmp_path))
    assert out.status == "ok" and out.extractor == "pdfium+tesseract"
    assert out.text == "ua\n"  # what the page shows


@needs_ocr
@pytest.mark.slow
def test_real_mixed_document(tmp_path):
    """A real text PDF with a real scanned page put after it (pages joined with PDFium)."""
    import pypdfium2 as pdfium

    joined = pdfium.PdfDocument.new()
    for name in ("crazyones.pdf", "ocrmypdf-linn-scan.pdf"):
        part = pdfium.PdfDocument((SAMPLES / name).read_bytes())
        joined.import_pages(part)
        part.close()
    buf = io.BytesIO()
    joined.save(buf)
    joined.close()
    out = read(buf.getvalue(), ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_dpi=100))
    assert out.status == "ok", out.error
    native, scanned = out.text.split("\f")
    assert "the round pegs in the square holes" in native.lower()
    assert "32 Track MIDI Sequence Recorder" in scanned
    assert [s["source"] for s in page_sources(out)] == ["native", "ocr"]


@needs_ocr
def test_two_caps_name_the_first_and_warn_of_the_second(tmp_path):
    b = pdfgen.PdfBuilder()
    gray, w, h = pdfgen.render_text_gray("WOMBAT")
    for _ in range(3):
        b.add_image_page(gray, w, h)
    ctx = ctx_for("pdfium", tmp_path, tools=OCR_TOOLS, ocr_max_pages=1, max_pages=2,
                  ocr_dpi=100)
    out = read(b.build(), ctx)
    assert out.limit == "max_pages" and "2 of 3 pages" in out.text
    assert list(out.warnings) == ["ocr_max_pages reached: 1 of 2 pages to OCR"]
    assert len(page_sources(out)) == 2


def test_c1_bytes_by_their_font_encoding():
    """Windows-1252 punctuation stands between words, Mac Roman letters inside them."""
    assert pagetext.repair_c1("Er sagte \x84hallo\x93 \x96 dann, don\x92t \x85") == (
        "Er sagte „hallo“ – dann, don’t …")
    assert pagetext.repair_c1("\x84Zitat\x93") == "„Zitat“"
    mac = "Die M\x8anner m\x9fssen gr\x9a\xa7ere \x80pfel sch\x8alen: \xe3so\xd2."
    assert pagetext.repair_c1(mac) == "Die Männer müssen größere Äpfel schälen: „so“."
    assert pagetext.repair_c1("Größe") == "Größe"


@needs_ocr
def test_pdftoppm_renders_what_pdfium_cannot_open(tmp_path):
    """PDFium gives up on a header after 1 KiB of junk; pdfplumber finds no text layer and
    pdftoppm (poppler recovers the file) renders the page for tesseract."""
    data = b"J" * 2000 + b"\n" + pdfgen.make_image_only("QUOKKA 42 zebra")
    ctx = LocalContext(Limits(ocr_dpi=150), {n: shutil.which(n) for n in OCR_TOOLS},
                       tmpdir=tmp_path)
    out = read(data, ctx)
    assert out.status == "ok", out.error
    assert out.extractor == "pdfplumber+tesseract" and "QUOKKA" in out.text
    (source,) = page_sources(out)
    assert (source["source"], source["renderer"]) == ("ocr", "pdftoppm")


def test_scan_without_any_renderer_says_so(tmp_path):
    data = b"J" * 2000 + b"\n" + pdfgen.make_image_only("QUOKKA 42 zebra")
    out = read(data, LocalContext(Limits(), {"tesseract": TESSERACT or "/bin/false"},
                                  tmpdir=tmp_path))
    assert (out.status, out.error) == ("empty", "no text layer (scanned PDF?)")
    assert out.warnings[-1] == "page 1: no text layer, not OCRed: no renderer opens the file"
