"""The language pack that reads a page: chosen per page from the installed packs, or fixed by
the manifest (``ocr_languages``).

``auto`` (the default), per page:

1. The page is read with ``eng`` — what bastion always did, so an English page costs what it
   did — and the language of that reading is identified (readers/text/langid.py).  A Latin
   language identified with probability ``LATIN_PROB`` or more is the page's: English ends
   there; another language is read again with its pack when installed (``deu``), and when it
   is not, the English reading stays and the pack is named missing.  A reading with too few
   letters to identify, of good confidence (a page number, a short caption), is kept too, and
   so is one of ``LATIN_SURE_CONF`` or more that no Latin language was identified in (a
   receipt's few words), and one identified as a Latin language with ``LATIN_LIKELY`` or more
   (a screenshot's words): ``eng`` reads pages of other scripts far less confidently, and
   their readings are identified at 0.02-0.22.
2. Otherwise the page is not in Latin script, or not readable by ``eng``: tesseract's
   orientation and script detection (OSD) names its script.  When a pack of that script is
   installed, the page is read with the script's first pack (``rus`` for Cyrillic, …), then
   with the pack of the language identified in that reading when it is another installed one
   of the same script.
3. When OSD is unsure of the script it names (Latin, or one whose packs did not give a
   reading identified as one of their languages), the scripts that look like it are tried
   (``packs.LOOKALIKE``: it takes Greek for Latin or Cyrillic); when it names none, every
   script with packs installed is; one pack each (scripts in name order), until one reads
   the page with a mean word confidence of ``OTHER_GOOD_CONF``; of the readings identified
   as their script's language (``SCRIPT_PROB``), the most confident wins from
   ``OTHER_MIN_CONF``.  Nothing is tried when OSD is sure of its script (``OSD_SURE``:
   tesseract's own acceptance), nor when the first reading found no word and OSD no script
   (a picture), nor when OSD names Latin unsure of a page whose first reading holds
   ``LATIN_SURE_WORDS`` long words read surely (a diagram's labels).  Nothing convincing: the English reading stays, and when OSD named a script
   without an installed pack, its first pack is named missing.

Every pack (and set of a script's packs) a step looked at goes into the page's
:class:`~bastion.readers.ocr.packs.Condition`, which keys the document (readers/ocr/packs.py).

A fixed list (``ocr_languages: [deu, eng]``) reads every page with those packs together
(``deu+eng``), the installed ones; the others are named missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from ..text import langid
from . import packs as P
from .engine import Osd

LATIN_PROB = 0.9  # a first reading identified this surely is in that Latin-script language
# … and this likely: a Latin page whose reading is poor (a screenshot's UI words, English at
# 0.66-0.82 on the peers corpus): kept as read, no other script tried.  A page of another
# script read with eng is identified at 0.02-0.22 (docs/performance.md)
LATIN_LIKELY = 0.5
LATIN_MIN_CONF = 30.0  # … when tesseract's mean word confidence is at least this
SHORT_MIN_CONF = 60.0  # a reading too short to identify is kept from this confidence
# ``eng`` reads a page of another script with a mean word confidence under 50 (17-46 on the
# test pages): from this one, its reading is of a Latin-script page, identified or not
LATIN_SURE_CONF = 75.0
SCRIPT_PROB = 0.5  # a reading by a script's pack identified as one of its languages …
SCRIPT_MIN_CONF = 40.0  # … with this mean word confidence, for the script OSD named
OTHER_MIN_CONF = 60.0  # … or this one, for a script tried without OSD's word
OTHER_GOOD_CONF = 80.0  # a tried script read this well: the others are not tried
# OSD is sure of a page's script from this confidence on: tesseract's is (best script's score /
# second's - 1) / (kScriptAcceptRatio - 1), 1.0 where the best scores kScriptAcceptRatio (1.3)
# times the second, the ratio tesseract itself accepts a script at (osdetect.cpp).  English and
# other Latin pages rendered in the tests: 5.7-85; Cyrillic, Greek and Arabic pages: 2.0-160
# but a Greek one in DejaVu Serif, taken for Latin at 0.35 (Cyrillic at 0.16 at 200 dpi)
OSD_SURE = 1.0
# ``eng`` read this many words of 5 letters or more at a confidence of 90 or more (the
# reading's ``sure_words``): Latin text, when OSD also names Latin (unsure).  ``eng`` reads at
# most one such word on the Cyrillic, Greek, Arabic and Chinese test pages, 4 on a circuit
# diagram's labels OSD names Latin at 0.97
LATIN_SURE_WORDS = 3
AUTO = "auto"


class Reading(Protocol):
    """A page's text as one pack (or ``a+b``) read it (readers/ocr/reader.py's OcrText)."""

    @property
    def text(self) -> str: ...
    @property
    def confidence(self) -> float | None: ...
    @property
    def words(self) -> int: ...
    @property
    def sure_words(self) -> int: ...


@dataclass(frozen=True)
class PageChoice:
    """What was chosen for a page, and what the choice depended on."""

    reading: Reading
    packs: tuple[str, ...]  # the pack(s) of the kept reading
    script: str | None  # the page's script: the identified language's, else OSD's
    language: str | None  # ISO 639-1 of the kept reading, when identified
    missing: tuple[str, ...]  # packs that would have read it, not installed
    condition: P.Condition
    passes: int  # recognitions made (the first included)


Recognise = Callable[[str], Reading]  # pack(s) "deu" or "deu+eng" -> the reading
Detect = Callable[[], "Osd | None"]


def _latin(iso: str | None) -> str | None:
    """The pack of a Latin-script language, None when it is not one bastion knows."""
    pack = P.BY_ISO.get(iso or "")
    return pack if pack is not None and P.script_of(pack) == "Latin" else None


class _Chooser:
    """One page's choice (:func:`choose`)."""

    def __init__(self, recognise: Recognise, detect: Detect,
                 installed: Mapping[str, str | None]) -> None:
        self.recognise, self.detect, self.installed = recognise, detect, installed
        self.cond: dict[str, str | None] = {}
        self.passes = 0

    def have(self, pack: str) -> bool:
        self.cond[pack] = self.installed.get(pack)
        return pack in self.installed

    def read(self, pack: str) -> tuple[Reading, str | None, float]:
        self.passes += 1
        got = self.recognise(pack)
        lang, prob = langid.identify(got.text)
        return got, lang, prob

    def done(self, reading: Reading, pack: str, script: str | None, language: str | None,
             missing: tuple[str, ...] = ()) -> PageChoice:
        return PageChoice(reading, tuple(pack.split("+")), script, language, missing,
                          P.Condition.of(self.cond), self.passes)

    def script_packs(self, script: str) -> list[str]:
        """The installed packs of ``script``, its first pack first (the set is a condition)."""
        self.cond[f"script/{script}"] = P.script_digest(self.installed, script)
        got = sorted(n for n in self.installed if P.script_of(n) == script)
        first = P.SCRIPT_DEFAULT.get(script)
        if first in got:
            got.remove(first)
            got.insert(0, first)
        return got

    def in_script(self, script: str, avoid: str | None = None
                  ) -> tuple[Reading, str, str | None, float] | None:
        """The page read by ``script``'s first installed pack, then by the pack of the
        language identified in it when that is another installed one of the script."""
        found = [p for p in self.script_packs(script) if p != avoid]
        if not found:
            return None
        got, lang, prob = self.read(found[0])
        better = next((p for p in found if P.iso_of(p) == lang), None)
        if better is not None and better != found[0]:
            again, lang2, prob2 = self.read(better)
            if lang2 == lang:
                return again, better, lang2, prob2
        return got, found[0], lang, prob

    def others(self, osd: Osd | None, script: str | None, first: Reading,
               tried: set[str]) -> list[str]:
        """The scripts step 3 tries: none when OSD is sure of the script (``OSD_SURE``), or
        found no script on a page the first reading found no word in (a picture), nor when
        it named Latin unsure on a page ``eng`` read ``LATIN_SURE_WORDS`` long words of
        surely; else the ones that look like the one OSD named unsure (``packs.LOOKALIKE``);
        every script with packs installed when OSD named none."""
        if script is not None and osd is not None and osd.script_confidence >= OSD_SURE:
            return []
        if script == "Latin" and first.sure_words >= LATIN_SURE_WORDS:
            return []
        if script is not None:
            return sorted(P.lookalikes(script) - tried)
        if not first.words:
            return []
        self.cond["script/*"] = P.current("script/*", self.installed)
        return sorted({s for n in self.installed if (s := P.script_of(n)) and s not in tried})

    def auto(self) -> PageChoice:
        base = "eng" if self.have("eng") else None
        if base is None:  # no English pack: the first installed one reads first
            self.cond["installed"] = P.current("installed", self.installed)
            if not self.installed:
                raise LookupError("no language pack installed")
            base = sorted(self.installed)[0]
        first, lang, prob = self.read(base)
        conf = first.confidence or 0.0
        if lang is None and first.words and conf >= SHORT_MIN_CONF:
            return self.done(first, base, P.script_of(base), None)
        pack = _latin(lang)
        if pack is not None and prob >= LATIN_PROB and conf >= LATIN_MIN_CONF:
            if pack == base:
                return self.done(first, base, "Latin", lang)
            if self.have(pack):
                again, lang2, _ = self.read(pack)
                return self.done(again, pack, "Latin", lang2 or lang)
            return self.done(first, base, "Latin", lang, (pack,))
        if P.script_of(base) == "Latin" and (
                conf >= LATIN_SURE_CONF
                or (pack is not None and prob >= LATIN_LIKELY and conf >= LATIN_MIN_CONF)):
            return self.done(first, base, "Latin", lang if prob >= LATIN_PROB else None)
        osd = self.detect()
        script = P.SCRIPT_ALIASES.get(osd.script or "", osd.script) if osd else None
        tried: set[str] = {"Latin"}
        if script and script != "Latin":
            tried.add(script)
            got = self.in_script(script)
            if (got is not None and got[3] >= SCRIPT_PROB and got[2] is not None
                    and (got[0].confidence or 0.0) >= SCRIPT_MIN_CONF):
                return self.done(got[0], got[1], script, got[2])
        best: tuple[float, Reading, str, str, str | None] | None = None
        for other in self.others(osd, script, first, tried):
            got = self.in_script(other)
            if (got is None or got[2] is None or got[3] < SCRIPT_PROB
                    or P.script_of(P.BY_ISO.get(got[2], "")) != other):
                continue
            conf = got[0].confidence or 0.0
            if best is None or conf > best[0]:
                best = (conf, got[0], got[1], other, got[2])
            if conf >= OTHER_GOOD_CONF:
                break
        if best is not None and best[0] >= OTHER_MIN_CONF:
            return self.done(best[1], best[2], best[3], best[4])
        missing: tuple[str, ...] = ()
        if script and script != "Latin" and not self.script_packs(script):
            first_pack = P.SCRIPT_DEFAULT.get(script)
            missing = (first_pack,) if first_pack else ()
        return self.done(first, base, script or None, lang if prob >= LATIN_PROB else None,
                         missing)

    def fixed(self, wanted: tuple[str, ...]) -> PageChoice:
        have = [p for p in wanted if self.have(p)]
        missing = tuple(p for p in wanted if p not in self.installed)
        if not have:
            have = ["eng"] if self.have("eng") else sorted(self.installed)[:1]
            if not have:
                raise LookupError("no language pack installed")
        pack = "+".join(have)
        got, lang, prob = self.read(pack)
        script = P.script_of(have[0])
        return self.done(got, pack, script, lang if prob >= SCRIPT_PROB else None, missing)


def choose(recognise: Recognise, detect: Detect, installed: Mapping[str, str | None],
           languages: tuple[str, ...] = (AUTO,)) -> PageChoice:
    """Read a page in its language (see the module docstring).  ``recognise`` reads it with
    a pack (or ``a+b``), ``detect`` runs OSD on it, ``installed`` maps the installed packs to
    their identities, ``languages`` is the manifest's ``ocr_languages``.  Raises what
    ``recognise`` raises, and LookupError when no pack is installed."""
    chooser = _Chooser(recognise, detect, installed)
    if tuple(languages) == (AUTO,):
        return chooser.auto()
    return chooser.fixed(tuple(languages))
