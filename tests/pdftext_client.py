"""The parent's side of the ``bastion pdftext`` protocol (:func:`bastion.readers.pdf.engines.pdftext_main`).

Only the tests run a ``pdftext`` child and read its lines back: the worker reads PDFs in its
own process.  :func:`run_pdftext` runs one with a deadline and an output cap;
:func:`parse_pdftext_output` turns its exit code and lines into a :class:`PdfDoc` or the named
error a reader would raise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bastion.readers.errors import CorruptDocument, EncryptedDocument, ReaderError, ToolFailed
from bastion.readers.pdf.engines import ENCRYPTED, OVER_OUTPUT, TIMED_OUT
from bastion.readers.pdf.reader import NO_TEXT_LAYER
from bastion.readers.runtime.toolcall import run_tool


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


@dataclass
class PdfDoc:
    """A document as the parent reads it back from the child's lines."""

    pages: int  # in the document, not only those extracted
    title: str | None
    outline: list[dict[str, Any]]
    texts: list[str]  # text of pages 1…, "" for a failed page
    failed: dict[int, str]  # page number -> error
    empty_reason: str | None = None  # NO_TEXT_LAYER when every extracted page is blank


def parse_pdftext_output(stdout: bytes, returncode: int, stderr: bytes) -> PdfDoc:
    """The parent's side of the protocol: exit code and lines to a :class:`PdfDoc` or an error."""
    if returncode == 3:
        raise EncryptedDocument(ENCRYPTED)
    why = _first_line(stderr)
    if returncode != 0:
        if not why:
            why = (f"killed by signal {-returncode}" if returncode < 0
                   else f"pdftext exit {returncode}")
        raise CorruptDocument(f"unreadable PDF: {why}")
    try:
        lines = stdout.decode("utf-8").splitlines()
        meta = json.loads(lines[0])["meta"]
        doc = PdfDoc(int(meta["pages"]), meta.get("title") or None, list(meta["outline"]),
                     [], {})
        for n, line in enumerate(lines[1:], 1):
            event = json.loads(line)
            if event["page"] != n:
                raise ValueError(f"page {event['page']} out of order")
            if "error" in event:
                doc.failed[n] = str(event["error"])
                doc.texts.append("")
            else:
                doc.texts.append(str(event["text"]))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise CorruptDocument(f"unreadable PDF: {why or f'bad pdftext output ({e})'}") from None
    if not any(t.strip() for t in doc.texts):
        doc.empty_reason = NO_TEXT_LAYER
    return doc


def run_pdftext(argv: list[str], data: bytes, *, timeout: float, max_output: int) -> PdfDoc:
    """Run a ``pdftext`` child (``argv`` up to and including its flags) on ``data``, killed
    with its process group at ``timeout`` or past ``max_output`` bytes, and parse its lines."""
    try:
        result = run_tool(argv, input=data, timeout=timeout, max_output=max_output)
    except ToolFailed as e:
        if e.kind == "timeout":
            raise ReaderError(TIMED_OUT, kind="timeout") from None
        raise
    if result.truncated:
        raise ReaderError(OVER_OUTPUT, kind="output_limit")
    return parse_pdftext_output(result.stdout, result.returncode, result.stderr)
