"""A reader's result is a frozen, typed value (readers/result.py), mapped field for field to the
document's verdict and sidecar: no dict of agreed keys between the reader and the record."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bastion.readers.errors import CapReached
from bastion.readers.metadata import DocMeta
from bastion.readers.pdf.pages import OutlineEntry, PageSource
from bastion.readers.result import SIDECAR, ReadResult
from bastion.readers.runtime.verdict import Verdict


def test_a_result_is_frozen_and_the_sidecar_names_its_fields() -> None:
    result = ReadResult("pdfium", pages=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.pages = 3  # type: ignore[misc]
    names = {f.name for f in dataclasses.fields(ReadResult)}
    assert set(SIDECAR) <= names


def test_the_sidecar_holds_the_fields_set_in_its_order_as_json() -> None:
    meta = DocMeta.make(title="Report", authors=["Ann"])
    source = PageSource(page=1, source="native", engine="pdfium", version=None)
    result = ReadResult("pdfium", pages=2, outline=(OutlineEntry("Intro", 1, 1),),
                        page_sources=(source,), metadata=meta, members={"ok": 1},
                        details={"charset": "x"})
    side = result.sidecar()
    assert list(side) == ["pages", "outline", "page_sources", "metadata"]  # SIDECAR's order
    assert side == {"pages": 2, "outline": [{"title": "Intro", "page": 1, "level": 1}],
                    "page_sources": [{"page": 1, "source": "native", "engine": "pdfium",
                                      "version": None}],
                    "metadata": meta.to_json()}
    assert json.loads(json.dumps(side)) == side  # plain JSON, as the worker sends it
    assert ReadResult("text").sidecar() == {}


def test_the_verdict_is_the_result_field_for_field() -> None:
    meta = DocMeta.make(title="From metadata", authors=["Ann", ""], subject="S", language="de")
    result = ReadResult("zip", pages=3, pages_ocr=1, metadata=meta, members={"ok": 2, "empty": 1},
                        encoding_source="bom", languages=(("de", 0.9),),
                        ocr_languages=("eng", "deu", "eng"), ocr_missing=("spa",),
                        ocr_packs={"eng": "sha256:e", "deu": None})
    v = Verdict.of_outcome("ok", chars=10, extractor="zip", error=None, error_kind=None,
                           limit=None, result=result, warnings=("w",), tools_used=("7z",))
    assert (v.pages, v.pages_ocr, v.encoding_source) == (3, 1, "bom")
    assert v.title == "From metadata" and v.authors == ("Ann",) and v.subject == "S"
    assert v.declared_language == "de" and v.languages == (("de", 0.9),)
    assert list(v.members or {}) == ["empty", "ok"]  # sorted, as the store keeps them
    assert v.ocr_languages == ("deu", "eng") and v.ocr_missing == ("spa",)
    assert v.ocr_packs == {"deu": None, "eng": "sha256:e"} and v.warnings == ("w",)
    own_title = dataclasses.replace(result, title="Own")
    assert Verdict.of_outcome("ok", chars=1, extractor="zip", error=None, error_kind=None,
                              limit=None, result=own_title, warnings=()).title == "Own"
    empty = Verdict.of_outcome("empty", chars=0, extractor="zip", error="none", error_kind=None,
                               limit=None, result=result, warnings=())
    assert empty.languages == () and empty.chars == 0  # languages only of a text kept


def test_a_cap_carries_the_result_as_far_as_it_got() -> None:
    cap = CapReached("max_chars", "16 characters")
    assert cap.result is None and cap.extractor is None
    cap.extractor = "email"
    cap.put_over(ReadResult("", metadata=DocMeta.make(title="T"), details={"a": 1}))
    assert cap.extractor == "email" and cap.result is not None
    assert cap.result.metadata == DocMeta.make(title="T") and cap.result.details == {"a": 1}
    inner = CapReached("max_chars", result=ReadResult("pdfium", pages=4, title=None))
    inner.put_over(ReadResult("email", title="Subject", pages=1))
    assert inner.result == ReadResult("pdfium", pages=4, title="Subject")  # what it set wins
    kept = CapReached("max_chars")
    kept.extractor = "csv:utf-8"
    kept.keep(ReadResult("csv:ascii", encoding_source="utf-8"))
    assert kept.result == ReadResult("csv:utf-8", encoding_source="utf-8")
    own = CapReached("max_chars", result=ReadResult("x", pages=1))
    own.keep(ReadResult("y", encoding_source="utf-8"))  # a nested reader's facts stay
    assert own.result == ReadResult("x", pages=1)


def test_metadata_gives_the_title_only_when_the_reader_set_none() -> None:
    meta = DocMeta.make(title="Declared")
    assert ReadResult("html").with_metadata(meta).title == "Declared"
    assert ReadResult("html", title="Page").with_metadata(meta).title == "Page"
    assert ReadResult("html").with_metadata(DocMeta()).metadata is None  # nothing declared
