"""bastion.readers.text.textcodec: the decoding order, real samples of every legacy encoding, stray NULs."""

from __future__ import annotations

from dataclasses import replace
import codecs
import re
from pathlib import Path

import pytest

from bastion.readers.text import textcodec
from bastion.readers.base import Document, Limits, normalize_text, ReadResult
from bastion.readers.detect import detect_bytes
from bastion.readers.dispatch import Outcome, read_document
from bastion.readers.runtime.context import LocalContext

TEXT = Path(__file__).parent / "samples" / "text"


def read(data: bytes, name: str = "notes.txt", mime: str | None = None) -> Outcome:
    mime = mime or detect_bytes(data, name)
    return read_document(Document(data, name, mime), LocalContext(Limits()))


# ------------------------------------------------------------------ real samples (ORIGIN.md)

# file -> (the codec that reads it right, how it must be chosen, words that must come out)
SAMPLES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "shift_jis-japanese.txt": ("shift_jis", "detected", ("アプリケーション", "プロジェクトの概要")),
    "euc-jp-japanese.txt": ("euc_jp", "detected", ("アプリケーション", "によって作成されました")),
    "euc-kr-korean.txt": ("euc_kr", "detected", ("대한민국에서는", "조선민주주의인민공화국")),
    "big5-chinese.txt": ("big5", "detected", ("維基媒體基金會也", "二十大卷佔八成")),
    "gb2312-chinese.html": ("gb2312", "detected", ("搜狐在线国庆免费大酬宾",)),
    "koi8-r-russian.txt": ("koi8_r", "detected", ("гимназии", "учеников", "математика")),
    "ibm866-russian.txt": ("cp866", "detected", ("гимназии", "учеников", "математика")),
    "maccyrillic-russian.txt": ("mac_cyrillic", "detected", ("гимназии", "математика")),
    "windows-1251-russian.txt": ("cp1251", "detected", ("гимназии", "исключение")),
    "windows-1255-hebrew.txt": ("cp1255", "detected", ("העברית", "השמיות")),
    "windows-1255-hebrew.html": ("cp1255", "detected", ("במקביל", "הקבינט")),
    "iso-8859-5-russian.html": ("iso8859_5", "detected", ("МОСКВА", "Новости", "кризиса")),
    "iso-8859-5-russian-declared.xml": ("iso8859_5", "declared", ("информации",
                                                                  "общественностью")),
    "iso-8859-7-greek.txt": ("iso8859_7", "detected", ("ελληνική", "εκατομμυρίων")),
    "iso-8859-2-czech.txt": ("iso8859_2", "detected", ("veřejností", "žebráky", "šátku")),
    "iso-8859-2-polish.txt": ("iso8859_2", "detected", ("zauważyli", "sypiają", "otyłości")),
    "windows-1250-czech.txt": ("cp1250", "detected", ("veřejností", "žebráky", "šátku")),
    "windows-1250-polish.txt": ("cp1250", "detected", ("zauważyli", "sypiają", "otyłości")),
    "windows-1252-german.txt": ("cp1252", "detected", ("Auswärtigen", "Schulabschlüsse")),
    "utf-32le-nobom.txt": ("utf-32-le", "nul-pattern", ("DateTime,Bid,Ask",)),
    "utf-32be-nobom.txt": ("utf-32-be", "nul-pattern", ("DateTime,Bid,Ask",)),
    "utf-16le-nobom.txt": ("utf-16-le", "nul-pattern", ("DateTime,Bid,Ask",)),
    "utf-32le-nobom-declares-utf16.html": ("utf-32-le", "nul-pattern",
                                           ("Unicode Plane 1 Example", "\U00010330")),
}


def test_every_sample_is_listed_with_its_origin():
    files = {p.name for p in TEXT.iterdir() if p.name != "ORIGIN.md"}
    assert files == set(SAMPLES)
    origin = (TEXT / "ORIGIN.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in origin for name in files)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_real_sample_reads_right(name):
    right, source, words = SAMPLES[name]
    data = (TEXT / name).read_bytes()
    out = read(data, name)
    assert out.status == "ok", out.error
    assert out.result.encoding_source == source
    for word in words:
        assert word in out.text
    assert "\ufffd" not in out.text and list(out.warnings) == []
    family = out.extractor.split(":")[0]
    if family == "text":  # plain text: every character, not just the words
        assert out.text == normalize_text(data.decode(right))
    # the codec named decodes these bytes exactly as the right one does
    assert data.decode(out.extractor.split(":", 1)[1]) == data.decode(right)


def test_same_text_in_two_code_pages_reads_the_same():
    """ISO-8859-2 and windows-1250 put š, ž, ś, ź, ą at different bytes."""
    for lang in ("czech", "polish"):
        iso = read((TEXT / f"iso-8859-2-{lang}.txt").read_bytes())
        win = read((TEXT / f"windows-1250-{lang}.txt").read_bytes())
        assert re.findall(r"\w+", iso.text) == re.findall(r"\w+", win.text)
        assert (iso.extractor, win.extractor) == ("text:iso8859-2", "text:cp1250")


def test_same_text_in_four_cyrillic_encodings_reads_the_same():
    names = ("koi8-r", "ibm866", "maccyrillic", "windows-1251")
    texts = {read((TEXT / f"{n}-russian.txt").read_bytes()).text for n in names}
    assert len(texts) == 1


def test_csv_and_text_decode_the_same_bytes_the_same():
    data = (TEXT / "windows-1251-russian.txt").read_bytes()
    as_text = read(data, "a.txt")
    as_csv = read(data, "a.csv")
    assert as_csv.extractor == "csv:cp1251" and as_text.extractor == "text:cp1251"


# ------------------------------------------------------------------ the order


def test_bom_first_utf32_before_utf16():
    for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        data = "\ufeffBOMMARK ünï".encode(codec)
        choice = textcodec.choose(data, "windows-1251")
        assert (choice.codec, choice.source) == (codec, "bom")
        assert "".join(textcodec.pieces(data, choice)) == "BOMMARK ünï"


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_bomless_wide_text_by_nul_pattern(codec):
    data = ("NULMARK Grüße, 東京 and more words\n" * 40).encode(codec)
    choice = textcodec.choose(data)
    assert (choice.codec, choice.source, choice.clean) == (codec, "nul-pattern", True)


def test_strict_utf8_before_declared():
    data = "<p>Grüße UTF8WINS</p>".encode("utf-8")
    assert textcodec.choose(data, "windows-1252").source == "utf-8"


def test_declared_used_when_the_bytes_decode_with_it():
    data = "Дата: Москва, МАРК".encode("koi8-r")
    choice = textcodec.choose(data, "KOI8-R")
    assert (choice.codec, choice.source) == ("koi8-r", "declared")


def test_declared_that_does_not_decode_falls_through():
    data = ("Город Москва — столица России. " * 30).encode("cp1251")
    with pytest.raises(UnicodeDecodeError):
        data.decode("euc_jp")
    choice = textcodec.choose(data, "EUC-JP")
    assert (choice.codec, choice.source) == ("cp1251", "detected")
    choice = textcodec.choose(data, "utf-16")  # never an 8-bit text's declared codec
    assert (choice.codec, choice.source) == ("cp1251", "detected")


@pytest.mark.parametrize("label", ["zlib", "base64", "rot13", "utf-7", "nonsense", "", None])
def test_labels_that_name_no_text_encoding_are_refused(label):
    assert textcodec.label_codec(label) is None


def test_whatwg_labels():
    assert textcodec.label_codec("ISO-8859-1") == "cp1252"
    assert textcodec.label_codec("us-ascii") == "cp1252"
    assert textcodec.label_codec("Shift_JIS") == "cp932"
    assert textcodec.label_codec("gb2312") == "gb18030"
    assert textcodec.label_codec("euc-kr") == "cp949"
    assert textcodec.label_codec("koi8-r") == "koi8-r"


def test_iso2022jp_is_detected_though_it_is_7_bit():
    data = "ISO2022MARK 日本語のテキストです。\n".encode("iso2022_jp")
    assert data.isascii()
    out = read(data)
    assert out.extractor == "text:iso2022_jp" and "日本語のテキストです" in out.text


def test_pure_ascii_is_utf8():
    assert textcodec.choose(b"plain ASCII\n") == textcodec.Choice("utf-8", 0, "utf-8", True)


def test_fallback_cp1252_when_nothing_fits():
    data = bytes(range(0x80, 0x100)).join([b"ab", b"cd"]) * 3
    data = b" ".join(b"ab" + bytes([b]) + b"c" for b in data if b >= 0x80)
    choice = textcodec.choose(data)
    assert (choice.codec, choice.source) == ("cp1252", "fallback")
    out = read(data)  # cp1252 leaves five bytes undefined: replaced, said, not a crash
    assert out.status == "ok" and "\ufffd" in out.text and out.warnings


def test_sample_is_taken_where_the_non_ascii_text_is():
    """A 3 MB file whose first 2 MB are ASCII: the detector sees the Cyrillic, not the ASCII."""
    russian = "Город Москва является столицей Российской Федерации.\n".encode("cp1251")
    data = b"ascii line of a log file\n" * 80_000 + russian * 2000
    choice = textcodec.choose(data)
    assert (choice.codec, choice.source, choice.clean) == ("cp1251", "detected", True)


def test_bytes_outside_the_sample_that_do_not_decode_are_replaced_and_said():
    russian = "Город Москва является столицей Российской Федерации.\n".encode("cp1251")
    data = russian * 3000 + b"tail \x98 byte\n"  # 0x98 is undefined in windows-1251
    assert len(data) > 2 * textcodec.SAMPLE_BYTES
    choice = textcodec.choose(data)
    assert (choice.codec, choice.clean) == ("cp1251", False)
    out = read(data)
    assert out.status == "ok" and out.text.endswith("tail \ufffd byte\n")
    assert list(out.warnings) == ["bytes that do not decode as cp1251 (detected) were replaced by "
                            "U+FFFD"]


def test_chunked_decoding_carries_split_characters():
    data = ("東京タワー " * 300_000).encode("cp932")  # > 1 MiB: several chunks
    choice = textcodec.Choice("cp932", 0, "detected")
    assert "".join(textcodec.pieces(data, choice)) == data.decode("cp932")


def test_deterministic():
    data = (TEXT / "iso-8859-2-czech.txt").read_bytes()
    assert len({textcodec.choose(data) for _ in range(5)}) == 1


# ------------------------------------------------------------------ NUL bytes


def test_a_few_stray_nuls_are_text_and_removed():
    lines = [b"%d INFO request served in %d ms\n" % (i, i % 17) for i in range(200)]
    lines[50] = b"\x00" + lines[50]
    lines[120] = lines[120].replace(b"served", b"ser\x00ved")
    data = b"".join(lines[:100]) + b"log line two\x00\nlog line three STRAYMARK\n" + b"".join(
        lines[100:])
    assert detect_bytes(data, "app.log") == "text/plain"
    out = read(data, "app.log")
    assert out.status == "ok" and "\x00" not in out.text
    assert "log line two\nlog line three STRAYMARK" in out.text


def test_a_log_padded_with_nuls_after_a_crash_is_text():
    data = b"before the crash PADMARK\n" * 50 + b"\x00" * 8192 + b"after the restart\n" * 50
    assert detect_bytes(data, "daemon.log") == "text/plain"
    out = read(data, "daemon.log")
    assert out.status == "ok" and "PADMARK" in out.text and "after the restart" in out.text


def test_binary_with_nuls_throughout_is_not_text():
    import struct
    data = b"".join(struct.pack("<IHH", i, i % 7, 3) + b"name" for i in range(2000))
    assert detect_bytes(data, "table.txt") == "application/octet-stream"
    out = read(data, "table.txt", "text/plain")
    assert out.status == "unsupported" and "NUL" in out.error
    assert textcodec.binary_reason("\x00" * 100) == "NUL bytes only"


def test_control_bytes_are_still_binary():
    out = read(bytes(range(1, 8)) * 200, "weird.txt", "text/plain")
    assert out.status == "unsupported" and "control characters" in out.error


def test_bom_helper_names_skip():
    assert textcodec.bom(codecs.BOM_UTF32_LE + b"x") == ("utf-32-le", 4)
    assert textcodec.bom(codecs.BOM_UTF16_LE + b"x") == ("utf-16-le", 2)
    assert textcodec.bom(b"plain") is None


def test_utf8_with_one_bad_byte_stays_utf8_with_a_replacement():
    log = "2026-12-01 INFO served /api in 12 ms — café DAMAGEMARK\n".encode() * 3000
    for data in (log + b"tail \xe9 byte\n", b"head \xe9 byte\n" + log):
        choice = textcodec.choose(data)
        assert (choice.codec, choice.source, choice.clean) == ("utf-8", "utf-8", False)
        out = read(data)
        assert out.status == "ok" and out.text.count("\ufffd") == 1
        assert "— café DAMAGEMARK" in out.text and out.warnings


def test_a_text_cut_at_the_cap_keeps_its_encoding():
    data = ("Город Москва является столицей России.\n" * 500).encode("cp1251")
    out = read_document(Document(data, "big.txt", "text/plain"),
                        LocalContext(Limits(max_chars=1000)))
    assert out.limit == "max_chars" and out.extractor == "text:cp1251"
    assert out.result.languages[0][0] == "ru"
    assert replace(out.result, languages=()) == ReadResult("text:cp1251",
                                                          encoding_source="detected")
    assert out.text.startswith("Город Москва")
