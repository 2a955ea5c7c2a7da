"""The plan step of a run, as functions of what they read: the walk checked, the no-op check,
the plan made (of only what the walk changed, or of everything), the digest of the inputs
that decide a task key, why a task is up to date, and what a run made.

Each function takes what it reads and what it changes as arguments: the run's frozen
:class:`~bastion.tasks.extract.values.RunInputs`, the output directory (an opener: the run
locks it at the first use), the store, the tools' cache; and returns a value: the stamped
run's summary when nothing is to do (:func:`nothing_to_do`), the
:class:`~bastion.tasks.extract.values.Planned` (:func:`make_planned`, made by
:func:`make_plan` or :func:`plan_change`).  :class:`bastion.tasks.extract.run.Run` calls them
once each and keeps what they returned in its
:class:`~bastion.tasks.extract.values.Outcomes`; the extract stage's
:class:`~bastion.tasks.extract.values.Decision` is made from them there.  The plan itself is
:func:`bastion.tasks.extract.plan.plan` (made from the walk table here).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from bastion.readers.runtime.toolset import Tool

from ..config import PrerequisiteError
from ..forgotten import ALL, forgotten
from ..output.atomic import STATE_DIR, OutputError, read_json_file
from ..output.directory import OutputDir
from ..manifest import Manifest
from ..names import task_name
from . import owners, plan as plan_module
from .plan import Item, Select, describe, plan
from . import backoff, stamp
from .store import Store
from .toolcache import ToolCache
from .table import Records, StoreTexts, changed, walk_records
from .values import Planned, RunInputs

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["Keys", "check_walk", "is_forgotten", "made_items", "make_plan", "make_planned",
           "nothing_to_do", "plan_change", "why"]


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


class Keys:
    """The inputs besides a file's bytes that decide its task key, as the no-op stamp names
    them: the readers' fingerprint and the registry's digest (each computed once, at the first
    need: the digest may import every reader), and the digest of them all with the manifest,
    the limits and the tools (:meth:`digest`)."""

    def __init__(self, given: RunInputs, lock: Callable[[], OutputDir]) -> None:
        self.given = given
        self._lock = lock  # the run's output, locked at the first use

    @functools.cached_property
    def fingerprint(self) -> str | None:
        """The readers' fingerprint (:func:`bastion.tasks.extract.stamp.readers_fingerprint`:
        ``stat`` calls, no reader imported); None for a run with extra readers or a listing
        command (their registry's digest is always computed)."""
        if self.given.extra_readers or self.given.cfg.listing:
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
    def readers(self) -> tuple[str | None, str]:
        """(the readers' fingerprint, the registry's digest): the digest the stamp took under
        the same fingerprint, else the one an earlier run of this installation left in the
        user's cache (no reader imported either way), else the registry's, computed (every
        reader imported) and left there."""
        fingerprint = self.fingerprint
        if fingerprint is not None:
            cached = stamp.cached_registry(self._lock(), fingerprint)
            if cached is not None:
                return fingerprint, cached
            entry = self.installed()
            if entry is not None:
                return fingerprint, entry["digest"]
        readers = self.given.registry.readers()
        digest = stamp.registry_digest(readers)
        if fingerprint is not None:
            names = {lib for r in readers for lib in r.libraries} | set(
                plan_module.COMMON_LIBRARIES)
            stamp.remember_registry(fingerprint, digest, {
                lib: plan_module.library_version(lib) for lib in sorted(names)})
        return fingerprint, digest

    def digest(self, tools: Mapping[str, Tool]) -> str:
        """The digest of every input that decides a task key (tasks/extract/stamp.py)."""
        given = self.given
        return stamp.inputs_digest(
            manifest_digest=given.manifest.digest, extract_version=plan_module.EXTRACT_VERSION,
            registry=self.readers[1], tools=tools, limits=given.manifest.limits,
            no_external=given.cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1",
            extra=given.extra_readers)


def nothing_to_do(od: OutputDir, store: Store, inputs: Callable[[], str]) -> dict[str, Any] | None:
    """The summary of the last complete run (its row in ``runs``) when its stamp still holds
    (:func:`bastion.tasks.extract.stamp.nothing_to_do`, ``inputs()`` the digest of the key
    inputs: :meth:`Keys.digest`): then the run does no per-file work; else None."""
    if not stamp.has_stamp(od):
        return None  # no complete run before: nothing can stand (no inputs' digest taken)
    try:
        noop_from = stamp.nothing_to_do(od, inputs(), store.db)
        if noop_from is not None and not Records(store.db, store.dir).matches():
            return None  # extract.jsonl is not the records' export: planned in full
    except OutputError:
        return None
    return noop_from


def make_planned(given: RunInputs, store: Store, toolcache: ToolCache, *,
                 lock: Callable[[], OutputDir], keys: Keys) -> Planned:
    """The plan of only what the walk changed (:func:`plan_change`), else of everything
    (:func:`make_plan`), with the tools probed (``toolcache``: their answers waited for once
    the registry is loaded) and this run counted in the store.  Before any text is placed,
    the plain names this run gives to another key than their owner's are no one's
    (tasks/extract/owners.py), unless nothing is run (a listing command)."""
    cfg = given.cfg
    keys.installed()  # the libraries' versions an earlier run of this installation found
    select = given.registry.select
    tools = toolcache.tools
    # the runs a repeat offender waits are counted here: one per run that plans to extract
    backoff.start_run(store, count=not cfg.listing)
    retries = backoff.retries(store)
    merged = None if cfg.all_tasks or cfg.listing else plan_change(
        given, store, tools, select, od=lock(), inputs=lambda: keys.digest(tools))
    if merged is not None:  # only what the walk found changed (tasks/extract/table.py)
        planned = dataclasses.replace(merged, retries=retries)
    else:
        planned = make_plan(store, given.manifest, select, tools, retries,
                            forgotten(given.out / STATE_DIR), cfg.retry_errors,
                            owners_of(store))
    if not cfg.listing:
        owners.disown(store.db, planned.plan.disowned())
    return planned


def owners_of(store: Store) -> Callable[[list[str]], dict[str, str]]:
    """Whose texts the plain names of some sha256s hold (tasks/extract/owners.py), asked of
    ``store``'s database (none before it exists)."""
    def of(shas: list[str]) -> dict[str, str]:
        return owners.owners(store.db, shas) if store.db_path.exists() else {}
    return of


def why(item: Item, planned: Planned | None, store: Store) -> str:
    """Why a file's task is up to date or not, in words (``doit info``, ``doit list``)."""
    known = (planned.verdicts if planned is not None else None) or \
        store.verdicts_for([item.sha256])
    retry = (planned.retries if planned is not None else {}).get((item.sha256, item.key))
    return describe(item, known.get((item.sha256, item.key)),
                    forgotten=planned is not None and is_forgotten(planned.forgotten, item),
                    other_key=any(sha == item.sha256 and key != item.key
                                  for sha, key in known),
                    retry=(retry[0], retry[1] - store.run) if retry else None)


def made_items(plan: Plan, store: Store) -> list[Item]:
    """The planned items whose verdicts this run made (the store's ``run`` column), read a
    chunk at a time; the store is left closed if it was (the run's end)."""
    closed = store._db is None
    done = []
    try:
        for chunk in plan_module._chunks(plan.items):
            new = store.made(sorted({i.sha256 for i in chunk}))
            done += [i for i in chunk if (i.sha256, i.key) in new]
    finally:
        if closed:
            store.close()
    return done


def is_forgotten(names: frozenset[str], item: Item) -> bool:
    """Whether ``doit forget`` named the item's task (or every task)."""
    return bool(names) and (
        ALL in names or f"extract:{task_name(item.root, item.path)}" in names)


def make_plan(store: Store, manifest: Manifest, select: Select, tools: Mapping[str, Tool],
              retries: dict[tuple[str, str], tuple[int, int]], forgot: set[str],
              retry_errors: bool, owners_of: Callable[[list[str]], dict[str, str]]) -> Planned:
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
    return Planned(planned, retries, forgotten=names, tools=tools)


def plan_change(given: RunInputs, store: Store, tools: Mapping[str, Tool], select: Select, *,
                od: OutputDir, inputs: Callable[[], str]) -> Planned | None:
    """The plan of only what the walk changed since the records were made, with the
    verdicts it read, the :class:`~bastion.tasks.extract.table.Change` and the summary it is
    merged into; None when the last complete run's stamp does not hold for everything but the
    walk (``inputs()``: the key inputs' digest), the export does not match the rows, or the
    walk's log does not reach back to them (then the caller plans everything)."""
    if not stamp.has_stamp(od):
        return None  # no complete run before (and no inputs' digest taken for nothing)
    previous = stamp.holds_but_walk(od, inputs(), store.db)
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
    planned = plan_module.plan(records, verdicts, select, tools, given.manifest.limits,
                               StoreTexts(store.root), markdown=given.manifest.markdown,
                               owners=owners_of(store))
    keys: dict[str, set[str]] = {}
    for sha, key in verdicts:
        keys.setdefault(sha, set()).add(key)
    for item in planned.items:
        if keys.get(item.sha256, {item.key}) - {item.key}:
            # these bytes have a verdict under another key: another file of the tree may
            # read them under that key, and the store's names for the two depend on both
            return None
    return Planned(planned, {}, change=change, change_from=dict(summary), verdicts=verdicts,
                   tools=tools)
