"""One invocation of bastion: an explicit :class:`Run` value, built by the CLI and by
``dodo.py`` alike, that the doit task generators close over.

A run holds its settings (:class:`tasks.config.RunConfig`), the manifest and the output
directory, the walk it made, the plan (:func:`tasks.plan.plan`, computed once), the session
that owns the workers and the commits (:class:`tasks.session.ExtractSession`), and at the end
the summary.  Nothing is kept in module globals: a second run in the same process (the CLI's
``main`` called again, the tests) builds a new ``Run``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from readers.tools import Tool, ToolProbe
from readers.verdict import Status, Verdict

from .config import PrerequisiteError, RunConfig, load
from .forgotten import ALL, forgotten, set_forgotten
from .extract import ExtractSummary, Tally, ToolInfo, build_records
from .fsio import STATE_DIR, OutputError, OutputLock, read_json, write_json
from .manifest import Manifest
from . import plan as plan_module
from .plan import Item, Plan, plan
from .progress import Progress
from .records import iter_walk
from .store import Store

TOOLS_CACHE = f"{STATE_DIR}/tools.json"  # the tools' versions, by binary (readers.tools)


def check_walk(manifest: Manifest, out: Path) -> dict:
    """The walk's summary, or PrerequisiteError when the extract stage may not run."""
    if "extract" not in manifest.stages:
        raise PrerequisiteError(f"'extract' is not in the stages of {manifest.path.name} "
                                f"(stages: {', '.join(manifest.stages)})")
    try:
        summary = read_json(out / "walk.summary.json")
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


class Run:
    """Everything one invocation shares.  Errors that are the run's (bad manifest, missing
    walk, locked output) are raised by the steps that meet them, as the exceptions of
    :data:`tasks.pipeline.RUN_ERRORS`; a document's failure is only ever a record."""

    def __init__(self, cfg: RunConfig, *, extra_readers: tuple[str, ...] = ()) -> None:
        self.cfg = cfg
        self.extra_readers = extra_readers
        self._loaded: tuple[Manifest, Path] | None = None
        self.walk_summary: dict[str, Any] | None = None  # the walk this run made
        self.walked = False
        self.tools: dict[str, Tool] = {}
        self._known_tools: dict[str, list] = {}
        self._known_before: dict[str, list] = {}
        self._plan: Plan | None = None
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        self.stale: list[Item] = []
        self.cursor = 0  # how many stale items were handed to doit (RunConfig.slice)
        self.store: Store | None = None
        self.session: Any = None  # tasks.session.ExtractSession, once extracting
        self.progress: Progress | None = None
        self.summary: ExtractSummary | None = None
        self.finished = False
        self.refused: str | None = None  # why the extract stage cannot run (a task failure)
        self.walk_read: dict[str, Any] = {}
        self.forgotten: set[str] = set()
        self.cleaned_all = False
        self.announce_in_actions = True  # the CLI prints the summaries itself
        # where lines for the person go: stderr as it is now, before doit replaces
        # sys.stderr with its capture inside actions
        self.console = sys.stderr
        self.t0 = time.monotonic()
        self.started = time.time()

    # -- settings ---------------------------------------------------------------------------------

    def load(self) -> tuple[Manifest, Path]:
        """The manifest (signature checked when required) and the output directory."""
        if self._loaded is None:
            self._loaded = load(self.cfg)
        return self._loaded

    @property
    def manifest(self) -> Manifest:
        return self.load()[0]

    @property
    def out(self) -> Path:
        return self.load()[1]

    def lock(self) -> None:
        OutputLock.acquire(self.out)

    # -- the walk ---------------------------------------------------------------------------------

    def walk(self) -> None:
        """The walk stage (once per run: later doit slices of the same run reuse it)."""
        manifest, out = self.load()
        if self.walked or self.cfg.walk == "reuse" or "walk" not in manifest.stages:
            check_walk(manifest, out)  # extract from the walk already there
            return
        from .walk import run_walk

        self.lock()
        progress = Progress("walk", 0, quiet=self.cfg.quiet)
        try:
            self.walk_summary = run_walk(manifest, out, no_hash=self.cfg.no_hash,
                                         progress=progress.update)
        finally:
            progress.close()
        self.walked = True

    # -- the plan ---------------------------------------------------------------------------------

    def plan(self) -> Plan:
        """The plan (computed once): the walk's records against the stored verdicts."""
        if self._plan is not None:
            return self._plan
        manifest, out = self.load()
        self.walk_read = check_walk(manifest, out)
        from readers.dispatch import select

        probed = self._probe_tools()
        self.tools.clear()  # the same dict the session (started early) holds
        self.tools.update(probed)
        if self.store is None:
            self.store = Store(out)
        self.verdicts = self.store.verdicts()
        self._plan = plan(iter_walk(out / "walk.jsonl"), self.verdicts, select, self.tools,
                          manifest.limits, self.store.text_names())
        self.forgotten = forgotten(out / STATE_DIR)
        if self.forgotten:  # doit forget: those files are redone, whatever the store says
            every = ALL in self.forgotten
            items = tuple(dataclasses.replace(i, fresh=False)
                          if i.fresh and (every or self.is_forgotten(i)) else i
                          for i in self._plan.items)
            self._plan = dataclasses.replace(self._plan, items=items)
        self.refused = None
        self.stale = self._plan.stale
        return self._plan

    def is_forgotten(self, item: Item) -> bool:
        return bool(self.forgotten) and (
            ALL in self.forgotten or f"extract:{item.root}/{item.path}" in self.forgotten)

    def why(self, item: Item) -> str:
        """Why a file's task is up to date or not, in words (``doit info``, ``doit list``)."""
        v = self.verdicts.get((item.sha256, item.key))
        if self.is_forgotten(item):
            return "not up to date: forgotten (doit forget)"
        if item.fresh and v is not None:
            return f"up to date: {v.status} under key {item.key}"
        if v is None:
            if any(sha == item.sha256 for sha, _ in self._verdict_keys()):
                return ("not up to date: extracted before under another key (the reader, its "
                        "settings or the tools it may call changed)")
            return "not up to date: not extracted yet"
        if v.status is Status.ERROR:
            return f"not up to date: error ({v.error_kind}) last time, retried on every run"
        return "not up to date: its text is missing from the store"

    def _verdict_keys(self) -> set[tuple[str, str]]:
        if not hasattr(self, "_keys"):
            self._keys = set(self.verdicts)
        return self._keys

    def _probe_tools(self) -> dict[str, Tool]:
        """The tools on PATH and their identities, before planning: they are in the keys.
        Versions come from ``.bastion/tools.json`` while a binary's stat is unchanged."""
        try:
            known = read_json(self.out / TOOLS_CACHE)
        except (OSError, ValueError):
            known = {}
        self._known_tools = known if isinstance(known, dict) else {}
        self._known_before = dict(self._known_tools)
        return ToolProbe(self.cfg.no_external, known=self._known_tools).result()

    def items_for(self, names: Iterable[str] | None = None) -> list[Item]:
        """The next slice of stale items (or all of them)."""
        self.plan()
        if not self.cfg.slice:
            batch = self.stale[self.cursor:]
        else:
            batch = self.stale[self.cursor:self.cursor + self.cfg.slice]
        self.cursor += len(batch)
        return batch

    @property
    def more(self) -> bool:
        """Whether stale items remain for another doit run (``RunConfig.slice``)."""
        return (self._plan is not None and not self.cfg.all_tasks
                and self.cursor < len(self.stale) and not self.finished)

    # -- extracting -------------------------------------------------------------------------------

    def start_session(self) -> Any:
        """The session (workers started); the output is locked first."""
        if self.session is None:
            from .session import ExtractSession

            manifest, out = self.load()
            self.lock()
            if self.store is None:
                self.store = Store(out)
            common = dict(out=out, store=self.store, limits=manifest.limits, tools=self.tools,
                          roots={r.name: r for r in manifest.roots},
                          on_verdict=self._on_verdict, extra_readers=self.extra_readers)
            if self.cfg.cluster:  # the documents go to a Dask cluster (tasks/cluster.py)
                from .cluster import ClusterSession, parse_cluster

                self.session = ClusterSession(parse_cluster(self.cfg.cluster),
                                              expected=lambda: len(self.stale),
                                              more=lambda: self.more, **common)
            else:
                self.session = ExtractSession(workers=self.cfg.workers, **common)
        if self.session.pool is None:
            self.session.start()
        return self.session

    def prestart(self) -> None:
        """Start the workers now, before doit is loaded and the walk runs: a worker's start
        (interpreter, readers, sandbox) then overlaps the CLI's loading of doit, the walk
        and the plan.  A failure here is left for the first document to report."""
        from readers.runtime import PoolError

        try:
            self.start_session()
        except (OutputError, PoolError, OSError):
            self.close()

    def extract(self, item: Item) -> None:
        """Hand one item to a worker (its verdict is committed when it arrives)."""
        session = self.start_session()
        if self.progress is None:
            self.progress = Progress("extract", len(self.stale), quiet=self.cfg.quiet)
        session.submit(item)

    def _on_verdict(self, item: Item, verdict: Verdict) -> None:
        if self.progress is not None:
            self.progress.update(1, errors=1 if verdict.status is Status.ERROR else 0)

    def close(self) -> None:
        """Stop the workers, if any (the end of a run that did not reach ``finish``)."""
        if self.session is not None:
            self.session.close()

    # -- finishing --------------------------------------------------------------------------------

    def finish(self) -> ExtractSummary | None:
        """Drain the workers, write extract.jsonl and extract.summary.json, remove the texts
        no record references (once per run; a no-op between doit slices)."""
        if self.finished:
            return self.summary
        if self.more:  # a slice done, more to come: keep the workers, commit what is done
            if self.session is not None:
                self.session.drain()
            return None
        self.finished = True
        plan = self.plan()
        manifest, out = self.load()
        assert self.store is not None
        try:
            if self.session is not None:
                try:
                    self.session.drain()
                finally:
                    self.session.close()
            self.lock()
            produced = self.session.produced if self.session is not None else {}
            tally = Tally()
            from .records import write_jsonl

            write_jsonl(out / "extract.jsonl", build_records(plan, self.verdicts, produced,
                                                             tally))
            # the records are durable (atomic_write fsyncs): texts they dropped can go
            removed = self.store.remove_unreferenced(tally.referenced)
            self.summary = self._summary(tally, len(produced), removed)
            write_json(out / "extract.summary.json", self.summary.to_json())
            if self._known_tools != self._known_before:
                write_json(out / TOOLS_CACHE, self._known_tools)
            if self.forgotten:
                done = {f"extract:{i.root}/{i.path}" for i in plan.items
                        if (i.sha256, i.key) in produced}
                left = ({f"extract:{i.root}/{i.path}" for i in plan.items} if ALL in
                        self.forgotten else self.forgotten) - done
                set_forgotten(out / STATE_DIR, left)
        finally:
            self.store.close()
            if self.progress is not None:
                self.progress.close()
        return self.summary

    def announce(self, line: str) -> None:
        """A line for the person running bastion, on the real stderr (fd 2: doit captures
        ``sys.stderr`` inside actions), unless quiet."""
        if not self.cfg.quiet:
            self.say(line)

    def say(self, line: str) -> None:
        try:
            self.console.write(line + "\n")
            self.console.flush()
        except (OSError, ValueError):
            pass

    def describe_partial(self) -> str | None:
        """What a run of single named tasks did (``doit extract:<file>``), or None."""
        if not self.cfg.all_tasks or self.cfg.listing or self.summary is None:
            return None
        produced = self.session.produced if self.session is not None else {}
        done = sorted(f"{i.root}/{i.path}" for i in self.plan().items
                      if (i.sha256, i.key) in produced)
        waiting = self.summary.counts.get(Status.SKIPPED.value, 0)
        shown = ", ".join(done[:10]) + (f", … ({len(done) - 10} more)" if len(done) > 10
                                        else "")
        return (f"extract: re-extracted {len(done)} file(s){': ' + shown if done else ''}; "
                f"{waiting} file(s) not extracted yet (run doit extract); records in "
                f"{self.out / 'extract.jsonl'}")

    # -- doit clean ---------------------------------------------------------------------------

    def clean_all(self) -> None:
        """Remove everything the extract stage made: records, summary, store, verdicts."""
        out = self.out
        self.lock()
        if self.store is not None:
            self.store.close()
        for name in ("extract.jsonl", "extract.summary.json"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "extract", ignore_errors=True)
        for name in ("verdicts.sqlite", "verdicts.sqlite-wal", "verdicts.sqlite-shm",
                     "forgotten.json", "tools.json"):
            (out / STATE_DIR / name).unlink(missing_ok=True)
        self.cleaned_all = True
        self.say(f"removed the extract stage's outputs in {out}")

    def clean_item(self, item: Item) -> None:
        """Remove one file's text, sidecar and verdict; its record becomes skipped."""
        if self.cleaned_all:
            return
        from .extract import rewrite_record

        self.lock()
        store = self.store or Store(self.out)
        store.remove_text(item.stem)
        store.forget([(item.sha256, item.key)])
        rewrite_record(self.out / "extract.jsonl", item)
        self.say(f"removed the text and verdict of {item.root}/{item.path}")

    def clean_walk(self) -> None:
        out = self.out
        self.lock()
        for name in ("walk.jsonl", "walk.summary.json", f"{STATE_DIR}/walk-cache"):
            (out / name).unlink(missing_ok=True)
        self.say(f"removed the walk's outputs in {out}")

    def _summary(self, tally: Tally, extracted: int, removed: int) -> ExtractSummary:
        manifest = self.manifest
        pool = self.session.pool if self.session is not None else None
        return ExtractSummary(
            manifest=str(manifest.path), manifest_digest=manifest.digest,
            walk_manifest_digest=self.walk_read.get("manifest_digest"),
            records=tally.records, counts=tally.counts, reused=tally.reused,
            extracted=extracted, chars=tally.chars,
            error_kinds=dict(sorted(tally.error_kinds.items())),
            limits_hit=dict(sorted(tally.limits_hit.items())), pages_ocr=tally.pages_ocr,
            removed=removed,
            tools=[ToolInfo(t.name, t.path, t.version, t.identity)
                   for t in sorted(self.tools.values(), key=lambda t: t.name)],
            no_external=self.cfg.no_external or os.environ.get("BASTION_NO_EXTERNAL") == "1",
            workers=self.session.workers if self.session is not None else self.cfg.workers,
            workers_started=pool.spawned if pool else 0,
            workers_killed=pool.killed if pool else 0,
            started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            duration_s=round(time.monotonic() - self.t0, 3),
            extract_version=plan_module.EXTRACT_VERSION,
            cluster=self.session.describe() if hasattr(self.session, "describe") else None,
        )
