"""Text classes the readers used to miss, each found on real documents (issue 35): list
numbers of numbering overrides and restarts, documents inside embedded documents, ODP
master-page headers and footers, ODF drawing shapes and their titles/descriptions, spreadsheet
dates and times as their cell format shows them, PDF form field values."""

from __future__ import annotations

from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import Outcome, read_document
from bastion.readers.runtime.context import LocalContext
from tests import officegen as og

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def read(data: bytes, name: str, mime: str) -> Outcome:
    return read_document(Document(data, name, mime), LocalContext(Limits()))


def lines(out: Outcome) -> list[str]:
    assert out.status == "ok", (out.status, out.error)
    return out.text.splitlines()


def numbered(text: str, num: str, ilvl: int = 0) -> str:
    return og.w_p(f'<w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num}"/>'
                  "</w:numPr></w:pPr>", text)


NUMBERING = (
    '<w:abstractNum w:abstractNumId="0">'
    '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
    '<w:lvlText w:val="%1)"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/>'
    '<w:lvlText w:val="%2."/></w:lvl></w:abstractNum>'
    '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
    # a restarted list at 7 (Word's "Restart numbering" / "Set numbering value")
    '<w:num w:numId="3"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0">'
    '<w:startOverride w:val="7"/></w:lvlOverride></w:num>'
    # a restart that sets the second level's value, not the first's
    '<w:num w:numId="5"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="1">'
    '<w:startOverride w:val="5"/></w:lvlOverride></w:num>'
)


def test_docx_numbering_overrides_and_restarts_number_as_word_does() -> None:
    body = (numbered("one", "1") + numbered("two", "1")
            + numbered("seven", "3") + numbered("eight", "3")
            + numbered("three", "1")  # back in the first list: it goes on where it was
            + numbered("fresh", "5") + numbered("echo", "5", 1) + numbered("foxtrot", "5", 1)
            + numbered("second", "5"))
    out = read(og.docx(body, numbering=NUMBERING), "n.docx", DOCX)
    assert lines(out) == ["1) one", "2) two", "7) seven", "8) eight", "3) three",
                          "1) fresh", "e. echo", "f. foxtrot", "2) second"]
