"""External tools are sensors, not dependencies: found on PATH at run time, or absent.

``discover`` looks each known tool up once per run and asks it for its version (unless the
caller's ``known`` versions already hold this very binary: same path, size, mtime, ctime and
inode).  The questions run at the same time (tesseract alone takes ~25 ms).  A tool that answers
without a version it can be told apart by is identified by its binary's sha256 instead
(:attr:`Tool.identity`), never by ``None``; a question that failed (no answer in time) is not
cached, so it is asked again next run.

The identities of the tools a reader may call, present or absent, are part of every task key
(``bastion.tasks.extract.plan.task_key``): installing, removing or upgrading a tool re-runs exactly the files
whose readers could use it.

Tesseract's language packs are tools too (:func:`language_packs`): its data directory
(``TESSDATA_PREFIX``, else the one ``tesseract --list-langs`` names) is the tool ``tessdata``,
handed to the readers that OCR, and each ``<name>.traineddata`` in it the tool
``tesseract:<name>``, identified by its sha256.  The packs are not in the task key: a
document's verdict names the packs its OCR looked at (readers/ocr/packs.py), and the plan
re-reads it when one of them changed.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

from ..errors import ToolFailed
from ..ocr import packs as ocr_packs
from .toolcall import RunningTool, run_tool

KNOWN_TOOLS: dict[str, list[str]] = {
    "pdftotext": ["-v"],
    "pdftoppm": ["-v"],
    "tesseract": ["--version"],
    "7zz": ["--help"],  # 7-Zip (Debian 7zip): 7z archives
    "7z": ["--help"],  # p7zip's 7z, when 7zz is absent
}

_VERSION_RE = re.compile(rb"(\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Tool:
    name: str
    path: str
    version: str | None
    identity: str | None = None  # what keys it: its version, else "sha256:<binary digest>"

    @property
    def key(self) -> str:
        return self.identity or self.version or f"path:{self.path}"


def discover(no_external: bool = False, path: str | None = None,
             known: dict[str, list] | None = None) -> dict[str, Tool]:
    """The known tools on ``path`` (default: this process's PATH); none under --no-external.

    ``known`` maps a tool's path to ``[size, mtime_ns, ctime_ns, inode, version, identity]``
    from an earlier run; it is used when the binary's stat still matches, and updated in
    place.
    """
    return ToolProbe(no_external, path, known).result()


class ToolProbe:
    """:func:`discover` in steps.  The constructor looks the tools up (``paths``: enough to
    pick readers and key tasks); :meth:`ask` starts asking the ones not in ``known`` for their
    versions, all at once (tesseract alone takes ~25 ms of CPU); :meth:`result` collects the
    answers.  The extract stage asks before it plans (the answers are in the task keys); on an
    output with no stamp it asks as its workers start, so the questions run beside their start."""

    def __init__(self, no_external: bool = False, path: str | None = None,
                 known: dict[str, list] | None = None) -> None:
        self.known = known
        self.paths: dict[str, str] = {}
        self.versions: dict[str, str | None] = {}
        self.identities: dict[str, str | None] = {}
        self._unknown: dict[str, list] = {}  # name -> the binary's stat identity (or [])
        self._asking: dict[str, RunningTool | None] = {}
        self._listing: list[RunningTool | None] = []  # tesseract --list-langs, when asked
        if no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1":
            return
        search = path if path is not None else os.environ.get("PATH", os.defpath)
        for name in KNOWN_TOOLS:
            exe = shutil.which(name, path=search)
            if exe is None:
                continue
            exe = self.paths[name] = os.path.abspath(exe)
            try:
                st = os.stat(exe)
                ident = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
            except OSError:
                ident = []
            entry = known.get(exe) if known is not None else None
            if (ident and isinstance(entry, list) and len(entry) == 6 and entry[:4] == ident
                    and (entry[4] or entry[5])):
                self.versions[name] = entry[4]
                self.identities[name] = entry[5]
            else:
                self._unknown[name] = ident

    def ask(self) -> None:
        """Start the version questions not asked yet (they run while the caller goes on), and
        tesseract's ``--list-langs`` when its data directory is not known yet."""
        exe = self.paths.get("tesseract")
        if exe and not self._listing and _cached_dir(exe, self.known) is _UNKNOWN:
            try:
                self._listing.append(RunningTool([exe, "--list-langs"], timeout=30.0,
                                                 max_output=1 << 16))
            except ToolFailed:
                self._listing.append(None)
        for name in self._unknown:
            if name in self._asking:
                continue
            try:
                # the deadline runs from now: result() is called straight after (plan time)
                self._asking[name] = RunningTool([self.paths[name], *KNOWN_TOOLS[name]],
                                                 timeout=30.0, max_output=1 << 16)
            except ToolFailed:
                self._asking[name] = None

    def result(self) -> dict[str, Tool]:
        """Every tool found, with its version and identity.  A tool that answered without a
        version is identified by its binary's sha256; one that did not answer (it could not
        start, or timed out) is too, for this run only: it is asked again next time."""
        self.ask()
        for name, ident in self._unknown.items():
            running = self._asking[name]
            version = None
            answered = False
            if running is not None:
                try:
                    answer = running.finish()
                    answered = True
                    m = _VERSION_RE.search(answer.stdout + b"\n" + answer.stderr)
                    version = m.group(1).decode() if m else None
                except ToolFailed:
                    pass
            identity = version if version else ocr_packs.file_identity(self.paths[name])
            self.versions[name] = version
            self.identities[name] = identity
            if ident and answered and identity and self.known is not None:
                self.known[self.paths[name]] = [*ident, version, identity]
        self._unknown.clear()
        self._asking.clear()
        found = {name: Tool(name, exe, self.versions.get(name), self.identities.get(name))
                 for name, exe in self.paths.items()}
        if "tesseract" in found:
            exe = found["tesseract"].path
            where = _cached_dir(exe, self.known)
            if where is _UNKNOWN:
                running = self._listing[0] if self._listing else None
                where = _listed_dir(exe, running, self.known)
            self._listing.clear()
            found.update(language_packs(exe, self.known, where))
        return found

    def close(self) -> None:
        """Abandon the questions still running (a run that stopped before its end)."""
        for running in [*self._asking.values(), *self._listing]:
            if running is not None:
                running.kill()
        self._asking.clear()
        self._listing.clear()
        self._unknown.clear()


def _stat_id(path: str) -> list:
    try:
        st = os.stat(path)
    except OSError:
        return []
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


_UNKNOWN = object()  # no data directory cached for this binary


def _cached_dir(tesseract: str, known: dict[str, list] | None) -> Any:
    """The data directory: ``TESSDATA_PREFIX`` when set (tesseract 5 reads the packs there),
    else the one kept in ``known`` for this very binary (None: it named none), else
    :data:`_UNKNOWN`."""
    prefix = os.environ.get("TESSDATA_PREFIX")
    if prefix:
        return os.path.abspath(prefix)
    ident = _stat_id(tesseract)
    entry = known.get(f"tessdata:{tesseract}") if known is not None else None
    if ident and isinstance(entry, list) and len(entry) == 6 and entry[:4] == ident:
        return entry[4]
    return _UNKNOWN


def _listed_dir(tesseract: str, running: RunningTool | None,
                known: dict[str, list] | None) -> str | None:
    """The directory ``tesseract --list-langs`` names (``running``: the question asked
    already; asked now when None), kept in ``known`` when it answered."""
    try:
        answer = (running.finish() if running is not None else
                  run_tool([tesseract, "--list-langs"], timeout=30.0, max_output=1 << 16))
    except ToolFailed:
        return None
    m = re.search(rb'"([^"\n]+)"', answer.stdout + b"\n" + answer.stderr)
    where = os.fsdecode(m.group(1)).rstrip("/") if m else None
    ident = _stat_id(tesseract)
    if ident and known is not None:
        known[f"tessdata:{tesseract}"] = [*ident, where, "tessdata"]
    return where


def tessdata_dir(tesseract: str, known: dict[str, list] | None = None) -> str | None:
    """Tesseract's data directory: ``TESSDATA_PREFIX`` when set, else the one
    ``tesseract --list-langs`` names (asked once per binary, kept in ``known``)."""
    where = _cached_dir(tesseract, known)
    return _listed_dir(tesseract, None, known) if where is _UNKNOWN else where


def language_packs(tesseract: str, known: dict[str, list] | None = None,
                   where: Any = _UNKNOWN) -> dict[str, Tool]:
    """The ``tessdata`` tool (the data directory ``where``, found by :func:`tessdata_dir`
    when not given; its identity is constant: the packs key each document, not the task)
    and one ``tesseract:<name>`` tool per pack, identified by its sha256 (kept in ``known``
    by the file's stat)."""
    if where is _UNKNOWN:
        where = tessdata_dir(tesseract, known)
    if not where or not os.path.isdir(where):
        return {}
    out = {ocr_packs.TESSDATA: Tool(ocr_packs.TESSDATA, where, None, "packs")}
    for name, path in ocr_packs.listed(where).items():
        ident = _stat_id(path)
        entry = known.get(path) if known is not None else None
        if ident and isinstance(entry, list) and len(entry) == 6 and entry[:4] == ident:
            identity = entry[5]
        else:
            identity = ocr_packs.identity(path)
            if ident and identity and known is not None:
                known[path] = [*ident, None, identity]
        tool = ocr_packs.TOOL_PREFIX + name
        out[tool] = Tool(tool, path, None, identity)
    return out
