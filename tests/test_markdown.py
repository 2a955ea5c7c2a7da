"""Structure as a second rendering: the event stream, the Markdown renderer, the two sinks.

Every Markdown written here is parsed back with markdown-it-py (CommonMark, with GFM tables
switched on), so an assertion says what structure a reader of the Markdown gets, not which
characters were written.
"""

from __future__ import annotations

from pathlib import Path

import markdown_it
import pytest
from hypothesis import given, settings, strategies as st

from bastion.readers.base import Document, Limits, TextSink
from bastion.readers.detect import detect_bytes
from bastion.readers.dispatch import BUILTIN, read_document
from bastion.readers.errors import CapReached
from bastion.readers.render.events import (Caption, Cell, Code, Fragment, Heading, LineBreak,
                                           Link, ListItem, Note, PageBreak, Paragraph, Row,
                                           Table, plain_of)
from bastion.readers.render.markdown import escape
from bastion.readers.render.sink import MarkdownSink
from bastion.readers.runtime.context import LocalContext

SAMPLES = Path(__file__).parent / "samples"
PARSER = markdown_it.MarkdownIt("commonmark").enable("table")


def parse(md: str) -> list:
    return PARSER.parse(md)


def blocks(md: str) -> list[str]:
    """The block tokens that open something (paragraph_open, heading_open, table_open …)."""
    return [t.type for t in parse(md) if t.nesting == 1]


def inline_text(tokens: list) -> str:
    out = []
    for t in tokens:
        if t.type != "inline":
            continue
        for c in t.children or []:
            if c.type in ("text", "code_inline"):
                out.append(c.content)
            elif c.type in ("softbreak", "hardbreak"):
                out.append("\n")
    return "".join(out)


def tables(md: str) -> list[list[list[str]]]:
    """Each table as rows of cell texts (header row first), as the parser reads it."""
    found: list[list[list[str]]] = []
    row: list[str] | None = None
    toks = parse(md)
    for i, t in enumerate(toks):
        if t.type == "table_open":
            found.append([])
        elif t.type == "tr_open":
            row = []
        elif t.type == "tr_close" and row is not None:
            found[-1].append(row)
            row = None
        elif t.type == "inline" and row is not None and toks[i - 1].type in ("th_open",
                                                                               "td_open"):
            row.append(inline_text([t]) if "\\" in t.content else t.content)
    return found


def links(md: str) -> list[tuple[str, str]]:
    out = []
    for t in parse(md):
        if t.type != "inline":
            continue
        children = t.children or []
        for i, c in enumerate(children):
            if c.type == "link_open":
                text = ""
                for d in children[i + 1:]:
                    if d.type == "link_close":
                        break
                    text += d.content
                out.append((text, c.attrs["href"]))
    return out


def sink_of(events: list, max_chars: int = 1 << 20) -> MarkdownSink:
    sink = MarkdownSink(max_chars)
    for op, value in events:
        getattr(sink, op)(value) if op != "close" else sink.close()
    return sink


# ---------------------------------------------------------------------------- escaping

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
               | st.sampled_from(list("\\`*_[]<>|~#+-=!&;:()0123456789.\n \t")), max_size=80)


def _words(s: str) -> str:
    return "".join(s.split())


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_text_in_a_paragraph_stays_text(text):
    """No character of the text becomes syntax: one paragraph, its text the text."""
    sink = sink_of([("open", Paragraph()), ("write", text), ("close", None)])
    md = sink.markdown()
    if not text.strip():
        assert md == ""
        return
    toks = parse(md)
    assert {t.type for t in toks if t.nesting == 1} == {"paragraph_open"}, md
    assert not any(c.type not in ("text", "softbreak", "hardbreak")
                   for t in toks if t.type == "inline" for c in t.children or []), md
    assert _words(inline_text(toks)) == _words(text)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT)
def test_text_in_a_heading_and_a_cell_stays_text(head, cell):
    sink = sink_of([("open", Heading(2)), ("write", head), ("close", None),
                    ("open", Table()), ("open", Row()), ("open", Cell()), ("write", cell),
                    ("close", None), ("open", Cell()), ("write", "x"), ("close", None),
                    ("close", None), ("close", None)])
    md = sink.markdown()
    toks = parse(md)
    if head.strip():
        assert toks[0].type == "heading_open" and toks[0].tag == "h2", md
        assert _words(toks[1].content.replace("\\", "")) or True
        heading_text = inline_text(toks[1:2])
        assert _words(heading_text) == _words(head), md
    [table] = tables(md)
    assert len(table) == 1 and len(table[0]) == 2, md  # one row, two cells: no | got through
    cell_tokens = [t for t in toks if t.type == "inline"][-2]
    got = inline_text([cell_tokens]).replace("<br>", "")
    assert _words(got) == _words(cell.replace("\n", "")), md


def test_escape_examples():
    assert escape("a*b_c d_ [x](y) <b> | ~~s~~ `c` \\ &amp; &") == (
        "a\\*b_c d\\_ \\[x\\](y) \\<b> \\| \\~\\~s\\~\\~ \\`c\\` \\\\ \\&amp; &")
    md = sink_of([("write", "# not\n- a list\n1. nor this\n> quote\n===")]).markdown()
    assert blocks(md) == ["paragraph_open"]


# ---------------------------------------------------------------------------- blocks


def test_headings_lists_links_and_tables():
    events = [("open", Heading(1)), ("write", "Top"), ("close", None),
              ("open", Heading(9)), ("write", "Deep C#"), ("close", None),
              ("open", Paragraph()), ("write", "See "), ("open", Link("https://a.example/p q")),
              ("write", "the page"), ("close", None), ("write", " now"), ("close", None)]
    for level, label, text in ((0, "1.", "one"), (0, "2)", "two"), (1, "a.", "two-a"),
                               (3, "•", "deep"), (0, "3.", "three")):
        events += [("open", ListItem(level, label)), ("write", text), ("close", None)]
    md = sink_of(events).markdown()
    toks = parse(md)
    heads = [(t.tag, toks[i + 1].content) for i, t in enumerate(toks) if t.type == "heading_open"]
    assert heads == [("h1", "Top"), ("h6", "Deep C#")]
    assert links(md) == [("the page", "https://a.example/p%20q")]
    items = [(sum(1 for x in toks[:i] if x.type.endswith("list_open"))
              - sum(1 for x in toks[:i] if x.type.endswith("list_close")), toks[i + 2].content)
             for i, t in enumerate(toks) if t.type == "list_item_open"]
    assert items == [(1, "one"), (1, "two"), (2, "a. two-a"), (3, "deep"), (1, "three")]
    assert "1. one\n2. two\n" in md


def test_ragged_and_merged_tables_stay_valid():
    events = [("open", Table())]
    rows = [[("a", 1, 1), ("b", 1, 1)],
            [("wide", 3, 1)],
            [("tall", 1, 2), ("x", 1, 1)],
            [("y", 1, 1)],
            [("1", 1, 1), ("2", 1, 1), ("3", 1, 1), ("4", 1, 1)]]
    for row in rows:
        events.append(("open", Row()))
        for text, colspan, rowspan in row:
            events += [("open", Cell(colspan, rowspan)), ("write", text), ("close", None)]
        events.append(("close", None))
    events.append(("close", None))
    md = sink_of(events).markdown()
    lines = md.strip().split("\n")
    assert len({line.count(" | ") for line in lines}) == 1, md  # every row as wide
    assert tables(md) == [[["a", "b", "", ""], ["wide", "", "", ""], ["tall", "x", "", ""],
                           ["", "y", "", ""], ["1", "2", "3", "4"]]]


def test_a_table_inside_a_cell_is_flattened_into_it():
    events = [("open", Table()), ("open", Row()), ("open", Cell()), ("write", "before"),
              ("open", Table())]
    for row in (["n1", "n2"], ["n3"]):
        events.append(("open", Row()))
        for text in row:
            events += [("open", Cell()), ("write", text), ("close", None)]
        events.append(("close", None))
    events += [("close", None), ("close", None), ("open", Cell()), ("write", "z"),
               ("close", None), ("close", None), ("close", None)]
    md = sink_of(events).markdown()
    assert tables(md) == [[["before<br>n1 | n2<br>n3", "z"]]]


def test_unsafe_link_targets_keep_their_text_only():
    for target in ("javascript:alert(1)", "file:///etc/passwd", "data:text/html,x", ""):
        md = sink_of([("open", Paragraph()), ("open", Link(target)), ("write", "click"),
                      ("close", None), ("close", None)]).markdown()
        assert md == "click\n" and links(md) == []
    md = sink_of([("open", Paragraph()), ("open", Link("mailto:a@b.c")), ("write", "mail"),
                  ("close", None), ("open", Link("#sec-2")), ("write", " two"), ("close", None),
                  ("close", None)]).markdown()
    assert links(md) == [("mail", "mailto:a@b.c"), ("two", "#sec-2")]


def test_notes_captions_code_pages_and_fragments():
    md = sink_of([("open", Paragraph()), ("write", "body"), ("close", None),
                  ("open", Note("comment")), ("write", "[comment: Ann] check"), ("close", None),
                  ("open", Caption("alt text")), ("write", "a cat"), ("close", None),
                  ("mark", PageBreak(2)),
                  ("open", Code()), ("write", "x = ```1```\n  y *= 2"), ("close", None),
                  ("mark", Fragment("## Inner\n\n| a | b |\n| --- | --- |\n| 1 | 2 |"))]
                 ).markdown()
    assert blocks(md) == ["paragraph_open", "blockquote_open", "paragraph_open",
                          "paragraph_open", "heading_open", "table_open", "thead_open",
                          "tr_open", "th_open", "th_open", "tbody_open", "tr_open", "td_open",
                          "td_open"]
    assert "<!-- page 2 -->" in md and "````\nx = ```1```\n  y *= 2\n````" in md
    assert "*a cat*" in md


def test_a_block_between_table_rows_follows_the_table():
    md = sink_of([("open", Table()), ("open", Row()), ("open", Cell()), ("write", "a"),
                  ("close", None), ("close", None), ("open", Note()), ("write", "note on a"),
                  ("close", None), ("open", Row()), ("open", Cell()), ("write", "b"),
                  ("close", None), ("close", None), ("close", None)]).markdown()
    assert tables(md) == [[["a"], ["b"]]]
    assert blocks(md)[-2:] == ["blockquote_open", "paragraph_open"]


def test_unbalanced_streams_still_render():
    md = sink_of([("close", None), ("open", Cell()), ("write", "lonely"), ("open", Paragraph()),
                  ("write", "x"), ("open", Table()), ("open", Row())]).markdown()
    assert tables(md) == [[["lonely<br>x"]]]
    assert sink_of([("close", None), ("close", None)]).markdown() == ""


def test_a_layout_table_is_written_as_its_blocks():
    """A single column whose cells hold structure (a page laid out in a table: a heading, a
    list) is written as the blocks it holds; a single column of values stays a table."""
    def one_column(*cells):
        events = [("open", Table())]
        for cell in cells:
            events += [("open", Row()), ("open", Cell())] + cell + [("close", None),
                                                                      ("close", None)]
        return events + [("close", None)]

    md = sink_of(one_column([("open", Heading(2)), ("write", "News"), ("close", None)],
                            [("open", ListItem()), ("write", "one"), ("close", None),
                             ("open", ListItem()), ("write", "two"), ("close", None)],
                            [("write", "plain * text")])).markdown()
    assert md == "## News\n\n- one\n- two\n\nplain \\* text\n"
    assert blocks(md) == ["heading_open", "bullet_list_open", "list_item_open",
                          "paragraph_open", "list_item_open", "paragraph_open",
                          "paragraph_open"]
    data = sink_of(one_column([("write", "10")], [("write", "20")])).markdown()
    assert tables(data) == [[["10"], ["20"]]]


def test_line_breaks_are_hard_breaks_in_blocks_and_br_in_cells():
    md = sink_of([("open", Paragraph()), ("write", "one"), ("mark", LineBreak()),
                  ("write", "two\nthree"), ("close", None), ("open", Table()), ("open", Row()),
                  ("open", Cell()), ("write", "c1\nc2"), ("close", None), ("close", None),
                  ("close", None)]).markdown()
    toks = parse(md)
    assert [c.type for c in toks[1].children].count("hardbreak") == 2
    assert tables(md) == [[["c1<br>c2"]]]


def test_a_big_table_is_written_as_it_goes():
    from bastion.readers.render import markdown as mdmod

    events = [("open", Table())]
    for i in range(mdmod.TABLE_ROWS + 10):
        events.append(("open", Row()))
        for j in range(2 if i < mdmod.TABLE_ROWS else 3):
            events += [("open", Cell()), ("write", f"r{i}c{j}"), ("close", None)]
        events.append(("close", None))
    events.append(("close", None))
    md = sink_of(events).markdown()
    [table] = tables(md)
    assert len(table) == mdmod.TABLE_ROWS + 10 and {len(r) for r in table} == {2}
    assert table[-1] == [f"r{mdmod.TABLE_ROWS + 9}c0", f"r{mdmod.TABLE_ROWS + 9}c1 | "
                         f"r{mdmod.TABLE_ROWS + 9}c2"]


# ---------------------------------------------------------------------------- the two sinks


def test_the_budget_cuts_both_renderings_at_the_same_character():
    def run(sink: TextSink) -> None:
        sink.open(Heading(1))
        sink.layout("# ")
        sink.write("Title")
        sink.close()
        sink.layout("\n")
        sink.open(Paragraph())
        sink.write("0123456789" * 3)
        sink.close()

    plain, both = TextSink(20), MarkdownSink(20)
    for sink in (plain, both):
        with pytest.raises(CapReached):
            run(sink)
    assert plain.getvalue() == both.getvalue() == "# Title\n012345678901"
    both.end_note("[bastion: text truncated, max_chars reached]")
    assert both.markdown() == "# Title\n\n012345678901\n\n\\[bastion: text truncated, " \
                              "max_chars reached\\]\n"


def test_layout_is_plain_only_and_md_markdown_only():
    sink = sink_of([("open", Paragraph()), ("layout", "1) "), ("write", "text"),
                    ("md", " (only here)"), ("close", None)])
    assert sink.getvalue() == "1) text"
    assert sink.markdown() == "text (only here)\n"
    assert plain_of([(1, "a"), (0, "b"), (2, "c"), (3, Paragraph())]) == "ab"


def _read(path: Path, markdown: bool):
    data = path.read_bytes()
    mime = detect_bytes(data, path.name)
    reader = BUILTIN.select(mime, path.name)
    if reader is None or reader.name == "ocr":
        return None
    return read_document(Document(data, path.name, mime),
                         LocalContext(Limits(name_languages=False), {}), reader,
                         markdown=markdown)


@pytest.mark.parametrize("path", sorted(p for p in SAMPLES.rglob("*") if p.is_file()),
                         ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_reads_to_the_same_plain_text_with_markdown(path):
    """The plain text of a document is the same whether its Markdown is rendered or not (the
    store's text never depends on the rendering), and the Markdown parses."""
    plain = _read(path, False)
    if plain is None:
        pytest.skip("no built-in reader without tools")
    both = _read(path, True)
    assert (both.status, both.text, both.limit, both.error, both.extractor) == (
        plain.status, plain.text, plain.limit, plain.error, plain.extractor)
    assert (both.markdown is not None) == (both.status == "ok")
    if both.markdown:
        parse(both.markdown)
        assert both.markdown.endswith("\n")


# ---------------------------------------------------------------------------- HTML


def read_html(html: str, markdown: bool = True):
    return read_document(Document(html.encode(), "p.html", "text/html"),
                         LocalContext(Limits(name_languages=False)), markdown=markdown)


def test_html_to_markdown():
    page = ("<html><head><title>T</title></head><body><h1>HEADMARK</h1><p>see <a "
            "href='https://x.example/'>LINKMARK</a> and a * star</p><ul><li>ITEM1<li>ITEM2"
            "<ol><li>SUB</ol></ul><table><thead><tr><th>H1<th>H2</thead><tr><td>C1<td>C2"
            "</table><h2>Second</h2><pre>  code\n  block</pre></body></html>")
    out = read_html(page)
    md = out.markdown
    assert "# HEADMARK" in md and "- ITEM1" in md and "| H1 | H2 |" in md and "| --- |" in md
    assert links(md) == [("LINKMARK", "https://x.example/")]
    toks = parse(md)
    assert [t.tag for t in toks if t.type == "heading_open"] == ["h1", "h2"]
    assert tables(md) == [[["H1", "H2"], ["C1", "C2"]]]
    assert [t.type for t in toks if t.type.endswith("list_open")] == ["bullet_list_open",
                                                                       "ordered_list_open"]
    assert "```\n  code\n  block\n```" in md
    plain = read_html(page, markdown=False)
    assert plain.markdown is None and plain.text == out.text
    for syntax in ("# ", "- ", "|", "](", "```"):
        assert syntax not in out.text


def test_html_implied_end_tags_and_spans():
    md = read_html("<p>one<p>two<table><tr><td rowspan=2>R<td>a<tr><td>b</table>"
                   "<ul><li>x<li>y</ul><div>d1</div><div>d2</div>").markdown
    assert tables(md) == [[["R", "a"], ["", "b"]]]
    assert blocks(md).count("paragraph_open") == 6  # one, two, x, y, d1, d2


NODES = st.sampled_from([Heading(1), Heading(3), Paragraph(), ListItem(0, "1."), ListItem(2, ""),
                         Table(), Row(), Row(True), Cell(), Cell(2, 3), Link("https://x.example"),
                         Link("javascript:x"), Caption(), Code("py"), Note()])
OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), TEXT), st.tuples(st.just("layout"), TEXT),
    st.tuples(st.just("md"), TEXT), st.tuples(st.just("open"), NODES),
    st.tuples(st.just("close"), st.none()),
    st.tuples(st.just("mark"), st.sampled_from([PageBreak(2), LineBreak(),
                                                Fragment("## x\n\n| a |\n| --- |")]))),
    max_size=40)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_any_stream_renders_to_markdown_that_parses(ops):
    """Whatever order a reader's events come in (a cap cuts a table, a reader closes more
    than it opened), the renderer writes Markdown, and the plain text is the text and layout
    characters."""
    sink = MarkdownSink(1 << 20)
    for op, value in ops:
        getattr(sink, op)(value) if op != "close" else sink.close()
    md = sink.markdown()
    parse(md)
    assert sink.getvalue() == "".join(v for op, v in ops if op in ("write", "layout"))
    widths: set[int] = set()
    for line in md.split("\n") + [""]:  # every table's lines as wide as its header
        if line.startswith("| ") and line.endswith(" |"):
            widths.add(line.count(" | "))
        else:
            assert len(widths) <= 1, md
            widths = set()
