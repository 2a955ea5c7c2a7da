"""Tesseract's language packs: which are installed, what language and script each reads, their
identities, and the conditions on them that a document's OCR depended on.

A pack is a ``<name>.traineddata`` file in tesseract's data directory (``TESSDATA_PREFIX``, or
the directory ``tesseract --list-langs`` names); readers/runtime/toolset.py finds the directory
and hands it to the workers as the ``tessdata`` tool, and lists the packs in it as the tools
``tesseract:<name>`` identified by their sha256 (:func:`identity`).

Which packs a page's recognition used, and which it looked for, is a :class:`Condition`: the
packs by name, each with the identity it had (None: looked for and absent), and the scripts
whose whole set of installed packs the choice weighed (``script/<Script>``: a digest of their
names and identities, None when none was installed; ``script/*``: every script but Latin).
A document's verdict keeps the
condition of its OCR; its stored verdict stands only while the condition still holds
(:func:`holds`), so installing ``tesseract-ocr-deu`` re-reads exactly the documents whose
choice looked for ``deu``, and nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Mapping

SUFFIX = ".traineddata"
OSD = "osd"
TOOL_PREFIX = "tesseract:"  # the tool name of a pack: "tesseract:deu"
TESSDATA = "tessdata"  # the tool name of the data directory

# pack -> (ISO 639-1 code, the script tesseract's OSD names for it): Debian's tesseract-ocr-*
# packs of languages written in one script.  A pack not listed here is used only when the
# manifest names it.
PACKS: dict[str, tuple[str, str]] = {
    "afr": ("af", "Latin"), "ara": ("ar", "Arabic"), "aze": ("az", "Latin"),
    "bel": ("be", "Cyrillic"), "ben": ("bn", "Bengali"), "bos": ("bs", "Latin"),
    "bul": ("bg", "Cyrillic"), "cat": ("ca", "Latin"), "ces": ("cs", "Latin"),
    "chi_sim": ("zh", "Han"), "chi_tra": ("zh", "Han"), "cym": ("cy", "Latin"),
    "dan": ("da", "Latin"), "deu": ("de", "Latin"), "ell": ("el", "Greek"),
    "eng": ("en", "Latin"), "epo": ("eo", "Latin"), "est": ("et", "Latin"),
    "eus": ("eu", "Latin"), "fas": ("fa", "Arabic"), "fin": ("fi", "Latin"),
    "fra": ("fr", "Latin"), "gle": ("ga", "Latin"), "glg": ("gl", "Latin"),
    "guj": ("gu", "Gujarati"), "heb": ("he", "Hebrew"), "hin": ("hi", "Devanagari"),
    "hrv": ("hr", "Latin"), "hun": ("hu", "Latin"), "hye": ("hy", "Armenian"),
    "ind": ("id", "Latin"), "isl": ("is", "Latin"), "ita": ("it", "Latin"),
    "jpn": ("ja", "Japanese"), "kan": ("kn", "Kannada"), "kat": ("ka", "Georgian"),
    "kaz": ("kk", "Cyrillic"), "khm": ("km", "Khmer"), "kor": ("ko", "Hangul"),
    "lav": ("lv", "Latin"), "lit": ("lt", "Latin"), "mal": ("ml", "Malayalam"),
    "mar": ("mr", "Devanagari"), "mkd": ("mk", "Cyrillic"), "mlt": ("mt", "Latin"),
    "msa": ("ms", "Latin"), "nld": ("nl", "Latin"), "nor": ("no", "Latin"),
    "pol": ("pl", "Latin"), "por": ("pt", "Latin"), "ron": ("ro", "Latin"),
    "rus": ("ru", "Cyrillic"), "slk": ("sk", "Latin"), "slv": ("sl", "Latin"),
    "spa": ("es", "Latin"), "sqi": ("sq", "Latin"), "srp": ("sr", "Cyrillic"),
    "swa": ("sw", "Latin"), "swe": ("sv", "Latin"), "tam": ("ta", "Tamil"),
    "tel": ("te", "Telugu"), "tha": ("th", "Thai"), "tur": ("tr", "Latin"),
    "ukr": ("uk", "Cyrillic"), "urd": ("ur", "Arabic"), "vie": ("vi", "Latin"),
}
# The pack a script is read with first, when installed (the most written language of it).
SCRIPT_DEFAULT: dict[str, str] = {
    "Latin": "eng", "Cyrillic": "rus", "Greek": "ell", "Arabic": "ara", "Han": "chi_sim",
    "Hebrew": "heb", "Japanese": "jpn", "Hangul": "kor", "Devanagari": "hin", "Thai": "tha",
    "Armenian": "hye", "Georgian": "kat", "Bengali": "ben", "Tamil": "tam",
    "Telugu": "tel", "Kannada": "kan", "Malayalam": "mal", "Gujarati": "guj", "Khmer": "khm",
}
# OSD's names for scripts whose text a pack of another script name reads
SCRIPT_ALIASES = {"Katakana": "Japanese", "Hiragana": "Japanese", "Korean": "Hangul"}
# Scripts whose letters look alike, that OSD takes one for another when it is unsure of the
# script (a Greek page in DejaVu Serif: "Latin" at 0.35, at 200 dpi "Cyrillic" at 0.16; a
# Chinese page: "Han" at 0.83): a script not listed looks like none other
LOOKALIKE: tuple[frozenset[str], ...] = (
    frozenset({"Latin", "Greek", "Cyrillic"}),
    frozenset({"Han", "Japanese", "Hangul"}),
)
BY_ISO: dict[str, str] = {}  # ISO 639-1 -> the first pack of that language
for _name, (_iso, _script) in PACKS.items():
    BY_ISO.setdefault(_iso, _name)


def script_of(pack: str) -> str | None:
    """The script a pack reads (None: not a single-script pack bastion knows)."""
    got = PACKS.get(pack)
    return got[1] if got else None


def lookalikes(script: str) -> frozenset[str]:
    """The scripts OSD may have meant when it named ``script`` unsure (itself included)."""
    return next((f for f in LOOKALIKE if script in f), frozenset({script}))


def iso_of(pack: str) -> str | None:
    got = PACKS.get(pack)
    return got[0] if got else None


def listed(directory: str | None) -> dict[str, str]:
    """The packs in ``directory`` by name -> path (``osd`` is not a language pack; the
    ``script/`` subdirectory is not read)."""
    if not directory:
        return {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}
    out: dict[str, str] = {}
    for name in names:
        if name.endswith(SUFFIX) and name != OSD + SUFFIX:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                out[name[:-len(SUFFIX)]] = path
    return out


def identity(path: str) -> str | None:
    """``sha256:<first 32 hex digits>`` of a pack file (the identity that keys it), computed
    once per process for one file state; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _identity(path, st.st_size, st.st_mtime_ns, st.st_ino)


@functools.cache
def _identity(path: str, size: int, mtime_ns: int, inode: int) -> str | None:
    """:func:`identity` of ``path`` in the state its stat gave."""
    return file_identity(path)


def file_identity(path: str) -> str | None:
    """``sha256:<hex>`` (the first 32 digits) of a file's bytes, None when it cannot be read:
    what names a pack here, and a tool that will not say its version (toolset)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return f"sha256:{h.hexdigest()[:32]}"


def script_digest(installed: Mapping[str, str | None], script: str) -> str | None:
    """What the choice knew of a script: the names and identities of the installed packs of
    ``script`` (a digest), None when none is installed.  ``*`` stands for every script but
    Latin, ``installed`` for every pack."""
    if script == "*":
        names = sorted(n for n in installed if script_of(n) not in (None, "Latin"))
    elif script == "installed":
        names = sorted(installed)
    else:
        names = sorted(n for n in installed if script_of(n) == script)
    if not names:
        return None
    blob = "\n".join(f"{n}={installed[n]}" for n in names).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:32]


@dataclass(frozen=True)
class Condition:
    """The packs a recognition looked at: ``name`` or ``script/<Script>`` -> the identity then
    (None: absent), sorted by key."""

    items: tuple[tuple[str, str | None], ...] = ()

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.items)

    @classmethod
    def of(cls, d: Mapping[str, str | None]) -> "Condition":
        return cls(tuple(sorted(d.items())))


def current(key: str, installed: Mapping[str, str | None]) -> str | None:
    """The state of one condition key under ``installed`` (pack name -> identity)."""
    if key.startswith("script/"):
        return script_digest(installed, key[len("script/"):])
    if key == "installed":
        return script_digest(installed, key)
    return installed.get(key)


def holds(condition: Mapping[str, str | None] | None,
          installed: Mapping[str, str | None]) -> bool:
    """Whether every pack (and script) a stored verdict's OCR looked at is as it was."""
    if not condition:
        return True
    return all(current(k, installed) == v for k, v in condition.items())
