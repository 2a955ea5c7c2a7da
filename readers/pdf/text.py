"""A page's text: cleaned, its C1 bytes repaired, how printable it is, and what kind of page
it makes (text, garbage, short or blank: every page but text is one to OCR)."""

from __future__ import annotations

import re

MIN_PRINTABLE = 0.90
MIN_PAGE_CHARS = 10  # a page with fewer visible characters of its own is OCRed (as Tika does)

# What makes text "not printable": C0/C1 controls other than whitespace, private-use code
# points, U+FFFD and non-characters, and pdfminer's "(cid:N)" for glyphs it cannot map.
_BAD = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\ufffe\uffff\U000f0000-\U0010ffff]")
_CID = re.compile(r"\(cid:\d+\)")
_ASCII_BAD = re.compile("[\x00-\x08\x0e-\x1f\x7f]")
# A C1 control character in a page's text is a byte of a font without a usable encoding read
# as Latin-1 (documents do not hold C1 controls).  Such bytes are Windows-1252 punctuation
# (German „…“, dashes, €) in fonts from Windows, or Mac OS Roman letters (ä = 0x8A, ö = 0x9A,
# ü = 0x9F) in fonts from a Mac.  In Windows-1252 0x80-0x9F are marks: quotes touch a word on
# one side, dashes and bullets on neither; in Mac Roman they are letters, mostly inside words.
# So a page with more C1 bytes between two letters than between two non-letters is read as
# Mac Roman — all its characters U+0080-U+00FF, since that font's other bytes (ß = 0xA7, „ =
# 0xE3) were misread as Latin-1 too — and any other page's C1 bytes as Windows-1252 (0x92, the
# Windows apostrophe of "don’t", does not vote).
_C1 = re.compile("[\x80-\x9f]")
_C1_CP1252 = {c: bytes([c]).decode("cp1252") for c in range(0x80, 0xA0)
              if c not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}  # the five cp1252 leaves undefined
_C1_MAC = {c: bytes([c]).decode("mac_roman") for c in range(0x80, 0x100)}
_LETTER = "[^\\W\\d_]"
_C1_VOTER = "[\\x80-\\x91\\x93-\\x9f]"
_C1_INSIDE = re.compile(f"(?<={_LETTER}){_C1_VOTER}(?={_LETTER})")
_C1_APART = re.compile(f"(?<!{_LETTER}){_C1_VOTER}(?!{_LETTER})")


def repair_c1(text: str) -> str:
    """``text`` with its C1 control characters read as Windows-1252 or Mac Roman bytes."""
    mac = len(_C1_INSIDE.findall(text)) > len(_C1_APART.findall(text))
    return text.translate(_C1_MAC if mac else _C1_CP1252)


def decode_text_string(raw: bytes) -> str:
    """A PDF text string: UTF-16BE after ``FE FF``, UTF-8 after its BOM (PDF 2.0), otherwise
    PDFDocEncoding, read as Latin-1 (the two differ only in a few punctuation marks); trimmed."""
    if raw.startswith(b"\xfe\xff"):
        text = raw[2:].decode("utf-16-be", "replace")
    elif raw.startswith(b"\xef\xbb\xbf"):
        text = raw[3:].decode("utf-8", "replace")
    else:
        text = raw.decode("latin-1")
    return text.replace("\x00", "").strip()


def measure(text: str) -> tuple[int, int]:
    """(visible characters, unprintable ones); a pdfminer ``(cid:N)`` counts as one of each."""
    if "(cid:" in text:
        text = _CID.sub("\ufffd", text)
    visible = len(text) - sum(text.count(c) for c in " \t\n\r\f\v")
    if not visible or (text.isascii() and not _ASCII_BAD.search(text)):
        return visible, 0  # ASCII text without controls: no regex pass over every character
    return visible, len(_BAD.findall(text))


def printable_ratio(text: str) -> float:
    """Share of the non-space characters that are printable (1.0 for blank text)."""
    visible, bad = measure(text)
    if visible <= 0:
        return 1.0
    return max(0.0, 1.0 - bad / visible)


def clean_page(text: str) -> str:
    """One page's text: LF line ends, no form feeds (they separate pages), no NUL, valid
    UTF-8, no trailing spaces, no blank lines around it."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\f", "\n").replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
        if _C1.search(text):
            text = repair_c1(text)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def page_kind(text: str) -> str:
    """How a page's own text layer reads: ``text``; ``garbage`` (under 90% printable: glyphs
    without a Unicode mapping); ``short`` (fewer than MIN_PAGE_CHARS visible characters) or
    ``blank`` (none).  Every page but ``text`` is a page to OCR."""
    visible, bad = measure(text)
    if not visible:
        return "blank"
    if bad > (1 - MIN_PRINTABLE) * visible:
        return "garbage"
    return "short" if visible < MIN_PAGE_CHARS else "text"
