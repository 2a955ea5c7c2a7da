"""The plan side of a run: the plan computed once, the no-op check, the digest of the
inputs, why a task is up to date, and the slices of stale items handed to doit.

:class:`RunPlan` is the base of :class:`bastion.tasks.extract.run.Run`: its methods read and set the
run's attributes (``cfg``, ``tools``, ``toolcache``, ``store``, ``planned``, ``cursor``,
``walk_read``, ``decision``, ``end``), which
``Run.__init__`` makes, and its ``given`` (the frozen :class:`~bastion.tasks.extract.values.RunInputs`)
and ``lock``.  What the stage will do is a returned value, :meth:`RunPlan.decide`'s
:class:`~bastion.tasks.extract.values.Decision`; the plan is one too, :meth:`RunPlan.plan`'s
:class:`~bastion.tasks.extract.values.Planned` (made by :func:`make_plan` or :func:`plan_change`).  The plan itself is
:func:`bastion.tasks.extract.plan.plan` (made from the walk table here), or :func:`plan_change` when only
the walk's change needs planning.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from bastion.readers.runtime.toolset import Tool

from bastion.errors import CANNOT_START

from ..config import PrerequisiteError, RunConfig
from ..forgotten import ALL, forgotten
from ..output.atomic import STATE_DIR, read_json_file
from ..output.directory import OutputDir
from ..manifest import Manifest
from ..names import task_name
from . import owners, plan as plan_module
from .plan import Item, Plan, Select, describe, plan
from . import backoff, stamp
from .store import Store
from .toolcache import ToolCache
from .table import Records, StoreTexts, changed, walk_records
from .values import Decision, Planned, RunEnd, RunInputs

if TYPE_CHECKING:
    from bastion.readers.dispatch import Registry


def check_walk(manifest: Manifest, out: Path) -> dict:
    """The walk's summary, or PrerequisiteError when the extract stage may not run."""
    if "extract" not in manifest.stages:
        raise PrerequisiteError(f"'extract' is not in the stages of {manifest.path.name} "
                                f"(stages: {', '.join(manifest.stages)})")
    try:
        summary = read_json_file(out / "walk.summary.json")  # a listing command's too: by path
    except (OSError, ValueError):
        raise PrerequisiteError(f"no walk in {out}: run the walk stage first "
                                "(bastion walk / bastion sweep)") from None
    if not (out / "walk.jsonl").is_file():
        raise PrerequisiteError(f"no walk.jsonl in {out}: run the walk stage first")
    if summary.get("manifest_digest") != manifest.digest:
        raise PrerequisiteError(
            f"the walk in {out} was made from a different manifest "
            f"(walk {str(summary.get('manifest_digest'))[:12]}…, this one "
            f"{manifest.digest[:12]}…): walk again")
    return summary


class RunPlan:
    """The plan of one run (the base of :class:`bastion.tasks.extract.run.Run`; see the module doc)."""

    cfg: RunConfig
    extra_readers: tuple[str, ...]
    tools: dict[str, Tool]
    toolcache: ToolCache | None
    store: Store | None
    planned: Planned | None  # what plan() made (once per run)
    cursor: int
    walk_read: dict[str, Any]
    decision: Decision | None  # what decide() returned
    end: RunEnd | None  # what the run's finish returned

    def given(self) -> RunInputs:
        """The run's frozen inputs (a :class:`Run` loads them once)."""
        raise NotImplementedError

    def load(self) -> tuple[Manifest, Path]:
        """The manifest and the output directory."""
        given = self.given()
        return given.manifest, given.out

    def lock(self) -> OutputDir:
        """The output directory, locked and checked (a :class:`Run` takes the lock once)."""
        raise NotImplementedError

    def store_dir(self) -> OutputDir:
        """The output directory the store goes through (:meth:`Run.store_dir`)."""
        raise NotImplementedError

    @property
    def manifest(self) -> Manifest:
        return self.load()[0]

    @property
    def registry(self) -> Registry:
        """The reader registry this run's plan chooses from (:attr:`RunInputs.registry`)."""
        return self.given().registry

    @property
    def out(self) -> Path:
        return self.load()[1]

    @property
    def stale(self) -> Sequence[Item]:
        """The planned items to extract (none before the plan)."""
        return self.planned.stale if self.planned is not None else ()

    # -- the plan ---------------------------------------------------------------------------------

    def plan(self) -> Plan:
        """The plan (computed once): the walk's records against the stored verdicts."""
        if self.planned is None:
            self.planned = self._make_plan()
            self._disown(self.planned.plan)
        return self.planned.plan

    def _make_plan(self) -> Planned:
        """The plan of only what the walk changed (:func:`plan_change`), else of everything
        (:func:`make_plan`), with the tools probed and the store opened first."""
        manifest, out = self.load()
        self.walk_read = check_walk(manifest, out)
        self.installed()  # the libraries' versions an earlier run of this installation found
        select = self.registry.select
        probed = self._probe_tools()
        self.tools.clear()  # the same dict the session (started early) holds
        self.tools.update(probed)
        if self.store is None:
            self.store = Store(out, self.store_dir)
        # the runs a repeat offender waits are counted here: one per run that plans to extract
        backoff.start_run(self.store, count=not self.cfg.listing)
        retries = backoff.retries(self.store)
        merged = None if self.cfg.all_tasks or self.cfg.listing else plan_change(self, select)
        if merged is not None:  # only what the walk found changed (tasks/extract/table.py)
            return dataclasses.replace(merged, retries=retries)
        return make_plan(self.store, manifest, select, self.tools, retries,
                         forgotten(out / STATE_DIR), self.cfg.retry_errors, self._owners)

    def _owners(self, shas: list[str]) -> dict[str, str]:
        """Whose texts the plain names of these sha256s hold (tasks/extract/owners.py)."""
        assert self.store is not None
        return owners.owners(self.store.db, shas) if self.store.db_path.exists() else {}

    def _disown(self, plan: Plan) -> None:
        """Before any text is placed: the plain names this run gives to another key than
        their owner's are no one's (tasks/extract/owners.py), unless nothing is run."""
        if not self.cfg.listing and self.store is not None:
            owners.disown(self.store.db, plan.disowned())

    def decide(self) -> Decision:
        """What the extract stage does (once per run: later doit slices get the same value):
        refused (the reason: a bad manifest, no walk, a locked output), nothing to do (the last
        complete run's stamp holds), or the plan, computed here."""
        if self.decision is None:
            try:
                noop = self.nothing_to_do()
                if noop is None:
                    self.plan()
                self.decision = Decision(noop_from=noop)
            except CANNOT_START as e:
                self.decision = Decision(refused=str(e))
        return self.decision

    def nothing_to_do(self) -> dict[str, Any] | None:
        """The summary of the last complete run (its row in ``runs``) when its stamp still holds
        (:func:`bastion.tasks.extract.stamp.nothing_to_do`): then the run does no per-file
        work; else None."""
        if self.cfg.all_tasks or self.cfg.listing or self.planned is not None:
            return None
        manifest, out = self.load()
        self.walk_read = check_walk(manifest, out)
        self.tools.update(self._probe_tools())
        from ..output.modes import OutputError

        if not stamp.has_stamp(self.lock()):
            return None  # no complete run before: nothing can stand (no inputs' digest taken)
        if self.store is None:
            self.store = Store(self.out, self.store_dir)
        try:
            noop_from = stamp.nothing_to_do(self.lock(), self.inputs(), self.store.db)
            if noop_from is not None and not Records(self.store.db, self.store.dir).matches():
                return None  # extract.jsonl is not the records' export: planned in full
        except OutputError:
            return None
        return noop_from

    def inputs(self) -> str:
        """The digest of every input that decides a task key (tasks/extract/stamp.py)."""
        return stamp.inputs_digest(
            manifest_digest=self.manifest.digest, extract_version=plan_module.EXTRACT_VERSION,
            registry=self.readers_digest[1], tools=self.tools, limits=self.manifest.limits,
            no_external=self.cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1",
            extra=self.extra_readers)

    @functools.cached_property
    def fingerprint(self) -> str | None:
        """The readers' fingerprint (:func:`bastion.tasks.extract.stamp.readers_fingerprint`:
        ``stat`` calls, no reader imported); None for a run with extra readers or a listing
        command (their registry's digest is always computed)."""
        if self.extra_readers or self.cfg.listing:
            return None
        return stamp.readers_fingerprint()

    def installed(self) -> dict[str, Any] | None:
        """What the user's cache holds for this installation (the registry's digest, the
        libraries' versions: :func:`bastion.tasks.extract.stamp.installed_registry`), the
        versions handed to the plan's keys; None when nothing is cached."""
        fingerprint = self.fingerprint
        entry = stamp.installed_registry(fingerprint) if fingerprint is not None else None
        if entry is not None:
            plan_module.known_versions(entry["libraries"])
        return entry

    @functools.cached_property
    def readers_digest(self) -> tuple[str | None, str]:
        """(the readers' fingerprint, the registry's digest): the digest the stamp took under
        the same fingerprint, else the one an earlier run of this installation left in the
        user's cache (no reader imported either way), else the registry's, computed (every
        reader imported) and left there."""
        fingerprint = self.fingerprint
        if fingerprint is not None:
            cached = stamp.cached_registry(self.lock(), fingerprint)
            if cached is not None:
                return fingerprint, cached
            entry = self.installed()
            if entry is not None:
                return fingerprint, entry["digest"]
        readers = self.registry.readers()
        digest = stamp.registry_digest(readers)
        if fingerprint is not None:
            names = {lib for r in readers for lib in r.libraries} | set(
                plan_module.COMMON_LIBRARIES)
            stamp.remember_registry(fingerprint, digest, {
                lib: plan_module.library_version(lib) for lib in sorted(names)})
        return fingerprint, digest

    def is_forgotten(self, item: Item) -> bool:
        return self.planned is not None and is_forgotten(self.planned.forgotten, item)

    def why(self, item: Item) -> str:
        """Why a file's task is up to date or not, in words (``doit info``, ``doit list``)."""
        assert self.store is not None
        planned = self.planned
        known = (planned.verdicts if planned is not None else None) or \
            self.store.verdicts_for([item.sha256])
        retry = (planned.retries if planned is not None else {}).get((item.sha256, item.key))
        return describe(item, known.get((item.sha256, item.key)),
                        forgotten=self.is_forgotten(item),
                        other_key=any(sha == item.sha256 and key != item.key
                                      for sha, key in known),
                        retry=(retry[0], retry[1] - self.store.run) if retry else None)

    def _probe_tools(self) -> dict[str, Tool]:
        """The tools on PATH and their identities, before planning (they are in the keys);
        asked once per run, cached by binary in ``.bastion/tools.json``."""
        self._ask_tools()
        assert self.toolcache is not None
        return self.toolcache.tools

    def _ask_tools(self) -> None:
        """Start the tools' version questions (:meth:`ToolCache.ask`); answered by
        :meth:`_probe_tools`."""
        if self.toolcache is None:
            self.toolcache = ToolCache(self.out, self.cfg.no_external)
        self.toolcache.ask()

    def made_items(self) -> list[Item]:
        """The planned items whose verdicts this run made (the store's ``run`` column), read
        a chunk at a time; the store is left closed if it was (the run's end)."""
        assert self.store is not None
        closed = self.store._db is None
        done = []
        try:
            for chunk in plan_module._chunks(self.plan().items):
                new = self.store.made(sorted({i.sha256 for i in chunk}))
                done += [i for i in chunk if (i.sha256, i.key) in new]
        finally:
            if closed:
                self.store.close()
        return done

    def items_for(self, names: Iterable[str] | None = None) -> Sequence[Item]:
        """The next slice of stale items (or all of them)."""
        self.plan()
        if not self.cfg.slice:
            batch = self.stale[self.cursor:]
        else:
            batch = self.stale[self.cursor:self.cursor + self.cfg.slice]
        self.cursor += len(batch)
        return batch

    @property
    def more_slices(self) -> bool:
        """Whether stale items remain for another doit run (``RunConfig.slice``)."""
        return (self.planned is not None and not self.cfg.all_tasks
                and self.cursor < len(self.stale) and self.end is None)


def is_forgotten(names: frozenset[str], item: Item) -> bool:
    """Whether ``doit forget`` named the item's task (or every task)."""
    return bool(names) and (
        ALL in names or f"extract:{task_name(item.root, item.path)}" in names)


def make_plan(store: Store, manifest: Manifest, select: Select, tools: dict[str, Tool],
              retries: dict[tuple[str, str], tuple[int, int]], forgot: set[str],
              retry_errors: bool, owners_of: Any) -> Planned:
    """The plan of everything: the walk table's rows (streamed in walk order: walk.jsonl is
    their export) against the stored verdicts, looked up a chunk at a time and never all
    held (tasks/extract/plan.py); the repeat offenders not due deferred (unless
    ``retry_errors``); the files ``doit forget`` named (``forgot``) planned stale."""
    deferred = () if retry_errors else backoff.deferred(retries, store.run)
    db = store.db
    planned = plan(lambda: walk_records(db), store.verdicts_for, select, tools,
                   manifest.limits, StoreTexts(store.root), deferred, manifest.markdown,
                   owners_of)
    names = frozenset(forgot)
    if names:  # doit forget: those files are redone, whatever the store says
        every = ALL in names
        planned.unfresh(lambda item: every or is_forgotten(names, item))
    return Planned(planned, retries, forgotten=names)


def plan_change(run: RunPlan, select: Select) -> Planned | None:
    """The plan of only what the walk changed since the records were made, with the
    verdicts it read, the :class:`~bastion.tasks.extract.table.Change` and the summary it is
    merged into; None when the last complete run's stamp does not hold for everything but the
    walk, the export does not match the rows, or the walk's log does not reach back to them
    (then the caller plans everything)."""
    store = run.store
    assert store is not None  # (opened by the plan before it asks)
    if not stamp.has_stamp(run.lock()):
        return None  # no complete run before (and no inputs' digest taken for nothing)
    previous = stamp.holds_but_walk(run.lock(), run.inputs(), store.db)
    if previous is None:
        return None
    _, summary = previous
    db = store.db
    table = Records(db, store.dir)
    if not table.matches():
        return None
    found = changed(db, table.state("gen"))
    if found is None:
        return None
    records, change = found
    shas = sorted({r.sha256 for r in records if r.sha256})
    verdicts = store.verdicts_for(shas)
    planned = plan_module.plan(records, verdicts, select, run.tools, run.manifest.limits,
                               StoreTexts(store.root), markdown=run.manifest.markdown,
                               owners=run._owners)
    keys: dict[str, set[str]] = {}
    for sha, key in verdicts:
        keys.setdefault(sha, set()).add(key)
    for item in planned.items:
        if keys.get(item.sha256, {item.key}) - {item.key}:
            # these bytes have a verdict under another key: another file of the tree may
            # read them under that key, and the store's names for the two depend on both
            return None
    return Planned(planned, {}, change=change, change_from=dict(summary), verdicts=verdicts)
