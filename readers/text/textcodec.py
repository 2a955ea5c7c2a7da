"""Bytes to text: the one place that chooses an encoding, for every reader that decodes bytes.

:func:`choose` looks at a document's bytes (and the charset the format declares, if any) and
returns a :class:`Choice`; the first rule that applies wins and is recorded as its ``source``:

1. ``bom``: a byte-order mark (UTF-8, UTF-32 LE/BE, UTF-16 LE/BE);
2. ``nul-pattern``: BOM-less UTF-32 or UTF-16, told by where the NUL bytes of a sample fall and
   checked by decoding that sample;
3. ``utf-8``: the whole input is strict UTF-8 (pure ASCII included), unless it is 7-bit
   ISO-2022-JP/KR, whose escape sequences say so (``detected``); or UTF-8 with damage: around
   its first invalid byte valid multibyte characters outnumber invalid sequences four to one
   (then decoded with replacement characters);
4. ``declared``: the format's declared charset (HTML meta prescan, XML declaration, MIME
   ``charset=``), mapped as WHATWG maps labels (``iso-8859-1``/``ascii`` are windows-1252,
   ``shift_jis`` is cp932, ``gb2312``/``gbk`` are gb18030, ``euc-kr`` is cp949…), used only when
   the whole input decodes with it;
5. ``detected``: charset-normalizer on a sample of :data:`SAMPLE_BYTES` taken where the first
   non-ASCII byte is, among :data:`CANDIDATES` only, then two deterministic corrections (see
   :func:`_detect`);
6. ``fallback``: windows-1252.

A choice is ``clean`` when the whole input decodes strictly with its codec; otherwise (a BOM or
NUL pattern the rest of the file does not honour, bytes outside the detector's sample) the
text is decoded with ``errors="replace"`` and :func:`warnings` says so.  Deterministic: the
same bytes, declaration and charset-normalizer version give the same choice.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

CHUNK = 1 << 20  # bytes decoded at a time
SAMPLE_BYTES = 64 * 1024  # bytes the statistical detector sees
NUL_SAMPLE = 4096  # bytes the NUL-pattern rule looks at
MAX_CONTROL_SHARE = 0.02  # control characters (other than NUL) allowed in text
MIN_FIT = 0.9  # alphabet fit a Latin reading needs when charset-normalizer found nothing
PERFECT_FIT_BYTES = 16  # in-word bytes a perfect Latin fit needs to skip the detector

SOURCES = ("bom", "nul-pattern", "utf-8", "declared", "detected", "fallback")

# Byte-order marks, UTF-32 before UTF-16 (the UTF-32-LE mark begins with the UTF-16-LE one).
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# What the detector may answer: the legacy encodings text is really written in.  Rare code
# pages (cp775, hp_roman8, iso8859-10/14…) are left out: on short Latin texts charset-normalizer
# ranks them level with the right one, and nobody's files are in them.
CANDIDATES: tuple[str, ...] = (
    "cp1252", "cp1250", "iso8859_2", "cp1251", "koi8_r", "koi8_u", "cp866", "mac_cyrillic",
    "iso8859_5", "cp1253", "iso8859_7", "cp1254", "iso8859_9", "cp1255", "iso8859_8",
    "cp1256", "iso8859_6", "cp1257", "iso8859_13", "cp874", "cp932", "euc_jp", "iso2022_jp",
    "cp949", "big5", "gb18030",
)
# Latin-script code pages, told apart by which language's alphabet their reading fits.
_LATIN: tuple[str, ...] = ("cp1252", "cp1250", "iso8859_2", "cp1254", "iso8859_9", "cp1257",
                           "iso8859_13")
# A windows code page whose sample never uses 0x80-0x9F is read as its ISO sibling.
_ISO_SIBLING = {"cp1253": "iso8859_7", "cp1255": "iso8859_8", "cp1256": "iso8859_6"}

# Letters beyond ASCII of the languages written in the Latin code pages above.
_ALPHABETS: tuple[frozenset[str], ...] = tuple(frozenset(a) for a in (
    "àâæçéèêëîïôœùûüÿ",  # French
    "äöüß",  # German
    "áéíñóúü",  # Spanish
    "áâãàçéêíóôõú",  # Portuguese
    "àèéìíîòóùú",  # Italian
    "àçéèíïòóúü",  # Catalan
    "áäéëèíïóöúü",  # Dutch
    "åäöé",  # Swedish
    "æøåé",  # Danish, Norwegian
    "äöå",  # Finnish
    "áðéíóúýþæö",  # Icelandic
    "áčďéěíňóřšťúůýž",  # Czech
    "áäčďéíĺľňóôŕšťúýž",  # Slovak
    "ąćęłńóśźż",  # Polish
    "áéíóöőúüű",  # Hungarian
    "čćđšž",  # Croatian, Slovene, Bosnian
    "ăâîșțşţ",  # Romanian
    "çğıöşüâî",  # Turkish
    "äõöüšž",  # Estonian
    "āčēģīķļņšūž",  # Latvian
    "ąčęėįšųūž",  # Lithuanian
    "çë",  # Albanian
))
# Bytes above 0x7F inside words (runs of two or more ASCII letters or such bytes): in every
# single-byte code page a letter there, or a symbol the wrong code page put where a letter was
# ("wi¶nie" for "wiśnie").  Found once in the bytes, then read through each code page.
_WORDS = re.compile(rb"[A-Za-z\x80-\xff]{2,}")
_ASCII = bytes(range(0x80))

# WHATWG label mapping, for labels Python reads differently (keys are codecs.lookup names).
_WHATWG = {
    "ascii": "cp1252", "latin-1": "cp1252", "iso8859-1": "cp1252", "iso8859-9": "cp1254",
    "shift_jis": "cp932", "euc_kr": "cp949", "gb2312": "gb18030", "gbk": "gb18030",
    "tis-620": "cp874", "iso8859-11": "cp874",
}

_NON_ASCII = re.compile(rb"[\x80-\xff]")
_ISO2022 = re.compile(rb"\x1b(?:\$[@AB(]|\$\)C|\([BJ])")
_XML_DECL = re.compile(rb"""^<\?xml[ \t\r\n][^>]{0,200}?encoding[ \t\r\n]*=[ \t\r\n]*["']"""
                       rb"""([A-Za-z][A-Za-z0-9._-]{0,39})["']""")
# C0 controls plain text does not carry (NUL is judged apart: it is removed, not counted).
_CONTROL_RE = re.compile("[\x01-\x07\x0b\x0e-\x1a\x1c-\x1f]")
_CONTROL_BYTES = bytes(c for c in range(1, 32) if chr(c) not in "\t\n\r\f\b\x1b")
_NUL_RUNS = re.compile("\x00+")


@dataclass(frozen=True)
class Choice:
    """How a document's bytes become text."""

    codec: str  # a Python codec name as ``codecs.lookup`` spells it: "cp1252", "shift_jis"
    skip: int  # BOM bytes to skip
    source: str  # one of SOURCES
    clean: bool = True  # the whole input decodes strictly; else errors="replace"

    @property
    def errors(self) -> str:
        return "strict" if self.clean else "replace"


def bom(data: bytes) -> tuple[str, int] | None:
    """(codec, bytes to skip) when ``data`` starts with a byte-order mark, else None."""
    for mark, codec in _BOMS:
        if data.startswith(mark):
            return codec, len(mark)
    return None


def nul_pattern(sample: bytes) -> str | None:
    """The BOM-less UTF-32/UTF-16 codec whose NUL layout a sample has, checked by decoding
    it (a unit cut at the sample's end is allowed) and by its share of control characters."""
    s = sample[:NUL_SAMPLE]
    if len(s) < 4 or 0 not in s:
        return None
    for wide, unit in (("utf-32-le", 4), ("utf-32-be", 4)):
        part = s[: len(s) // unit * unit]
        highs = part[3::4] if wide.endswith("le") else part[0::4]
        if highs.count(0) == len(highs) and _decodes_as_text(part, wide):
            return wide
    even, odd = s[0::2], s[1::2]
    n = min(len(even), len(odd))
    zero_even, zero_odd = even[:n].count(0) / n, odd[:n].count(0) / n
    codec: str | None = None
    if zero_odd > 0.4 and zero_even < 0.05:
        codec = "utf-16-le"
    elif zero_even > 0.4 and zero_odd < 0.05:
        codec = "utf-16-be"
    if codec and _decodes_as_text(s[: len(s) // 2 * 2], codec, partial=True):
        return codec
    return None


def _decodes_as_text(part: bytes, codec: str, partial: bool = False) -> bool:
    try:
        text = codecs.getincrementaldecoder(codec)("strict").decode(part, final=not partial)
    except UnicodeDecodeError:
        return False
    return binary_reason(text) is None


def label_codec(label: str | None) -> str | None:
    """The Python codec for a declared charset label, WHATWG-mapped, or None when the label is
    unknown or names no text encoding (a label in an untrusted file must never select
    ``zlib``, ``base64`` or ``rot13``)."""
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'"))
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in ("utf-7", "idna",
                                                                      "punycode"):
        return None
    name = _WHATWG.get(info.name, info.name)
    return codecs.lookup(name).name


def xml_declared(data: bytes) -> str | None:
    """The ``encoding`` of an XML declaration at the very start (after a UTF-8 BOM)."""
    m = _XML_DECL.match(data[3:] if data.startswith(codecs.BOM_UTF8) else data)
    return m.group(1).decode("ascii") if m else None


def choose(data: bytes, declared: str | None = None) -> Choice:
    """The encoding of ``data``; ``declared`` is the format's own charset label, if any."""
    marked = bom(data)
    if marked is not None:
        codec, skip = marked
        return Choice(codec, skip, "bom", _decodes(data, codec, skip))
    nul = nul_pattern(data)
    if nul is not None:
        return Choice(nul, 0, "nul-pattern", _decodes(data, nul))
    first = None if data.isascii() else _NON_ASCII.search(data)
    if first is None:
        iso = _iso2022(data)
        if iso is not None:
            return Choice(iso, 0, "detected", True)
        return Choice("utf-8", 0, "utf-8", True)
    bad = _utf8_error(data, first.start())
    if bad is None:
        return Choice("utf-8", 0, "utf-8", True)
    if _mostly_utf8(data, first.start(), bad):
        return Choice("utf-8", 0, "utf-8", False)
    label = label_codec(declared)
    if label is not None and not label.startswith(("utf-16", "utf-32")) \
            and _decodes(data, label):
        return Choice(label, 0, "declared", True)
    sample = _sample(data, first.start())
    found = _detect(sample)
    if found is not None:
        return Choice(found, 0, "detected", _decodes(data, found))
    return Choice("cp1252", 0, "fallback", _decodes(data, "cp1252"))


def _iso2022(data: bytes) -> str | None:
    """ISO-2022-JP/KR: 7-bit text whose escape sequences switch character sets."""
    if b"\x1b" not in data[:SAMPLE_BYTES] or not _ISO2022.search(data[:SAMPLE_BYTES]):
        return None
    for codec in ("iso2022_jp", "iso2022_kr"):
        if _decodes(data, codec):
            return codecs.lookup(codec).name
    return None


def _decodes(data: bytes, codec: str, skip: int = 0) -> bool:
    """Whether ``data[skip:]`` decodes strictly with ``codec``, checked a chunk at a time."""
    view = memoryview(data)[skip:]
    if len(view) <= 8 * CHUNK:
        try:
            codecs.decode(view, codec, "strict")
        except UnicodeDecodeError:
            return False
        return True
    dec = codecs.getincrementaldecoder(codec)("strict")
    try:
        for at in range(0, len(view), CHUNK):
            dec.decode(view[at : at + CHUNK])
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _utf8_error(data: bytes, start: int) -> int | None:
    """The offset of the first byte that is not strict UTF-8 (bytes before ``start`` are
    ASCII), or None when the whole input is UTF-8."""
    pos, end = _ascii_floor(data, start), len(data)
    view = memoryview(data)
    while pos < end:
        final = pos + CHUNK >= end
        try:
            _, used = codecs.utf_8_decode(view[pos : pos + CHUNK], "strict", final)
        except UnicodeDecodeError as e:
            return pos + e.start
        if not used and not final:  # a sequence longer than the chunk cannot be
            return pos
        pos += used
    return None


def _mostly_utf8(data: bytes, first: int, bad: int) -> bool:
    """UTF-8 with damage rather than another encoding: around the first bad byte (half a
    sample either side, from the first non-ASCII byte on), valid multibyte characters
    outnumber invalid sequences four to one."""
    start = _ascii_floor(data, max(first, bad - SAMPLE_BYTES // 2))
    text = data[start : bad + SAMPLE_BYTES // 2].decode("utf-8", "replace")
    invalid = text.count("\ufffd")
    valid = len(text) - len(text.encode("ascii", "ignore")) - invalid
    return valid >= 4 * max(1, invalid)


def _ascii_floor(data: bytes, start: int) -> int:
    """A line start at or before ``start`` (ASCII before ``start`` is checked already)."""
    if start <= 0:
        return 0
    return data.rfind(b"\n", 0, start) + 1


def _sample(data: bytes, first: int) -> bytes:
    """Up to SAMPLE_BYTES from a line start shortly before the first non-ASCII byte (so every
    multibyte reading starts on a character), ending after a line break or a byte below 0x30
    (never inside a CJK character, whose trail bytes are 0x30 and above)."""
    start = max(0, data.rfind(b"\n", max(0, first - 1024), first) + 1)
    end = start + SAMPLE_BYTES
    if end >= len(data):
        return data[start:]
    cut = data.rfind(b"\n", start + SAMPLE_BYTES // 2, end)
    if cut < 0:
        cut = max((data.rfind(bytes([b]), start + SAMPLE_BYTES // 2, end)
                   for b in b" \t\r,.;:!?()\"'-/"), default=-1)
    return data[start : cut + 1] if cut >= 0 else data[start:end]


def _detect(sample: bytes) -> str | None:
    """A Latin code page whose reading puts every in-word byte (at least PERFECT_FIT_BYTES of
    them) in one language's alphabet, without asking further (no Cyrillic, Greek, Hebrew or
    CJK text reads that way); else charset-normalizer's best guess among CANDIDATES, then two
    corrections: a windows code page whose sample never uses bytes 0x80-0x9F (where it differs
    from ISO) is read as its ISO sibling; between Latin code pages, the reading whose in-word
    bytes best fit one language's alphabet wins (ties: the order of ``_LATIN``, windows-1252
    first).  When charset-normalizer found nothing, a Latin reading must fit at least MIN_FIT.
    None: nothing fits."""
    in_word = Counter(b"".join(_WORDS.findall(sample)).translate(None, _ASCII))
    latin = _latin_scores(sample, in_word)
    if latin and latin[0][0] == -1.0 and sum(in_word.values()) >= PERFECT_FIT_BYTES:
        return codecs.lookup(latin[0][2]).name  # one language's alphabet, every letter

    from charset_normalizer import from_bytes

    results = list(from_bytes(sample, cp_isolation=list(CANDIDATES),
                              preemptive_behaviour=False))
    best = results[0].encoding if results else None
    if best in _ISO_SIBLING and not re.search(rb"[\x80-\x9f]", sample):
        if _decodes(sample, _ISO_SIBLING[best]):
            return codecs.lookup(_ISO_SIBLING[best]).name
    if best is None or best in _LATIN:
        if not latin or (best is None and -latin[0][0] < MIN_FIT):
            return None
        return codecs.lookup(latin[0][2]).name
    return codecs.lookup(best).name


def _latin_scores(sample: bytes, in_word: Counter[int]) -> list[tuple[float, int, str]]:
    """(-fit, rank, codec) of the Latin code pages that decode the sample, best first."""
    scored = []
    for rank, codec in enumerate(_LATIN):
        if _decodes(sample, codec):
            scored.append((-_alphabet_fit(in_word, codec), rank, codec))
    return sorted(scored)


def _alphabet_fit(in_word: Counter[int], codec: str) -> float:
    """Share of the in-word bytes whose reading in ``codec`` one language's alphabet holds."""
    total = sum(in_word.values())
    if not total:
        return 1.0
    where = _alphabets_of(codec)
    held = [0] * len(_ALPHABETS)
    for byte, n in in_word.items():
        for index in where[byte - 0x80]:
            held[index] += n
    return max(held) / total


@functools.lru_cache(maxsize=None)
def _alphabets_of(codec: str) -> tuple[tuple[int, ...], ...]:
    """For each byte 0x80-0xFF, the alphabets (indexes into _ALPHABETS) holding its reading in
    a single-byte ``codec``, lower-cased."""
    out = []
    for b in range(0x80, 0x100):
        ch = bytes([b]).decode(codec, "replace").lower()[:1]
        out.append(tuple(i for i, letters in enumerate(_ALPHABETS) if ch in letters))
    return tuple(out)


def pieces(data: bytes, choice: Choice, chunk: int = CHUNK) -> Iterator[str]:
    """The text of ``data`` a chunk at a time (a multibyte character split between chunks is
    carried over)."""
    view = memoryview(data)[choice.skip :]
    if len(view) <= chunk:
        yield codecs.decode(view, choice.codec, choice.errors)
        return
    dec = codecs.getincrementaldecoder(choice.codec)(choice.errors)
    for at in range(0, len(view), chunk):
        yield dec.decode(view[at : at + chunk], final=at + chunk >= len(view))


def decode(data: bytes, declared: str | None = None) -> tuple[str, Choice]:
    """The whole text of ``data`` and the choice that made it."""
    choice = choose(data, declared)
    return "".join(pieces(data, choice, max(CHUNK, len(data)))), choice


def warnings(choice: Choice) -> list[str]:
    """What a reader reports about a choice: replacement characters put in."""
    if choice.clean:
        return []
    return [f"bytes that do not decode as {choice.codec} ({choice.source}) were replaced "
            f"by U+FFFD"]


def binary_reason(text: str) -> str | None:
    """Why a decoded sample is not text, or None when it is: control characters other than
    NUL beyond 2 %, or NUL bytes scattered through it (more than one run of NULs per 100
    other characters; a few stray NULs, or long runs such as a log padded after a crash,
    are text, and the store removes them)."""
    sample = text[: 1 << 16]
    if not sample:
        return None
    nuls = sample.count("\x00")
    rest = len(sample) - nuls
    if nuls:
        if not rest:
            return "NUL bytes only"
        runs = len(_NUL_RUNS.findall(sample))
        if runs * 100 > rest:
            return "NUL bytes throughout"
    controls = len(_CONTROL_RE.findall(sample)) if _CONTROL_RE.search(sample) else 0
    if controls > MAX_CONTROL_SHARE * len(sample):
        return "control characters throughout"
    return None


def looks_like_text(sample: bytes) -> bool:
    """True when a head of bytes is text: a BOM, a UTF-32/UTF-16 NUL pattern, or bytes that,
    read one per character, pass :func:`binary_reason`."""
    if bom(sample) is not None or nul_pattern(sample) is not None:
        return True
    head = sample[: 1 << 16]
    if 0 not in head:  # the common case, in C: control bytes counted without decoding
        return len(head) - len(head.translate(None, _CONTROL_BYTES)) <= \
            MAX_CONTROL_SHARE * len(head)
    return binary_reason(head.decode("latin-1")) is None
