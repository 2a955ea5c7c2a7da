"""External tools are sensors, not dependencies: found on PATH at run time, or absent.

``discover`` looks each known tool up once per run and asks it for its version.  The result
goes into the extract summary; the tool names present for a document's type go into the task
key of ``unsupported`` verdicts, so installing a tool re-tries exactly the files it could read.
"""

from __future__ import annotations

import os
import re
import shutil
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


def discover(no_external: bool = False, path: str | None = None) -> dict[str, Tool]:
    """The known tools on ``path`` (default: this process's PATH); none under --no-external."""
    if no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1":
        return {}
    search = path if path is not None else os.environ.get("PATH", os.defpath)
    found: dict[str, Tool] = {}
    for name, version_args in KNOWN_TOOLS.items():
        exe = shutil.which(name, path=search)
        if exe is None:
            continue
        exe = os.path.abspath(exe)
        found[name] = Tool(name, exe, _version(exe, version_args))
    return found


def _version(exe: str, args: list[str]) -> str | None:
    try:
        result = run_tool([exe, *args], timeout=10.0, max_output=1 << 16)
    except ToolFailed:
        return None
    m = _VERSION_RE.search(result.stdout + b"\n" + result.stderr)
    return m.group(1).decode() if m else None
