"""A run's steps besides the plan and the end, as functions of what they read and change: the
walk, the session opened, one document handed out, the index brought in step.

Each takes the run's frozen values and the state it changes (the output, the store, the
session, the progress display) as arguments and returns what it made; the run
(:class:`bastion.tasks.extract.run.Run`) calls each once (a document: once per item) and keeps
what it returned.  The plan step is :mod:`bastion.tasks.extract.runplan`'s, the end
:mod:`bastion.tasks.extract.finish`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from bastion.readers.runtime.verdict import Verdict

from ..config import PrerequisiteError, RunConfig
from ..manifest import Manifest
from ..output.directory import OutputDir
from ..progress import Progress
from . import stamp
from .plan import Item
from .runplan import Keys
from .store import Store
from .toolcache import ToolCache
from .values import Planned, RunInputs

if TYPE_CHECKING:  # the session (and the worker pool) is imported when a run extracts
    from ..index.stage import IndexSummary
    from .session import Session

__all__ = ["extract", "index", "open_session", "prestart", "walk"]


def walk(given: RunInputs, od: OutputDir) -> dict[str, Any]:
    """The walk stage into the locked output ``od``, with its progress display; its summary
    (tasks/walk/stage.py)."""
    from ..walk.stage import run_walk

    progress = Progress("walk", 0, quiet=given.cfg.quiet, leave=False)
    try:
        return run_walk(given.manifest, od, no_hash=given.cfg.no_hash, progress=progress.update)
    finally:
        progress.close()


def open_session(given: RunInputs, store: Store, *,
                 on_verdict: Callable[[Item, Verdict], None],
                 expected: Callable[[], int], more_slices: Callable[[], bool]) -> Session:
    """The run's session, not started: its documents read by the local sandboxed workers, or
    on a Dask cluster when the run names one (tasks/cluster/run.py; ``expected()``: how many
    items the run will submit, ``more_slices()``: whether more come after a drain)."""
    manifest = given.manifest
    roots = {r.name: r for r in manifest.roots}
    if given.cfg.cluster:
        from ..cluster.run import ClusterSession, parse_cluster

        return ClusterSession(parse_cluster(given.cfg.cluster), out=given.out, store=store,
                              limits=manifest.limits, roots=roots, on_verdict=on_verdict,
                              extra_readers=given.extra_readers, expected=expected,
                              more_slices=more_slices)
    from .session import ExtractSession

    return ExtractSession(out=given.out, store=store, limits=manifest.limits,
                          workers=given.cfg.workers, roots=roots, on_verdict=on_verdict,
                          extra_readers=given.extra_readers,
                          allow_root=manifest.allow_root_workers)


def prestart(cfg: RunConfig, lock: Callable[[], OutputDir], toolcache: Callable[[], ToolCache],
             keys: Keys, start: Callable[[], object]) -> None:
    """Start the workers (``start()``) before doit is loaded and the walk runs: a worker's
    start (interpreter, sandbox) then overlaps the CLI's loading of doit, the walk and the
    plan.  An output with no stamp (a first run, a fresh directory) cannot be a no-op: there
    the tools' version questions (a process per tool: ``toolcache()``) are only started, and
    the workers start at once, so that the questions and the registry's loading overlap
    their start; where the stamp likely holds, no worker is started (one starts at the first
    document, if one comes)."""
    if not (cfg.all_tasks or cfg.listing):
        if not stamp.has_stamp(lock()):
            toolcache()
        else:
            tools = toolcache().tools
            if stamp.likely_nothing_to_do(lock(), keys.digest(tools)):
                return
    start()


def extract(item: Item, planned: Planned, session: Session, progress: Progress, *,
            every: bool) -> None:
    """Hand one item to a worker, its job made with the tools it was planned with (its
    verdict is committed when it arrives).  ``every``: the run makes a task of every item
    (``--all``, named tasks), which may repeat one (sha256, key): the plan marks what was
    handed out, and a repeat only counts."""
    if every and not planned.plan.hand_out(item):
        progress.update(1, name=None)  # the same content as a file handed out
        return
    progress.start(f"{item.root}/{item.path}")
    session.submit(item, planned.tools)


def index(manifest: Manifest, lock: Callable[[], OutputDir], *, quiet: bool) -> IndexSummary:
    """The index stage: the full-text index of the locked output (``lock()``) brought in step
    with its records, with a progress display once texts are added (tasks/index/stage.py).
    PrerequisiteError when the manifest's stages have no index."""
    from ..index.stage import sync

    if "index" not in manifest.stages:
        raise PrerequisiteError(f"'index' is not in the stages of {manifest.path.name} "
                                f"(stages: {', '.join(manifest.stages)})")
    shown: list[Progress] = []

    def progress(done: int, total: int) -> None:
        if not shown:
            shown.append(Progress("index", total, quiet=quiet, leave=False))
        shown[0].update(1)

    try:
        return sync(lock(), progress=progress)
    finally:
        for display in shown:
            display.close()
