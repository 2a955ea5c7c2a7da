"""The doit task generators, wired by ``dodo.py`` and run in-process by the CLI.

``walk``              walk the manifest's roots into walk.jsonl (always runs: the tree may change)
``extract``           created after ``walk``; one subtask per hashed file (``extract:<root>/<path>``)
``_extract_finish``   setup of the ``extract`` group: drain the workers, write extract.jsonl and
                      extract.summary.json (hidden from ``doit list``)

Settings come from doit variables (see :class:`tasks.config.RunConfig`).  Every failure that is
the run's (bad manifest, missing walk, cannot write) is a failed task with a one-line message;
a document's failure is only ever a record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter

from . import doitdb
from .config import FINISH_TASK, PrerequisiteError, RunConfig, load
from .fsio import STATE_DIR, LockedError, OutputError, OutputLock
from .manifest import ManifestError
from .progress import Progress
from .signing import SignatureError
from .walk import run_walk

if TYPE_CHECKING:  # the extract stage (and every reader) is imported when a run extracts
    from .extract import ExtractStage


class Reporter(ConsoleReporter):
    """doit's console reporter, minus a line per task (100k files make 100k lines): only
    failures are printed, one line each."""

    def execute_task(self, task: Any) -> None:
        pass

    def skip_uptodate(self, task: Any) -> None:
        pass

    def skip_ignore(self, task: Any) -> None:
        pass

    def add_failure(self, task: Any, fail: Any) -> None:
        message = fail.get_msg().strip().splitlines() if hasattr(fail, "get_msg") else [str(fail)]
        first = message[-1] if message else "failed"
        sys.stderr.write(f"bastion: error: {task.name}: {first}\n")
        self.failures.append({"task": task, "exception": fail})

    def cleanup_error(self, exception: Any) -> None:
        sys.stderr.write(f"bastion: error: {str(exception).strip().splitlines()[-1]}\n")

    def complete_run(self) -> None:
        # failures were printed as they happened; doit's own errors still get their detail
        for message in self.runtime_errors:
            sys.stderr.write(f"bastion: error: {message}\n")


DOIT_CONFIG = {
    "default_tasks": ["extract"],
    "reporter": Reporter,
    "verbosity": 0,
    "minversion": "0.36.0",
}

RUN_ERRORS = (ManifestError, SignatureError, PrerequisiteError, LockedError, OutputError)

_walked: set[RunConfig] = set()  # walked in this process: later slices of the run reuse it
LAST_WALK: dict[str, Any] = {}


def stage_for(cfg: RunConfig) -> ExtractStage:
    """The one ExtractStage of this process for these settings."""
    from .extract import stage_for

    return stage_for(cfg)


def existing_stage(cfg: RunConfig) -> ExtractStage | None:
    extract = sys.modules.get(f"{__package__}.extract")
    return extract.existing_stage(cfg) if extract is not None else None


def reset() -> None:
    """Forget the stages of earlier in-process runs (the CLI and tests run doit repeatedly)."""
    extract = sys.modules.get(f"{__package__}.extract")
    if extract is not None:
        extract.forget_stages()
    _walked.clear()
    LAST_WALK.clear()
    OutputLock.release_all()


def _walk_action(cfg: RunConfig) -> TaskFailed | None:
    try:
        manifest, out = load(cfg)
        if cfg.walk == "reuse" or "walk" not in manifest.stages or cfg in _walked:
            from .extract import check_walk

            check_walk(manifest, out)  # extract from the walk already there
            return None
        OutputLock.acquire(out)
        progress = Progress("walk", 0, quiet=cfg.quiet)
        LAST_WALK.clear()
        LAST_WALK.update(run_walk(manifest, out, no_hash=cfg.no_hash,
                                  progress=progress.update))
        progress.close()
        _walked.add(cfg)
    except RUN_ERRORS as e:
        return TaskFailed(str(e))
    return None


def walk_task(cfg: RunConfig) -> dict:
    return {
        "basename": "walk",
        "doc": "walk the manifest's roots into walk.jsonl (incremental: unchanged files are "
               "not read again)",
        "actions": [(_walk_action, (cfg,))],
        "uptodate": [False],
        "verbosity": 0,
    }


def extract_tasks(cfg: RunConfig) -> Iterator[dict]:
    try:
        stage = stage_for(cfg)
    except RUN_ERRORS as e:
        message = str(e)
        yield {"basename": "extract", "name": None, "doc": "extract text",
               "setup": [FINISH_TASK]}
        _failures[cfg] = message
        return
    yield from stage.tasks()


_failures: dict[RunConfig, str] = {}


def _finish_action(cfg: RunConfig) -> TaskFailed | None:
    if cfg in _failures:
        return TaskFailed(_failures.pop(cfg))
    try:
        return stage_for(cfg).finish()
    except RUN_ERRORS as e:
        return TaskFailed(str(e))


def finish_task(cfg: RunConfig) -> dict:
    return {
        "basename": FINISH_TASK,
        "doc": "write extract.jsonl and extract.summary.json",
        "actions": [(_finish_action, (cfg,))],
        "uptodate": [False],
        "verbosity": 0,
    }


def doit_db(cfg: RunConfig) -> str:
    """Where doit keeps its database: under the output directory's state dir when known."""
    try:
        _, out = load(cfg)
    except RUN_ERRORS:
        return ".doit.db"
    state = out / STATE_DIR
    try:
        state.mkdir(parents=True, exist_ok=True)  # doit opens its database before any task
    except OSError:
        pass  # the tasks report an unwritable output directory themselves
    return str(state / "doit.json")


def doit_config(cfg: RunConfig, backend: str | None = None) -> dict:
    """DOIT_CONFIG for these settings.  The backend is bastion's atomic JSON one
    (tasks/doitdb.py); for the ``doit`` command it is found by its entry point, so a checkout
    that was never installed falls back to doit's plain ``json`` (the CLI registers it itself
    and passes ``backend``, sparing every run the entry-point scan)."""
    if backend is None:
        backend = doitdb.NAME if doitdb.registered() else "json"
    return dict(DOIT_CONFIG, dep_file=doit_db(cfg), backend=backend)


def namespace(cfg: RunConfig) -> dict[str, Any]:
    """The task generators as a doit namespace (what dodo.py wires, for the CLI)."""
    from doit import create_after

    def task_walk() -> dict:
        """walk the manifest's roots into walk.jsonl"""
        return walk_task(cfg)

    @create_after(executed="walk")
    def task_extract() -> Iterator[dict]:
        """extract text from every walked file (one subtask per file)"""
        yield from extract_tasks(cfg)

    def task__extract_finish() -> dict:
        """write extract.jsonl and extract.summary.json"""
        return finish_task(cfg)

    return {
        "DOIT_CONFIG": doit_config(cfg, doitdb.NAME),
        "task_walk": task_walk,
        "task_extract": task_extract,
        "task__extract_finish": task__extract_finish,
    }


def describe_walk(summary: dict, out: Path) -> str:
    if not summary:
        return "walk: nothing done"
    return (f"walk: {summary['files']} files ({summary['bytes']} bytes) in "
            f"{summary['duration_s']} s: {summary['hashed']} hashed, {summary['reused']} "
            f"unchanged, {summary['not_hashed']} not hashed, {summary['symlinks']} symlinks, "
            f"{summary['other']} other, {summary['errors']} errors, {summary['warnings']} "
            f"warnings; records in {out / 'walk.jsonl'}")


def describe_extract(summary: dict, out: Path) -> str:
    if not summary:
        return "extract: nothing done"
    c = summary["counts"]
    kinds = ", ".join(f"{k} {n}" for k, n in summary.get("error_kinds", {}).items())
    return (f"extract: {summary['records']} files in {summary['duration_s']} s: {c['ok']} ok, "
            f"{c['empty']} empty, {c['unsupported']} unsupported, {c['error']} errors"
            f"{' (' + kinds + ')' if kinds else ''}, {c['skipped']} skipped; "
            f"{summary['reused']} reused, {summary['extracted']} extracted now, "
            f"{summary['chars']} characters; records in {out / 'extract.jsonl'}")
