"""The extract stage's outputs: ``extract.jsonl`` (one record per walked file) and
``extract.summary.json``, built from the plan and the verdicts.

:func:`build_records` joins the plan (walk order, so already sorted by root and path) with the
verdicts by (sha256, key); a file whose verdict is not there yet (a partial run) is ``skipped``
with "not extracted yet".  The stage's other parts: :mod:`tasks.plan` (what to do),
:mod:`tasks.session` (the workers and the commits), :mod:`tasks.run` (one invocation).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping

from readers.verdict import Status, Verdict

from . import plan as _plan
from .plan import EXTRACT_VERSION, Plan
from .records import ExtractRecord, to_line

__all__ = ["EXTRACT_VERSION", "NOT_YET", "Tally", "ExtractSummary", "build_records"]

NOT_YET = "not extracted yet (run the extract stage)"


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
    referenced: set[str] = field(default_factory=set)  # store stems the records name

    def add(self, rec: ExtractRecord) -> None:
        v = rec.verdict
        self.records += 1
        self.counts[v.status.value] += 1
        if v.status is Status.SKIPPED:
            return
        self.reused += rec.reused
        self.chars += v.chars
        self.pages_ocr += v.pages_ocr or 0
        if v.error_kind:
            self.error_kinds[v.error_kind] = self.error_kinds.get(v.error_kind, 0) + 1
        if v.limit:
            self.limits_hit[v.limit] = self.limits_hit.get(v.limit, 0) + 1


def build_records(plan: Plan, verdicts: Mapping[tuple[str, str], Verdict],
                  produced: Mapping[tuple[str, str], Verdict],
                  tally: Tally) -> Iterator[bytes]:
    """The extract.jsonl lines, sorted by (root, path), counted into ``tally``.  ``produced``
    are the verdicts made by this run: the first record of each is not ``reused``."""
    first_seen: set[tuple[str, str]] = set()
    skipped = iter(plan.skipped)
    pending_skip = next(skipped, None)
    for item in plan.items:
        while pending_skip is not None and (pending_skip.root, pending_skip.path) < (
                item.root, item.path):
            yield _skipped_line(pending_skip, tally)
            pending_skip = next(skipped, None)
        pair = (item.sha256, item.key)
        v = produced.get(pair) or verdicts.get(pair)
        if v is None:
            rec = ExtractRecord(root=item.root, path=item.path, sha256=item.sha256,
                                mime=item.mime, verdict=Verdict(status=Status.SKIPPED,
                                                                error=NOT_YET),
                                v=_plan.EXTRACT_VERSION, reused=False)
        else:
            reused = pair not in produced or pair in first_seen
            first_seen.add(pair)
            text = None
            if v.status is Status.OK:
                text = f"extract/{item.stem[:2]}/{item.stem}.txt"
                tally.referenced.add(item.stem)
            rec = ExtractRecord(root=item.root, path=item.path, sha256=item.sha256,
                                mime=item.mime, verdict=v, v=_plan.EXTRACT_VERSION, reused=reused,
                                text=text)
        tally.add(rec)
        yield to_line(rec)
    while pending_skip is not None:
        yield _skipped_line(pending_skip, tally)
        pending_skip = next(skipped, None)


def _skipped_line(w: Any, tally: Tally) -> bytes:
    rec = ExtractRecord(root=w.root, path=w.path, sha256=w.sha256, mime=w.mime,
                        verdict=Verdict(status=Status.SKIPPED,
                                        error=w.reason or w.error or "not hashed by the walk"),
                        v=_plan.EXTRACT_VERSION, reused=False)
    tally.add(rec)
    return to_line(rec)


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
    stage: str = "extract"
    cluster: dict[str, Any] | None = None  # a cluster run: the scheduler and its workers

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def rewrite_record(path: Any, item: Any) -> None:
    """Turn one file's record in extract.jsonl into ``skipped`` (not extracted yet): what
    ``doit clean extract:<file>`` leaves.  Streams the file; a missing file is left alone."""
    import json
    import os

    from .fsio import atomic_write

    if not os.path.exists(path):
        return
    target = (item.root, item.path)

    def lines() -> Iterator[bytes]:
        with open(path, "rb") as f:
            for line in f:
                d = json.loads(line)
                if (d["root"], d["path"]) != target:
                    yield line
                    continue
                yield to_line(ExtractRecord(
                    root=item.root, path=item.path, sha256=item.sha256, mime=item.mime,
                    verdict=Verdict(status=Status.SKIPPED, error=NOT_YET),
                    v=_plan.EXTRACT_VERSION, reused=False))

    atomic_write(path, lines())
