"""What a document says about itself: one frozen metadata type for every format.

A reader that finds metadata (PDF Info/XMP, OOXML ``docProps``, ODF ``meta.xml``, OLE summary
information, e-mail headers, HTML ``<title>``/``<meta>``, EPUB OPF, EXIF) builds a
:class:`DocMeta` and puts it in its result with ``ReadResult.with_metadata``: the result's
``metadata`` (its JSON form is what the sidecar keeps, ``extract/<aa>/<sha256>.meta.json``),
and its title the record's ``title`` when the reader set none.  Every string is cleaned like text (NFC, LF,
no control characters, surrounding blanks stripped) and capped (:data:`MAX_STRING`
characters, :data:`MAX_ITEMS` list items); dates are normalised to ISO 8601 by
:func:`iso_date`, keeping the source's UTC offset when it has one.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

MAX_STRING = 2000  # characters of one metadata string
MAX_ITEMS = 100  # authors, keywords, recipients …
MAX_FIELDS = 40  # format fields of one document
MAX_KEY = 256  # characters of a format field's name
MAX_EMBEDDED = 1000  # nested documents whose metadata one sidecar keeps

COUNTS = ("pages", "slides", "sheets", "words", "characters", "paragraphs", "attachments")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")
_SPACES = re.compile(r"[ \t]*\n[ \t\n]*|[ \t]{2,}")


def clean(value: Any, limit: int = MAX_STRING) -> str | None:
    """A metadata string as the store keeps text: NFC, LF, no control characters, no
    surrounding blanks, runs of blanks made one, at most ``limit`` characters; None when
    nothing is left (or it is not a string)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    value = _CONTROL.sub("", value)
    if not value.isascii():
        value = unicodedata.normalize("NFC", value)
    value = _SPACES.sub(lambda m: "\n" if "\n" in m.group() else " ", value).strip()
    return value[:limit] or None


def clean_list(values: Iterable[Any] | None) -> tuple[str, ...]:
    """Cleaned strings, duplicates and empties dropped, order kept, at most MAX_ITEMS."""
    out: list[str] = []
    for v in values or ():
        s = clean(v)
        if s and s not in out:
            out.append(s)
            if len(out) >= MAX_ITEMS:
                break
    return tuple(out)


def split_people(value: Any) -> tuple[str, ...]:
    """Authors written in one string: ``"A; B"``, ``"A and B"`` stay as the source wrote
    them except for ``;`` (the separator PDF producers and Office use for several authors)."""
    s = clean(value)
    return clean_list(s.split(";")) if s else ()


def split_keywords(value: Any) -> tuple[str, ...]:
    """Keywords written in one string, separated by ``,`` or ``;`` (Office, PDF, HTML)."""
    s = clean(value)
    return clean_list(re.split(r"[;,\n]", s)) if s else ()


# -- dates ----------------------------------------------------------------------------------------

_PDF_DATE = re.compile(r"^\s*(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?"
                       r"(?:\s*([Zz+\-])\s*(\d{2})?'?(\d{2})?'?)?")
_ISO_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
                       r"\s*(Z|z|[+\-]\d{2}:?\d{2})?)?\s*$")
_EXIF_DATE = re.compile(r"^\s*(\d{4}):(\d{2}):(\d{2})[ T](\d{2}):(\d{2}):(\d{2})")


def _fmt(dt: datetime, with_time: bool = True) -> str | None:
    if not 1000 <= dt.year <= 9999:
        return None
    if not with_time:
        return dt.strftime("%Y-%m-%d")
    return dt.isoformat(timespec="seconds")


def _tz(sign: str | None, hours: str | None, minutes: str | None) -> timezone | None:
    if sign is None:
        return None
    if sign in "Zz":
        return timezone.utc
    offset = timedelta(hours=int(hours or 0), minutes=int(minutes or 0))
    if offset >= timedelta(hours=24):
        return None
    return timezone(-offset if sign == "-" else offset)


def iso_date(value: Any, *, kind: str = "auto") -> str | None:
    """``value`` as ISO 8601 (``2011-09-15T15:22:00+02:00``; without an offset when the
    source gives none; ``2011-09-15`` for a date alone), or None when it is not a date.

    Takes a :class:`datetime` (naive: no offset written), a PDF date (``D:20110915152200
    +02'00'``), a W3C/ISO date (OOXML, ODF, XMP, EPUB, HTML), an RFC 5322 date (e-mail,
    ``kind="email"``) or an EXIF date (``2011:09:15 15:22:00``)."""
    try:
        if isinstance(value, datetime):
            return _fmt(value)
        s = clean(value, 200)
        if s is None:
            return None
        if kind == "email":
            from email.utils import parsedate_to_datetime

            return _fmt(parsedate_to_datetime(s))  # "-0000" (no zone known): naive
        m = _ISO_DATE.match(s)
        if m:
            y, mo, d, hh, mi, ss, z = m.groups()
            if hh is None:
                return _fmt(datetime(int(y), int(mo), int(d)), with_time=False)
            tz = None
            if z:
                tz = timezone.utc if z in "Zz" else _tz(z[0], z[1:3], z[-2:])
            return _fmt(datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss or 0),
                                 tzinfo=tz))
        m = _EXIF_DATE.match(s)
        if m:
            y, mo, d, h, mi, sec = (int(g) for g in m.groups())
            return _fmt(datetime(y, mo, d, h, mi, sec))
        m = _PDF_DATE.match(s)
        if m and (s.lstrip().startswith("D:") or kind == "pdf"):
            y, mo, d, hh, mi, ss, sign, zh, zm = m.groups()
            tz = _tz(sign, zh, zm)
            return _fmt(datetime(int(y), int(mo or 1), int(d or 1), int(hh or 0),
                                 int(mi or 0), int(ss or 0), tzinfo=tz))
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    return None


# -- the type -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DocMeta:
    """One document's metadata, as the document declares it (nothing here is inferred from
    its text).  ``fields`` holds a format's own fields (an e-mail's ``from``, ``to``,
    ``cc``, ``message_id``; a PDF's ``producer``), each a string or a tuple of strings."""

    title: str | None = None
    authors: tuple[str, ...] = ()
    created: str | None = None  # ISO 8601
    modified: str | None = None  # ISO 8601
    subject: str | None = None
    description: str | None = None
    keywords: tuple[str, ...] = ()
    language: str | None = None  # as declared (``en-US``), never detected
    pages: int | None = None
    slides: int | None = None
    sheets: int | None = None
    words: int | None = None
    characters: int | None = None
    paragraphs: int | None = None
    attachments: int | None = None
    fields: tuple[tuple[str, str | tuple[str, ...]], ...] = ()

    @classmethod
    def make(cls, *, title: Any = None, authors: Iterable[Any] = (), created: Any = None,
             modified: Any = None, subject: Any = None, description: Any = None,
             keywords: Iterable[Any] = (), language: Any = None,
             fields: dict[str, Any] | None = None, date_kind: str = "auto",
             **counts: Any) -> "DocMeta":
        """A DocMeta from raw values: strings cleaned and capped, dates normalised (raw
        strings or datetimes), counts kept when they are non-negative integers."""
        bad = set(counts) - set(COUNTS)
        if bad:
            raise TypeError(f"unknown metadata count(s): {', '.join(sorted(bad))}")
        kept: dict[str, Any] = {}
        for name, v in counts.items():
            if isinstance(v, str):  # ASCII digits only ("²" is a digit to str.isdigit)
                digits = v.strip()
                v = int(digits) if digits.isascii() and digits.isdigit() \
                    and len(digits) <= 16 else None
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 53:
                kept[name] = v
        extra: list[tuple[str, str | tuple[str, ...]]] = []
        for key, v in (fields or {}).items():
            if not isinstance(key, str) or not key or len(key) > MAX_KEY:
                continue  # a field's name is the format's (or a PDF's own Info key): bounded
            if isinstance(v, (list, tuple)):
                items = clean_list(v)
                if items:
                    extra.append((key, items))
            else:
                s = clean(v)
                if s:
                    extra.append((key, s))
        lang = clean(language, 64)
        return cls(
            title=clean(title), authors=clean_list(authors),
            created=iso_date(created, kind=date_kind) if created is not None else None,
            modified=iso_date(modified, kind=date_kind) if modified is not None else None,
            subject=clean(subject), description=clean(description),
            keywords=clean_list(keywords), language=lang,
            fields=tuple(sorted(extra)[:MAX_FIELDS]), **kept)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self))

    def to_json(self) -> dict[str, Any]:
        """The sidecar's ``metadata`` object: only the fields present, in a fixed order."""
        d: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or v == ():
                continue
            if f.name == "fields":
                d["fields"] = {k: list(x) if isinstance(x, tuple) else x for k, x in v}
            elif isinstance(v, tuple):
                d[f.name] = list(v)
            else:
                d[f.name] = v
        return d

    @classmethod
    def from_json(cls, d: Any) -> "DocMeta":
        """The DocMeta a sidecar's (or a worker's) ``metadata`` object describes, taken
        through :meth:`make` again (a damaged or hostile object gives what it can)."""
        if not isinstance(d, dict):
            return cls()
        raw_fields = d.get("fields") if isinstance(d.get("fields"), dict) else {}
        counts = {k: d[k] for k in COUNTS if k in d}
        got_authors, got_keywords = d.get("authors"), d.get("keywords")
        authors: list[Any] = got_authors if isinstance(got_authors, list) else []
        keywords: list[Any] = got_keywords if isinstance(got_keywords, list) else []
        return cls.make(title=d.get("title"), authors=authors, created=d.get("created"),
                        modified=d.get("modified"), subject=d.get("subject"),
                        description=d.get("description"), keywords=keywords,
                        language=d.get("language"), fields=raw_fields, **counts)

    def merged(self, other: "DocMeta") -> "DocMeta":
        """This metadata with ``other``'s fields filling what this one lacks."""
        values = {}
        for f in fields(self):
            mine = getattr(self, f.name)
            values[f.name] = mine if mine not in (None, ()) else getattr(other, f.name)
        return DocMeta(**values)


def note_embedded(ctx: Any, label: str, doc_meta: "DocMeta | None") -> None:
    """Keep an embedded document's metadata (an attachment, an archive member, an object in
    an Office file) in the reading state (``ctx.state.embedded``), for the walked file's
    sidecar (``embedded``)."""
    own = doc_meta.to_json() if doc_meta else None
    if not own:
        return
    kept = ctx.state.embedded
    if len(kept) < MAX_EMBEDDED:
        kept.append({"path": clean(label, 4096) or "?", "metadata": own})
