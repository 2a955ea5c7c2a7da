"""External tools are sensors, not dependencies: found on PATH at run time, or absent.

``discover`` looks each known tool up once per run and asks it for its version (unless the
caller's ``known`` versions already hold this very binary: same path, size, mtime, ctime and
inode).  The questions run at the same time (tesseract alone takes ~25 ms), and
:class:`ToolProbe` lets a caller overlap them with its own work.  The result goes into the
extract summary; the tool names present for a document's type go into the task key of
``unsupported`` verdicts, so installing a tool re-tries exactly the files it could read.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from .errors import ToolFailed
from .toolrun import RunningTool

KNOWN_TOOLS: dict[str, list[str]] = {
    "pdftotext": ["-v"],
    "pdftoppm": ["-v"],
    "tesseract": ["--version"],
}

_VERSION_RE = re.compile(rb"(\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Tool:
    name: str
    path: str
    version: str | None


def discover(no_external: bool = False, path: str | None = None,
             known: dict[str, list] | None = None) -> dict[str, Tool]:
    """The known tools on ``path`` (default: this process's PATH); none under --no-external.

    ``known`` maps a tool's path to ``[size, mtime_ns, ctime_ns, inode, version]`` from an
    earlier run; it is used when the binary's stat still matches, and updated in place.
    """
    return ToolProbe(no_external, path, known).result()


class ToolProbe:
    """:func:`discover` in steps.  The constructor looks the tools up (``paths``: enough to
    pick readers and key tasks); :meth:`ask` starts asking the ones not in ``known`` for their
    versions, all at once (tesseract alone takes ~25 ms of CPU); :meth:`result` collects the
    answers.  The extract stage asks once its first document is handed out, so the questions
    run beside the extraction instead of before it."""

    def __init__(self, no_external: bool = False, path: str | None = None,
                 known: dict[str, list] | None = None) -> None:
        self.known = known
        self.paths: dict[str, str] = {}
        self.versions: dict[str, str | None] = {}
        self._unknown: dict[str, list] = {}  # name -> the binary's stat identity (or [])
        self._asking: dict[str, RunningTool | None] = {}
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
            if ident and isinstance(entry, list) and len(entry) == 5 and entry[:4] == ident:
                self.versions[name] = entry[4]
            else:
                self._unknown[name] = ident

    def ask(self) -> None:
        """Start the version questions not asked yet (they run while the caller goes on)."""
        for name in self._unknown:
            if name in self._asking:
                continue
            try:
                self._asking[name] = RunningTool([self.paths[name], *KNOWN_TOOLS[name]],
                                                 timeout=10.0, max_output=1 << 16)
            except ToolFailed:
                self._asking[name] = None

    def result(self) -> dict[str, Tool]:
        """Every tool found, with its version (None when it would not say)."""
        self.ask()
        for name, ident in self._unknown.items():
            running = self._asking[name]
            version = None
            if running is not None:
                try:
                    answer = running.finish()
                    m = _VERSION_RE.search(answer.stdout + b"\n" + answer.stderr)
                    version = m.group(1).decode() if m else None
                except ToolFailed:
                    pass
            self.versions[name] = version
            if ident and self.known is not None:
                self.known[self.paths[name]] = [*ident, version]
        self._unknown.clear()
        self._asking.clear()
        return {name: Tool(name, exe, self.versions.get(name))
                for name, exe in self.paths.items()}

    def close(self) -> None:
        """Abandon the questions still running (a run that stopped before its end)."""
        for running in self._asking.values():
            if running is not None:
                running.kill()
        self._asking.clear()
        self._unknown.clear()
