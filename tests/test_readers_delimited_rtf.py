"""The CSV/TSV (delimited) and RTF readers: rules, encodings, caps, real samples."""

from __future__ import annotations

from dataclasses import replace
import random
import tracemalloc
from pathlib import Path

import pytest

from bastion.readers.text import delimited
from bastion.readers.base import Document, Limits, ReadResult
from bastion.readers.dispatch import Outcome, read_document
from bastion.readers.runtime.context import LocalContext
from workcost import linear  # tests/ is on sys.path

SAMPLES = Path(__file__).parent / "samples"


def read_csv(data: bytes | str, limits: Limits | None = None, name: str = "t.csv",
             mime: str = "text/csv") -> Outcome:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return read_document(Document(data, name, mime), LocalContext(limits or Limits()))


def read_rtf(data: bytes, limits: Limits | None = None) -> Outcome:
    return read_document(Document(data, "d.rtf", "application/rtf"),
                         LocalContext(limits or Limits()))


# ---------------------------------------------------------------------------- CSV rules


def test_rows_become_tab_separated_lines():
    out = read_csv('name,note,n\r\nCSVMARK,"has, comma",1\r\nx,"multi\nline\tcell",2\r\n')
    assert out.status == "ok" and out.extractor == "csv:utf-8"
    assert out.text == "name\tnote\tn\nCSVMARK\thas, comma\t1\nx\tmulti line cell\t2\n"
    assert out.result == ReadResult("csv:utf-8", encoding_source="utf-8", details={
        "charset": "utf-8", "delimiter": ",", "rows": 3}, languages=())  # too few words


def test_semicolon_dialect_sniffed():
    out = read_csv("a;b;c\nSEMIMARK;2;3\n4;5;6\n")
    assert out.text == "a\tb\tc\nSEMIMARK\t2\t3\n4\t5\t6\n"
    assert out.result.details["delimiter"] == ";"


def test_tsv_by_extension_and_mime():
    out = read_csv("a\tb,c\nTSVMARK\t2,3\n", name="t.tsv", mime="text/tab-separated-values")
    assert out.extractor == "tsv:utf-8" and out.text == "a\tb,c\nTSVMARK\t2,3\n"


def test_single_column_falls_back_to_comma():
    out = read_csv("ONECOLMARK\nsecond\n")
    assert out.text == "ONECOLMARK\nsecond\n" and out.extractor == "csv:utf-8"


def test_old_mac_line_ends_and_blank_lines():
    out = read_csv(b"a,b\rCRMARK,2\r\r3,4")
    assert out.text == "a\tb\nCRMARK\t2\n\n3\t4\n"


@pytest.mark.parametrize("encoding, expected", [
    ("utf-8-sig", "utf-8"), ("utf-16", None), ("utf-16-le", "utf-16-le"),
    ("utf-16-be", "utf-16-be"), ("cp1252", "cp1252"), ("utf-8", "utf-8"),
])
def test_decoding(encoding, expected):
    out = read_csv("name,city\nENCMARK,Zürich “q”\n".encode(encoding))
    assert out.text == "name\tcity\nENCMARK\tZürich “q”\n"
    if expected:
        assert out.result.details["charset"] == expected


# ---------------------------------------------------------------------------- CSV caps


def test_20mb_single_field_small_cap():
    def field(n: int) -> bytes:
        return b'id,val\nFIELDMARK,"' + b"x" * n + b'"\nlast,row\n'

    read_csv(field(200_000), Limits(max_chars=1000))  # what loads once (the language model)
    data = field(20_000_000)
    tracemalloc.start()
    try:
        out = read_csv(data, Limits(max_chars=1000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the row is cut at the budget as the text is decoded, a chunk (1 MiB) at a time: the
    # reader never held the 20 MB field (reading it whole would take 20 MB and more)
    assert peak < 8 << 20, f"the reader held {peak >> 20} MiB"
    assert out.status == "ok" and out.limit == "max_chars"
    assert out.text.startswith("id\tval\nFIELDMARK\txxx")
    assert out.text.endswith("\n[bastion: text truncated, max_chars reached: 1000 characters]\n")
    assert len(out.text) < 1100


def test_endless_line_small_cap():
    out = read_csv(b"ENDLESSMARK" + b"y" * 20_000_000, Limits(max_chars=1000))
    assert out.status == "ok" and out.limit == "max_chars"
    assert out.text.startswith("ENDLESSMARKyyy") and len(out.text) < 1100


def test_quote_heavy_long_row_stops_even_when_output_is_short():
    # 3 source characters per output character: the row's source passes the budget first
    data = b"QMARK," + b'"",' * 400_000 + b"\n"
    out = read_csv(data, Limits(max_chars=100_000, max_parts=10_000_000))
    assert out.status == "ok" and out.limit == "max_chars"
    assert out.text.startswith("QMARK\t")


def test_300k_cell_row_stops_at_max_parts():
    data = b"HDRMARK\n" + b",".join(b"c%d" % i for i in range(300_000)) + b"\nnext\n"
    out = read_csv(data)
    assert out.status == "ok" and out.limit == "max_parts"
    lines = out.text.split("\n")
    assert lines[0] == "HDRMARK"
    assert lines[1].split("\t") == [f"c{i}" for i in range(200_000)]
    assert lines[2] == "[bastion: text truncated, max_parts reached: a row of more than 200000 fields]"
    assert out.extractor == "csv:utf-8"


def test_many_rows_hit_char_cap():
    data = b"".join(b"%d,ROWMARK\n" % i for i in range(100_000))
    out = read_csv(data, Limits(max_chars=10_000))
    assert out.limit == "max_chars" and out.text.startswith("0\tROWMARK\n1\tROWMARK\n")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_bomless_wide_csv_by_nul_pattern(codec):
    out = read_csv("a,b\nWIDEMARK,2\n".encode(codec) * 10)
    assert out.extractor == f"csv:{codec}" and out.result.encoding_source == "nul-pattern"
    assert out.text.startswith("a\tb\nWIDEMARK\t2\n")


def test_legacy_csv_is_detected_not_cp1252():
    rows = "Город,Население\nМосква,13010112\nСанкт-Петербург,5601911\nНовосибирск,1633595\n"
    out = read_csv(rows.encode("cp1251"))
    assert out.extractor == "csv:cp1251" and out.result.encoding_source == "detected"
    assert "Москва\t13010112" in out.text


# ---------------------------------------------------------------------------- RTF rules

RTF_DOC = rb"""{\rtf1\ansi\ansicpg1252\deff0
{\fonttbl{\f0\fswiss\fcharset0 FONTNAMEMARK;}{\f1\fcharset204 Times New Roman Cyr;}}
{\colortbl;\red255\green0\blue0;}{\stylesheet{\s0 STYLEMARK;}}
{\*\generator GENERATORMARK 5.41;}{\info{\title INFOTITLEMARK}{\author AUTHORMARK}}
{\header HEADERMARK\par}{\footerr FOOTERMARK\par}
{\*\themedata 0102THEMEMARK}{\*\unknowndest STARMARK}
\pard\plain Hello \b RTFMARK\b0  world\par
caf\'e9 \u8364? euro\uc2\u8212 xx dash{\uc1\u-10179 ?\u-8704 ?} smile\par
{\f1 \'cf\'f0\'e8\'e2\'e5\'f2} cyr\par
a\tab b\line c\emdash d\endash e \bullet \lquote q\rquote  \ldblquote dq\rdblquote  \{x\} \\ \~nb\par
{\field{\*\fldinst {HYPERLINK "http://FLDINSTMARK"}}{\fldrslt {LINKMARK}}}\par
{\*\bkmkstart BKMARK}{\*\bkmkend BKMARK}\trowd\cellx1000\cellx2000 c1\cell c2\cell\row
{\pict\pngblip\picw10 89504e47PICTMARK\bin5 {}}\}}after pict\par
}TRAILINGMARK"""


def test_rtf_body_text_and_symbols():
    out = read_rtf(RTF_DOC)
    assert out.status == "ok" and out.extractor == "rtf"
    assert out.text == (
        "Hello RTFMARK world\n"
        "café € euro— dash😀 smile\n"
        "Привет cyr\n"
        "a\tb\nc—d–e •‘q’ “dq” {x} \\ \xa0nb\n"
        "LINKMARK\n"
        "c1\tc2\n"
        "after pict\n"
        "## header\n"
        "HEADERMARK\n"
        "## footer\n"
        "FOOTERMARK\n"
    )
    assert out.result.metadata.to_json() == {"title": "INFOTITLEMARK",  # not text: metadata
                                             "authors": ["AUTHORMARK"]}
    assert replace(out.result, metadata=None) == ReadResult(
        "rtf", title="INFOTITLEMARK", details={"codepage": "cp1252"}, languages=())


@pytest.mark.parametrize("word", [
    "FONTNAMEMARK", "STYLEMARK", "GENERATORMARK", "INFOTITLEMARK", "AUTHORMARK", "THEMEMARK",
    "STARMARK", "FLDINSTMARK", "BKMARK", "PICTMARK", "TRAILINGMARK",
])
def test_rtf_destinations_dropped(word):
    assert word not in read_rtf(RTF_DOC).text


def test_rtf_ansicpg_and_uc0():
    out = read_rtf(b"{\\rtf1\\ansi\\ansicpg1251 \\'cf\\'f0 CPMARK \\uc0\\u1046 end}")
    assert out.text == "Пр CPMARK Жend\n"
    assert out.result.details["codepage"] == "cp1251"


def test_rtf_uc_scoped_per_group():
    out = read_rtf(b"{\\rtf1 {\\uc3\\u1046 abcX}\\u1046 yZ UCMARK}")
    assert out.text == "ЖXЖZ UCMARK\n"


def test_rtf_unterminated_keeps_text():
    out = read_rtf(b"{\\rtf1\\ansi {\\b UNTERMMARK\\par more")
    assert out.status == "ok" and out.text == "UNTERMMARK\nmore\n"


@pytest.mark.parametrize("data", [b"", b"hello, not rtf", b"\x00\xff" * 100, b"{\\rtx1 x}"])
def test_rtf_not_rtf_is_corrupt(data):
    out = read_rtf(data)
    assert out.status == "error" and out.error_kind == "corrupt"


@pytest.mark.timeout(300)  # a net against a hang; what is asserted is the work's growth
def test_rtf_100k_nested_groups():
    def nested(depth: int) -> bytes:
        return b"{\\rtf1 " + b"{\\b " * depth + b"DEEPMARK" + b"}" * depth + b" tail}"

    depth = 100_000
    out = linear(read_rtf, nested(depth), nested(depth // 8))  # not a step per open group
    assert out.text == "DEEPMARK tail\n"
    out = read_rtf(b"{\\rtf1 " + b"{" * depth + b"OPENMARK")  # never closed
    assert out.text == "OPENMARK\n"


def test_rtf_cell_cap_and_char_cap():
    out = read_rtf(b"{\\rtf1 ROWMARK\\par\\trowd " + b"x\\cell " * 1000 + b"\\row}",
                   Limits(max_parts=100))
    assert out.limit == "max_parts" and out.extractor == "rtf"
    # the 101st cell's text is written before its \cell shows the row is too long
    assert out.text == "ROWMARK\n" + "x\t" * 100 + "x\n" + (
        "[bastion: text truncated, max_parts reached: a table row of more than 100 cells]\n")
    out = read_rtf(b"{\\rtf1 CHARMARK " + b"word\\par " * 100_000 + b"}",
                   Limits(max_chars=1000))
    assert out.limit == "max_chars" and out.text.startswith("CHARMARK word\nword\n")
    assert out.text.endswith("max_chars reached: 1000 characters]\n")


def test_rtf_bin_length_beyond_end_is_safe():
    assert read_rtf(b"{\\rtf1 BINMARK \\bin99999999 xx}").text == "BINMARK \n"


@pytest.mark.timeout(300)  # a net against a hang; what is asserted is the work's growth
def test_rtf_throughput():
    para = (rb"\pard\plain \s0\ql\li0\ri0\widctlpar\wrapdefault\faauto\rin0\lin0\itap0 "
            rb"\rtlch\fcs1 \af0\afs24 \ltrch\fcs0 \fs24\lang1033\langfe1033 {\rtlch\fcs1 "
            rb"\af0 \ltrch\fcs0 \insrsid123 The quick brown fox caf\'e9 \u8212\'97 more.}"
            rb"{\insrsid123 \par }" + b"\r\n")
    def paragraphs(n: int) -> bytes:
        return b"{\\rtf1\\ansi " + para * n + b"}"

    # ~6.5 MB: the work grows with the text, no faster (its speed is bench/'s)
    out = linear(read_rtf, paragraphs(20_000), paragraphs(2_500))
    assert out.text.count("The quick brown fox café — more.\n") == 20_000


def test_garbage_never_escapes_as_an_exception():
    rng = random.Random(7)
    alphabet = b"{}\\'abcu0123456789-* \r\nbinpar;\"," + bytes(range(128, 140))
    for _ in range(300):
        body = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        assert read_rtf(b"{\\rtf1" + body).status in ("ok", "empty", "error")
        assert read_csv(body).status in ("ok", "empty", "error")


# ---------------------------------------------------------------------------- real samples


@pytest.mark.parametrize("path, mime, phrases, absent", [
    ("csv/FY09_EDU_Recipients_by_State.csv", "text/csv",
     ["State Name\tState Abbreviate\tCode\tMontgomery GI Bill-Active Duty",
      "CALIFORNIA\tCA\t06\t34,942\t2,987"], []),
    ("csv/dummy.tsv", "text/tab-separated-values", ["a\tb\tc\n1\t2\t3\n"], []),
    ("rtf/headers_footers.rtf", "application/rtf",
     ["Body Text\n\nBody Text page 2\n\nBody Text page 3\n## header\nEven page header\n"
      "Odd Page Header\nFirst Page Header\n## footer\nEven Page Footer\nOdd Page Footer\n"
      "First Page Footer\n"], []),
    ("rtf/la_dame.rtf", "application/rtf",
     ["La dame\nToc toc Il a fermé la porte\nLes lys du jardin sont flétris\n",
      "– Guillaume Apollinaire, Alcools", "to take\xa0[out/away/etc.]"],
     ["Times New Roman", "p.La dame"]),
])
def test_real_samples(path, mime, phrases, absent):
    data = (SAMPLES / path).read_bytes()
    out = read_document(Document(data, Path(path).name, mime), LocalContext())
    assert out.status == "ok", out.error
    for phrase in phrases:
        assert phrase in out.text
    for phrase in absent:
        assert phrase not in out.text


def test_rtf_headers_footers_apart_and_shape_text():
    """Header and footer groups are written after the body under ``## header`` /
    ``## footer``, each distinct line once; a shape's text (``\\shptxt``) is read where the
    shape sits and its fallback picture group (``\\shprslt``) is not read twice; the optional
    hyphen ``\\-`` and U+00AD are removed, ``\\_`` is '-'."""
    rtf = (rb"{\rtf1\ansi{\fonttbl{\f0 Arial;}}{\header \pard hdrword\par}"
           rb"{\headerf \pard hdrword\par}{\footerl \pard footword {\field{\*\fldinst PAGE}"
           rb"{\fldrslt 1}}\par}\pard bodyword in\-for\u173?ma\_tion\par"
           rb"{\shp{\*\shpinst{\sp{\sn shapeType}{\sv 202}}{\shptxt \pard boxword\par}}"
           rb"{\shprslt{\*\do\dobxcolumn{\dptxbx{\pard boxword\par}}}}}\pard tail\par}")
    out = read_rtf(rtf)
    assert out.text == ("bodyword informa-tion\nboxword\ntail\n## header\nhdrword\n"
                        "## footer\nfootword 1\n")


def test_rtf_annotations_after_their_paragraph():
    """A comment (``\\*\\annotation``, author from ``\\*\\atnauthor``) is one line after the
    paragraph it is anchored in; its id and reference are not text."""
    rtf = (rb"{\rtf1\ansi\pard first {\*\atnid AA}{\*\atnauthor Ann Auditor}\chatn"
           rb"{\*\annotation{\*\atnref 1}\pard\plain rtfremark\par more}para\par"
           rb"\pard second{\*\annotation orphanremark}\par}")
    out = read_rtf(rtf)
    assert out.text == ("first para\n[comment: Ann Auditor] rtfremark more\nsecond\n"
                        "[comment] orphanremark\n")
