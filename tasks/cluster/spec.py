"""What ``--cluster`` names, and the one error of a cluster that cannot go on.

:func:`parse_cluster` reads ``local:N`` or a scheduler's address into a :class:`ClusterSpec`;
:class:`ClusterError` is every fault of the cluster itself (Dask missing, the scheduler
unreachable or lost, no worker): one line, exit 1.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass

from bastion.errors import WorkerError


INSTALL_HINT = "--cluster needs Dask: pip install 'bastion[dask]'"


class ClusterError(WorkerError):
    """The cluster cannot go on: Dask is not installed, the scheduler cannot be reached or was
    lost, no worker joined.  A :class:`~bastion.errors.WorkerError` (the cluster is the run's
    pool of workers), so, one of :data:`~bastion.errors.CANNOT_START`, whichever step meets it
    reports it as one line and the run exits 1."""


@dataclass(frozen=True)
class ClusterSpec:
    """``local:N`` (a scheduler and N worker processes started by this run) or the address
    of a running scheduler (``tcp://host:8786``)."""

    address: str | None = None
    local_workers: int = 0

    @property
    def local(self) -> bool:
        return self.address is None

    def __str__(self) -> str:
        return self.address or f"local:{self.local_workers}"


_LOCAL = re.compile(r"local(?::(\d+))?")
_ADDRESS = re.compile(r"(?:[a-z][a-z0-9+.-]*://)?[^\s/:]+(?::\d+)?|[a-z]+://\S+")


def parse_cluster(text: str) -> ClusterSpec:
    """The cluster ``--cluster`` names; ClusterError (a one-line reason) when it names none."""
    text = text.strip()
    m = _LOCAL.fullmatch(text)
    if m:
        n = int(m.group(1)) if m.group(1) else (os.cpu_count() or 1)
        if n < 1:
            raise ClusterError(f"--cluster {text}: a local cluster needs at least one worker")
        return ClusterSpec(local_workers=n)
    if text and _ADDRESS.fullmatch(text):
        return ClusterSpec(address=text if "://" in text else f"tcp://{text}")
    raise ClusterError(f"--cluster {text!r}: give a scheduler address (tcp://host:8786) or "
                     "local:N (a local cluster of N worker processes)")


def require_dask() -> None:
    """ClusterError with what to install when ``dask.distributed`` is missing.  Looked up, not
    imported: importing it takes ≈ 0.5 s of CPU, which the run does in the background
    (:mod:`bastion.tasks.cluster.connect`) while ``local:N``'s processes start."""
    try:
        found = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ClusterError(INSTALL_HINT)


def why(error: BaseException | None) -> str:
    """An exception as one line: its type and the first line of its message."""
    if error is None:
        return "unknown"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text and text[0] else type(error).__name__
