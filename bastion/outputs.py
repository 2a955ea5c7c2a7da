"""An output directory read back as typed values: the summaries and the records.

``walk.summary.json`` becomes a :class:`WalkSummary`, ``extract.summary.json`` a
:class:`bastion.tasks.extract.records.ExtractSummary` (the type the extract stage writes it from), both in a
:class:`Summary`; ``walk.jsonl`` and ``extract.jsonl`` are streamed as
:class:`bastion.tasks.records.WalkRecord` and :class:`bastion.tasks.records.ExtractRecord` (whose ``verdict``
is a :class:`bastion.readers.runtime.verdict.Verdict`).  docs/records.md has every field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator, Literal, overload

from bastion.readers.runtime.verdict import Status, Verdict
from bastion.tasks.extract.records import ExtractSummary, ToolInfo
from bastion.tasks.records import ExtractRecord, WalkRecord, iter_jsonl

from .errors import NotAnOutputError

__all__ = ["Summary", "WalkSummary", "ExtractSummary", "ToolInfo", "read_summary", "records"]


@dataclass(frozen=True, kw_only=True)
class WalkSummary:
    """walk.summary.json (docs/records.md)."""

    manifest: str
    manifest_digest: str
    roots: list[dict[str, str]]
    files: int
    bytes: int
    hashed: int
    reused: int
    not_hashed: int
    symlinks: int
    other: int
    errors: int
    warnings: int
    warning_samples: list[str]
    unreadable: int
    vanished: int
    outputs_skipped: int
    partial: bool
    records: int
    no_hash: bool
    max_file_bytes: int
    started_at: str
    duration_s: float
    stage: str = "walk"


def _typed(cls: type, d: dict[str, Any], path: Path) -> Any:
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in d.items() if k in names})
    except TypeError as e:
        raise NotAnOutputError(f"{path}: not a bastion summary ({e})") from None


def _load(path: Path) -> dict[str, Any] | None:
    import json

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise NotAnOutputError(f"cannot read {path}: {e.strerror}") from None
    try:
        d = json.loads(data)
    except ValueError as e:
        raise NotAnOutputError(f"{path}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise NotAnOutputError(f"{path}: not a JSON object")
    return d


@dataclass(frozen=True)
class Summary:
    """What a sweep left in ``out``: the walk's summary and the extract stage's (``None``
    for a stage that has not run there)."""

    out: Path
    walk: WalkSummary | None
    extract: ExtractSummary | None

    @property
    def counts(self) -> dict[str, int]:
        """Records by status (``ok``, ``empty``, ``unsupported``, ``error``, ``skipped``)."""
        return dict(self.extract.counts) if self.extract else {}

    @property
    def errors(self) -> int:
        """``error`` records (what makes ``bastion sweep`` exit 2)."""
        return self.counts.get(Status.ERROR.value, 0)

    @property
    def partial(self) -> bool:
        """Whether the walk could not read everything (what makes the command exit 3)."""
        return bool(self.walk and self.walk.partial)

    @property
    def exit_code(self) -> int:
        """The exit code ``bastion sweep`` gives for this outcome: 4 (both 2 and 3), 3, 2
        or 0."""
        if self.partial:
            return 4 if self.errors else 3
        return 2 if self.errors else 0


def read_summary(out: str | os.PathLike[str]) -> Summary:
    """The summaries in an output directory; NotAnOutputError when it holds neither."""
    out = Path(out)
    walk = _load(out / "walk.summary.json")
    extract = _load(out / "extract.summary.json")
    if walk is None and extract is None:
        raise NotAnOutputError(f"{out} holds no bastion output (no walk.summary.json)")
    ws = _typed(WalkSummary, walk, out / "walk.summary.json") if walk is not None else None
    es = None
    if extract is not None:
        extract = dict(extract)
        extract["tools"] = [ToolInfo(str(t.get("name", "")), str(t.get("path", "")), t.get("version"),
                                     t.get("identity"))
                            for t in extract.get("tools") or () if isinstance(t, dict)]
        es = _typed(ExtractSummary, extract, out / "extract.summary.json")
    return Summary(out, ws, es)


def extract_record(d: dict[str, Any]) -> ExtractRecord:
    """One parsed extract.jsonl line as an :class:`ExtractRecord`."""
    return ExtractRecord(root=d["root"], path=d["path"], sha256=d.get("sha256"),
                         mime=d.get("mime"), verdict=Verdict.from_store(d), v=d["v"],
                         reused=bool(d.get("reused")), text=d.get("text"),
                         markdown=d.get("markdown"))


@overload
def records(out: str | os.PathLike[str],
            stage: Literal["extract"] = "extract") -> Iterator[ExtractRecord]: ...
@overload
def records(out: str | os.PathLike[str], stage: Literal["walk"]) -> Iterator[WalkRecord]: ...


def records(out: str | os.PathLike[str], stage: str = "extract") -> Iterator[Any]:
    """The records of an output directory, streamed in file order (sorted by root, path):
    ``extract.jsonl`` as :class:`ExtractRecord` s (default) or ``walk.jsonl`` as
    :class:`WalkRecord` s.  NotAnOutputError when the file is missing or a line is not a
    record."""
    if stage not in ("walk", "extract"):
        raise ValueError(f"stage must be 'walk' or 'extract', not {stage!r}")
    path = Path(out) / f"{stage}.jsonl"
    if not path.is_file():
        raise NotAnOutputError(f"no {path.name} in {out}: run the {stage} stage first")
    make = extract_record if stage == "extract" else (lambda d: WalkRecord(**d))
    try:
        for d in iter_jsonl(path):
            yield make(d)
    except (KeyError, TypeError, ValueError) as e:
        raise NotAnOutputError(f"{path}: not a bastion record ({type(e).__name__}: {e})") \
            from None
