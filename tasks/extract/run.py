"""One invocation of bastion: the :class:`Run` the CLI and ``dodo.py`` alike build, which the
doit task generators and actions close over.

A run is values flowing through functions: its frozen inputs
(:class:`~bastion.tasks.extract.values.RunInputs`), then what each step returned — the walk's
summary, the extract stage's :class:`~bastion.tasks.extract.values.Decision` and
:class:`~bastion.tasks.extract.values.Planned`, its :class:`~bastion.tasks.extract.values.RunEnd`,
the index's summary — kept together in one frozen
:class:`~bastion.tasks.extract.values.Outcomes`, each set once.  The steps are functions
(:mod:`~bastion.tasks.extract.steps`: walk, session, one document, index;
:mod:`~bastion.tasks.extract.runplan`: the no-op check and the plan;
:mod:`~bastion.tasks.extract.finish`: the end) that take those values and the state that must
change as arguments.  A :class:`Run` holds that state, the resources of one invocation — the
output's lock (:class:`~bastion.tasks.output.held.HeldOutput`), the store, the session (the
workers: :class:`~bastion.tasks.extract.session.Session`), the progress display, the tools'
cache, the slices handed to doit — and each of its step methods calls its function once and
keeps what it returned, because doit calls the tasks' actions one at a time.

Nothing is kept in module globals: a second run in the same process (the CLI's ``main``
called again, the tests) builds a new ``Run``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from bastion.errors import CANNOT_START
from bastion.readers.runtime.verdict import Status, Verdict

from ..config import PrerequisiteError, RunConfig
from ..output.atomic import OutputError, OutputLock
from ..output.directory import OutputDir
from ..output.held import HeldOutput
from ..manifest import Manifest
from ..names import shown
from ..progress import Progress
from . import runplan, steps
from .plan import Item, Plan
from .runplan import Keys, check_walk
from .slices import Slices
from .store import Store
from .toolcache import ToolCache
from .values import Clock, Decision, Outcomes, Planned, RunEnd, RunInputs, run_inputs

if TYPE_CHECKING:  # the session (and the worker pool) is imported when a run extracts
    from ..index.stage import IndexSummary
    from .session import Session

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


class Run:
    """One invocation's values and resources (see the module doc).  The run's errors (bad
    manifest, missing walk, locked output) are raised by the steps that meet them, as the
    exceptions of :data:`bastion.errors.CANNOT_START`; a document's failure is only a record."""

    def __init__(self, cfg: RunConfig, *, extra_readers: tuple[str, ...] = (),
                 lock: OutputLock | None = None) -> None:
        self.cfg = cfg
        self.extra_readers = extra_readers
        self._given: RunInputs | None = None  # loaded at the first use (given())
        self.clock = Clock.now()
        self.outcomes = Outcomes()  # what the steps returned so far
        # the resources: the output's lock (given, taken by the caller who releases it, or
        # taken at the first use), the store, the workers, the progress display, the tools
        self.output = HeldOutput(lock)
        self.store: Store | None = None
        self.session: Session | None = None
        self.progress: Progress | None = None
        self.toolcache: ToolCache | None = None
        self.slices = Slices()
        self.announce_in_actions = True  # the CLI prints the summaries itself
        # where lines for the person go: stderr as it is now, before doit replaces
        # sys.stderr with its capture inside actions
        self.console = sys.stderr

    # -- the frozen inputs and what the steps returned -----------------------------------------

    def given(self) -> RunInputs:
        """The run's frozen inputs (:func:`bastion.tasks.extract.values.run_inputs`), loaded
        at the first use: the manifest's errors are the run's (a failed task, one line)."""
        if self._given is None:
            self._given = run_inputs(self.cfg, self.extra_readers)
        return self._given

    @property
    def out(self) -> Path:
        return self.given().out

    @functools.cached_property
    def keys(self) -> Keys:
        """The inputs that decide a task key besides a file's bytes."""
        return Keys(self.given(), self.lock)

    def _keep(self, **returned: Any) -> None:
        """Keep what a step returned (each once)."""
        self.outcomes = dataclasses.replace(self.outcomes, **returned)

    @property
    def end(self) -> RunEnd | None:
        """What the run's finish returned (None before it, and between doit slices)."""
        return self.outcomes.end

    @property
    def stale(self) -> Sequence[Item]:
        """The planned items to extract (none before the plan)."""
        planned = self.outcomes.planned
        return planned.stale if planned is not None else ()

    # -- the resources ----------------------------------------------------------------------------

    def lock(self) -> OutputDir:
        """The output directory, checked and locked once per run (tasks/output/held.py): what
        everything this run writes goes through."""
        given = self.given()
        return self.output.lock(given.manifest, given.out, self.announce)

    def store_dir(self) -> OutputDir:
        """The output directory the store goes through: the locked one, except for a listing
        command (``doit list``, ``info``) that has not locked it (it only reads verdicts)."""
        if self.cfg.listing:
            unlocked = self.output.unlocked(self.out)
            if unlocked is not None:
                return unlocked
        return self.lock()

    def open_store(self) -> Store:
        """The store (made at the first use: its database opens when it is first read)."""
        if self.store is None:
            self.store = Store(self.out, self.store_dir)
        return self.store

    def tool_cache(self) -> ToolCache:
        """The tools' cache, their version questions started (answered by its ``tools``)."""
        if self.toolcache is None:
            self.toolcache = ToolCache(self.out, self.cfg.no_external)
        self.toolcache.ask()
        return self.toolcache

    def start_session(self) -> Session:
        """The session (workers started); the output is locked first."""
        if self.session is None:
            given = self.given()
            self.lock()
            self.session = steps.open_session(
                given, self.open_store(), on_verdict=self._on_verdict,
                expected=lambda: len(self.stale), more_slices=lambda: self.more_slices)
        self.session.start()
        return self.session

    def prestart(self) -> None:
        """Start the workers now, before doit is loaded and the walk runs (:func:`steps.prestart
        <bastion.tasks.extract.steps.prestart>`); a failure here is left for the first
        document to report."""
        from bastion.errors import WorkerError

        try:
            steps.prestart(self.cfg, self.lock, self.tool_cache, self.keys, self.start_session)
        except (OutputError, WorkerError, OSError):
            self.close()

    def _on_verdict(self, item: Item, verdict: Verdict) -> None:
        if self.progress is not None:
            self.progress.update(1, errors=1 if verdict.status is Status.ERROR else 0,
                                 name=f"{item.root}/{item.path}")

    def close(self) -> None:
        """Stop the workers, if any (the end of a run that did not reach ``finish``)."""
        if self.session is not None:
            self.session.close()

    def release(self) -> None:
        """Stop the workers (:meth:`close`), release the lock this run took (a lock it was
        given stays its giver's) and close what it opened."""
        self.slices.done(False)
        self.close()
        self.output.release()

    # -- the steps: each calls its function once and keeps what it returned --------------------

    def walk(self) -> None:
        """The walk stage (once per run: later doit slices of the same run reuse it)."""
        given = self.given()
        if (self.outcomes.walked is not None or self.cfg.walk == "reuse"
                or "walk" not in given.manifest.stages):
            check_walk(given.manifest, given.out)  # extract from the walk already there
            return
        self._keep(walked=steps.walk(given, self.lock()))

    def _check_walk(self) -> None:
        self._keep(walk_read=check_walk(self.given().manifest, self.out))

    def decide(self) -> Decision:
        """What the extract stage does (once per run: later doit slices get the same value):
        refused (the reason: a bad manifest, no walk, a locked output), nothing to do (the
        stamp holds: :func:`~bastion.tasks.extract.runplan.nothing_to_do`), or planned."""
        decision = self.outcomes.decision
        if decision is None:
            try:
                noop = self._nothing_to_do()
                if noop is None:
                    self.plan()
                decision = Decision(noop_from=noop)
            except CANNOT_START as e:
                decision = Decision(refused=str(e))
            self._keep(decision=decision)
        return decision

    def _nothing_to_do(self) -> dict[str, Any] | None:
        cfg = self.cfg
        if cfg.all_tasks or cfg.listing or self.outcomes.planned is not None:
            return None
        self._check_walk()
        tools = self.tool_cache().tools
        return runplan.nothing_to_do(self.lock(), self.open_store(),
                                     lambda: self.keys.digest(tools))

    def plan(self) -> Plan:
        """The plan (made once: :func:`~bastion.tasks.extract.runplan.make_planned`)."""
        return self._planned().plan

    def _planned(self) -> Planned:
        planned = self.outcomes.planned
        if planned is None:
            self._check_walk()
            planned = runplan.make_planned(self.given(), self.open_store(), self.tool_cache(),
                                           lock=self.lock, keys=self.keys)
            self._keep(planned=planned)
        return planned

    def items_for(self) -> Sequence[Item]:
        """The next slice of stale items (or all of them)."""
        return self.slices.take(self._planned().stale, self.cfg.slice)

    @property
    def more_slices(self) -> bool:
        """Whether stale items remain for another doit run (``RunConfig.slice``)."""
        planned = self.outcomes.planned
        return (planned is not None and not self.cfg.all_tasks
                and self.slices.remain(planned.stale) and self.outcomes.end is None)

    def extract(self, item: Item) -> None:
        """Hand one item to a worker (its verdict is committed when it arrives)."""
        session = self.start_session()
        if self.progress is None:
            # a run of named tasks (doit extract:<file>, wildcards) does not know its count
            total = 0 if self.cfg.all_tasks else len(self.stale)
            # no final line of its own: the summary line follows
            self.progress = Progress("extract", total, quiet=self.cfg.quiet, leave=False)
        steps.extract(item, self._planned(), session, self.progress, every=self.cfg.all_tasks)

    def finish(self) -> RunEnd | None:
        """Drain the workers, write the records and the summary: the run's end, once per run
        (later calls return the same value), or None between doit slices (only a commit)."""
        from .finish import Resources, finish

        if self.outcomes.end is None:
            decision = self.outcomes.decision
            more = self.more_slices
            if (decision is None or decision.noop_from is None) and not more:
                self._planned()
            res = Resources(self.lock, self.open_store(), self.session, self.progress,
                            self.toolcache)
            end = finish(self.given(), self.outcomes, res, keys=self.keys, clock=self.clock,
                         more_slices=more)
            if end is not None:
                self._keep(end=end)
        return self.outcomes.end

    def index(self) -> IndexSummary:
        """The index stage (tasks/extract/steps.py ``index``); what it did."""
        summary = steps.index(self.given().manifest, self.lock, quiet=self.cfg.quiet)
        self._keep(index=summary)
        return summary

    # -- lines for the person -------------------------------------------------------------------

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
