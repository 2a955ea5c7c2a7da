"""Each reader family's Markdown: the structure it finds, parsed back with markdown-it-py; and
the plain text of the same documents, which holds none of that syntax."""

from __future__ import annotations

import pytest

import officegen as og
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import Outcome, read_document, read_nested
from bastion.readers.runtime.context import LocalContext
from test_markdown import blocks, inline_text, links, parse, tables

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
HLINK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"


def read(data: bytes, name: str, mime: str, markdown: bool = True) -> Outcome:
    return read_document(Document(data, name, mime),
                         LocalContext(Limits(name_languages=False), nested=read_nested),
                         markdown=markdown)


def headings(md: str) -> list[tuple[int, str]]:
    toks = parse(md)
    return [(int(t.tag[1]), inline_text([toks[i + 1]])) for i, t in enumerate(toks)
            if t.type == "heading_open"]


def items(md: str) -> list[tuple[int, str]]:
    """(nesting depth, text) of every list item."""
    toks = parse(md)
    out = []
    depth = 0
    for i, t in enumerate(toks):
        if t.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif t.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif t.type == "list_item_open":
            out.append((depth, inline_text([toks[i + 2]])))
    return out


def no_markdown_syntax(text: str) -> None:
    for syntax in ("](", "| --- |", "\n- ", "\\"):
        assert syntax not in text, syntax


# ---------------------------------------------------------------------------- DOCX

STYLES = ('<w:style w:type="paragraph" w:styleId="Titre1"><w:name w:val="heading 1"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="Sub"><w:name w:val="Sub"/>'
          '<w:basedOn w:val="Lvl2"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="Lvl2"><w:name w:val="Custom"/>'
          '<w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>'
          '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>')
NUMBERING = ('<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/>'
             '<w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>'
             '<w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/><w:lvlText w:val="\uf0b7"/></w:lvl>'
             '</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>')


def styled(style: str, text: str) -> str:
    return og.w_p(f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>', text)


def numbered(text: str, ilvl: int) -> str:
    return og.w_p(f'<w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="1"/></w:numPr>'
                  "</w:pPr>", text)


def tc(*paras: str, props: str = "") -> str:
    return "<w:tc>" + (f"<w:tcPr>{props}</w:tcPr>" if props else "") + "".join(
        og.w_p(p) if not p.startswith("<") else p for p in paras) + "</w:tc>"


def test_docx_markdown():
    body = (styled("Title", "Report TITLEMARK")
            + styled("Titre1", "Intro HEADMARK")
            + og.w_p('<w:pPr><w:outlineLvl w:val="2"/></w:pPr>', "Direct outline")
            + styled("Sub", "Inherited level two")
            + og.w_p("See ", '<w:hyperlink r:id="rIdL1"><w:r><w:t>the site</w:t></w:r>'
                     '</w:hyperlink>', " and ",
                     '<w:hyperlink w:anchor="sec2"><w:r><w:t>section two</w:t></w:r>'
                     '</w:hyperlink>', " and ",
                     '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>'
                     ' HYPERLINK "https://field.example/" </w:instrText></w:r><w:r>'
                     '<w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>a field</w:t></w:r>'
                     '<w:r><w:fldChar w:fldCharType="end"/></w:r>', ".")
            + numbered("first", 0) + numbered("inner", 1) + numbered("second", 0)
            + "<w:tbl><w:tr><w:trPr><w:tblHeader/></w:trPr>" + tc("H1") + tc("H2") + tc("H3")
            + "</w:tr><w:tr>" + tc("wide", props='<w:gridSpan w:val="2"/>') + tc("c3")
            + "</w:tr><w:tr>" + tc("x *star* | pipe") + "</w:tr></w:tbl>")
    data = og.docx(body, styles=STYLES, numbering=NUMBERING,
                   part_rels=[("rIdL1", HLINK, "https://site.example/a")])
    out = read(data, "r.docx", DOCX)
    md = out.markdown
    assert headings(md) == [(1, "Report TITLEMARK"), (1, "Intro HEADMARK"), (3, "Direct outline"),
                            (2, "Inherited level two")]
    assert links(md) == [("the site", "https://site.example/a"), ("section two", "#sec2"),
                         ("a field", "https://field.example/")]
    assert items(md) == [(1, "first"), (2, "inner"), (1, "second")]
    assert "1. first\n   - inner\n2. second" in md
    assert tables(md) == [[["H1", "H2", "H3"], ["wide", "", "c3"], ["x *star* | pipe", "", ""]]]
    # the plain text is the same as without the Markdown, and holds none of its syntax
    plain = read(data, "r.docx", DOCX, markdown=False)
    assert plain.text == out.text and plain.markdown is None
    assert out.text.splitlines()[:4] == ["Report TITLEMARK", "Intro HEADMARK", "Direct outline",
                                         "Inherited level two"]
    no_markdown_syntax(out.text)


def test_docx_nested_table_in_its_cell_in_markdown_and_after_its_row_in_the_text():
    nested = ("<w:tbl><w:tr>" + tc("innerA") + tc("innerB") + "</w:tr><w:tr>" + tc("innerC")
              + "</w:tr></w:tbl>")
    table = ("<w:tbl><w:tr>" + tc("c11") + tc("c12 before", nested, "c12 after") + tc("c13")
             + "</w:tr><w:tr>" + tc("c21") + tc(nested) + "</w:tr></w:tbl>")
    out = read(og.docx(table), "t.docx", DOCX)
    assert out.text == ("c11\tc12 before c12 after\tc13\ninnerA\tinnerB\ninnerC\n"
                        "c21\ninnerA\tinnerB\ninnerC\n")
    assert tables(out.markdown) == [[
        ["c11", "c12 before<br>innerA | innerB<br>innerC<br>c12 after", "c13"],
        ["c21", "innerA | innerB<br>innerC", ""]]]


def test_docx_comments_alt_text_headers_and_notes():
    body = (og.w_p("Body", '<w:commentReference w:id="1"/>')
            + og.w_p(og.drawing_run("", descr="a red car")))
    comments = ('<w:comment w:id="1" w:author="Ann"><w:p><w:r><w:t>check *this*</w:t></w:r>'
                '</w:p></w:comment>')
    data = og.docx(body, comments=comments, headers=[og.w_p("Page head")],
                   footnotes='<w:footnote w:id="1"><w:p><w:r><w:t>A note</w:t></w:r></w:p>'
                             '</w:footnote>')
    md = read(data, "c.docx", DOCX).markdown
    assert blocks(md) == ["paragraph_open", "blockquote_open", "paragraph_open",
                          "paragraph_open", "heading_open", "paragraph_open", "heading_open",
                          "paragraph_open"]
    assert "> \\[comment: Ann\\] check \\*this\\*" in md
    assert "*\\[alt text: a red car\\]*" in md
    assert headings(md) == [(2, "header"), (2, "footnotes")]


# ---------------------------------------------------------------------------- XLSX


def test_xlsx_markdown():
    rows = ('<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>'
            '<row r="2"><c r="A2" t="s"><v>2</v></c><c r="C2"><v>3.5</v></c></row>'
            '<row r="4"><c r="B4" t="s"><v>3</v></c></row>')
    data = og.xlsx([("Data | sheet", "sheet1.xml", rows), ("Empty", "sheet2.xml", "")],
                   shared=["Name", "Value", "a|b", "*bold*"])
    out = read(data, "b.xlsx", XLSX)
    md = out.markdown
    assert headings(md) == [(1, "Data | sheet"), (1, "Empty")]
    assert tables(md) == [[["Name", "Value", ""], ["a|b", "", "3.5"], ["", "*bold*", ""]]]
    assert out.text == "# Data | sheet\nName\tValue\na|b\t\t3.5\n\t*bold*\n# Empty\n"
    assert read(data, "b.xlsx", XLSX, markdown=False).text == out.text


# ---------------------------------------------------------------------------- PPTX


def test_pptx_markdown():
    rid = "rIdH"
    run_link = (f'<a:p><a:r><a:rPr><a:hlinkClick r:id="{rid}"/></a:rPr><a:t>the deck</a:t>'
                '</a:r><a:r><a:t> is here</a:t></a:r></a:p>')
    bullets = ('<a:p><a:pPr><a:buChar char="•"/></a:pPr><a:r><a:t>point one</a:t></a:r></a:p>'
               '<a:p><a:pPr lvl="1"><a:buChar char="-"/></a:pPr><a:r><a:t>sub point</a:t>'
               '</a:r></a:p><a:p><a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr><a:r>'
               '<a:t>numbered</a:t></a:r></a:p>')
    table = ('<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tblPr firstRow="1"/>'
             '<a:tr><a:tc><a:txBody><a:p><a:r><a:t>Q</a:t></a:r></a:p></a:txBody></a:tc>'
             '<a:tc><a:txBody><a:p><a:r><a:t>Sales</a:t></a:r></a:p></a:txBody></a:tc></a:tr>'
             '<a:tr><a:tc><a:txBody><a:p><a:r><a:t>Q1</a:t></a:r></a:p></a:txBody></a:tc>'
             '<a:tc><a:txBody><a:p><a:r><a:t>8.2</a:t></a:r></a:p></a:txBody></a:tc></a:tr>'
             '</a:tbl></a:graphicData></a:graphic></p:graphicFrame>')
    data = og.pptx([(og.a_sp("Quarterly TITLEMARK", ph="title") + og.a_sp(run_link, bullets)
                     + table, og.a_sp("speaker words"))])
    members = og.zip_members(data)
    members["ppt/slides/_rels/slide1.xml.rels"] = og.rels(
        ("rIdN", "notesSlide", "../notesSlides/notesSlide1.xml"),
        (rid, HLINK, "https://deck.example/q1"))
    data = og.zip_bytes(members)
    out = read(data, "d.pptx", PPTX)
    md = out.markdown
    assert headings(md) == [(1, "slide 1"), (2, "Quarterly TITLEMARK"), (2, "notes")]
    assert links(md) == [("the deck", "https://deck.example/q1")]
    assert items(md) == [(1, "point one"), (2, "sub point"), (1, "numbered")]
    assert tables(md) == [[["Q", "Sales"], ["Q1", "8.2"]]]
    assert out.text == ("# slide 1\nQuarterly TITLEMARK\nthe deck is here\npoint one\n"
                        "sub point\nnumbered\nQ\tSales\nQ1\t8.2\n## notes\nspeaker words\n")
    assert read(data, "d.pptx", PPTX, markdown=False).text == out.text


# ---------------------------------------------------------------------------- ODF


def test_odt_markdown():
    body = ('<text:h text:outline-level="1">Chapter HEADMARK</text:h>'
            '<text:p>Go to <text:a xlink:href="https://odf.example/">the site</text:a>.</text:p>'
            '<text:list><text:list-item><text:p>one</text:p><text:list><text:list-item>'
            '<text:p>deeper</text:p></text:list-item></text:list></text:list-item>'
            '<text:list-item><text:p>two</text:p></text:list-item></text:list>'
            '<table:table><table:table-header-rows><table:table-row><table:table-cell>'
            '<text:p>H</text:p></table:table-cell><table:table-cell><text:p>V</text:p>'
            '</table:table-cell></table:table-row></table:table-header-rows><table:table-row>'
            '<table:table-cell><text:p>k</text:p></table:table-cell><table:table-cell>'
            '<text:p>v</text:p></table:table-cell></table:table-row></table:table>')
    data = og.odf("text", body)
    out = read(data, "b.odt", "application/vnd.oasis.opendocument.text")
    md = out.markdown
    assert headings(md) == [(1, "Chapter HEADMARK")]
    assert links(md) == [("the site", "https://odf.example/")]
    assert items(md) == [(1, "one"), (2, "deeper"), (1, "two")]
    assert tables(md) == [[["H", "V"], ["k", "v"]]]
    no_markdown_syntax(out.text)


@pytest.mark.parametrize("kind,name", [("spreadsheet", "s.ods"), ("presentation", "p.odp")])
def test_ods_and_odp_markdown(kind, name):
    if kind == "spreadsheet":
        body = ('<table:table table:name="Sheet A"><table:table-row><table:table-cell>'
                '<text:p>x</text:p></table:table-cell><table:table-cell><text:p>y</text:p>'
                '</table:table-cell></table:table-row></table:table>')
        want_heads, want_tables = [(1, "Sheet A")], [[["x", "y"]]]
    else:
        body = ('<draw:page><draw:frame presentation:class="title"><draw:text-box>'
                '<text:p>Deck title</text:p></draw:text-box></draw:frame><draw:frame>'
                '<draw:text-box><text:p>body words</text:p></draw:text-box></draw:frame>'
                '</draw:page>')
        want_heads, want_tables = [(1, "slide 1"), (2, "Deck title")], []
    out = read(og.odf(kind, body), name, f"application/vnd.oasis.opendocument.{kind}")
    assert headings(out.markdown) == want_heads
    assert tables(out.markdown) == want_tables


# ---------------------------------------------------------------------------- RTF, CSV, text


def test_rtf_markdown():
    rtf = (rb"{\rtf1\ansi{\stylesheet{\s1\outlinelevel0 heading 1;}}"
           rb"\pard\s1\outlinelevel0 Chapter ONE\par"
           rb"\pard Body with a {\field{\*\fldinst HYPERLINK \"https://rtf.example/\"}"
           rb"{\fldrslt the link}} here.\par"
           rb"\trowd\cellx1000\cellx2000\pard\intbl a1\cell b1\cell\row"
           rb"\trowd\cellx1000\cellx2000\pard\intbl a2\cell b2\cell\row"
           rb"\pard After the table {\*\atnauthor Ann}{\*\annotation note}\par}")
    out = read(rtf, "d.rtf", "application/rtf")
    md = out.markdown
    assert headings(md) == [(1, "Chapter ONE")]
    assert links(md) == [("the link", "https://rtf.example/")]
    assert tables(md) == [[["a1", "b1"], ["a2", "b2"]]]
    assert blocks(md)[-2:] == ["blockquote_open", "paragraph_open"]
    plain = read(rtf, "d.rtf", "application/rtf", markdown=False)
    assert plain.text == out.text == ("Chapter ONE\nBody with a the link here.\na1\tb1\na2\tb2\n"
                                      "After the table \n[comment: Ann] note\n")


def test_csv_is_a_table_and_text_keeps_its_kind():
    out = read(b"name,qty\nwidget | x,3\n*star*,\n", "t.csv", "text/csv")
    assert tables(out.markdown) == [[["name", "qty"], ["widget | x", "3"], ["*star*", ""]]]
    code = read(b"def f(x):\n    return x * 2\n", "f.py", "text/x-python")
    assert code.markdown == "```python\ndef f(x):\n    return x * 2\n```\n"
    doc = b"# Title\n\nSome *emphasis* and [a link](https://x.example).\n"
    own = read(doc, "r.md", "text/markdown")
    assert own.markdown == doc.decode() and own.text == doc.decode()
    plain = read(b"1. not a list\n# not a heading\n*not emphasis*\n", "n.txt", "text/plain")
    assert blocks(plain.markdown) == ["paragraph_open"]


# ---------------------------------------------------------------------------- e-mail, archives


def test_email_markdown():
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"] = "Ann <ann@example.com>"
    msg["Subject"] = "Plans"
    msg.set_content("plain body")
    msg.add_alternative("<h2>Agenda</h2><ul><li>one</li><li>two</li></ul>"
                        "<p><a href='https://mail.example/'>site</a></p>", subtype="html")
    msg.add_attachment("<h1>Inner HEADMARK</h1><table><tr><td>x</td></tr></table>".encode(),
                       maintype="text", subtype="html", filename="inner.html")
    out = read(bytes(msg), "m.eml", "message/rfc822")
    md = out.markdown
    # the plain text shows the text body; the Markdown its HTML alternative's structure
    assert md.startswith("From: Ann \\<ann@example.com>\\\nSubject: Plans\n\n## Agenda")
    assert "plain body" in out.text and "Agenda" not in out.text
    assert headings(md) == [(2, "Agenda"), (1, "Inner HEADMARK")]
    assert items(md) == [(1, "one"), (1, "two")] and links(md) == [("site",
                                                                   "https://mail.example/")]
    assert tables(md) == [[["x"]]]
    no_markdown_syntax(out.text)


def test_archive_members_keep_their_markdown():
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.html", "<h1>Member HEADMARK</h1><ul><li>one</li></ul>")
        zf.writestr("b.csv", "k,v\n1,2\n")
        zf.writestr("c.docx", og.docx(styled("Titre1", "Word heading"), styles=STYLES))
    out = read(buf.getvalue(), "a.zip", "application/zip")
    md = out.markdown
    assert headings(md) == [(1, "Member HEADMARK"), (1, "Word heading")]
    assert items(md) == [(1, "one")]
    assert tables(md) == [[["k", "v"], ["1", "2"]]]
    assert "\\=== member: a.html ===" in md
    assert read(buf.getvalue(), "a.zip", "application/zip", markdown=False).text == out.text


# ---------------------------------------------------------------------------- PDF

pdfgen = pytest.importorskip("pdfgen")


def test_pdf_outline_headings_pages_and_annotations():
    out = read(pdfgen.make_nested_outline(), "o.pdf", "application/pdf")
    md = out.markdown
    # the outline's entries as headings at their pages (no line holds their title: in the
    # Markdown alone), a page mark before each page after the first
    assert headings(md) == [(1, "Introduction"), (1, "Part One"), (2, "Section 1.1"),
                            (2, "Section 1.2"), (3, "Deep item"), (1, "Appendix é")]
    assert [f"<!-- page {n} -->" in md for n in (2, 3, 4)] == [True] * 3
    assert md.index("# Part One") < md.index("Chapter page 2") < md.index("<!-- page 3 -->")
    assert out.text == read(pdfgen.make_nested_outline(), "o.pdf", "application/pdf",
                            markdown=False).text
    noted = read(pdfgen.make_annotated("Body words", [("Text", "check this")]), "a.pdf",
                 "application/pdf")
    assert blocks(noted.markdown) == ["paragraph_open"] + ["blockquote_open",
                                                            "paragraph_open"] * 2
    assert "> \\[annotation\\] check this" in noted.markdown


def test_pdf_heading_on_its_line():
    b = pdfgen.PdfBuilder()
    b.add_text_page("2.3 Selecting Compilers")
    b.add_outline([pdfgen.OutlineItem("Selecting Compilers", 0)])
    md = read(b.build(), "h.pdf", "application/pdf").markdown
    assert headings(md) == [(1, "2.3 Selecting Compilers")]


def test_pdf_values_are_frozen():
    import dataclasses

    from bastion.readers.pdf.pages import PageSource

    out = read(pdfgen.make_nested_outline(), "o.pdf", "application/pdf")
    source = out.result.page_sources[0]
    assert isinstance(source, PageSource)
    with pytest.raises(dataclasses.FrozenInstanceError):
        source.source = "ocr"  # type: ignore[misc]
    assert out.result.outline[0].to_json() == {"title": "Introduction", "page": 1, "level": 1}


# ---------------------------------------------------------------------------- the read context


def test_no_reader_sets_an_undeclared_attribute_on_the_context():
    """What a reading keeps is declared (``ReadState``): the context refuses anything else,
    and no reader module assigns to an attribute of a context."""
    import ast
    from pathlib import Path

    ctx = LocalContext(Limits())
    with pytest.raises(AttributeError):
        ctx.depth = 1  # type: ignore[attr-defined]
    root = Path(__file__).resolve().parent.parent / "readers"
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.parent.name == "runtime":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for t in targets:
                if isinstance(t, ast.Attribute) and (
                        (isinstance(t.value, ast.Name) and t.value.id == "ctx")
                        or (isinstance(t.value, ast.Attribute) and t.value.attr == "ctx")):
                    found.append(f"{path.relative_to(root)}:{node.lineno} ctx.{t.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" \
                    and node.args and getattr(node.args[0], "id", "") == "ctx":
                found.append(f"{path.relative_to(root)}:{node.lineno} setattr(ctx, …)")
    assert found == []
