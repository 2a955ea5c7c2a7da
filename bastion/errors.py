"""The exceptions of bastion's Python API, one tree under :class:`BastionError`::

    BastionError                  anything bastion refuses to do (never a document's failure)
     ├── ConfigError              the run is refused before it starts
     │    ├── ManifestError       the manifest is invalid ("file:line: key: problem")
     │    ├── SignatureError      a required manifest signature is missing, bad or untrusted
     │    └── PrerequisiteError   no walk to extract from, stage not in the manifest, no out=
     ├── OutputError              bastion cannot write (or read) its output directory
     │    ├── LockedError         another bastion run holds the output directory
     │    └── NotAnOutputError    the directory holds no bastion output (no walk.jsonl)
     └── WorkerError              the sandboxed reader workers cannot be started

A document that cannot be read is never an exception: it is a :class:`bastion.Result` (or a
record) with ``status == "error"`` and an ``error_kind`` (docs/records.md).  Each class here
wraps the internal exception of the same name (``bastion.tasks.manifest.ManifestError``, …), kept as
``__cause__``; the message is the one the ``bastion`` command prints.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

__all__ = ["BastionError", "ConfigError", "ManifestError", "SignatureError",
           "PrerequisiteError", "OutputError", "LockedError", "NotAnOutputError", "WorkerError",
           "translated"]


class BastionError(Exception):
    """The base of every exception bastion's API raises on purpose."""


class ConfigError(BastionError):
    """The run is refused before it starts (manifest, signature, prerequisites)."""


class ManifestError(ConfigError):
    """The manifest is invalid.  ``problem``, ``key``, ``line`` and ``file`` as in the
    message ``file:line: key: problem`` (``key`` and ``line`` are None when unknown)."""

    problem: str | None = None
    key: str | None = None
    line: int | None = None
    file: str | None = None


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


class NotAnOutputError(OutputError):
    """The directory holds no bastion output (no ``walk.jsonl``) or a damaged one."""


class WorkerError(BastionError):
    """The sandboxed reader workers cannot be started (the pool's ``PoolError``)."""


def _mapping() -> list[tuple[type[BaseException], type[BastionError]]]:
    from .readers.runtime.pool import PoolError
    from .tasks import config, manifest, signing
    from .tasks.output import atomic as fsio

    return [(manifest.ManifestError, ManifestError), (signing.SignatureError, SignatureError),
            (config.PrerequisiteError, PrerequisiteError), (fsio.LockedError, LockedError),
            (fsio.OutputError, OutputError), (PoolError, WorkerError)]


@contextmanager
def translated() -> Iterator[None]:
    """Raise the API's exception for the internal one raised inside the block.  The
    internal modules are imported only when something was raised (``bastion text`` and
    ``extract_file`` never load the manifest's, signing's or the output's modules)."""
    try:
        yield
    except BastionError:
        raise
    except Exception as e:
        for internal, public in _mapping():
            if isinstance(e, internal):
                err = public(str(e))
                for attr in ("problem", "key", "line", "file"):
                    if hasattr(e, attr):
                        setattr(err, attr, getattr(e, attr))
                raise err from e
        raise
