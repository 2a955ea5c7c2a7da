"""The exceptions of bastion's Python API, one tree under :class:`BastionError`::

    BastionError                  anything bastion refuses to do (never a document's failure)
     ├── ConfigError              the run is refused before it starts
     │    ├── ManifestError       the manifest is invalid ("file:line: key: problem")
     │    ├── SignatureError      a required manifest signature is missing, bad or untrusted
     │    └── PrerequisiteError   no walk to extract from, stage not in the manifest, no out=
     ├── OutputError              bastion cannot write (or read) its output directory
     │    ├── LockedError         another bastion run holds the output directory
     │    ├── UnsafeOutputError   the output directory is a symlink, someone else's, or loose
     │    └── NotAnOutputError    the directory holds no bastion output (no walk.jsonl)
     ├── QueryError               a search query the index cannot run (FTS5 refused it)
     └── WorkerError              the sandboxed reader workers cannot be started or were lost

A document that cannot be read is never an exception: it is a :class:`bastion.Result` (or a
record) with ``status == "error"`` and an ``error_kind`` (docs/records.md).  These classes are
the ones bastion's own modules raise (the manifest loader, the signature check, the output
directory, the pool): nothing is translated at the edge, and the message is the one the
``bastion`` command prints.  :data:`CANNOT_START` is the one tuple of "this run cannot start
(or go on)" errors that the command and the doit tasks report as one line and exit status 1.
"""

from __future__ import annotations

__all__ = ["BastionError", "ConfigError", "ManifestError", "SignatureError",
           "PrerequisiteError", "OutputError", "LockedError", "UnsafeOutputError",
           "NotAnOutputError", "QueryError", "WorkerError", "CANNOT_START"]


class BastionError(Exception):
    """The base of every exception bastion's API raises on purpose."""


class ConfigError(BastionError):
    """The run is refused before it starts (manifest, signature, prerequisites)."""


class ManifestError(ConfigError):
    """The manifest is invalid.  ``problem``, ``key``, ``line`` and ``file`` as in the
    message ``file:line: key: problem`` (``key`` and ``line`` are None when unknown)."""

    def __init__(self, problem: str, *, key: str | None = None, line: int | None = None,
                 file: str = "manifest") -> None:
        self.problem = problem
        self.key = key
        self.line = line
        self.file = file
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {problem}" if key is None else f"{where}: {key}: {problem}")


class SignatureError(ConfigError):
    """A required manifest signature is missing, invalid or not by a trusted key."""


class PrerequisiteError(ConfigError):
    """A stage cannot run: no walk to extract from, the stage is not in the manifest's
    ``stages``, the walk was made from another manifest, or no output directory was given
    for a manifest of several roots."""


class OutputError(BastionError):
    """Bastion cannot write (or read) its output directory: disk full, read-only, …"""


class LockedError(OutputError):
    """Another bastion run holds the output directory (``<out>/.lock``)."""


class UnsafeOutputError(OutputError):
    """The output directory is a symlink, someone else's, or writable by others
    (docs/security.md, "The output directory rule")."""


class NotAnOutputError(OutputError):
    """The directory holds no bastion output (no ``walk.jsonl``) or a damaged one."""


class QueryError(BastionError):
    """A search query the index cannot run: not valid FTS5 query syntax, or empty
    (``bastion search``, :func:`bastion.search`); the message says why and how to quote."""


class WorkerError(BastionError):
    """The sandboxed reader workers cannot be started, or the pool (a Dask cluster's
    included) cannot go on."""


# A run that meets one of these cannot start (or go on): one line, exit status 1.
CANNOT_START: tuple[type[BastionError], ...] = (ConfigError, OutputError, WorkerError)
