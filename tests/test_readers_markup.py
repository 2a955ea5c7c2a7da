"""The HTML (markup) and e-mail (mail) readers: rules, charsets, caps, real samples."""

from __future__ import annotations

from dataclasses import replace
import base64
from email.message import EmailMessage
from pathlib import Path

import pytest

from bastion.readers.containers import mail
from bastion.readers.text import markup
from bastion.readers.base import Document, Limits, TextSink, ReadResult
from bastion.readers.runtime.context import LocalContext
from workcost import linear  # tests/ is on sys.path
from bastion.readers.dispatch import Outcome, read_document, read_nested

SAMPLES = Path(__file__).parent / "samples"


def read_html(data: bytes | str, limits: Limits | None = None, name: str = "page.html",
              mime: str = "text/html") -> Outcome:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return read_document(Document(data, name, mime), LocalContext(limits or Limits()))


def read_mail(data: bytes, limits: Limits | None = None) -> Outcome:
    return read_document(Document(data, "msg.eml", "message/rfc822"),
                         LocalContext(limits or Limits(), nested=read_nested))


# ---------------------------------------------------------------------------- HTML rules


def test_title_first_scripts_styles_dropped():
    out = read_html(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title> Page  TITLEMARK </title>"
        "<style>body{color:STYLEMARK}</style><script>var s='SCRIPTMARK <p>';</script>"
        "</head><body><noscript>NOSCRIPTMARK</noscript><template><p>TEMPLATEMARK</p>"
        "</template><p>BODYMARK</p><!-- COMMENTMARK --></body></html>"
    )
    assert out.status == "ok" and out.extractor == "html:utf-8"
    assert out.text == "Page TITLEMARK\nBODYMARK\n"
    assert out.result.metadata.to_json() == {"title": "Page TITLEMARK"}
    assert replace(out.result, metadata=None) == ReadResult(
        "html:utf-8", encoding_source="utf-8", title="Page TITLEMARK",
        details={"charset": "utf-8"}, languages=())


def test_blocks_lines_whitespace_entities():
    out = read_html(
        "<body><h1>HEAD  one</h1><p>para\n  with   <b>bold</b>&nbsp;and &amp; &eacute;&#233;"
        "&#x41;</p><div>a<br>b<br/><br>c</div><ul><li>i1<li>i2</ul>"
        "<blockquote>quote</blockquote>x<hr>y</body>"
    )
    assert out.text == (
        "HEAD one\npara with bold\xa0and & ééA\na\nb\n\nc\ni1\ni2\nquote\nx\ny\n"
    )


def test_table_cells_tabs_and_nested_tables():
    out = read_html(
        "<table><tr><th>H1</th> <th>H2</th></tr>\n<tr><td> a </td><td>b\n c</td></tr>"
        "<tr><td><table><tr><td>in1</td><td>in2</td></tr></table></td><td>after</td></tr>"
        "</table>"
    )
    assert out.text == "H1\tH2\na\tb c\nin1\tin2\n\tafter\n"


def test_pre_keeps_whitespace():
    out = read_html("<p>x   y</p><pre>\n  code   here\n\tline2</pre><p>z</p>")
    assert out.text == "x y\n  code   here\n\tline2\nz\n"


def test_xhtml_cdata_and_self_closing():
    out = read_html(
        b'<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        b"<body><p>XHTMLMARK<br/>two</p><script/><p><![CDATA[CDATAMARK]]></p></body></html>",
        name="doc.xhtml", mime="application/xhtml+xml",
    )
    assert out.text == "XHTMLMARK\ntwo\nCDATAMARK\n"


def test_malformed_declarations_do_not_crash():
    out = read_html("<p>before</p><![if !supportLists]>MSOMARK<![endif]><!DOCTYPE x [ <!x> ]>"
                    "<p>after</p><div")
    assert out.status == "ok"
    assert "before" in out.text and "MSOMARK" in out.text and "after" in out.text


def test_html_to_text_for_mail():
    sink = TextSink(1000)
    markup.html_to_text("<p>one</p><p>two <i>three</i></p>", sink, Limits())
    assert sink.getvalue() == "one\ntwo three\n"


# ---------------------------------------------------------------------------- charsets


def test_meta_charset_windows_1252():
    html = "<html><head><meta charset='windows-1252'></head><body>café “CP1252MARK”</body>"
    out = read_html(html.encode("cp1252"))
    assert out.text == "café “CP1252MARK”\n"
    assert out.result.details["charset"] == "cp1252"


def test_http_equiv_charset_and_latin1_alias():
    html = ('<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
            "<p>na\xefve \x93LATINMARK\x94</p>")
    out = read_html(html.encode("latin-1"))
    assert out.text == "naïve “LATINMARK”\n"  # ISO-8859-1 is read as windows-1252


def test_bom_utf16_beats_declaration():
    html = "\ufeff<meta charset='windows-1252'><p>UTF16MARK Ωμέγα</p>"
    out = read_html(html.encode("utf-16-le"))
    assert out.text == "UTF16MARK Ωμέγα\n"
    assert out.result.details["charset"] == "utf-16-le"


def test_undeclared_utf8_then_cp1252():
    assert read_html("<p>Grüße UTF8MARK</p>".encode("utf-8")).text == "Grüße UTF8MARK\n"
    out = read_html("<p>Grüße CPMARK</p>".encode("cp1252"))
    assert out.text == "Grüße CPMARK\n" and out.result.details["charset"] == "cp1252"


def test_declared_non_text_codec_is_refused():
    out = read_html(b"<meta charset='zlib'><p>ZLIBMARK</p>")
    assert out.text == "ZLIBMARK\n" and out.result.details["charset"] == "utf-8"


def test_prescan_follows_whatwg():
    pre = markup.prescan
    assert pre(b"<meta charset=koi8-r>") == "koi8-r"
    assert pre(b'<META HTTP-EQUIV="content-type" CONTENT="text/html;charset=\'big5\'">') == "big5"
    assert pre(b'<meta content="text/html; charset=big5">') is None  # no http-equiv
    assert pre(b"<!-- <meta charset=koi8-r> --><meta charset=cp1251>") == "cp1251"
    assert pre(b'<div title="<meta charset=koi8-r>"><meta charset="gbk">') == "gbk"
    assert pre(b"<meta charset=utf-16le>") == "utf-8"
    assert pre(b"<meta charset=bogus><meta charset=euc-jp>") == "euc-jp"
    assert pre(b" " * 1024 + b"<meta charset=koi8-r>") is None  # past the 1024 bytes


def test_declared_charset_used_and_recorded():
    html = "<meta charset='koi8-r'><p>Привет, KOIHTMLMARK</p>"
    out = read_html(html.encode("koi8-r"))
    assert out.text == "Привет, KOIHTMLMARK\n"
    assert out.extractor == "html:koi8-r" and out.result.encoding_source == "declared"


def test_undeclared_legacy_html_is_detected():
    words = "Город Москва является столицей России. " * 20
    html = f"<html><body><p>{words}</p></body></html>"
    out = read_html(html.encode("cp1251"))
    assert out.extractor == "html:cp1251" and out.result.encoding_source == "detected"
    assert "Москва является столицей" in out.text


# ---------------------------------------------------------------------------- caps


@pytest.mark.slow
@pytest.mark.timeout(300)  # a net against a hang; what is asserted is the work's growth
def test_nested_100k_deep_is_bounded():
    def nested(depth: int) -> str:
        return ("<div><span><table><tr><td>" * depth + "DEEPMARK"
                + "</td></tr></table></span></div>" * depth)

    out = linear(read_html, nested(100_000), nested(12_500))  # not a step per open element
    assert out.status == "ok" and "DEEPMARK" in out.text


def test_char_cap_keeps_text_so_far():
    html = "<p>FIRSTMARK</p>" + "<p>" + "word " * 200_000 + "</p>"
    out = read_html(html, Limits(max_chars=5000))
    assert out.status == "ok" and out.limit == "max_chars"
    assert out.text.startswith("FIRSTMARK\n")
    assert out.text.endswith("[bastion: text truncated, max_chars reached: 5000 characters]\n")
    assert len(out.text) < 5100


def test_row_with_too_many_cells_stops_at_max_parts():
    html = "<p>ROWMARK</p><table><tr>" + "<td>c</td>" * 1000 + "</tr></table>"
    out = read_html(html, Limits(max_parts=100))
    assert out.status == "ok" and out.limit == "max_parts"
    assert out.extractor == "html:utf-8"
    assert out.text == "ROWMARK\n" + "\t".join(["c"] * 100) + (
        "\n[bastion: text truncated, max_parts reached: a table row of more than 100 cells]\n")


@pytest.mark.timeout(300)  # a net against a hang; what is asserted is the work's growth
def test_unterminated_huge_comment_and_script_are_linear():
    def script(n: int) -> str:
        return "<p>KEEPMARK</p><script>" + "x" * n

    def attribute(n: int) -> str:
        return "<p>KEEPMARK</p><img src='data:" + "A" * n + "'><p>AFTERMARK</p>"

    out = linear(read_html, script(5_000_000), script(625_000))
    assert out.text == "KEEPMARK\n"
    out = linear(read_html, attribute(5_000_000), attribute(625_000))
    assert out.text == "KEEPMARK\nAFTERMARK\n"


# ---------------------------------------------------------------------------- e-mail


def _message(subject: str = "Plain PLAINSUBJ") -> EmailMessage:
    m = EmailMessage()
    m["From"] = "Zoë Ünal <zoe@example.org>"
    m["To"] = "a@example.org, B <b@example.org>"
    m["Cc"] = "c@example.org"
    m["Date"] = "Mon, 01 Jan 2024 10:00:00 +0000"
    m["Subject"] = subject
    return m


def test_multipart_alternative_prefers_plain():
    m = _message()
    m.set_content("Plain body PLAINMARK\n")
    m.add_alternative("<html><body><p>HTMLONLYMARK</p></body></html>", subtype="html")
    out = read_mail(m.as_bytes())
    assert out.status == "ok" and out.extractor == "email"
    assert out.text == (
        "From: Zoë Ünal <zoe@example.org>\nTo: a@example.org, B <b@example.org>\n"
        "Cc: c@example.org\nDate: Mon, 01 Jan 2024 10:00:00 +0000\nSubject: Plain PLAINSUBJ\n"
        "\nPlain body PLAINMARK\n"
    )
    assert out.result.details["subject"] == "Plain PLAINSUBJ"


def test_html_only_body_goes_through_markup():
    m = _message()
    m.set_content("<html><head><style>p{}</style></head><body><p>HTMLMARK one</p>"
                  "<script>SCRIPTMARK</script><p>two</p></body></html>", subtype="html")
    out = read_mail(m.as_bytes())
    assert out.text.endswith("\n\nHTMLMARK one\ntwo\n")
    assert "SCRIPTMARK" not in out.text


def test_encoded_word_subject_and_qp_body():
    raw = (
        b"From: =?utf-8?q?J=C3=BCrgen?= <j@example.org>\r\n"
        b"Subject: =?iso-8859-1?q?Gr=FC=DFe?= =?utf-8?b?RU5DTUFSSyDinJM=?=\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"QPMARK caf=C3=A9 soft=\r\nbreak\r\n"
    )
    out = read_mail(raw)
    assert "From: Jürgen <j@example.org>\n" in out.text
    assert "Subject: GrüßeENCMARK ✓\n" in out.text
    assert out.text.endswith("\n\nQPMARK café softbreak\n")


def test_base64_body():
    body = base64.encodebytes("B64MARK ünïcode\n".encode("utf-8"))
    raw = (b"Subject: b64\nContent-Type: text/plain; charset=utf-8\n"
           b"Content-Transfer-Encoding: base64\n\n" + body)
    assert read_mail(raw).text == "Subject: b64\n\nB64MARK ünïcode\n"


@pytest.mark.parametrize("charset", ["x-unknown-charset", "zlib", "us-ascii"])
def test_bad_or_wrong_charset_falls_back(charset):
    raw = (f"Subject: cs\nContent-Type: text/plain; charset={charset}\n"
           "Content-Transfer-Encoding: 8bit\n\n").encode() + "BADCSMARK café\n".encode("utf-8")
    out = read_mail(raw)
    assert out.status == "ok" and out.text.endswith("\n\nBADCSMARK café\n")


def test_cp1252_body_without_charset():
    raw = (b"Subject: cp\nContent-Type: text/plain\nContent-Transfer-Encoding: 8bit\n\n"
           + "CPBODYMARK “quoted”\n".encode("cp1252"))
    assert read_mail(raw).text.endswith("\n\nCPBODYMARK “quoted”\n")


def test_undeclared_legacy_body_is_detected():
    body = "Здравствуйте! Встреча переносится на пятницу, KOIMARK.\n" * 3
    raw = (b"Subject: koi\nContent-Type: text/plain\nContent-Transfer-Encoding: 8bit\n\n"
           + body.encode("koi8-r"))
    assert read_mail(raw).text.endswith("\n\n" + body)


def test_declared_body_charset_checked_against_the_bytes():
    body = "Grüße aus Köln, DECLMARK\n"
    ok = (b"Subject: d\nContent-Type: text/plain; charset=iso-8859-15\n"
          b"Content-Transfer-Encoding: 8bit\n\n" + body.encode("iso8859_15"))
    assert read_mail(ok).text.endswith("\n\n" + body)
    # declared Shift-JIS on windows-1251 bytes that Shift-JIS cannot decode: not used
    ru = "Город Москва — столица России, RUMARK.\n" * 4
    wrong = (b"Subject: w\nContent-Type: text/plain; charset=shift_jis\n"
             b"Content-Transfer-Encoding: 8bit\n\n" + ru.encode("cp1251"))
    assert read_mail(wrong).text.endswith("\n\n" + ru)


def test_attachments_listed_and_text_extracted():
    m = _message()
    m.set_content("Body BODYMARK\n")
    m.add_attachment("attached ATTTEXTMARK\n".encode(), maintype="text", subtype="plain",
                     filename="notes.txt")
    m.add_attachment(bytes(range(256)) * 4, maintype="application", subtype="octet-stream",
                     filename="blob.bin")
    inner = EmailMessage()
    inner["Subject"] = "Inner INNERSUBJ"
    inner.set_content("inner body INNERMARK\n")
    m.add_attachment(inner)
    out = read_mail(m.as_bytes())
    assert out.status == "ok"
    text = out.text
    assert "Body BODYMARK\n[attachment: notes.txt (text/plain, 21 bytes)]\nattached ATTTEXTMARK\n" in text
    assert "[attachment: blob.bin (application/octet-stream, 1024 bytes): not read: " in text
    assert "[attachment: (unnamed) (message/rfc822)]\nSubject: Inner INNERSUBJ\n\ninner body INNERMARK\n" in text
    assert out.result.details["attachments"] == 3


def test_attachment_text_counts_against_the_cap():
    m = _message()
    m.set_content("CAPBODYMARK\n")
    m.add_attachment(("long " * 10_000).encode(), maintype="text", subtype="plain",
                     filename="long.txt")
    out = read_mail(m.as_bytes(), Limits(max_chars=1000))
    assert out.status == "ok" and out.limit == "max_chars"
    assert "CAPBODYMARK" in out.text and "[attachment: long.txt" in out.text
    assert out.text.endswith("max_chars reached: 1000 characters]\n")


def test_defects_become_warnings_but_text_kept():
    raw = (b"Subject: broken DEFECTSUBJ\nMIME-Version: 1.0\n"
           b"Content-Type: multipart/mixed; boundary=\"XYZ\"\n\n"
           b"--XYZ\nContent-Type: text/plain\n\nDEFECTMARK body\n")  # no closing boundary
    out = read_mail(raw)
    assert out.status == "ok" and "DEFECTMARK body" in out.text
    assert any("CloseBoundaryNotFoundDefect" in w for w in out.warnings)


def test_garbage_is_one_clean_verdict():
    for data in (b"", b"\x00\xff" * 1000, b"Content-Type: multipart/mixed\n\n--\n" * 50):
        assert read_mail(data).status in ("ok", "empty", "error")


def test_mail_html_to_text_is_markups():
    assert mail.html_to_text is markup.html_to_text


# ---------------------------------------------------------------------------- real samples


@pytest.mark.parametrize("path, mime, phrases", [
    ("html/wikipedia-consequtive-tables.html", "text/html",
     ["Monatliche Durchschnittstemperaturen und -niederschläge für Chur 1981–2010",
      "Max. Temperatur (°C)\t4,8\t6,4"]),
    ("html/wikipedia-code.html", "text/html",
     ["Pythons Schlüsselwort lambda", '        print("{} + {} = {}".format(x, y, x + y))']),
    ("eml/multipart.eml", "message/rfc822",
     ["Subject: Multi-part boundary", "please see attached",
      "[attachment: tired_boot.FJ010019.jpeg (image/jpeg, 10442 bytes)"]),
    ("eml/sample.eml", "message/rfc822",
     ["Subject: Winter promotions", "Lorem ipsum dolor sit amet",
      "[attachment: nodejs.png (image/png"]),
])
def test_real_samples(path, mime, phrases):
    data = (SAMPLES / path).read_bytes()
    out = read_document(Document(data, Path(path).name, mime), LocalContext())
    assert out.status == "ok", out.error
    for phrase in phrases:
        assert phrase in out.text
