"""OCR in the document's own language and script (readers/ocr/choose.py, packs.py), and every
text's main languages (readers/text/langid.py): real tesseract and its Debian language packs
on pages rendered from known text (tests/langpages.py), real sweeps with the packs of a
``TESSDATA_PREFIX`` directory changed between them."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

import langpages as lp
from bastion.readers.base import Document, Limits, ReadResult
from bastion.readers.dispatch import read_document, select
from bastion.readers.ocr import choose, packs
from bastion.readers.ocr.reader import read_page
from bastion.readers.runtime.context import LocalContext
from bastion.readers.runtime.toolset import discover, language_packs
from bastion.readers.runtime.verdict import Verdict
from bastion.readers.text import langid
from bastion.tasks.cli import main

TESSERACT = shutil.which("tesseract")
SYSTEM = language_packs(TESSERACT).get(packs.TESSDATA) if TESSERACT else None
WANTED = ("eng", "osd", "deu", "fra", "rus", "ell", "ara", "chi_sim")
HAVE = {n for n in WANTED if SYSTEM and os.path.exists(f"{SYSTEM.path}/{n}.traineddata")}
needs_packs = pytest.mark.skipif(
    set(WANTED) - HAVE != set() or bool(lp.MISSING_FONTS),
    reason="tesseract-ocr with the deu fra rus ell ara chi-sim packs, or the fonts the pages "
           f"are rendered in ({lp.FONT_PACKAGES}), are not installed")


@pytest.fixture
def tessdata():
    """Make a data directory holding some of the system's packs (symlinks), readable by a
    worker that gave up root (under /tmp, mode 755); removed afterwards."""
    made: list[str] = []

    def make(*names: str) -> str:
        where = tempfile.mkdtemp(prefix="bastion-tessdata-", dir="/tmp")
        os.chmod(where, 0o755)
        made.append(where)
        for name in names:
            os.symlink(f"{SYSTEM.path}/{name}.traineddata", f"{where}/{name}.traineddata")
        return where

    yield make
    for where in made:
        shutil.rmtree(where, ignore_errors=True)


def context(tmp_path: Path, where: str | None, **limits) -> LocalContext:
    tools = {"tesseract": TESSERACT}
    if where:
        tools[packs.TESSDATA] = where
    return LocalContext(Limits(**limits), tools, tmpdir=tmp_path)


def ocr(data: bytes, ctx: LocalContext):
    return read_document(Document(data, "page.png", "image/png"), ctx,
                         select("image/png", "page.png"))


# -- the choice, page by page --------------------------------------------------------------


@pytest.mark.slow
@needs_packs
@pytest.mark.parametrize("sample", lp.SAMPLES, ids=[s.lang for s in lp.SAMPLES])
def test_auto_reads_each_language_with_its_own_pack(sample, tmp_path, tessdata):
    """Seven languages in five scripts: ``auto`` picks the page's pack, reads ≥ 0.9 of its
    words, and the English model alone reads clearly fewer (all of English's, of course)."""
    image = lp.render(sample)
    auto = ocr(image, context(tmp_path, tessdata(*WANTED)))
    english = ocr(image, context(tmp_path, tessdata(*WANTED), ocr_languages=("eng",)))
    got = lp.recall(sample.text, auto.text, sample.script)
    eng = lp.recall(sample.text, english.text, sample.script)
    assert got >= 0.9, (sample.lang, got, auto.text[:300])
    if sample.lang != "eng":
        assert got - eng >= 0.1, (sample.lang, got, eng)
    assert list(auto.result.ocr_languages) == [sample.lang]
    assert auto.result.details["ocr"]["script"] == sample.script
    assert auto.result.details["ocr"]["language"] == sample.iso
    assert auto.result.ocr_missing == ()
    assert auto.result.languages[0][0] == sample.iso  # the document's main language
    assert list(english.result.ocr_languages) == ["eng"]


NOTE = Path(__file__).resolve().parent.parent / "examples" / "docs" / "scanned-note.png"


@pytest.mark.slow
@needs_packs
@pytest.mark.parametrize("page", ["prose", "receipt"])
def test_an_english_page_is_read_once_and_depends_on_eng_alone(page, tmp_path, tessdata):
    """An English page costs one recognition, as before the choice existed, and its result
    depends on no other pack: installing one does not re-read it.  A receipt's few words
    ("Scanned receipt: bastion / Total 42 euros") name no language, but eng reads them far
    too confidently for another script."""
    calls: list[str] = []
    ctx = context(tmp_path, tessdata(*WANTED))
    image = lp.render(lp.sample("eng")) if page == "prose" else NOTE.read_bytes()
    real = choose.choose

    def spy(recognise, detect, installed, languages):
        def counted(pack):
            calls.append(pack)
            return recognise(pack)

        def no_osd():
            calls.append("osd")
            return detect()
        return real(counted, no_osd, installed, languages)

    choose.choose, saved = spy, choose.choose
    try:
        got = read_page(image, ctx)
    finally:
        choose.choose = saved
    assert calls == ["eng"]
    assert list(got.condition.as_dict()) == ["eng"]


@pytest.mark.slow
@needs_packs
@pytest.mark.parametrize("lang, missing, key", [
    ("deu", "deu", "deu"), ("rus", "rus", "script/Cyrillic"), ("ara", "ara", "script/Arabic")])
def test_without_its_pack_a_page_is_read_in_english_and_the_pack_named(
        lang, missing, key, tmp_path, tessdata):
    s = lp.sample(lang)
    out = ocr(lp.render(s), context(tmp_path, tessdata("eng", "osd")))
    assert list(out.result.ocr_languages) == ["eng"]
    assert list(out.result.ocr_missing) == [missing]
    assert out.result.ocr_packs[key] is None  # looked for, absent
    assert out.result.details["ocr"]["missing"] == [missing]


@pytest.mark.slow
@needs_packs
def test_a_greek_page_osd_takes_for_latin_is_found_among_the_other_scripts(tmp_path, tessdata):
    """Tesseract's OSD names Latin, unsure, for this Greek page: the scripts that look like
    Latin are tried, and the page depends on their packs (installing one may change it),
    not on the Arabic or Chinese ones (they are never tried for it)."""
    s = lp.sample("ell")
    out = ocr(lp.render(s), context(tmp_path, tessdata(*WANTED)))
    assert list(out.result.ocr_languages) == ["ell"]
    assert {"script/Cyrillic", "script/Greek"} <= set(out.result.ocr_packs)
    assert not {"script/*", "script/Arabic", "script/Han"} & set(out.result.ocr_packs)
    assert lp.recall(s.text, out.text, s.script) >= 0.9


@pytest.mark.slow
@needs_packs
def test_a_fixed_list_reads_with_those_packs_and_names_the_absent_ones(tmp_path, tessdata):
    s = lp.sample("deu")
    where = tessdata("eng", "osd", "deu")
    out = ocr(lp.render(s), context(tmp_path, where, ocr_languages=("deu", "eng", "spa")))
    assert list(out.result.ocr_languages) == ["deu", "eng"]
    assert out.result.details["ocr"]["languages"] == ["deu", "eng"]
    assert list(out.result.ocr_missing) == ["spa"]
    assert set(out.result.ocr_packs) == {"deu", "eng", "spa"}
    assert lp.recall(s.text, out.text, s.script) >= 0.9


# -- the packs as tools, the condition as the key ---------------------------------------------


@needs_packs
def test_the_packs_are_tools_identified_by_their_bytes(tessdata, monkeypatch):
    where = tessdata("eng", "osd", "deu")
    monkeypatch.setenv("TESSDATA_PREFIX", where)
    tools = discover()
    assert tools[packs.TESSDATA].path == where
    assert sorted(n for n in tools if n.startswith(packs.TOOL_PREFIX)) == [
        "tesseract:deu", "tesseract:eng"]  # osd is no language
    assert tools["tesseract:deu"].key == packs.identity(f"{SYSTEM.path}/deu.traineddata")
    assert tools["tesseract:deu"].key.startswith("sha256:")


def test_a_condition_holds_while_every_pack_it_looked_at_is_unchanged():
    installed = {"eng": "sha256:e", "deu": "sha256:d"}
    english = {"eng": "sha256:e"}
    german_missing = {"eng": "sha256:e", "fra": None}
    cyrillic = {"eng": "sha256:e", "script/Cyrillic": None}
    assert packs.holds(english, installed) and packs.holds(german_missing, installed)
    assert packs.holds(cyrillic, installed)
    more = {**installed, "fra": "sha256:f", "rus": "sha256:r"}
    assert packs.holds(english, more)
    assert not packs.holds(german_missing, more)  # fra came
    assert not packs.holds(cyrillic, more)  # a Cyrillic pack came
    assert not packs.holds(english, {"eng": "sha256:other"})  # eng changed
    assert not packs.holds({"deu": "sha256:d"}, {"eng": "sha256:e"})  # deu went
    assert packs.holds(None, {}) and packs.holds({}, {})
    star = {"script/*": packs.script_digest(installed, "*")}
    assert star["script/*"] is None and packs.holds(star, more) is False


def test_the_record_keeps_languages_and_the_ocr_condition():
    v = Verdict.of_outcome("ok", chars=5, extractor="tesseract", error=None, error_kind=None,
                           limit=None, warnings=[], tools_used=["tesseract"],
                           result=ReadResult("tesseract", languages=(("de", 0.98),),
                                             ocr_languages=("deu",), ocr_missing=(),
                                             ocr_packs={"eng": "sha256:e", "deu": "sha256:d"}))
    j = v.to_json()
    assert j["languages"] == [{"code": "de", "confidence": 0.98}]
    assert j["ocr_languages"] == ["deu"] and j["ocr_missing"] == []
    assert j["ocr_packs"] == {"deu": "sha256:d", "eng": "sha256:e"}
    assert Verdict.from_json(j) == v == Verdict.from_store(json.loads(json.dumps(j)))
    with pytest.raises(ValueError):
        Verdict.from_json({**j, "languages": [{"code": "de", "confidence": 7}]})
    with pytest.raises(ValueError):
        Verdict.from_json({**j, "ocr_packs": {"eng": 1}})


# -- every document's languages ---------------------------------------------------------------


def test_every_text_gets_its_main_languages(tmp_path):
    ctx = LocalContext(Limits(), {}, tmpdir=tmp_path)

    def langs(text: str) -> list[str]:
        out = read_document(Document(text.encode(), "a.txt", "text/plain"), ctx)
        return [code for code, _ in out.result.languages]

    assert langs(lp.sample("deu").text) == ["de"]
    assert langs(lp.sample("rus").text) == ["ru"]
    assert langs(lp.sample("chi_sim").text) == ["zh"]
    mixed = "\n".join([lp.sample("fra").text] * 3 + [lp.sample("ell").text] * 3)
    assert sorted(langs(mixed * 4)) == ["el", "fr"]
    assert langs("12 34 56\n") == []  # no letters, no language
    got = langid.main_languages(lp.sample("eng").text)
    assert got[0][0] == "en" and 0.9 <= got[0][1] <= 1.0
    assert langid.main_languages(mixed * 4) == langid.main_languages(mixed * 4)


# -- sweeps: installing packs re-reads exactly the documents that could use them -------------


def sweep(m: Path, out: Path) -> dict[str, dict]:
    assert main(["sweep", str(m), "--out", str(out), "-q", "-j", "2"]) in (0, 2)
    with open(out / "extract.jsonl", "rb") as f:
        return {json.loads(line)["path"]: json.loads(line) for line in f}


@pytest.mark.slow
@needs_packs
def test_installing_packs_rereads_exactly_the_non_english_ocred_documents(
        tmp_path, tessdata, monkeypatch):
    monkeypatch.delenv("BASTION_NO_EXTERNAL", raising=False)
    root = tmp_path / "tree"
    root.mkdir()
    for lang in ("eng", "deu", "fra", "rus", "chi_sim"):
        (root / f"{lang}.png").write_bytes(lp.render(lp.sample(lang)))
    (root / "note.txt").write_text(lp.sample("deu").text, encoding="utf-8")
    with zipfile.ZipFile(root / "scans.zip", "w") as z:  # a German scan inside an archive
        z.writestr("inside/deu.png", (root / "deu.png").read_bytes())
        z.writestr("inside/readme.txt", "an archive of scans\n")
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n"
                 "stages: [walk, extract]\n", encoding="utf-8")
    out = tmp_path / "out"

    monkeypatch.setenv("TESSDATA_PREFIX", tessdata("eng", "osd"))
    first = sweep(m, out)
    assert all(r["status"] == "ok" for r in first.values()), first
    assert first["eng.png"]["ocr_missing"] == []
    assert first["deu.png"]["ocr_missing"] == ["deu"]
    assert first["fra.png"]["ocr_missing"] == ["fra"]
    assert first["rus.png"]["ocr_missing"] == ["rus"]
    assert first["chi_sim.png"]["ocr_missing"] == ["chi_sim"]
    assert first["scans.zip"]["ocr_missing"] == ["deu"], first["scans.zip"]
    assert [x["code"] for x in first["note.txt"]["languages"]] == ["de"]
    assert [x["code"] for x in first["deu.png"]["languages"]] == ["de"]

    everything = tessdata(*WANTED)
    monkeypatch.setenv("TESSDATA_PREFIX", everything)
    second = sweep(m, out)
    redone = {p for p, r in second.items() if not r["reused"]}
    assert redone == {"deu.png", "fra.png", "rus.png", "chi_sim.png", "scans.zip"}, redone
    assert second["scans.zip"]["ocr_languages"] == ["deu"], second["scans.zip"]
    for lang in ("deu", "fra", "rus", "chi_sim"):
        r = second[f"{lang}.png"]
        assert r["ocr_languages"] == [lang] and r["ocr_missing"] == [], r
        s = lp.sample(lang)
        assert lp.recall(s.text, (out / r["text"]).read_text(), s.script) >= 0.9

    sweep(m, out)  # the same packs: nothing is read (the no-op run keeps every verdict)
    assert json.loads((out / "extract.summary.json").read_text())["extracted"] == 0

    monkeypatch.setenv("TESSDATA_PREFIX", tessdata(*(n for n in WANTED if n != "deu")))
    third = sweep(m, out)  # deu removed: the German page alone is read again
    assert {p for p, r in third.items() if not r["reused"]} == {"deu.png", "scans.zip"}
    assert third["deu.png"]["ocr_missing"] == ["deu"]


# -- PDFs ------------------------------------------------------------------------------------


def scanned_pdf(*langs: str) -> bytes:
    """A PDF of one scanned page (an image, no text layer) per language."""
    import io

    import pdfgen
    from PIL import Image

    b = pdfgen.PdfBuilder()
    for lang in langs:
        im = Image.open(io.BytesIO(lp.render(lp.sample(lang)))).convert("L")
        b.add_image_page(im.tobytes(), im.width, im.height)
    return b.build()


@pytest.mark.slow
@needs_packs
def test_each_scanned_pdf_page_is_read_in_its_language_and_says_so(tmp_path, tessdata):
    data = scanned_pdf("deu", "rus", "eng")
    ctx = context(tmp_path, tessdata(*WANTED))
    out = read_document(Document(data, "scan.pdf", "application/pdf"), ctx,
                        select("application/pdf", "scan.pdf"))
    assert out.status == "ok", out
    pages = [p.to_json() for p in out.result.page_sources]
    assert [(p["source"], p["languages"], p["script"]) for p in pages] == [
        ("ocr", ["deu"], "Latin"), ("ocr", ["rus"], "Cyrillic"), ("ocr", ["eng"], "Latin")]
    assert list(out.result.ocr_languages) == ["deu", "eng", "rus"]
    assert {c for c, _ in out.result.languages} == {"de", "ru", "en"}
    texts = out.text.split("\f")
    for text, lang in zip(texts, ("deu", "rus", "eng")):
        s = lp.sample(lang)
        assert lp.recall(s.text, text, s.script) >= 0.9, (lang, text[:200])


LAYER = {  # a text layer in each script, and the language its record must name
    "el": ("Η επιτροπή συνεδρίασε την Τρίτη για να εξετάσει τον ετήσιο προϋπολογισμό της "
           "βιβλιοθήκης και τα στοιχεία των αιθουσών ανάγνωσης.", ""),
    "ru": ("Настоящий договор заключён между поставщиком и покупателем о том, что поставщик "
           "обязуется передать товар в собственность покупателя.", ""),
    "ar": ("اجتمعت اللجنة يوم الثلاثاء لمراجعة الميزانية السنوية للمكتبة ووعد المدير بنشر "
           "الأرقام قبل الاجتماع القادم.", "rtl"),
    "zh": ("委员会于星期二开会审查图书馆的年度预算。几位成员询问为什么阅览室在冬季关闭得这么早，"
           "馆长承诺在下次会议之前公布有关数字。", ""),
    "he": ("הוועדה התכנסה ביום שלישי כדי לבחון את התקציב השנתי של הספרייה, והמנהל הבטיח "
           "לפרסם את הנתונים לפני הפגישה הבאה.", "rtl"),
}


@pytest.mark.slow
def test_text_layers_in_other_scripts_are_text_never_unprintable(tmp_path):
    """PDFs printed by Chromium (real embedded subset fonts with ToUnicode maps) whose text
    layer is Greek, Cyrillic, Arabic, Chinese or Hebrew: each page is text (no OCR, nothing
    dropped as garbage) and the record names the language."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    fonts = [f for f in (lp.DEJAVU / "DejaVuSans.ttf", lp.NOTO_CJK / "NotoSansCJK-Regular.ttc")
             if not f.exists()]
    if exe is None or fonts:
        if os.environ.get("CI"):
            pytest.fail("chromium or a font is missing: .ci/run installs them")
        pytest.skip("chromium, or the fonts the pages are printed in (fonts-dejavu, "
                    "fonts-noto-cjk), are not installed: apt-get install chromium "
                    "fonts-dejavu fonts-noto-cjk")
    import subprocess

    ctx = LocalContext(Limits(), {}, tmpdir=tmp_path)
    for code, (text, direction) in LAYER.items():
        html = tmp_path / f"{code}.html"
        html.write_text(f'<html><head><meta charset="utf-8"></head><body style="font-family: '
                        f"'DejaVu Sans', 'Noto Sans CJK SC'\"><p dir=\"{direction or 'ltr'}\">"
                        f"{text}</p></body></html>", encoding="utf-8")
        pdf = tmp_path / f"{code}.pdf"
        done = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                               f"--user-data-dir={tmp_path / 'profile'}",
                               "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html.as_uri()],
                              capture_output=True, timeout=120, check=False)
        assert pdf.exists(), done.stderr.decode(errors="replace")[-2000:]
        out = read_document(Document(pdf.read_bytes(), pdf.name, "application/pdf"), ctx,
                            select("application/pdf", pdf.name))
        assert out.status == "ok", (code, out.error)
        assert [p["source"] for p in [p.to_json() for p in out.result.page_sources]] == ["native"], code
        assert out.result.languages[0][0] == code, (code, out.result.languages, out.text)
        if not direction:  # right-to-left text comes out of PDFium in visual order in parts
            assert text[:12] in out.text, (code, out.text)


@pytest.mark.slow
def test_in_a_worker_whose_memory_cap_is_too_small_the_text_stays_and_the_record_says_so(
        tmp_path):
    """The language model unpacked in memory needs ≈ 310 MB of address space: a worker
    capped at 256 MiB that has no mapped copy of it (tests/unmapped_langid.py: as for a user
    whose cache cannot be had; readers/text/langmodel.py) still gives the document's text,
    without languages, and a warning naming why."""
    import hashlib

    from bastion.readers.base import MiB
    from bastion.readers.runtime.pool import Job, WorkerPool

    results = []
    docs = tmp_path / "docs"
    docs.mkdir()
    path = docs / "vertrag.txt"
    path.write_text(lp.sample("deu").text, encoding="utf-8")
    data = path.read_bytes()
    pool = WorkerPool(1, Limits(memory_bytes=256 * MiB), tmp_path / "pool", results.append,
                      extra_readers=("tests.unmapped_langid",))
    try:
        for n in (1, 2):  # the second document meets the same answer at once
            pool.submit(Job(id=n, path=str(path), name=path.name, mime="text/plain",
                            sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                            deadline_s=30.0))
        pool.drain()
    finally:
        pool.close()
    assert [r.status for r in results] == ["ok", "ok"]
    for r in results:
        assert r.verdict.languages == () and r.verdict.warnings == (langid.UNAVAILABLE,)


def test_the_manifests_ocr_languages_keys_exactly_the_readers_that_ocr():
    from bastion.readers.dispatch import BUILTIN
    from bastion.tasks.extract.plan import task_key

    fixed = Limits(ocr_languages=("deu", "eng"))
    changed = {r.name for r in BUILTIN.readers()
               for mime in r.mimes[:1]
               if task_key(r, mime, Limits(), {}) != task_key(r, mime, fixed, {})}
    # and the readers of documents inside documents, whose images and scans are OCR'd too
    assert changed == {"pdf", "ocr", "archive", "mail", "outlook", "legacy"}
