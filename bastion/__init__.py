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

from readers.base import Limits
from readers.verdict import Status, Verdict
from tasks.records import ExtractRecord, WalkRecord

from .api import extract_bytes, extract_file, read_summary, records, sweep
from .errors import (BastionError, ConfigError, LockedError, ManifestError, NotAnOutputError,
                     OutputError, PrerequisiteError, SignatureError, WorkerError)
from .extractor import Extractor, OutlineEntry, Result
from .outputs import ExtractSummary, Summary, ToolInfo, WalkSummary

__all__ = [
    "extract_file", "extract_bytes", "sweep", "records", "read_summary",
    "Extractor", "Result", "OutlineEntry", "Limits", "Status", "Verdict",
    "Summary", "WalkSummary", "ExtractSummary", "ToolInfo", "WalkRecord", "ExtractRecord",
    "BastionError", "ConfigError", "ManifestError", "SignatureError", "PrerequisiteError",
    "OutputError", "LockedError", "NotAnOutputError", "WorkerError",
    "__version__",
]


def __getattr__(name: str):
    if name == "__version__":  # read only when asked (a file read)
        from tasks.cli import version

        return version()
    raise AttributeError(f"module 'bastion' has no attribute {name!r}")
