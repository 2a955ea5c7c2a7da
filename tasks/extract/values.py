"""A run's plain values: its frozen inputs, the extract stage's decision, its plan, its end,
and what its steps returned so far.

A run goes ``RunInputs`` (settings, manifest, output path, reader registry; built by
:func:`run_inputs`, the one function the CLI and ``dodo.py`` both reach through
:class:`bastion.tasks.extract.run.Run`) → :class:`Decision` (refused, nothing to do, or a plan:
:meth:`bastion.tasks.extract.run.Run.decide`; the plan itself a :class:`Planned`,
:func:`~bastion.tasks.extract.runplan.make_planned`'s) → the session reading documents → the
outputs written → :class:`RunEnd` (:func:`bastion.tasks.extract.finish.finish`).  Each is
made once and never changed; what reads them (``tasks/pipeline.py``, ``tasks/cli.py``,
``tasks/clean.py``) reads a returned value, not a flag some step set on the run.  The values
a run's steps returned are kept together in one :class:`Outcomes` (each set once), which the
run replaces as a step returns, and its start in a :class:`Clock`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..config import RunConfig, load
from ..manifest import Manifest

if TYPE_CHECKING:
    from bastion.readers.dispatch import Registry
    from bastion.readers.runtime.toolset import Tool
    from bastion.readers.runtime.verdict import Verdict

    from ..index.stage import IndexSummary
    from .plan import Item, Plan
    from .records import ExtractSummary
    from .table import Change

__all__ = ["Clock", "Decision", "Outcomes", "Planned", "RunEnd", "RunInputs", "run_inputs"]


@dataclass(frozen=True)
class RunInputs:
    """What one run is given, loaded once.  The tools are not here: they are asked their
    versions in the background while the workers start (``Run.prestart``), and the digest of
    every input that decides a task key (:class:`bastion.tasks.extract.runplan.Keys`) is
    taken once they answered."""

    cfg: RunConfig
    manifest: Manifest
    out: Path
    extra_readers: tuple[str, ...] = ()

    @functools.cached_property
    def registry(self) -> Registry:
        """The reader registry the plan chooses from, built at the first use: the extra
        readers (the tests' misbehaving ones, which the workers put first too), then the
        registry's."""
        from bastion.readers.dispatch import Registry

        return Registry.with_modules(self.extra_readers)


def run_inputs(cfg: RunConfig, extra_readers: tuple[str, ...] = ()) -> RunInputs:
    """The run's inputs: the manifest (signature checked when required) and the output
    directory's path.  Raises ManifestError, SignatureError or PrerequisiteError."""
    manifest, out = load(cfg)
    if cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1":
        # the readers say a tool was not used because of --no-external (readers/errors.py
        # missing_tool), and the task keys of the readers with tools say so too
        manifest = dataclasses.replace(
            manifest, limits=dataclasses.replace(manifest.limits, external_off=True))
    return RunInputs(cfg, manifest, out, tuple(extra_readers))


@dataclass(frozen=True)
class Decision:
    """What the extract stage does, decided once per run before doit is given its tasks."""

    refused: str | None = None  # why the stage cannot run (a failed task: no walk, …)
    noop_from: Mapping[str, Any] | None = None  # the stamped run's summary (its row), when the stamp holds

    @property
    def nothing_to_do(self) -> bool:
        return self.refused is None and self.noop_from is not None


@dataclass(frozen=True)
class RunEnd:
    """What the end of an extract run returns: the summary it wrote, and how many records
    say "not extracted yet" (a run of named tasks, ``doit extract:<file>``)."""

    summary: ExtractSummary
    not_yet: int = 0
    noop: bool = False  # the last run's stamp held: no per-file work was done


@dataclass(frozen=True)
class Planned:
    """The plan step's value (made once per run): the plan; the store's repeat offenders it
    was made with, ``(sha256, key) -> (failures, next run to try)``; the files ``doit forget``
    named (planned in full only); and, when only the walk's change was planned
    (:func:`bastion.tasks.extract.runplan.plan_change`), that change, the summary of the run
    it is merged into, and the verdicts the plan read (else none: a plan in full looks them
    up a chunk at a time); the tools the keys were planned with (the session makes each
    item's job with them)."""

    plan: Plan
    retries: Mapping[tuple[str, str], tuple[int, int]]
    forgotten: frozenset[str] = frozenset()
    change: Change | None = None
    change_from: Mapping[str, Any] | None = None
    verdicts: Mapping[tuple[str, str], Verdict] = dataclasses.field(default_factory=dict)
    tools: Mapping[str, Tool] = dataclasses.field(default_factory=dict)

    @property
    def stale(self) -> Sequence[Item]:
        """The items to extract, in the order they are handed out."""
        return self.plan.stale


@dataclass(frozen=True)
class Clock:
    """When a run began: the wall clock (the summary's ``started_at``) and the monotonic one
    (its ``duration_s``)."""

    started: float
    t0: float

    @classmethod
    def now(cls) -> Clock:
        return cls(time.time(), time.monotonic())

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


@dataclass(frozen=True)
class Outcomes:
    """What a run's steps returned so far, each once: the walk this run made (its summary), the
    walk's summary as the extract stage read it back (:func:`~bastion.tasks.extract.runplan.check_walk`:
    the manifest digest the summary names), the extract stage's :class:`Decision` and
    :class:`Planned`, the run's :class:`RunEnd`, and what the index stage did.  The run holds
    one and replaces it (``dataclasses.replace``) as a step returns."""

    walked: dict[str, Any] | None = None
    walk_read: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    decision: Decision | None = None
    planned: Planned | None = None
    end: RunEnd | None = None
    index: IndexSummary | None = None  # what the index stage did (tasks/index/stage.py)
