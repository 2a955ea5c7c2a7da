"""``bastion report OUT [--html FILE]``: what a sweep did, for a person, without a query.

:func:`gather` streams ``extract.jsonl`` (and the errors of ``walk.jsonl``) once, with memory
bounded whatever the number of records: counts by status and by type, and for each error kind,
each cap reached and each unsupported type its count and at most ``max_files`` files with their
messages.  :func:`render_text` writes it for a terminal, :func:`render_html` as one
self-contained page (inline CSS, no script, no external asset, a Content-Security-Policy that
forbids every load).  File names and messages come from the documents: everything is escaped,
and control and bidirectional characters are shown as escapes, on the page and the terminal.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..names import shown
from ..records import iter_jsonl

MAX_FILES = 50  # files listed per error kind, cap and type
STATUSES = ("ok", "empty", "unsupported", "error", "skipped")


class ReportError(Exception):
    """The directory holds no output to report on."""


@dataclass
class Group:
    """A count and the first files of it, with their messages."""

    count: int = 0
    files: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, message: str, limit: int) -> None:
        self.count += 1
        if len(self.files) < limit:
            self.files.append((name, message))


@dataclass
class Report:
    out: Path
    walk: dict[str, Any] | None
    extract: dict[str, Any] | None
    records: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, Group] = field(default_factory=dict)
    limits: dict[str, Group] = field(default_factory=dict)
    unsupported: dict[str, Group] = field(default_factory=dict)
    empty: Group = field(default_factory=Group)
    walk_errors: Group = field(default_factory=Group)
    max_files: int = MAX_FILES
    has_records: bool = False  # extract.jsonl exists (the extract stage ran here)


NO_EXTRACT = "The extract stage has not run here (no extract.jsonl): only the walk is reported."


def _summary(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ReportError(f"cannot read {path}: {e}") from None
    return d if isinstance(d, dict) else None


def gather(out: Path, max_files: int = MAX_FILES) -> Report:
    """Read an output directory into a :class:`Report` (one pass over each record file)."""
    out = Path(out)
    walk = _summary(out / "walk.summary.json")
    extract = _summary(out / "extract.summary.json")
    if walk is None and extract is None:
        raise ReportError(f"{out} holds no bastion output (no walk.summary.json): "
                          "run bastion sweep first")
    report = Report(out, walk, extract, max_files=max_files)
    records = out / "extract.jsonl"
    report.has_records = records.is_file()
    if report.has_records:
        for r in iter_jsonl(records):
            name = f"{r.get('root')}/{r.get('path')}"
            status = str(r.get("status"))
            mime = str(r.get("mime") or "(none)")
            report.records += 1
            report.by_status[status] = report.by_status.get(status, 0) + 1
            row = report.by_type.setdefault(mime, {})
            row[status] = row.get(status, 0) + 1
            if status == "error":
                kind = str(r.get("error_kind") or "error")
                report.errors.setdefault(kind, Group()).add(name, r.get("error") or "",
                                                            max_files)
            elif status == "unsupported":
                report.unsupported.setdefault(mime, Group()).add(name, r.get("error") or "",
                                                                 max_files)
            elif status == "empty":
                report.empty.add(name, r.get("error") or "no text", max_files)
            if r.get("limit"):
                report.limits.setdefault(str(r["limit"]), Group()).add(
                    name, f"{r.get('chars', 0)} characters kept", max_files)
    walked = out / "walk.jsonl"
    if walked.is_file() and walk and walk.get("errors"):
        for r in iter_jsonl(walked):
            if r.get("error"):
                report.walk_errors.add(f"{r.get('root')}/{r.get('path')}", r["error"],
                                       max_files)
    return report




def _sorted(groups: dict[str, Group]) -> list[tuple[str, Group]]:
    return sorted(groups.items(), key=lambda kv: (-kv[1].count, kv[0]))


def _tools(report: Report) -> list[dict[str, Any]]:
    return list((report.extract or {}).get("tools") or [])


def _timing_note(report: Report) -> str:
    took = (report.extract or {}).get("duration_s")
    note = ("Per-document timings are not recorded (extract.jsonl holds no durations), so "
            "the slowest documents cannot be listed.")
    if took is not None:
        note += f" The last extract run took {took} s"
        n = (report.extract or {}).get("extracted")
        note += f" for {n} documents read." if n is not None else "."
    return note


def _walk_lines(walk: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not walk:
        return []
    def value(v: Any) -> Any:
        return ("yes" if v else "no") if isinstance(v, bool) else v

    return [(k, value(walk.get(k))) for k in ("files", "hashed", "reused", "not_hashed", "symlinks",
                                       "other", "errors", "warnings", "unreadable", "vanished",
                                       "outputs_skipped", "partial", "duration_s")]


# -- the terminal -------------------------------------------------------------------------------


def render_text(report: Report) -> str:
    lines: list[str] = [f"bastion report: {shown(report.out)}"]
    ex = report.extract or {}
    if ex:
        lines.append(f"extract run {shown(ex.get('started_at'))}, {ex.get('duration_s')} s, "
                     f"{ex.get('extracted')} read now, {ex.get('reused')} reused")
    lines.append("")
    _text_records(lines, report)
    _text_section(lines, "errors by kind:", _sorted(report.errors))
    _text_section(lines, "caps reached (text cut short):", _sorted(report.limits))
    _text_section(lines, "unsupported, by type:", _sorted(report.unsupported))
    if report.empty.count:
        _text_section(lines, "empty (read, no text):", [("empty", report.empty)])
    lines.append("")
    lines.append("slowest documents: " + _timing_note(report))
    tools = _tools(report)
    lines.append("")
    lines.append("tools: " + (", ".join(f"{shown(t.get('name'))} {shown(t.get('version'))}"
                                        for t in tools) if tools else "none found"
                              + (" (--no-external)" if ex.get("no_external") else "")
                              if ex else "not known (no extract.summary.json)"))
    if report.walk:
        _text_walk(lines, report)
    return "\n".join(lines) + "\n"


def _text_records(lines: list[str], report: Report) -> None:
    """The records by status, then by type."""
    if not report.has_records:
        lines.append(NO_EXTRACT)
    lines.append(f"records: {report.records}")
    for s in STATUSES:
        lines.append(f"  {s:12} {report.by_status.get(s, 0):>9}")
    if report.by_type:
        lines.append("")
        lines.append("by type:")
        width = min(60, max(len(shown(m)) for m in report.by_type))
        for mime, row in sorted(report.by_type.items(), key=lambda kv: -sum(kv[1].values())):
            parts = ", ".join(f"{row[s]} {s}" for s in STATUSES if row.get(s))
            lines.append(f"  {shown(mime):{width}} {sum(row.values()):>7}  ({parts})")


def _text_section(lines: list[str], title: str, groups: list[tuple[str, Group]]) -> None:
    """Groups of files under a title, each with its count and the files kept (none: nothing)."""
    if not groups:
        return
    lines.append("")
    lines.append(title)
    for key, g in groups:
        lines.append(f"  {shown(key)}: {g.count}")
        for name, message in g.files:
            lines.append(f"    {shown(name)}: {shown(message)}")
        if g.count > len(g.files):
            lines.append(f"    … and {g.count - len(g.files)} more")


def _text_walk(lines: list[str], report: Report) -> None:
    """The walk's counts, its warnings kept, its read errors."""
    walk = report.walk or {}
    lines.append("")
    lines.append("walk: " + ", ".join(f"{k} {shown(v)}" for k, v in _walk_lines(walk)))
    for sample in walk.get("warning_samples") or []:
        lines.append(f"  warning: {shown(sample)}")
    if (walk.get("warnings") or 0) > len(walk.get("warning_samples") or []):
        lines.append(f"  … {walk['warnings'] - len(walk['warning_samples'])} more "
                     "warnings (not kept)")
    _text_section(lines, "walk read errors:", [("files", report.walk_errors)]
                  if report.walk_errors.count else [])


# -- the page -----------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:75em;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#666}.file{font-family:ui-monospace,monospace;word-break:break-all}
.ok{color:#1a7f37}.error{color:#c62828}.unsupported{color:#8a6d00}.empty,.skipped{color:#666}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:.6em 1.2em;min-width:7em}.card .n{font-size:1.6em;font-weight:600;display:block}
details{margin:.3em 0}summary{cursor:pointer}.more{color:#666;font-style:italic}
"""


def _e(value: Any) -> str:
    return html.escape(shown(value), quote=True)


def render_html(report: Report) -> str:
    ex = report.extract or {}
    out: list[str] = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # nothing may load: no script, no image, no font, no frame, no connection
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>bastion report: {_e(report.out)}</title>", f"<style>{_CSS}</style>",
        "</head><body>", "<h1>bastion report</h1>",
        f'<p class="meta">output <span class="file">{_e(report.out)}</span>'
        + (f"; extract run {_e(ex.get('started_at'))}, {_e(ex.get('duration_s'))} s, "
           f"{_e(ex.get('extracted'))} read now, {_e(ex.get('reused'))} reused" if ex else "")
        + "</p>",
        f'<h2>Records <span id="records">{report.records}</span></h2>',
    ]
    _html_records(out, report)
    _html_section(out, "Errors by kind", "errors", _sorted(report.errors), "No document failed.")
    _html_section(out, "Caps reached (text cut short)", "limits", _sorted(report.limits),
                  "No document reached a cap.")
    _html_section(out, "Unsupported, by type", "unsupported", _sorted(report.unsupported),
                  "Every type had a reader.")
    _html_section(out, "Empty (read, no text)", "empty", [("empty", report.empty)]
                  if report.empty.count else [], "No document was empty.")
    out.append(f'<h2 id="slowest">Slowest documents</h2><p class="meta">'
               f"{_e(_timing_note(report))}</p>")
    _html_tools(out, report, ex)
    _html_walk(out, report)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_records(out: list[str], report: Report) -> None:
    """The records by status (cards), then by type (a table)."""
    if not report.has_records:
        out.append(f'<p class="meta" id="no-extract">{_e(NO_EXTRACT)}</p>')
    out.append('<div class="cards">')
    for s in STATUSES:
        out.append(f'<div class="card {s}" data-status="{s}"><span class="n">'
                   f"{report.by_status.get(s, 0)}</span>{s}</div>")
    out.append("</div>")
    if report.by_type:
        out.append('<h2>By type</h2><table id="by-type"><tr><th>type</th><th class="n">'
                   "files</th>" + "".join(f'<th class="n {s}">{s}</th>' for s in STATUSES)
                   + "</tr>")
        for mime, row in sorted(report.by_type.items(), key=lambda kv: -sum(kv[1].values())):
            out.append(f'<tr data-type="{_e(mime)}"><td class="file">{_e(mime)}</td>'
                       f'<td class="n">{sum(row.values())}</td>'
                       + "".join(f'<td class="n">{row.get(s, 0) or ""}</td>' for s in STATUSES)
                       + "</tr>")
        out.append("</table>")


def _html_section(out: list[str], title: str, ident: str, groups: list[tuple[str, Group]],
                  empty: str) -> None:
    """Groups of files under a heading, each a details element (none: the ``empty`` line)."""
    out.append(f'<h2 id="{ident}">{title}</h2>')
    if not groups:
        out.append(f'<p class="meta">{empty}</p>')
        return
    for key, g in groups:
        out.append(f'<details open data-group="{_e(key)}" data-count="{g.count}">'
                   f"<summary><b>{_e(key)}</b>: {g.count}</summary><table>")
        for name, message in g.files:
            out.append(f'<tr><td class="file">{_e(name)}</td><td>{_e(message)}</td></tr>')
        out.append("</table>")
        if g.count > len(g.files):
            out.append(f'<p class="more">… and {g.count - len(g.files)} more (the first '
                       f"{len(g.files)} are listed; every one is in extract.jsonl)</p>")
        out.append("</details>")


def _html_tools(out: list[str], report: Report, ex: dict) -> None:
    """The tools the extract run found, or why none are listed."""
    out.append('<h2 id="tools">Tools</h2>')
    tools = _tools(report)
    if tools:
        out.append("<table><tr><th>tool</th><th>version</th><th>path</th><th>identity</th></tr>")
        for t in tools:
            out.append(f"<tr><td>{_e(t.get('name'))}</td><td>{_e(t.get('version'))}</td>"
                       f'<td class="file">{_e(t.get("path"))}</td>'
                       f'<td class="file">{_e(t.get("identity"))}</td></tr>')
        out.append("</table>")
    elif not ex:
        out.append('<p class="meta">Not known: no extract.summary.json.</p>')
    else:
        out.append('<p class="meta">No external tool was found'
                   + (" (--no-external)" if ex.get("no_external") else "") + ".</p>")


def _html_walk(out: list[str], report: Report) -> None:
    """The walk's counts, its warnings kept, its read errors."""
    walk = report.walk
    out.append('<h2 id="walk">Walk</h2>')
    if not walk:
        out.append('<p class="meta">No walk summary.</p>')
        return
    out.append("<table>" + "".join(f'<tr><td>{_e(k)}</td><td class="n" data-walk="{_e(k)}">'
                                   f"{_e(v)}</td></tr>" for k, v in _walk_lines(walk))
               + "</table>")
    samples = walk.get("warning_samples") or []
    if samples:
        out.append('<h3>Warnings</h3><ul id="warnings">'
                   + "".join(f'<li class="file">{_e(s)}</li>' for s in samples) + "</ul>")
        if (walk.get("warnings") or 0) > len(samples):
            out.append(f'<p class="more">… {walk["warnings"] - len(samples)} more warnings '
                       "(not kept)</p>")
    if report.walk_errors.count:
        _html_section(out, "Walk read errors", "walk-errors", [("files", report.walk_errors)], "")
