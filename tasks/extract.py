"""The extract stage: one doit task per walked file, decided up to date from the store.

Each hashed file becomes ``extract:<root>/<path>``.  Its key is the reader's identity and
settings (:func:`task_key`); the verdict stored for its sha256 decides whether it is up to date:

* ``ok`` / ``empty``: kept while the sha256 and the key are unchanged (and the text exists);
* ``unsupported``: kept while, in addition, the tools present for its type are unchanged;
* ``error``: never kept — retried on every run.

Task actions hand documents to the :class:`readers.pool.WorkerPool` and return at once;
verdicts arrive in the pool's callback and are committed to the store one by one.  The finish
step (the ``_extract_finish`` setup of the ``extract`` group, or the teardown of a single-file
run) drains the pool and writes ``extract.jsonl`` and ``extract.summary.json``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from readers.base import Limits, Reader
from readers.pool import Job, JobResult, PoolError, WorkerPool
from readers.tools import Tool, ToolProbe

from .config import FINISH_TASK, PrerequisiteError, RunConfig, load
from .fsio import STATE_DIR, OutputError, OutputLock, read_json, remove_stale_temps, write_json
from .manifest import Manifest
from .progress import Progress
from .records import ExtractRecord, load_jsonl, to_line, write_jsonl
from .store import Store, Verdict

if TYPE_CHECKING:
    from doit.exceptions import TaskFailed

# Neither doit nor the reader registry is imported with this module: the CLI creates the
# stage and starts its workers first, and loads them while the workers boot.

# Raise when any reader's output changes: every verdict and text is redone on the next run.
EXTRACT_VERSION = 1

COMMON_SETTINGS = ("max_chars", "max_parts")  # Limits that change every reader's text
COMMIT_EVERY = 500  # verdicts per commit (one syncfs + one transaction)
COMMIT_SECONDS = 2.0
TOOLS_CACHE = f"{STATE_DIR}/tools.json"  # the tools' versions, by binary (readers.tools)


def task_key(reader: Reader | None, mime: str, limits: Limits) -> str:
    """What decides a verdict besides the bytes: version, reader, its settings, the type."""
    if reader is None:
        parts: list[Any] = [EXTRACT_VERSION, None, mime]
    else:
        names = COMMON_SETTINGS + reader.settings
        settings = {name: getattr(limits, name) for name in names}
        parts = [EXTRACT_VERSION, reader.name, reader.version, mime, settings]
    blob = json.dumps(parts, sort_keys=True, default=list).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def task_name(root: str, path: str) -> str:
    """The doit name of a file's task (the part after ``extract:``)."""
    return f"{root}/{path}"


@dataclass(slots=True)
class Item:
    """One hashed file of the walk, planned."""

    root: str
    path: str
    sha256: str
    mime: str
    size: int
    reader: Reader | None
    key: str
    tools: tuple[str, ...]  # tools present for its type
    fresh: bool


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


class ExtractStage:
    """Everything one extract run shares: settings, store, tools, pool, verdicts, counters."""

    def __init__(self, cfg: RunConfig, manifest: Manifest, out: Path,
                 extra_readers: tuple[str, ...] = ()) -> None:
        self.cfg = cfg
        self.manifest = manifest
        self.out = out
        self.limits = manifest.limits
        self.store = Store(out)
        self.roots = {r.name: r for r in manifest.roots}
        self.extra_readers = extra_readers
        self.refused: str | None = None
        self.walk_summary: dict = {}
        self.tools: dict[str, Tool] = {}
        self.verdicts: dict[str, Verdict] = {}
        self.known_tools: dict[str, list] = {}
        self.known_before: dict[str, list] = {}
        self.tools_cache_stale = False
        self.probe: ToolProbe | None = None
        self.items: list[Item] = []
        self.skipped: list[dict[str, Any]] = []  # walk records without a sha256
        self.produced: set[str] = set()  # sha256 extracted by this run
        self.scheduled: set[str] = set()
        self.jobs: dict[int, Item] = {}  # in flight, by job id
        self.job_seq = 0
        self.pool: WorkerPool | None = None
        self.progress: Progress | None = None
        self.finished = False
        self.stale: list[Item] | None = None  # the items to extract, once planned
        self.cursor = 0  # how many of them were handed to doit (RunConfig.slice)
        self.summary: dict | None = None
        self.pending: list[Verdict] = []  # verdicts whose texts are not yet known durable
        self.last_commit = time.monotonic()
        self.t0 = time.monotonic()
        self.started = time.time()

    # -- planning (task generation time: pure, writes nothing) ---------------------------------

    def plan(self) -> list[Item]:
        try:
            self.walk_summary = check_walk(self.manifest, self.out)
        except PrerequisiteError as e:
            self.refused = str(e)
            return []
        from readers.dispatch import select

        probe = self._tool_probe()
        # the versions are known at finish() (for the summary); the paths are enough now
        self.tools = {name: Tool(name, exe, None) for name, exe in probe.paths.items()}
        self.verdicts = self.store.verdicts()
        limits = self.limits
        tool_names = set(self.tools)
        keys: dict[tuple[str, str], tuple[Reader | None, str, tuple[str, ...]]] = {}
        items: list[Item] = []
        texts = self.store.text_names()
        for rec in load_jsonl(self.out / "walk.jsonl"):
            sha = rec["sha256"]
            if rec["kind"] != "file" or sha is None:
                self.skipped.append(rec)
                continue
            mime = rec["mime"] or "application/octet-stream"
            path = rec["path"]
            name = path.rsplit("/", 1)[-1]
            ext = os.path.splitext(name)[1].lower()
            cached = keys.get((mime, ext))
            if cached is None:
                reader = select(mime, name)
                present = tuple(sorted(tool_names.intersection(reader.tools))) if reader else ()
                cached = (reader, task_key(reader, mime, limits), present)
                keys[(mime, ext)] = cached
            reader, key, present = cached
            v = self.verdicts.get(sha)
            fresh = v is not None and v.key == key and (
                (v.status == "ok" and f"{sha}.txt" in texts)
                or v.status == "empty"
                or (v.status == "unsupported" and v.tools == present)
            )
            items.append(Item(rec["root"], path, sha, mime, rec["size"] or 0, reader, key,
                              present, fresh))
        self.items = items
        return items

    def tasks(self) -> Iterator[dict]:
        """The doit task dicts: the group first (so it exists even with nothing walked).

        A file that is up to date costs doit ~75 µs and ~5 KB as a Task object even when it
        does nothing, so its subtask is generated only when the run may need it: when the
        command names an ``extract:…`` task or lists tasks (``RunConfig.all_tasks``).
        """
        if self.stale is None:
            self.plan()
            # largest first (stable: then in path order): the long documents start early,
            # so no worker is left alone with one at the end.  Records are sorted when they
            # are written, so the order of extraction changes no output.
            self.stale = sorted((i for i in self.items if not i.fresh),
                                key=lambda i: -i.size)
        yield {
            "basename": "extract",
            "name": None,
            "doc": "extract text from every walked file (one subtask per file)",
            "setup": [FINISH_TASK],
        }
        every = self.cfg.all_tasks
        # A run of single named tasks has no group to finish it: their teardown does.
        teardown = [(_finish_teardown, (self,))] if every else []
        if every:
            batch = self.items
        else:  # up to date: no doit Task object (see docs/architecture.md)
            end = len(self.stale) if not self.cfg.slice else self.cursor + self.cfg.slice
            batch = self.stale[self.cursor:end]
            self.cursor += len(batch)
        for item in batch:
            yield {
                "basename": "extract",
                "name": task_name(item.root, item.path),
                "actions": [(_run_item, (self, item))],
                "uptodate": [item.fresh],
                "teardown": teardown,
                "verbosity": 0,
            }

    # -- running --------------------------------------------------------------------------------

    def prestart(self) -> None:
        """Start the workers now, before doit is loaded and the walk runs (``bastion sweep``
        / ``extract``): a worker's start (interpreter, readers, sandbox) then overlaps the
        CLI's loading of doit, the walk and doit's setup instead of delaying the first
        document.  The cost when nothing is to be extracted is the idle workers' start, on
        the other cores.  A failure here is left for the first document to report."""
        try:
            self._pool()
        except (OutputError, PoolError, OSError):
            self.close()

    def _tool_probe(self) -> ToolProbe:
        if self.probe is None:
            try:
                known = read_json(self.out / TOOLS_CACHE)
            except (OSError, ValueError):
                known = {}
            self.known_tools = known if isinstance(known, dict) else {}
            self.known_before = dict(self.known_tools)
            self.probe = ToolProbe(self.cfg.no_external, known=self.known_tools)
        return self.probe

    def close(self) -> None:
        """Stop the workers and the tools' version questions, if any (the end of a run that
        did not reach ``finish``)."""
        if self.probe is not None:
            self.probe.close()
        if self.pool is not None:
            self.pool.close()

    def _pool(self) -> WorkerPool:
        if self.pool is not None:
            return self.pool
        OutputLock.acquire(self.out)
        tmp_root = self.out / STATE_DIR / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.out)
        try:  # PDF metadata sidecars a killed run was writing into the store's buckets
            buckets = [e.path for e in os.scandir(self.store.root) if e.is_dir()]
        except OSError:
            buckets = []
        for bucket in buckets:
            remove_stale_temps(Path(bucket))
        for stale in tmp_root.iterdir():  # scratch of a killed run
            shutil.rmtree(stale, ignore_errors=True)
        self.pool = WorkerPool(self.cfg.workers, self.limits, tmp_root, self.on_result,
                               extra_readers=self.extra_readers)
        self.pool.warm()
        return self.pool

    def _start(self) -> WorkerPool:
        pool = self._pool()
        todo = sum(1 for i in self.items if not i.fresh)
        self.progress = Progress("extract", todo, quiet=self.cfg.quiet)
        return pool

    def run_item(self, item: Item) -> TaskFailed | None:
        """doit action of ``extract:<root>/<path>``: hand the document to a worker."""
        if self.refused:
            return _failed(self.refused)
        if item.sha256 in self.scheduled:
            return None  # same content as a file already extracted in this run
        self.scheduled.add(item.sha256)
        try:
            pool = self.pool if self.progress is not None else self._start()
            if item.reader is None:
                self.record_verdict(item, "unsupported", None, 0, f"no reader for {item.mime}",
                                    None, None, {})
                return None
            self.job_seq += 1
            job_id = self.job_seq
            self.jobs[job_id] = item
            deadline = self.limits.deadline_s
            if item.reader.uses_tool_deadline and item.tools:
                deadline = self.limits.tool_deadline_s
            root = self.roots[item.root]
            path = os.path.join(str(root.path), item.path)
            if root.follow_symlinks:  # a file reached through a followed link: read the target
                path = os.path.realpath(path)
            pool.submit(Job(
                id=job_id, path=path,
                name=os.path.basename(item.path), mime=item.mime, sha256=item.sha256,
                size=item.size, deadline_s=deadline,
                tools={t: self.tools[t].path for t in item.tools},
            ))
            if self.job_seq == 1 and self.probe is not None:
                self.probe.ask()  # the tools' versions, asked beside the first document
        except (OutputError, PoolError) as e:
            return _failed(str(e))
        return None

    def on_result(self, result: JobResult) -> None:
        """Pool callback: commit one verdict (text first, then the verdict)."""
        item = self.jobs.pop(result.job.id)
        if result.status == "ok" and result.text_path is not None:
            self.store.adopt_text(item.sha256, result.text_path)
        self.record_verdict(item, result.status, result.extractor, result.chars, result.error,
                            result.error_kind, result.limit, result.meta)

    def record_verdict(self, item: Item, status: str, extractor: str | None, chars: int,
                       error: str | None, error_kind: str | None, limit: str | None,
                       meta: dict[str, Any]) -> None:
        sha = item.sha256
        if status != "ok":
            self.store.remove_text(sha)
            chars = 0
        if status == "ok" and "outline" in meta:
            self.store.write_meta(sha, {k: meta.get(k) for k in ("pages", "title", "outline")})
        pages = meta.get("pages") if isinstance(meta.get("pages"), int) else None
        title = meta.get("title") if isinstance(meta.get("title"), str) else None
        verdict = Verdict(sha, item.key, status, extractor, chars, error, error_kind, limit,
                          item.tools if status == "unsupported" else None, pages, title or None)
        self.pending.append(verdict)
        now = time.monotonic()
        if len(self.pending) >= COMMIT_EVERY or now - self.last_commit >= COMMIT_SECONDS:
            self.commit()
        self.verdicts[sha] = verdict
        self.produced.add(sha)
        if self.progress:
            self.progress.update(1, errors=1 if status == "error" else 0)

    def commit(self) -> None:
        """Make the pending verdicts (and their texts) durable."""
        self.store.put_many(self.pending)
        self.pending = []
        self.last_commit = time.monotonic()

    # -- finishing ------------------------------------------------------------------------------

    @property
    def more(self) -> bool:
        """Whether files to extract remain for another doit run (``RunConfig.slice``)."""
        return self.stale is not None and self.cursor < len(self.stale) and not self.refused

    def finish(self) -> TaskFailed | None:
        """Drain the pool, write extract.jsonl and extract.summary.json (once per run)."""
        if self.finished:
            return None
        if self.more:  # a slice done, more to come: keep the workers, commit what is done
            try:
                if self.pool is not None:
                    self.pool.drain()
                self.commit()
            except OutputError as e:
                return _failed(str(e))
            return None
        self.finished = True
        if self.refused:
            self.close()
            return _failed(self.refused)
        try:
            if self.pool is not None:
                try:
                    self.pool.drain()
                finally:
                    self.pool.close()
            OutputLock.acquire(self.out)
            self.commit()
            self._tool_versions()
            lines, tally = self.records()
            write_jsonl(self.out / "extract.jsonl", lines)
            self.summary = self.make_summary(tally)
            write_json(self.out / "extract.summary.json", self.summary)
            if self.tools_cache_stale:
                write_json(self.out / TOOLS_CACHE, self.known_tools)
        except OutputError as e:
            return _failed(str(e))
        finally:
            self.store.close()
            if self.progress:
                self.progress.close()
        return None

    def _tool_versions(self) -> None:
        """The tools' versions, for the summary (asked during the run, or now)."""
        if self.probe is None:
            return
        self.tools = self.probe.result()
        self.tools_cache_stale = self.known_tools != self.known_before  # written below

    def finish_teardown(self) -> None:
        """Teardown of a single-file run (``doit extract:<root>/<path>``)."""
        failed = self.finish()
        if failed is not None:
            raise OutputError(failed.message)

    def records(self) -> tuple[list[bytes], dict[str, Any]]:
        """The extract.jsonl lines, sorted, and their tally for the summary."""
        produced = self.produced
        first_seen: set[str] = set()
        out: list[tuple[str, str, bytes]] = []
        v_now = EXTRACT_VERSION
        counts = dict.fromkeys(("ok", "empty", "unsupported", "error", "skipped"), 0)
        error_kinds: dict[str, int] = {}
        limits_hit: dict[str, int] = {}
        reused_n = chars = 0
        for item in self.items:
            v = self.verdicts.get(item.sha256)
            if v is None or v.key != item.key:
                rec = ExtractRecord(item.root, item.path, item.sha256, item.mime, "skipped",
                                    None, 0, "not extracted yet (run the extract stage)", None,
                                    None, v_now, False, None)
            else:
                reused = item.sha256 not in produced or item.sha256 in first_seen
                first_seen.add(item.sha256)
                rec = ExtractRecord(item.root, item.path, item.sha256, item.mime, v.status,
                                    v.extractor, v.chars, v.error, v.error_kind, v.limit, v_now,
                                    reused, list(v.tools) if v.tools is not None else None,
                                    v.pages, v.title)
                reused_n += reused
                chars += v.chars
                if v.error_kind:
                    error_kinds[v.error_kind] = error_kinds.get(v.error_kind, 0) + 1
                if v.limit:
                    limits_hit[v.limit] = limits_hit.get(v.limit, 0) + 1
            counts[rec.status] += 1
            out.append((item.root, item.path, to_line(rec)))
        for w in self.skipped:
            reason = w["reason"] or w["error"] or "not hashed by the walk"
            rec = ExtractRecord(w["root"], w["path"], w["sha256"], w["mime"], "skipped", None, 0,
                                reason, None, None, v_now, False, None)
            counts["skipped"] += 1
            out.append((w["root"], w["path"], to_line(rec)))
        out.sort(key=_order)
        tally = {"records": len(out), "counts": counts, "reused": reused_n, "chars": chars,
                 "error_kinds": dict(sorted(error_kinds.items())),
                 "limits_hit": dict(sorted(limits_hit.items()))}
        return [line for _, _, line in out], tally

    def make_summary(self, tally: dict[str, Any]) -> dict:
        return {
            "stage": "extract",
            "extract_version": EXTRACT_VERSION,
            "manifest": str(self.manifest.path),
            "manifest_digest": self.manifest.digest,
            "walk_manifest_digest": self.walk_summary.get("manifest_digest"),
            **tally,
            "extracted": len(self.produced),
            "tools": [{"name": t.name, "path": t.path, "version": t.version}
                      for t in sorted(self.tools.values(), key=lambda t: t.name)],
            # the CLI leaves BASTION_NO_EXTERNAL to ToolProbe: report what was in force
            "no_external": self.cfg.no_external
            or os.environ.get("BASTION_NO_EXTERNAL") == "1",
            "workers": self.cfg.workers,
            "workers_started": self.pool.spawned if self.pool else 0,
            "workers_killed": self.pool.killed if self.pool else 0,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.monotonic() - self.t0, 3),
        }


_stages: dict[RunConfig, ExtractStage] = {}


def stage_for(cfg: RunConfig) -> ExtractStage:
    """The one ExtractStage of this process for these settings."""
    stage = _stages.get(cfg)
    if stage is None:
        manifest, out = load(cfg)
        stage = _stages[cfg] = ExtractStage(cfg, manifest, out)
    return stage


def existing_stage(cfg: RunConfig) -> ExtractStage | None:
    return _stages.get(cfg)


def forget_stages() -> None:
    """Forget the stages of earlier in-process runs (the CLI and tests run doit repeatedly)."""
    _stages.clear()


def _failed(message: str) -> TaskFailed:
    from doit.exceptions import TaskFailed  # loaded by then: only doit runs an action

    return TaskFailed(message)


def _order(t: tuple) -> tuple[str, str]:
    return (t[0], t[1])


# doit calls inspect.signature() on an action's callable every time it runs it; a plain
# function carrying its own __signature__ answers that at once (a bound method costs ~60 µs).
def _run_item(stage: ExtractStage, item: Item) -> TaskFailed | None:
    return stage.run_item(item)


def _finish_teardown(stage: ExtractStage) -> None:
    stage.finish_teardown()


for _f in (_run_item, _finish_teardown):
    _f.__signature__ = inspect.signature(_f)  # type: ignore[attr-defined]
