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

import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..config import PrerequisiteError, RunConfig, load
from .records import ExtractSummary
from ..output.atomic import OutputError, OutputLock
from ..output.directory import MODES, refuse
from ..output.tag import root_conflict
from ..manifest import Manifest
from ..names import shown
from .plan import Item, Plan
from ..progress import Progress
from . import stamp
from .store import Store
from .toolcache import ToolCache
from .runplan import RunPlan, check_walk

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
    :data:`bastion.tasks.pipeline.RUN_ERRORS`; a document's failure is only ever a record."""

    def __init__(self, cfg: RunConfig, *, extra_readers: tuple[str, ...] = ()) -> None:
        self.cfg = cfg
        self.extra_readers = extra_readers
        self._loaded: tuple[Manifest, Path] | None = None
        self.walk_summary: dict[str, Any] | None = None  # the walk this run made
        self.walked = False
        self.tools: dict[str, Tool] = {}
        self.toolcache: ToolCache | None = None
        self._plan: Plan | None = None
        self.retries: dict[tuple[str, str], tuple[int, int]] = {}
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        self.stale: Sequence[Item] = ()
        self.cursor = 0  # how many stale items were handed to doit (RunConfig.slice)
        self.store: Store | None = None
        self.session: Any = None  # bastion.tasks.extract.session.ExtractSession, once extracting
        self.progress: Progress | None = None
        self.summary: ExtractSummary | None = None
        self.finished = False
        self.refused: str | None = None  # why the extract stage cannot run (a task failure)
        self.walk_read: dict[str, Any] = {}
        self.forgotten: set[str] = set()
        self.cleaned_all = False
        self.not_yet = 0  # records "not extracted yet" (a partial run)
        self.merge: Any = None  # bastion.tasks.extract.table.Change, when only the walk's change is planned
        self.merge_from: dict[str, Any] | None = None  # the last summary, then
        self.noop_from: dict[str, Any] | None = None  # the last summary, when nothing to do
        self.announce_in_actions = True  # the CLI prints the summaries itself
        # where lines for the person go: stderr as it is now, before doit replaces
        # sys.stderr with its capture inside actions
        self.console = sys.stderr
        self.t0 = time.monotonic()
        self.started = time.time()
        self._told_tightened = False

    # -- settings ---------------------------------------------------------------------------------

    def load(self) -> tuple[Manifest, Path]:
        """The manifest (signature checked when required) and the output directory."""
        if self._loaded is None:
            self._loaded = load(self.cfg)
        return self._loaded

    def lock(self) -> None:
        """Open, check and lock the output directory (tasks/output/directory.py: a symlink, another
        user's or a group/world-writable one is refused), with the manifest's modes."""
        why = root_conflict(self.out, self.manifest.roots)
        if why is not None:  # before anything in it is opened, let alone tightened
            raise refuse(Path(os.path.abspath(self.out)), why)
        lock = OutputLock.acquire(self.out, MODES[self.manifest.output_mode])
        if lock.dir is not None and lock.dir.tightened and not self._told_tightened:
            self._told_tightened = True
            self.announce(f"tightened {lock.dir.tightened} file(s) and director(ies) of "
                          f"{self.out} to {lock.dir.modes.dir:o}/{lock.dir.modes.file:o}")

    @property
    def tightened(self) -> int:
        """Files and directories of the output this run narrowed to its modes."""
        return OutputLock.tightened(self.out)

    # -- the walk ---------------------------------------------------------------------------------

    def walk(self) -> None:
        """The walk stage (once per run: later doit slices of the same run reuse it)."""
        manifest, out = self.load()
        if self.walked or self.cfg.walk == "reuse" or "walk" not in manifest.stages:
            check_walk(manifest, out)  # extract from the walk already there
            return
        from ..walk.stage import run_walk

        self.lock()
        progress = Progress("walk", 0, quiet=self.cfg.quiet, leave=False)
        try:
            self.walk_summary = run_walk(manifest, out, no_hash=self.cfg.no_hash,
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
                self.store = Store(out)
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
                if not stamp.has_stamp(self.out):
                    self._ask_tools()
                else:
                    self.tools.update(self._probe_tools())
                    if stamp.likely_nothing_to_do(self.out, self.inputs()):
                        return  # workers start at the first document, if one comes
            self.start_session()
        except (OutputError, WorkerError, OSError):
            self.close()

    def extract(self, item: Item) -> None:
        """Hand one item to a worker (its verdict is committed when it arrives)."""
        session = self.start_session()
        if self.progress is None:
            # a run of named tasks (doit extract:<file>, wildcards) does not know its count
            total = 0 if self.cfg.all_tasks else len(self.stale)
            # no final line of its own: the summary line follows
            self.progress = Progress("extract", total, quiet=self.cfg.quiet, leave=False)
        name = f"{item.root}/{item.path}"
        if item.canonical in session.scheduled:
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

    # -- finishing --------------------------------------------------------------------------------

    def finish(self) -> ExtractSummary | None:
        """Drain the workers, write extract.jsonl and extract.summary.json, remove the texts
        no record references (once per run; a no-op between doit slices): tasks/extract/finish.py."""
        from .finish import finish

        return finish(self)

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
