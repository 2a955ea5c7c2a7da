"""bastion: turn a tree of untrusted files into plain text, from Python.

One document, in a sandboxed worker (the same as a sweep's: deadline, output and memory caps)::

    import bastion
    result = bastion.extract_file("report.pdf")
    result.status, result.text, result.pages, result.outline

A whole manifest, and its output read back as typed records::

    summary = bastion.sweep("manifest.yaml", out="/srv/out")
    for record in bastion.records("/srv/out"):
        record.path, record.verdict.status

docs/api.md has every function; :mod:`bastion.errors` the exception tree::

    BastionError
     ├── ConfigError
     │    ├── ManifestError
     │    ├── SignatureError
     │    └── PrerequisiteError
     ├── OutputError
     │    ├── LockedError
     │    └── NotAnOutputError
     └── WorkerError
"""

from __future__ import annotations

from pathlib import Path as _Path
from typing import TYPE_CHECKING

# ``bastion.readers`` and ``bastion.tasks`` live at the top of the repository (readers/,
# tasks/).  An installed wheel holds them inside this package (pyproject's package-dir
# mapping); a source checkout, and a worker started with ``python -I -S`` from one (no
# ``site``, so no editable finder), finds them beside it: the checkout's root is searched
# for this package's subpackages too.
_ROOT = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).parent / "readers").is_dir() and (_ROOT / "readers" / "__init__.py").is_file():
    __path__.append(str(_ROOT))  # noqa: F821 (the package's own __path__)

if TYPE_CHECKING:
    from .api import Shown, extract_bytes, extract_file, read_summary, records, search, show, sweep
    from .errors import (BastionError, ConfigError, LockedError, ManifestError,
                         NotAnOutputError, OutputError, PrerequisiteError, QueryError,
                         SignatureError, WorkerError)
    from .tasks.index.query import Hit, Place, SearchResults
    from .extractor import Extractor, OutlineEntry, Result
    from .outputs import ExtractSummary, Summary, ToolInfo, WalkSummary
    from .readers.base import Limits
    from .readers.metadata import DocMeta
    from .readers.runtime.verdict import Status, Verdict
    from .tasks.records import ExtractRecord, WalkRecord

# Each public name and the module it comes from, imported on first use: a reader worker
# imports ``bastion.readers.runtime.workermain``, and must not pay for the API (the pool, the records)
_EXPORTS = {
    **dict.fromkeys(["extract_file", "extract_bytes", "sweep", "records", "read_summary",
                     "search", "show", "Shown"], ".api"),
    **dict.fromkeys(["BastionError", "ConfigError", "ManifestError", "SignatureError",
                     "PrerequisiteError", "OutputError", "LockedError", "NotAnOutputError",
                     "QueryError", "WorkerError"], ".errors"),
    **dict.fromkeys(["Hit", "Place", "SearchResults"], ".tasks.index.query"),
    **dict.fromkeys(["Extractor", "OutlineEntry", "Result"], ".extractor"),
    **dict.fromkeys(["ExtractSummary", "Summary", "ToolInfo", "WalkSummary"], ".outputs"),
    "Limits": ".readers.base",
    "DocMeta": ".readers.metadata",
    **dict.fromkeys(["Status", "Verdict"], ".readers.runtime.verdict"),
    **dict.fromkeys(["ExtractRecord", "WalkRecord"], ".tasks.records"),
}

__all__ = [
    "extract_file", "extract_bytes", "sweep", "records", "read_summary", "search", "show",
    "Shown", "Hit", "Place", "SearchResults", "Extractor", "Result", "OutlineEntry", "Limits", "DocMeta", "Status", "Verdict",
    "Summary", "WalkSummary", "ExtractSummary", "ToolInfo", "WalkRecord", "ExtractRecord",
    "BastionError", "ConfigError", "ManifestError", "SignatureError", "PrerequisiteError",
    "OutputError", "LockedError", "NotAnOutputError", "QueryError", "WorkerError",
    "__version__",
]


def __getattr__(name: str):
    if name == "__version__":  # read only when asked (a file read)
        from .tasks.cli import version

        return version()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bastion' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
