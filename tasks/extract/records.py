"""The extract stage's outputs: ``extract.jsonl`` (one record per walked file) and
``extract.summary.json``, built from the plan and the verdicts.

:func:`build_records` joins the plan (walk order, so already sorted by root and path) with the
verdicts by (sha256, key); a file whose verdict is not there yet (a partial run) is ``skipped``
with "not extracted yet".  The stage's other parts: :mod:`bastion.tasks.extract.plan` (what to do),
:mod:`bastion.tasks.extract.session` (the workers), :mod:`bastion.tasks.extract.commits` (the commits),
:mod:`bastion.tasks.extract.run` (one invocation).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Container, Iterator, Mapping

from bastion.readers.runtime.verdict import Status, Verdict

from . import plan as _plan
from .plan import EXTRACT_VERSION, Lookup, Plan
from ..records import ExtractRecord, to_line
from .table import NOT_YET, Row, make_row, record

__all__ = ["EXTRACT_VERSION", "NOT_YET", "Tally", "ExtractSummary", "build_records"]


@dataclass
class Tally:
    """The counts over the records, for the summary."""

    records: int = 0
    counts: dict[str, int] = field(
        default_factory=lambda: {s.value: 0 for s in Status})
    reused: int = 0
    chars: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    limits_hit: dict[str, int] = field(default_factory=dict)
    pages_ocr: int = 0
    not_yet: int = 0  # files of a partial run not extracted yet

    @classmethod
    def of_summary(cls, prev: dict[str, Any]) -> "Tally":
        """The counts of an earlier summary (a run with nothing to do keeps them)."""
        counts = dict(prev.get("counts") or {})
        records = int(prev.get("records", 0))
        return cls(records=records, counts=counts,
                   reused=records - int(counts.get(Status.SKIPPED.value, 0)),
                   chars=int(prev.get("chars", 0)),
                   error_kinds=dict(prev.get("error_kinds") or {}),
                   limits_hit=dict(prev.get("limits_hit") or {}),
                   pages_ocr=int(prev.get("pages_ocr", 0)))

    def remove(self, rec: dict[str, Any]) -> None:
        """Take out an earlier record (a parsed extract.jsonl line) from the counts."""
        status = str(rec.get("status"))
        self.records -= 1
        self.counts[status] = self.counts.get(status, 0) - 1
        if status == Status.SKIPPED.value:
            return
        self.reused -= 1  # every kept record counts as reused; this one is not kept
        self.chars -= rec.get("chars") or 0
        self.pages_ocr -= rec.get("pages_ocr") or 0
        for field_, name in ((self.error_kinds, "error_kind"), (self.limits_hit, "limit")):
            value = rec.get(name)
            if value:
                field_[value] = field_.get(value, 0) - 1
                if field_[value] <= 0:
                    del field_[value]

    def merge(self, other: "Tally") -> None:
        """Add another tally's counts (the fresh records of a change)."""
        self.records += other.records
        for k, n in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + n
        self.reused += other.reused
        self.chars += other.chars
        self.pages_ocr += other.pages_ocr
        for mine, theirs in ((self.error_kinds, other.error_kinds),
                             (self.limits_hit, other.limits_hit)):
            for k, n in theirs.items():
                mine[k] = mine.get(k, 0) + n

    def add(self, rec: ExtractRecord) -> None:
        v = rec.verdict
        self.records += 1
        self.counts[v.status.value] += 1
        self.reused += rec.reused  # what the record says, whatever its status
        if v.status is Status.SKIPPED:
            self.not_yet += v.error == NOT_YET
            return
        self.chars += v.chars
        self.pages_ocr += v.pages_ocr or 0
        if v.error_kind:
            self.error_kinds[v.error_kind] = self.error_kinds.get(v.error_kind, 0) + 1
        if v.limit:
            self.limits_hit[v.limit] = self.limits_hit.get(v.limit, 0) + 1


Made = Callable[[list[str]], Container[tuple[str, str]]]  # sha256s -> pairs this run made


def build_records(plan: Plan, verdicts: Mapping[tuple[str, str], Verdict] | Lookup,
                  made: Made, tally: Tally,
                  retries: Mapping[tuple[str, str], tuple[int, int]] | None = None,
                  run: int = 0) -> Iterator[tuple[bytes, Row]]:
    """The extract.jsonl lines, sorted by (root, path), each with its ``records`` row
    (tasks/extract/table.py), counted into ``tally``.  ``verdicts``
    are by (sha256, key), or a function giving those of some sha256s (the store's, looked
    up a chunk of items at a time: nothing holds every verdict); ``made`` gives the (sha256,
    key) pairs of some sha256s whose verdicts this run made (the store's ``run`` column,
    :meth:`~bastion.tasks.extract.store.Store.made`): the first record of each is not
    ``reused``.  ``retries``: the repeat offenders' (failures, due run), this being run
    ``run``: their error records say when they are tried again."""
    lookup: Lookup = verdicts if callable(verdicts) else (lambda shas: verdicts)
    skipped = iter(plan.skipped)
    pending_skip = next(skipped, None)
    for chunk in _plan._chunks(plan.items):
        shas = sorted({i.sha256 for i in chunk})
        found = lookup(shas)
        new = made(shas)
        for item in chunk:
            while pending_skip is not None and (pending_skip.root, pending_skip.path) < (
                    item.root, item.path):
                yield _skipped(pending_skip, tally)
                pending_skip = next(skipped, None)
            v = found.get((item.sha256, item.key))
            if v is None:
                rec = record(item.root, item.path, item.sha256, item.mime, None, NOT_YET,
                             False, None, None, run)
                row = make_row(item.root, item.path, item.sha256, item.mime, None, NOT_YET,
                               False, None)
            else:
                reused = item.index != item.canonical or (item.sha256, item.key) not in new
                stem = None
                if v.status is Status.OK:
                    stem = item.stem
                backoff = retries.get((item.sha256, item.key)) if (
                    retries and v.status is Status.ERROR) else None
                rec = record(item.root, item.path, item.sha256, item.mime, v, None, reused,
                             stem, backoff, run)
                row = make_row(item.root, item.path, item.sha256, item.mime, item.key, None,
                               reused, stem)
            tally.add(rec)
            yield to_line(rec), row
    while pending_skip is not None:
        yield _skipped(pending_skip, tally)
        pending_skip = next(skipped, None)


def _skipped(w: Any, tally: Tally) -> tuple[bytes, Row]:
    why = w.reason or w.error or "not hashed by the walk"
    rec = record(w.root, w.path, w.sha256, w.mime, None, why, False, None, None, 0)
    tally.add(rec)
    return to_line(rec), make_row(w.root, w.path, w.sha256, w.mime, None, why, False, None)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    path: str
    version: str | None
    identity: str | None


@dataclass(frozen=True)
class ExtractSummary:
    """extract.summary.json (docs/records.md)."""

    manifest: str
    manifest_digest: str
    walk_manifest_digest: str | None
    records: int
    counts: dict[str, int]
    reused: int
    extracted: int
    chars: int
    error_kinds: dict[str, int]
    limits_hit: dict[str, int]
    pages_ocr: int
    removed: int  # store files no record references any more, removed by this run
    tools: list[ToolInfo]
    no_external: bool
    workers: int
    workers_started: int
    workers_killed: int
    started_at: str
    duration_s: float
    extract_version: int
    tightened: int = 0  # output files and directories this run narrowed to the output's modes
    stage: str = "extract"
    cluster: dict[str, Any] | None = None  # a cluster run: the scheduler and its workers
    # a worker's identity as the pool measured it in /proc (uid, capabilities, namespaces…)
    worker_identity: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(manifest: Any, walk_digest: str | None, tally: Tally, *, extracted: int,
              removed: int, tools: Mapping[str, Any], workers: int, started: int, killed: int,
              no_external: bool, started_at: float, duration_s: float) -> ExtractSummary:
    """The summary of a run from its tally and its facts."""
    import time

    return ExtractSummary(
        manifest=str(manifest.path), manifest_digest=manifest.digest,
        walk_manifest_digest=walk_digest, records=tally.records, counts=tally.counts,
        reused=tally.reused, extracted=extracted, chars=tally.chars,
        error_kinds=dict(sorted(tally.error_kinds.items())),
        limits_hit=dict(sorted(tally.limits_hit.items())), pages_ocr=tally.pages_ocr,
        removed=removed,
        tools=[ToolInfo(t.name, t.path, t.version, t.identity)
               for t in sorted(tools.values(), key=lambda t: t.name)],
        no_external=no_external, workers=workers, workers_started=started,
        workers_killed=killed,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        duration_s=round(duration_s, 3), extract_version=_plan.EXTRACT_VERSION)
