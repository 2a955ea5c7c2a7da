"""Pages rendered from known text in several languages and scripts, for the OCR language tests
and bench/ocrlang.py: each text, a Pillow page of it (300 dpi, a font per language), and the
word recall of what OCR read against it.

The fonts are Debian's (``fonts-dejavu``, ``fonts-liberation``, ``fonts-noto-cjk``); Arabic is
shaped and laid out right to left by Pillow's raqm layout.
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
LIBERATION = Path("/usr/share/fonts/truetype/liberation")
NOTO_CJK = Path("/usr/share/fonts/opentype/noto")


@dataclass(frozen=True)
class Sample:
    lang: str  # the tesseract pack that reads it
    iso: str  # ISO 639-1
    script: str  # as tesseract's OSD names it
    font: Path
    text: str


TEXTS = {
    "eng": ("en", "Latin", LIBERATION / "LiberationSerif-Regular.ttf",
            "The committee met on Tuesday to review the annual budget of the library. "
            "Several members asked why the reading rooms close so early in winter, and the "
            "director promised to publish the figures before the next meeting. The new "
            "catalogue will be available to every visitor from the first of March, together "
            "with a guide that explains how to borrow books, maps and old newspapers."),
    "deu": ("de", "Latin", DEJAVU / "DejaVuSans.ttf",
            "Der Vertrag zwischen den beiden Gesellschaften wurde am Montag in München "
            "unterzeichnet. Die Käuferin übernimmt sämtliche Grundstücke, Gebäude und "
            "Maschinen sowie alle Verbindlichkeiten gegenüber den Lieferanten. Über die Höhe "
            "des Kaufpreises haben die Parteien Stillschweigen vereinbart. Streitigkeiten "
            "werden ausschließlich vor dem zuständigen Gericht in Düsseldorf verhandelt, "
            "und für die Auslegung gilt das Recht der Bundesrepublik."),
    "fra": ("fr", "Latin", DEJAVU / "DejaVuSerif.ttf",
            "Madame, nous avons bien reçu votre lettre du douze février et nous vous en "
            "remercions. Après vérification de votre dossier, il apparaît que la facture "
            "concernée a déjà été réglée par notre service comptable. Nous restons à votre "
            "disposition pour toute question complémentaire et vous prions d'agréer, "
            "Madame, l'expression de nos salutations distinguées. Le directeur régional "
            "vous recevra volontiers à Lyon ou à Besançon pendant la première semaine."),
    "rus": ("ru", "Cyrillic", LIBERATION / "LiberationSans-Regular.ttf",
            "Настоящий договор заключён между поставщиком и покупателем о том, что "
            "поставщик обязуется передать товар в собственность покупателя в течение "
            "тридцати дней после оплаты. Покупатель обязуется принять товар и оплатить его "
            "стоимость в полном объёме. Все споры решаются путём переговоров, а при "
            "недостижении согласия передаются на рассмотрение в арбитражный суд."),
    "ell": ("el", "Greek", DEJAVU / "DejaVuSerif.ttf",
            "Η επιτροπή συνεδρίασε την Τρίτη για να εξετάσει τον ετήσιο προϋπολογισμό της "
            "βιβλιοθήκης. Πολλά μέλη ρώτησαν γιατί οι αίθουσες ανάγνωσης κλείνουν τόσο νωρίς "
            "τον χειμώνα, και ο διευθυντής υποσχέθηκε να δημοσιεύσει τα στοιχεία πριν από "
            "την επόμενη συνάντηση. Ο νέος κατάλογος θα είναι διαθέσιμος σε κάθε επισκέπτη "
            "από την πρώτη Μαρτίου."),
    "ara": ("ar", "Arabic", DEJAVU / "DejaVuSans.ttf",
            "اجتمعت اللجنة يوم الثلاثاء لمراجعة الميزانية السنوية للمكتبة. وسأل عدد من "
            "الأعضاء عن سبب إغلاق قاعات القراءة في وقت مبكر خلال فصل الشتاء، ووعد المدير "
            "بنشر الأرقام قبل الاجتماع القادم. وسيكون الفهرس الجديد متاحا لكل زائر ابتداء "
            "من الأول من شهر مارس مع دليل يشرح كيفية استعارة الكتب والخرائط والصحف القديمة."),
    "chi_sim": ("zh", "Han", NOTO_CJK / "NotoSansCJK-Regular.ttc",
                "委员会于星期二开会审查图书馆的年度预算。几位成员询问为什么阅览室在冬季关闭得"
                "这么早，馆长承诺在下次会议之前公布有关数字。新的目录将从三月一日起向每一位读者"
                "开放，同时提供一份说明如何借阅图书、地图和旧报纸的指南。"),
}

SAMPLES = tuple(Sample(lang, iso, script, font, text)
                for lang, (iso, script, font, text) in TEXTS.items())
# the fonts the pages are rendered in that this machine lacks (Debian: fonts-dejavu,
# fonts-liberation, fonts-noto-cjk; .ci/run installs them): the tests that render skip
MISSING_FONTS = tuple(sorted({str(s.font) for s in SAMPLES if not s.font.exists()}))


def _raqm() -> bool:
    """Whether Pillow lays text out with raqm (it loads FriBiDi, Debian's libfribidi0, at
    run time): the right-to-left and CJK pages need it."""
    from PIL import features

    return bool(features.check("raqm"))


if not _raqm():
    MISSING_FONTS += ("Pillow's raqm layout (libfribidi0)",)
FONT_PACKAGES = "fonts-dejavu fonts-liberation fonts-noto-cjk libfribidi0"


def sample(lang: str) -> Sample:
    return next(s for s in SAMPLES if s.lang == lang)


def _lines(text: str, font, width: int, draw, cjk: bool) -> list[str]:
    """``text`` broken into lines no wider than ``width`` pixels (by words; CJK by
    characters)."""
    units = list(text) if cjk else text.split()
    joiner = "" if cjk else " "
    lines: list[str] = []
    cur = ""
    for u in units:
        cand = u if not cur else cur + joiner + u
        if draw.textlength(cand, font=font) <= width or not cur:
            cur = cand
        else:
            lines.append(cur)
            cur = u
    if cur:
        lines.append(cur)
    return lines


def render(s: Sample, dpi: int = 300, points: int = 12, fmt: str = "PNG") -> bytes:
    """An A5-wide page of ``s.text`` at ``dpi``, ``points`` high, as ``fmt`` bytes."""
    from PIL import Image, ImageDraw, ImageFont

    size = round(points * dpi / 72)
    font = ImageFont.truetype(str(s.font), size,
                              layout_engine=ImageFont.Layout.RAQM)
    width = round(5.8 * dpi)
    margin = round(0.6 * dpi)
    probe = ImageDraw.Draw(Image.new("L", (10, 10), 255))
    rtl = s.script == "Arabic"
    lines = _lines(s.text, font, width - 2 * margin, probe, s.script == "Han")
    step = round(size * 1.6)
    im = Image.new("L", (width, 2 * margin + step * len(lines)), 255)
    draw = ImageDraw.Draw(im)
    for n, line in enumerate(lines):
        y = margin + n * step
        if rtl:
            w = draw.textlength(line, font=font, direction="rtl")
            draw.text((width - margin - w, y), line, font=font, fill=0, direction="rtl")
        else:
            draw.text((margin, y), line, font=font, fill=0)
    buf = io.BytesIO()
    im.save(buf, fmt, dpi=(dpi, dpi))
    return buf.getvalue()


_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str, script: str) -> list[str]:
    """The words of ``text`` (Han: its characters), case-folded, NFC, without punctuation."""
    text = unicodedata.normalize("NFC", text).casefold()
    if script == "Han":
        return [c for c in text if _WORD.fullmatch(c)]
    return _WORD.findall(text)


def recall(truth: str, read: str, script: str) -> float:
    """The share of ``truth``'s words (with their counts) found in ``read``."""
    from collections import Counter

    want = Counter(tokens(truth, script))
    got = Counter(tokens(read, script))
    return sum(min(n, got[w]) for w, n in want.items()) / max(1, sum(want.values()))
