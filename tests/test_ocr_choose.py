"""When ``auto`` stops looking (readers/ocr/choose.py): the choice fed readings and OSD answers
as tesseract gave them on real pages (the peers corpus's pictures, tests/langpages.py's pages;
figures in docs/performance.md), with the real language identifier, and which recognitions
it asked for."""

from __future__ import annotations

import pytest

import langpages as lp
from bastion.readers.ocr import choose
from bastion.readers.ocr.engine import Osd
from bastion.readers.ocr.reader import OcrText

INSTALLED = {"eng": "sha256:e", "deu": "sha256:d", "fra": "sha256:f", "rus": "sha256:r",
             "ell": "sha256:g", "ara": "sha256:a", "chi_sim": "sha256:c"}
GARBAGE = OcrText("Hacrosmuii gorosop 3akmouén Mex noctaBmuKom u nokynatenem o Tom", 22.4, 60, 0)

# eng's readings of the peers corpus's pictures (bench/.corpus/peers/image)
BAIONA = OcrText("Tarnose\n\nBokale an\n\nLehuntze\n\nMugerre\n\nAngelu\n\nMilafranga "
                 "Komunikabideak\n\nBAIONA", 54.3, 18, 7)
DIAGRAM = OcrText("cho\n\norev\n\nDL\n2000, ea\nsan 2\"\n\nH28VDC 4 ue FL +5V,400mA (Logic)\n"
                  "B UL 275uH_ 1AFB SWITCHING POWER SUPPLY Feb", 39.0, 125, 4)
NO_WORDS = OcrText("", None, 0, 0)
GREEK_BY_ENG = OcrText("H emitpom} ovvedpiace tv Tpitn yia va eetaoe Tov etiowo mpoivmoAoyiono "
                       "Ths BiBAroOnKns. MoAAd péAn pwtnoav yiati ot aiOovoes avayvwons", 43.5,
                       52, 0)


def run(readings: dict[str, OcrText], osd: Osd | None):
    calls: list[str] = []

    def recognise(pack: str) -> OcrText:
        calls.append(pack)
        return readings.get(pack, GARBAGE)

    def detect() -> Osd | None:
        calls.append("osd")
        return osd

    return choose.choose(recognise, detect, INSTALLED), calls


def test_osd_sure_of_a_script_whose_pack_reads_nothing_ends_the_search():
    """A photo of Basque place names: OSD says Cyrillic at 1.67 (tesseract accepts a script
    from 1.0); the Russian pack reads nothing Russian; no other script is tried."""
    got, calls = run({"eng": BAIONA}, Osd(0, "Cyrillic", 1.67))
    assert calls == ["eng", "osd", "rus"]
    assert got.packs == ("eng",) and got.missing == ()
    assert "script/*" not in got.condition.as_dict()


def test_osd_sure_of_latin_ends_the_search():
    got, calls = run({"eng": BAIONA}, Osd(0, "Latin", 2.31))
    assert calls == ["eng", "osd"]
    assert got.packs == ("eng",)
    assert set(got.condition.as_dict()) == {"eng"}


def test_a_picture_without_words_or_script_is_not_read_again():
    got, calls = run({"eng": NO_WORDS}, Osd(None, None, 0.0))
    assert calls == ["eng", "osd"]
    assert got.reading == NO_WORDS and got.packs == ("eng",)


def test_latin_named_unsure_with_long_words_read_surely_is_latin():
    """A circuit diagram: OSD names Latin at 0.97; eng read SWITCHING, POWER, SUPPLY and
    (Logic) at 90 or more; no other script is tried."""
    got, calls = run({"eng": DIAGRAM}, Osd(0, "Latin", 0.97))
    assert calls == ["eng", "osd"]
    assert got.packs == ("eng",)


def test_latin_named_unsure_tries_the_lookalike_scripts_only():
    """A Greek page OSD takes for Latin (0.35): the Cyrillic and Greek packs are tried, not
    the Arabic or Chinese ones, and the page depends on those two scripts' packs only."""
    greek = lp.sample("ell")
    ell = OcrText(greek.text, 91.0, 52, 30)
    got, calls = run({"eng": GREEK_BY_ENG, "ell": ell}, Osd(0, "Latin", 0.35))
    assert calls == ["eng", "osd", "rus", "ell"]
    assert got.packs == ("ell",) and got.script == "Greek" and got.language == "el"
    cond = got.condition.as_dict()
    assert "script/Greek" in cond and "script/Cyrillic" in cond
    assert not {"script/*", "script/Arabic", "script/Han"} & set(cond)


def test_cyrillic_named_unsure_tries_greek_after_its_own_pack():
    greek = lp.sample("ell")
    ell = OcrText(greek.text, 91.0, 52, 30)
    got, calls = run({"eng": GREEK_BY_ENG, "ell": ell}, Osd(0, "Cyrillic", 0.16))
    assert calls == ["eng", "osd", "rus", "ell"]
    assert got.packs == ("ell",)


@pytest.mark.parametrize("osd", [Osd(None, None, 0.0), None])
def test_no_script_named_on_a_page_with_words_tries_every_script(osd):
    got, calls = run({"eng": GREEK_BY_ENG}, osd)
    assert calls == ["eng", "osd", "ara", "rus", "ell", "chi_sim"]
    assert got.packs == ("eng",)
    assert "script/*" in got.condition.as_dict()
