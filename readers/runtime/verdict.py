"""The verdict on one document: the one type from the worker, through the pool and the store,
to the record.

A worker reads a document and answers with a :class:`Verdict`; the pool hands it back (or makes
one itself when the worker died, timed out or broke a cap); the store persists it under the
document's sha256 and task key; ``extract.jsonl`` embeds its fields.  Its JSON form
(:meth:`Verdict.to_json`) is the wire format between worker and parent and the store's row.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from ..base import ReadResult


class Status(StrEnum):
    """What became of a document.  ``skipped`` is never a verdict, only a record: the file was
    not extracted (not hashed by the walk, or not extracted yet)."""

    OK = "ok"  # text in the store (possibly cut short: ``limit``)
    EMPTY = "empty"  # read, and it holds no text
    UNSUPPORTED = "unsupported"  # no reader, or the reader needs a tool that is absent
    ERROR = "error"  # the reader failed (``error_kind``); retried on every run
    SKIPPED = "skipped"


VERDICT_STATUSES = frozenset({Status.OK, Status.EMPTY, Status.UNSUPPORTED, Status.ERROR})


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """One document's outcome.  Everything here is small metadata: the text itself travels as
    a file (worker → store), the PDF outline and per-page provenance as the sidecar."""

    status: Status
    extractor: str | None = None  # the reader's detail: "pdfium", "text:cp1252", …
    chars: int = 0  # characters of text in the store (0 unless ok)
    error: str | None = None  # why it is not ok (or why empty: "no text layer (scanned PDF?)")
    error_kind: str | None = None  # error only: corrupt, encrypted, timeout, memory, …
    limit: str | None = None  # the budget reached when the text was cut short (ok only)
    tools_used: tuple[str, ...] = ()  # external tools that ran for this document, sorted
    pages: int | None = None
    title: str | None = None
    pages_ocr: int | None = None  # PDF pages whose text came from OCR
    members: dict[str, int] | None = None  # archive members by outcome: {"ok": 12, …}
    encoding_source: str | None = None  # how the text encoding was chosen: bom, declared, …
    warnings: tuple[str, ...] = ()  # problems the reader survived (at most MAX_WARNINGS)
    # the document's main metadata as it declares it (all of it: the sidecar's "metadata")
    authors: tuple[str, ...] = ()
    created: str | None = None  # ISO 8601
    modified: str | None = None  # ISO 8601
    subject: str | None = None
    declared_language: str | None = None
    # the text's main languages: (ISO 639-1, confidence 0-1), most first (readers/text/langid.py)
    languages: tuple[tuple[str, float], ...] = ()
    ocr_languages: tuple[str, ...] = ()  # tesseract packs whose reading is in the text
    ocr_missing: tuple[str, ...] = ()  # packs OCR would have used, not installed
    # the packs OCR looked at -> their identity then (None: absent): keys the verdict
    ocr_packs: dict[str, str | None] | None = None
    # its Markdown is stored beside its text (set by the parent that stored it, never taken
    # from a worker; written only when true, so a verdict without it reads as before)
    markdown: bool = False

    MAX_WARNINGS = 20
    MAX_AUTHORS = 20
    MAX_FIELD = 500  # characters of each main metadata string in the record
    MAX_STRING = 4096  # characters of its title, error, extractor, limit

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": self.status.value, "extractor": self.extractor, "chars": self.chars,
            "error": self.error, "error_kind": self.error_kind, "limit": self.limit,
            "tools_used": list(self.tools_used), "pages": self.pages, "title": self.title,
            "pages_ocr": self.pages_ocr, "members": self.members,
            "encoding_source": self.encoding_source, "warnings": list(self.warnings),
            "authors": list(self.authors), "created": self.created, "modified": self.modified,
            "subject": self.subject, "declared_language": self.declared_language,
            "languages": [{"code": c, "confidence": p} for c, p in self.languages],
            "ocr_languages": list(self.ocr_languages), "ocr_missing": list(self.ocr_missing),
            "ocr_packs": self.ocr_packs,
        }
        if self.markdown:
            out["markdown"] = True
        return out

    @classmethod
    def from_json(cls, d: Any) -> "Verdict":
        """The verdict a JSON object describes; raises ValueError when it is not one (a worker
        that broke the protocol, a damaged store row)."""
        if not isinstance(d, dict):
            raise ValueError("a verdict is a JSON object")
        try:
            status = Status(str(d.get("status")))
        except ValueError:
            raise ValueError(f"invalid status {d.get('status')!r}") from None
        if status not in VERDICT_STATUSES:
            raise ValueError(f"{status} is not a verdict")

        def text(name: str) -> str | None:
            v = d.get(name)
            if v is not None and not isinstance(v, str):
                raise ValueError(f"{name} must be a string")
            return v

        def count(name: str) -> int | None:
            v = d.get(name)
            if v is None:
                return None
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be a count")
            return v

        def strings(name: str, limit: int = 1000) -> tuple[str, ...]:
            v = d.get(name) or ()
            if not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
                raise ValueError(f"{name} must be a list of strings")
            return tuple(s[:500] for s in v[:limit])

        members = d.get("members")
        packs = d.get("ocr_packs")
        if packs is not None:
            if not isinstance(packs, dict) or not all(
                    isinstance(k, str) and (v is None or isinstance(v, str))
                    for k, v in packs.items()):
                raise ValueError("ocr_packs must map packs to identities or null")
            packs = dict(sorted(packs.items())) or None
        if members is not None:
            if not isinstance(members, dict) or not all(
                    isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool)
                    for k, n in members.items()):
                raise ValueError("members must map outcomes to counts")
            members = dict(sorted(members.items()))
        return cls(
            status=status, extractor=text("extractor"), chars=count("chars") or 0,
            error=text("error"), error_kind=text("error_kind"), limit=text("limit"),
            tools_used=tuple(sorted(set(strings("tools_used")))), pages=count("pages"),
            title=text("title") or None, pages_ocr=count("pages_ocr"), members=members,
            encoding_source=text("encoding_source"),
            warnings=strings("warnings", cls.MAX_WARNINGS),
            authors=strings("authors", cls.MAX_AUTHORS), created=text("created"),
            modified=text("modified"), subject=text("subject"),
            declared_language=text("declared_language"),
            languages=_languages(d.get("languages")),
            ocr_languages=tuple(sorted(set(strings("ocr_languages")))),
            ocr_missing=tuple(sorted(set(strings("ocr_missing")))), ocr_packs=packs,
        )

    @classmethod
    def from_store(cls, d: dict[str, Any]) -> "Verdict":
        """A verdict read back from bastion's own store (written by :meth:`to_json`): the
        types are taken as they are, without :meth:`from_json`'s checks (5x cheaper; a row
        that does not even parse is dropped by the caller)."""
        members = d.get("members")
        return cls(
            status=Status(d["status"]), extractor=d.get("extractor"),
            chars=d.get("chars") or 0, error=d.get("error"), error_kind=d.get("error_kind"),
            limit=d.get("limit"), tools_used=tuple(d.get("tools_used") or ()),
            pages=d.get("pages"), title=d.get("title"), pages_ocr=d.get("pages_ocr"),
            members=dict(members) if members else None,
            encoding_source=d.get("encoding_source"), warnings=tuple(d.get("warnings") or ()),
            authors=tuple(d.get("authors") or ()), created=d.get("created"),
            modified=d.get("modified"), subject=d.get("subject"),
            declared_language=d.get("declared_language"),
            languages=tuple((x["code"], x["confidence"]) for x in d.get("languages") or ()),
            ocr_languages=tuple(d.get("ocr_languages") or ()),
            ocr_missing=tuple(d.get("ocr_missing") or ()), ocr_packs=d.get("ocr_packs"),
            markdown=bool(d.get("markdown")),  # (a record names the file: true too)
        )

    @classmethod
    def of_outcome(cls, status: str, *, chars: int, extractor: str | None, error: str | None,
                   error_kind: str | None, limit: str | None, result: ReadResult | None,
                   warnings: Sequence[str], tools_used: Iterable[str] = ()) -> "Verdict":
        """The verdict on a document a reader read (the worker's side): the reader's outcome
        and its typed result, field for field (``pages``, ``title``, ``pages_ocr``,
        ``members``, ``encoding_source``, the languages and OCR packs, and from ``metadata``
        the main fields: ``title`` when the reader set none, ``authors``, ``created``,
        ``modified``, ``subject`` and ``language`` as ``declared_language``)."""
        if result is None:
            from ..base import ReadResult

            result = ReadResult("")
        got = result

        def count(v: int | None) -> int | None:
            return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 53 \
                else None

        doc = got.metadata.to_json() if got.metadata else {}

        def main(name: str) -> str | None:
            v = doc.get(name)
            return v[:cls.MAX_FIELD] if isinstance(v, str) and v else None

        got_authors = doc.get("authors")
        authors: list[Any] = got_authors if isinstance(got_authors, list) else []
        st = Status(status)
        cap = cls.MAX_STRING  # the schema's bound on these (readers/runtime/schema.py)
        return cls(
            status=st, extractor=extractor and extractor[:cap],
            chars=chars if st is Status.OK else 0,
            error=error and error[:cap], error_kind=error_kind, limit=limit and limit[:cap],
            tools_used=tuple(sorted(set(tools_used))),
            pages=count(got.pages), title=(got.title or main("title") or "")[:cap] or None,
            pages_ocr=count(got.pages_ocr),
            members=dict(sorted(got.members.items())) if got.members else None,
            encoding_source=(got.encoding_source or "")[:cap] or None,
            warnings=tuple(str(w)[:500] for w in list(warnings)[:cls.MAX_WARNINGS]),
            authors=tuple(a[:cls.MAX_FIELD] for a in authors[:cls.MAX_AUTHORS]
                          if isinstance(a, str) and a),
            created=main("created"), modified=main("modified"), subject=main("subject"),
            declared_language=main("language"),
            languages=_languages(got.languages) if st is Status.OK else (),
            ocr_languages=tuple(sorted(set(got.ocr_languages))),
            ocr_missing=tuple(sorted(set(got.ocr_missing))),
            ocr_packs=dict(sorted(got.ocr_packs.items())) if got.ocr_packs else None,
        )

    @classmethod
    def failed(cls, kind: str, message: str, extractor: str | None = None) -> "Verdict":
        """An ``error`` verdict: the reader failed, or the parent failed the job for it."""
        return cls(status=Status.ERROR, extractor=extractor, error=message, error_kind=kind)


def _languages(v: Any) -> tuple[tuple[str, float], ...]:
    """``[{"code": "de", "confidence": 0.97}, …]`` (or ``(code, confidence)`` pairs) as
    pairs; raises ValueError for anything else."""
    if not v:
        return ()
    out = []
    for x in list(v)[:10]:
        code, conf = (x.get("code"), x.get("confidence")) if isinstance(x, dict) else (
            x if isinstance(x, (list, tuple)) and len(x) == 2 else (None, None))
        if not isinstance(code, str) or not isinstance(conf, (int, float)) or isinstance(
                conf, bool) or not 0 <= conf <= 1:
            raise ValueError("languages must be codes with a confidence from 0 to 1")
        out.append((code[:20], float(conf)))
    return tuple(out)


VERDICT_FIELDS = tuple(f.name for f in fields(Verdict))
