"""One invocation of bastion: an explicit :class:`Run` value, built by the CLI and by
``dodo.py`` alike, that the doit task generators close over.

A run holds its settings (:class:`bastion.tasks.config.RunConfig`), the manifest and the output
directory, the walk it made, the plan (:func:`bastion.tasks.extract.plan.plan`, computed once), the session
that owns the workers and the commits (:class:`bastion.tasks.extract.session.ExtractSession`), and at the end
the summary.  Nothing is kept in module globals: a second run in the same process (the CLI's
``main`` called again, the tests) builds a new ``Run``.  Its plan side (the plan, the no-op
check, the slices handed to doit) is its base, :class:`bastion.tasks.extract.runplan.RunPlan`.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..config import PrerequisiteError, RunConfig
from ..output.atomic import OutputError, OutputLock
from ..output.directory import MODES, OutputDir, open_output, refuse
from ..output.tag import root_conflict
from ..manifest import Manifest
from ..names import shown
from .plan import Item
from ..progress import Progress
from . import stamp
from .store import Store
from .toolcache import ToolCache
from .runplan import RunPlan, check_walk
from .values import Decision, Planned, RunEnd, RunInputs, run_inputs

__all__ = ["Run", "check_stages", "check_walk"]


def check_stages(manifest: Manifest, out: Path, stages: list[str]) -> None:
    """PrerequisiteError unless every stage asked for is in the manifest's ``stages`` and, for
    an extract without a walk, a walk of this manifest is already there."""
    for stage in stages:
        if stage not in manifest.stages:
            raise PrerequisiteError(f"'{stage}' is not in the stages of {manifest.path.name} "
                                    f"(stages: {', '.join(manifest.stages)})")
    if "walk" not in stages:
        check_walk(manifest, out)


class Run(RunPlan):
    """Everything one invocation shares.  Errors that are the run's (bad manifest, missing
    walk, locked output) are raised by the steps that meet them, as the exceptions of
    :data:`bastion.errors.CANNOT_START`; a document's failure is only ever a record."""

    def __init__(self, cfg: RunConfig, *, extra_readers: tuple[str, ...] = (),
                 lock: OutputLock | None = None) -> None:
        self.cfg = cfg
        # the output's lock and checked directory: taken by :meth:`lock` (or given, taken by
        # the caller, who releases it), released by :meth:`release`
        self._lock = lock
        self._owns_lock = lock is None
        self._unlocked: OutputDir | None = None  # a listing command's (store_dir)
        self.extra_readers = extra_readers
        self._given: RunInputs | None = None
        self.walk_summary: dict[str, Any] | None = None  # the walk this run made
        self.index_summary: Any = None  # what the index stage did (tasks/index/stage.py)
        self.walked = False
        self.tools: dict[str, Tool] = {}
        self.toolcache: ToolCache | None = None
        self.planned: Planned | None = None  # what plan() made (tasks/extract/values.py)
        self.cursor = 0  # how many stale items were handed to doit (RunConfig.slice)
        self.store: Store | None = None
        self.session: Any = None  # bastion.tasks.extract.session.ExtractSession, once extracting
        self.progress: Progress | None = None
        self.decision: Decision | None = None  # what the extract stage does (decide())
        self.end: RunEnd | None = None  # what finish() returned
        self.walk_read: dict[str, Any] = {}
        self.announce_in_actions = True  # the CLI prints the summaries itself
        # where lines for the person go: stderr as it is now, before doit replaces
        # sys.stderr with its capture inside actions
        self.console = sys.stderr
        self.t0 = time.monotonic()
        self.started = time.time()
        self._told_tightened = False
        self._gc_was: bool | None = None  # while paused (pause_gc): whether it was enabled
        self._frozen = False  # the slice's objects left out of collections (resume_gc)

    # -- settings ---------------------------------------------------------------------------------

    def given(self) -> RunInputs:
        """The run's frozen inputs (:func:`bastion.tasks.extract.values.run_inputs`), loaded
        at the first use: the manifest's errors are the run's (a failed task, one line)."""
        if self._given is None:
            self._given = run_inputs(self.cfg, self.extra_readers)
        return self._given

    def lock(self) -> OutputDir:
        """Open, check and lock the output directory (tasks/output/directory.py: a symlink, another
        user's or a group/world-writable one is refused), with the manifest's modes, once per
        run; the checked directory everything this run writes goes through."""
        if self._lock is None or self._lock.fd is None:
            why = root_conflict(self.out, self.manifest.roots)
            if why is not None:  # before anything in it is opened, let alone tightened
                raise refuse(Path(os.path.abspath(self.out)), why)
            self._lock = OutputLock.acquire(self.out, MODES[self.manifest.output_mode])
            self._owns_lock = True
        else:
            self._lock.use_modes(MODES[self.manifest.output_mode])
        od = self._lock.dir
        if od.tightened and not self._told_tightened:
            self._told_tightened = True
            self.announce(f"tightened {od.tightened} file(s) and director(ies) of "
                          f"{self.out} to {od.modes.dir:o}/{od.modes.file:o}")
        return od

    def store_dir(self) -> OutputDir:
        """The output directory the store goes through: the locked one (:meth:`lock`), except
        for a listing command (``doit list``, ``info``) that has not locked it: that one only
        reads the verdicts, through the output opened and checked but not locked, so that it
        still works while a run holds the lock."""
        if self.cfg.listing and self._lock is None:
            if self._unlocked is None:
                self._unlocked = open_output(self.out)
            return self._unlocked
        return self.lock()

    def release(self) -> None:
        """Stop the workers (:meth:`close`) and release the lock this run took (a lock it was
        given stays its giver's) and close what it opened."""
        self.slice_done(False)
        self.close()
        if self._lock is not None and self._owns_lock:
            self._lock.release()
            self._lock = None
        if self._unlocked is not None:
            self._unlocked.close()
            self._unlocked = None

    @property
    def tightened(self) -> int:
        """Files and directories of the output this run narrowed to its modes."""
        return self._lock.dir.tightened if self._lock is not None else 0

    # -- the walk ---------------------------------------------------------------------------------

    def walk(self) -> None:
        """The walk stage (once per run: later doit slices of the same run reuse it)."""
        manifest, out = self.load()
        if self.walked or self.cfg.walk == "reuse" or "walk" not in manifest.stages:
            check_walk(manifest, out)  # extract from the walk already there
            return
        from ..walk.stage import run_walk

        od = self.lock()
        progress = Progress("walk", 0, quiet=self.cfg.quiet, leave=False)
        try:
            self.walk_summary = run_walk(manifest, od, no_hash=self.cfg.no_hash,
                                         progress=progress.update)
        finally:
            progress.close()
        self.walked = True

    # -- extracting -------------------------------------------------------------------------------

    def start_session(self) -> Any:
        """The session (workers started); the output is locked first."""
        if self.session is None:
            from .session import ExtractSession

            manifest, out = self.load()
            self.lock()
            if self.store is None:
                self.store = Store(out, self.store_dir)
            common: dict[str, Any] = dict(
                out=out, store=self.store, limits=manifest.limits, tools=self.tools,
                roots={r.name: r for r in manifest.roots},
                on_verdict=self._on_verdict, extra_readers=self.extra_readers)
            if self.cfg.cluster:  # the documents go to a Dask cluster (tasks/cluster/run.py)
                from ..cluster.run import ClusterSession, parse_cluster

                self.session = ClusterSession(parse_cluster(self.cfg.cluster),
                                              expected=lambda: len(self.stale),
                                              more_slices=lambda: self.more_slices, **common)
            else:
                self.session = ExtractSession(workers=self.cfg.workers,
                                              allow_root=manifest.allow_root_workers, **common)
        if self.session.pool is None:
            self.session.start()
        return self.session

    def prestart(self) -> None:
        """Start the workers now, before doit is loaded and the walk runs: a worker's start
        (interpreter, sandbox) then overlaps the CLI's loading of doit, the walk
        and the plan.  A failure here is left for the first document to report.

        An output with no stamp (a first run, a fresh directory) cannot be a no-op: there the
        tools' version questions (a process per tool) are only started, and the workers
        start at once, so that the questions and the registry's loading overlap their start."""
        from bastion.errors import WorkerError

        try:
            if not (self.cfg.all_tasks or self.cfg.listing):
                if not stamp.has_stamp(self.lock()):
                    self._ask_tools()
                else:
                    self.tools.update(self._probe_tools())
                    if stamp.likely_nothing_to_do(self.lock(), self.inputs()):
                        return  # workers start at the first document, if one comes
            self.start_session()
        except (OutputError, WorkerError, OSError):
            self.close()

    def pause_gc(self) -> None:
        """No cyclic garbage collection while a slice's tasks are made and run (until
        :meth:`resume_gc`, at the slice's finish).  A slice's tasks and doit's nodes for them
        are hundreds of thousands of objects that live until the slice ends, and every full
        collection while they pile up walks them all: ≈ 1 s of a 20,000-file sweep's parent,
        a fifth of its CPU (docs/performance.md, issue 40).  The walk runs before, with the
        collector on."""
        if self._gc_was is None:
            self._gc_was = gc.isenabled()
            gc.disable()

    def resume_gc(self) -> None:
        """The collector on again (as it was before :meth:`pause_gc`), what the slice made
        left out of its collections while the slice's doit run holds it (``gc.freeze``:
        until :meth:`slice_done`), so the finish pays no collection of it either."""
        if self._gc_was is not None:
            gc.freeze()
            self._frozen = True
            if self._gc_was:
                gc.enable()
            self._gc_was = None

    def slice_done(self, more: bool) -> None:
        """A slice's doit run is over: what it made is garbage the collector may take, at
        once when another slice follows (so that no two slices' garbage is ever held), else
        whenever it next runs (idempotent)."""
        self.resume_gc()
        if self._frozen:
            self._frozen = False
            gc.unfreeze()
            if more:
                gc.collect()

    def extract(self, item: Item) -> None:
        """Hand one item to a worker (its verdict is committed when it arrives)."""
        session = self.start_session()
        if self.progress is None:
            # a run of named tasks (doit extract:<file>, wildcards) does not know its count
            total = 0 if self.cfg.all_tasks else len(self.stale)
            # no final line of its own: the summary line follows
            self.progress = Progress("extract", total, quiet=self.cfg.quiet, leave=False)
        name = f"{item.root}/{item.path}"
        # the stale slices hold one item per (sha256, key); every item (--all, named tasks)
        # may repeat one: the plan marks what was handed out
        if self.cfg.all_tasks and not self.plan().hand_out(item):
            self.progress.update(1, name=None)  # the same content as a file handed out
            return
        self.progress.start(name)
        session.submit(item)

    def _on_verdict(self, item: Item, verdict: Verdict) -> None:
        if self.progress is not None:
            self.progress.update(1, errors=1 if verdict.status is Status.ERROR else 0,
                                 name=f"{item.root}/{item.path}")

    def close(self) -> None:
        """Stop the workers, if any (the end of a run that did not reach ``finish``)."""
        if self.session is not None:
            self.session.close()

    def announce(self, line: str) -> None:
        """A line for the person running bastion, on the real stderr (fd 2: doit captures
        ``sys.stderr`` inside actions), unless quiet."""
        if not self.cfg.quiet:
            self.say(line)

    def say(self, line: str) -> None:
        try:  # a file name in the line is shown escaped, never obeyed by the terminal
            self.console.write(shown(line) + "\n")
            self.console.flush()
        except (OSError, ValueError):
            pass
