"""What ``local:N``'s helper prepares before it forks the worker processes
(:func:`bastion.tasks.cluster.local.serve`), so that every worker starts with it: Dask and
bastion's worker side imported, this machine's tools probed (their answers come while Dask is
imported) and the code digest computed — once, instead of once per worker.  The same machine,
the same ``PATH`` and files as a worker's own probe would see.
"""

from __future__ import annotations

import importlib
import sys


def prepare() -> None:
    """Import and probe everything a worker needs, in this (single-threaded) process."""
    from bastion.readers.runtime.toolset import ToolProbe

    probe = ToolProbe()
    probe.ask()  # the tools' version questions run while the imports below do
    # the helper and its workers never carry arrays: Dask's optional numpy (≈ 0.1 s of
    # import, a receive buffer its only use here) stays out of them
    sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]
    importlib.import_module("distributed")
    importlib.import_module("bastion.tasks.cluster.plugin")  # the batch function, the readers
    from .worker import code_identity, worker_tools

    worker_tools(probe)
    code_identity()
