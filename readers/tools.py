"""External tools are sensors, not dependencies: found on PATH at run time, or absent.

``discover`` looks each known tool up once per run and asks it for its version (unless the
caller's ``known`` versions already hold this very binary: same path, size, mtime, ctime and
inode — asking three tools costs ~55 ms of every run).  The result goes into the extract summary; the tool names present for a document's type go into the task
key of ``unsupported`` verdicts, so installing a tool re-tries exactly the files it could read.
"""

from __future__ import annotations

import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .errors import ToolFailed
from .runtime import run_tool

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
    if no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1":
        return {}
    search = path if path is not None else os.environ.get("PATH", os.defpath)
    exes: dict[str, str] = {}
    for name in KNOWN_TOOLS:
        exe = shutil.which(name, path=search)
        if exe is not None:
            exes[name] = os.path.abspath(exe)
    # the tools not known yet are asked at the same time (tesseract alone takes ~25 ms)
    with ThreadPoolExecutor(max_workers=max(1, len(exes))) as pool:
        versions = {name: pool.submit(_known_version, exe, KNOWN_TOOLS[name], known)
                    for name, exe in exes.items()}
    return {name: Tool(name, exes[name], versions[name].result()) for name in exes}


def _known_version(exe: str, args: list[str], known: dict[str, list] | None) -> str | None:
    if known is None:
        return _version(exe, args)
    try:
        st = os.stat(exe)
    except OSError:
        return _version(exe, args)
    ident = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    entry = known.get(exe)
    if isinstance(entry, list) and len(entry) == 5 and entry[:4] == ident:
        return entry[4]
    version = _version(exe, args)
    known[exe] = [*ident, version]
    return version


def _version(exe: str, args: list[str]) -> str | None:
    try:
        result = run_tool([exe, *args], timeout=10.0, max_output=1 << 16)
    except ToolFailed:
        return None
    m = _VERSION_RE.search(result.stdout + b"\n" + result.stderr)
    return m.group(1).decode() if m else None
