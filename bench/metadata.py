"""Metadata found per format, and checked against each format's own report, on a corpus.

    python bench/metadata.py DIR [DIR …] [-j N]

Every file under the DIRs (the peer corpus's ``bench/.corpus/peers/<format>/`` folders, or
``tests/samples``) is read with ``bastion.Extractor`` (built-in readers, no external tool: the
metadata does not depend on them) and counted by its folder name or extension: files, files
with any metadata, and with each main field.  Then the fields are checked against an
independent reading of the same file: ``pdfinfo`` (poppler) for PDFs' Title/Author/CreationDate,
the stdlib's ElementTree over OOXML ``docProps/core.xml`` and ODF ``meta.xml``, the stdlib's
``email`` parser for e-mails.  Prints two Markdown tables (docs/readers.md has them).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import re
import subprocess
import sys
import time
import zipfile
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree as ET

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bastion.extractor import Extractor  # noqa: E402

FIELDS = ("title", "authors", "created", "modified", "language", "counts")
COUNT_FIELDS = ("pages", "slides", "sheets", "words")
DC = "{http://purl.org/dc/elements/1.1/}"
DCT = "{http://purl.org/dc/terms/}"
META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"


def fmt_of(path: Path, roots: list[Path]) -> str:
    for root in roots:
        if root in path.parents and path.parent != root:
            return path.relative_to(root).parts[0]
    return path.suffix.lower().lstrip(".") or "(none)"


def utc(iso: str | None) -> str | None:
    """An ISO date as UTC to the minute (offset-less dates taken as UTC), for comparing."""
    if not iso:
        return None
    try:
        dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt.strftime("%Y-%m-%dT%H:%M")


def pdfinfo(path: Path) -> dict[str, str | None]:
    try:
        out = subprocess.run(["pdfinfo", "-isodates", str(path)], capture_output=True,
                             timeout=30).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return {}
    info = {k: v.replace("\x00", "").strip()
            for k, v in re.findall(r"^(\w+):[ \t]*(.*)$", out, re.M)}
    return {"title": info.get("Title") or None, "author": info.get("Author") or None,
            "created": utc(info.get("CreationDate"))}


def xml_part(path: Path, part: str) -> ET.Element | None:
    try:
        with zipfile.ZipFile(path) as z:
            return ET.fromstring(z.read(part))
    except (KeyError, zipfile.BadZipFile, ET.ParseError, OSError):
        return None


def reference(fmt: str, path: Path) -> dict[str, str | None] | None:
    """The format's own report of title, first author and creation date (None: no check)."""
    if fmt == "pdf":
        return pdfinfo(path)
    if fmt in ("docx", "xlsx", "pptx"):
        root = xml_part(path, "docProps/core.xml")
        if root is None:
            return {"title": None, "author": None, "created": None}
        return {"title": (root.findtext(f"{DC}title") or "").strip() or None,
                "author": (root.findtext(f"{DC}creator") or "").split(";")[0].strip() or None,
                "created": utc(root.findtext(f"{DCT}created"))}
    if fmt in ("odt", "ods", "odp"):
        root = xml_part(path, "meta.xml")
        if root is None:
            return {"title": None, "author": None, "created": None}
        m = root.find(f"{{urn:oasis:names:tc:opendocument:xmlns:office:1.0}}meta")
        m = m if m is not None else root
        creator = m.findtext(f"{META}initial-creator") or m.findtext(f"{DC}creator")
        return {"title": (m.findtext(f"{DC}title") or "").strip() or None,
                "author": (creator or "").strip() or None,
                "created": utc(m.findtext(f"{META}creation-date"))}
    if fmt == "eml":
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        try:
            created = msg["Date"].datetime.isoformat() if msg["Date"] else None
        except (AttributeError, TypeError, ValueError):
            created = None
        subject = " ".join(str(msg["Subject"] or "").split()) or None
        sender = msg["From"]
        first = None
        if sender is not None and getattr(sender, "addresses", None):
            a = sender.addresses[0]
            first = f"{a.display_name} <{a.addr_spec}>" if a.display_name else a.addr_spec
        return {"title": subject, "author": first, "created": utc(created)}
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    roots = [d.resolve() for d in args.dirs]
    files = sorted(p for d in roots for p in d.rglob("*")
                   if p.is_file() and p.name not in ("MANIFEST.tsv", "ORIGIN.md"))
    found: dict[str, Counter] = defaultdict(Counter)
    checks: dict[str, Counter] = defaultdict(Counter)
    mismatches: list[str] = []
    t0, c0 = time.perf_counter(), time.process_time()
    with Extractor(tools=None, jobs=args.jobs) as ex:
        for path, r in zip(files, ex.extract_files(files)):
            fmt = fmt_of(path, roots)
            c = found[fmt]
            c["files"] += 1
            m = r.metadata
            c["any"] += bool(m)
            c["title"] += bool(m.title)
            c["authors"] += bool(m.authors)
            c["created"] += bool(m.created)
            c["modified"] += bool(m.modified)
            c["language"] += bool(m.language)
            c["counts"] += any(getattr(m, f) is not None for f in COUNT_FIELDS)
            c["embedded"] += bool(r.embedded)
            ref = reference(fmt, path) if r.status in ("ok", "empty") else None
            if ref is None:
                continue
            k = checks[fmt]
            k["files"] += 1
            mine = {"title": m.title, "author": m.authors[0] if m.authors else None,
                    "created": utc(m.created)}
            for key in ("title", "author", "created"):
                want, got = ref.get(key), mine[key]
                if want is None and got is None:
                    continue
                k[f"{key}_checked"] += 1
                if want is not None and got is not None and " ".join(want.split()) == got:
                    k[f"{key}_same"] += 1
                elif len(mismatches) < 40:
                    mismatches.append(f"{fmt}/{path.name}: {key}: bastion {got!r}, "
                                      f"reference {want!r}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{len(files)} files in {wall:.1f} s wall ({cpu:.1f} s CPU in this process)\n")
    print("| format | files | any metadata | title | authors | created | modified | "
          "language | counts | embedded docs' |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fmt in sorted(found):
        c = found[fmt]
        print(f"| {fmt} | {c['files']} | {c['any']} | {c['title']} | {c['authors']} | "
              f"{c['created']} | {c['modified']} | {c['language']} | {c['counts']} | "
              f"{c['embedded']} |")
    print("\n| format | files checked | title same / compared | first author | created "
          "(UTC, to the minute) | reference |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    refs = {"pdf": "pdfinfo -isodates", "eml": "Python email parser"}
    for fmt in sorted(checks):
        k = checks[fmt]
        ref = refs.get(fmt, "ElementTree: docProps/core.xml" if fmt in ("docx", "xlsx", "pptx")
                       else "ElementTree: meta.xml")
        cells = [f"{k[f'{key}_same']} / {k[f'{key}_checked']}"
                 for key in ("title", "author", "created")]
        print(f"| {fmt} | {k['files']} | {' | '.join(cells)} | {ref} |")
    if mismatches:
        print("\ndifferences:")
        for line in mismatches:
            print("-", line)


if __name__ == "__main__":
    main()
