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
from typing import Callable, Mapping, NamedTuple, Protocol

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


class _Read(NamedTuple):
    """A reading by a pack, and the language identified in it (``langid``)."""

    reading: Reading
    pack: str
    language: str | None
    prob: float

    @property
    def confidence(self) -> float:
        return self.reading.confidence or 0.0


# The stopping rules of ``auto`` (the module docstring's steps), each a predicate on a reading.

def _short_and_sure(first: _Read) -> bool:
    """Step 1: too few letters to identify, read with good confidence (a page number)."""
    return first.language is None and bool(first.reading.words) \
        and first.confidence >= SHORT_MIN_CONF


def _latin_identified(first: _Read, pack: str | None) -> bool:
    """Step 1: identified surely as a Latin-script language bastion has a pack for."""
    return pack is not None and first.prob >= LATIN_PROB and first.confidence >= LATIN_MIN_CONF


def _latin_unidentified(first: _Read, pack: str | None) -> bool:
    """Step 1: a Latin pack's reading that is surely Latin, identified or not (a receipt's
    few words), or likely Latin (a screenshot's words)."""
    return P.script_of(first.pack) == "Latin" and (
        first.confidence >= LATIN_SURE_CONF
        or (pack is not None and first.prob >= LATIN_LIKELY
            and first.confidence >= LATIN_MIN_CONF))


def _of_osd_script(got: _Read | None) -> bool:
    """Step 2: the script OSD named read the page as one of its languages."""
    return got is not None and got.prob >= SCRIPT_PROB and got.language is not None \
        and got.confidence >= SCRIPT_MIN_CONF


def _of_tried_script(got: _Read | None, script: str) -> bool:
    """Step 3: a tried script's pack read the page as one of that script's languages."""
    return got is not None and got.language is not None and got.prob >= SCRIPT_PROB \
        and P.script_of(P.BY_ISO.get(got.language, "")) == script


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

    def read(self, pack: str) -> _Read:
        self.passes += 1
        got = self.recognise(pack)
        lang, prob = langid.identify(got.text)
        return _Read(got, pack, lang, prob)

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

    def in_script(self, script: str) -> _Read | None:
        """The page read by ``script``'s first installed pack, then by the pack of the
        language identified in it when that is another installed one of the script."""
        found = self.script_packs(script)
        if not found:
            return None
        got = self.read(found[0])
        better = next((p for p in found if P.iso_of(p) == got.language), None)
        if better is not None and better != found[0]:
            again = self.read(better)
            if again.language == got.language:
                return again
        return got

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
        """The module docstring's three steps, each ending the choice when its rule holds;
        nothing convincing: the first reading."""
        first = self.read(self.base_pack())
        chosen = self.latin(first)
        if chosen is not None:
            return chosen
        osd = self.detect()
        script = P.SCRIPT_ALIASES.get(osd.script or "", osd.script) if osd else None
        tried: set[str] = {"Latin"}
        if script and script != "Latin":
            tried.add(script)
            got = self.in_script(script)
            if got is not None and _of_osd_script(got):
                return self.done(got.reading, got.pack, script, got.language)
        chosen = self.most_confident(self.others(osd, script, first.reading, tried))
        if chosen is not None:
            return chosen
        return self.done(first.reading, first.pack, script or None,
                         first.language if first.prob >= LATIN_PROB else None,
                         self.missing(script))

    def base_pack(self) -> str:
        """The pack of the first reading: ``eng``, else the first installed one."""
        if self.have("eng"):
            return "eng"
        self.cond["installed"] = P.current("installed", self.installed)
        if not self.installed:
            raise LookupError("no language pack installed")
        return sorted(self.installed)[0]

    def latin(self, first: _Read) -> PageChoice | None:
        """Step 1: the first reading is kept (or read again with its Latin language's pack)
        when it is short and sure, or Latin; None: go on to the other scripts."""
        base = first.pack
        if _short_and_sure(first):
            return self.done(first.reading, base, P.script_of(base), None)
        pack = _latin(first.language)
        if pack is not None and _latin_identified(first, pack):
            if pack == base:
                return self.done(first.reading, base, "Latin", first.language)
            if self.have(pack):
                again = self.read(pack)
                return self.done(again.reading, pack, "Latin", again.language or first.language)
            return self.done(first.reading, base, "Latin", first.language, (pack,))
        if _latin_unidentified(first, pack):
            return self.done(first.reading, base, "Latin",
                             first.language if first.prob >= LATIN_PROB else None)
        return None

    def most_confident(self, scripts: list[str]) -> PageChoice | None:
        """Step 3: one pack of each script in turn, until one reads the page with
        ``OTHER_GOOD_CONF``; the most confident reading identified as its script's language,
        from ``OTHER_MIN_CONF``."""
        best: tuple[_Read, str] | None = None
        for other in scripts:
            got = self.in_script(other)
            if got is None or not _of_tried_script(got, other):
                continue
            if best is None or got.confidence > best[0].confidence:
                best = (got, other)
            if got.confidence >= OTHER_GOOD_CONF:
                break
        if best is None or best[0].confidence < OTHER_MIN_CONF:
            return None
        got, script = best
        return self.done(got.reading, got.pack, script, got.language)

    def missing(self, script: str | None) -> tuple[str, ...]:
        """The first pack of the script OSD named, when none of its packs is installed."""
        if script and script != "Latin" and not self.script_packs(script):
            first_pack = P.SCRIPT_DEFAULT.get(script)
            return (first_pack,) if first_pack else ()
        return ()

    def fixed(self, wanted: tuple[str, ...]) -> PageChoice:
        have = [p for p in wanted if self.have(p)]
        missing = tuple(p for p in wanted if p not in self.installed)
        if not have:
            have = ["eng"] if self.have("eng") else sorted(self.installed)[:1]
            if not have:
                raise LookupError("no language pack installed")
        got = self.read("+".join(have))
        return self.done(got.reading, got.pack, P.script_of(have[0]),
                         got.language if got.prob >= SCRIPT_PROB else None, missing)


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
