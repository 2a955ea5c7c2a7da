"""The doit task generators, wired by ``dodo.py`` and run in-process by the CLI.

``walk``              walk the manifest's roots into walk.jsonl (always runs: the tree may change)
``extract``           created after ``walk``; one subtask per hashed file (``extract:<root>/<path>``)
``_extract_finish``   setup of the ``extract`` group: drain the workers, write extract.jsonl and
                      extract.summary.json (hidden from ``doit list``)

Every generator closes over one :class:`tasks.run.Run` (built by the CLI or ``dodo.py``).
Every failure that is the run's (bad manifest, missing walk, cannot write) is a failed task
with a one-line message; a document's failure is only ever a record.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter

from . import doitdb
from .config import FINISH_TASK, PrerequisiteError, RunConfig, load
from .fsio import STATE_DIR, LockedError, OutputError
from .manifest import ManifestError
from .signing import SignatureError

if TYPE_CHECKING:  # the extract stage (and every reader) is imported when a run extracts
    from .plan import Item
    from .run import Run


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


def task_name(root: str, path: str) -> str:
    """The doit name of a file's task (the part after ``extract:``)."""
    return f"{root}/{path}"


# -- actions (plain functions carrying their own __signature__: doit inspects an action's
# callable every time it runs it, and a bound method costs ~60 µs to inspect) ----------------


def _walk_action(run: Run) -> TaskFailed | None:
    try:
        run.walk()
    except RUN_ERRORS as e:
        return TaskFailed(str(e))
    return None


def _extract_action(run: Run, item: Item) -> TaskFailed | None:
    """doit action of ``extract:<root>/<path>``: hand the document to a worker."""
    if run.refused:
        return TaskFailed(run.refused)
    from readers.runtime import PoolError

    try:
        run.extract(item)
    except (OutputError, LockedError, PoolError) as e:
        return TaskFailed(str(e))
    return None


def _finish_action(run: Run) -> TaskFailed | None:
    if run.refused:
        run.close()
        return TaskFailed(run.refused)
    try:
        run.finish()
    except RUN_ERRORS as e:
        run.close()
        return TaskFailed(str(e))
    return None


def _finish_teardown(run: Run) -> None:
    """Teardown of a single-file run (``doit extract:<root>/<path>``)."""
    failed = _finish_action(run)
    if failed is not None:
        raise OutputError(failed.message)


for _f in (_walk_action, _extract_action, _finish_action, _finish_teardown):
    _f.__signature__ = inspect.signature(_f)  # type: ignore[attr-defined]


# -- generators -----------------------------------------------------------------------------


def walk_task(run: Run) -> dict:
    return {
        "basename": "walk",
        "doc": "walk the manifest's roots into walk.jsonl (incremental: unchanged files are "
               "not read again)",
        "actions": [(_walk_action, (run,))],
        "uptodate": [False],
        "verbosity": 0,
    }


def extract_tasks(run: Run) -> Iterator[dict]:
    """The group first (so it exists even with nothing walked), then one subtask per file.

    A file that is up to date costs doit ~75 µs and ~5 KB as a Task object even when it does
    nothing, so its subtask is generated only when the command names ``extract:…`` tasks or
    lists tasks (``RunConfig.all_tasks``); otherwise only the stale files get one, in slices
    of ``RunConfig.slice``.
    """
    yield {"basename": "extract", "name": None,
           "doc": "extract text from every walked file (one subtask per file)",
           "setup": [FINISH_TASK]}
    try:
        plan = run.plan()
    except RUN_ERRORS as e:
        run.refused = str(e)
        return
    every = run.cfg.all_tasks
    # A run of single named tasks has no group to finish it: their teardown does.
    teardown = [(_finish_teardown, (run,))] if every else []
    batch = plan.items if every else run.items_for()
    for item in batch:
        yield {
            "basename": "extract",
            "name": task_name(item.root, item.path),
            "actions": [(_extract_action, (run, item))],
            "uptodate": [item.fresh],
            "teardown": teardown,
            "verbosity": 0,
        }


def finish_task(run: Run) -> dict:
    return {
        "basename": FINISH_TASK,
        "doc": "write extract.jsonl and extract.summary.json",
        "actions": [(_finish_action, (run,))],
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


def namespace(run: Run) -> dict[str, Any]:
    """The task generators as a doit namespace (what dodo.py wires, for the CLI)."""
    from doit import create_after

    def task_walk() -> dict:
        """walk the manifest's roots into walk.jsonl"""
        return walk_task(run)

    @create_after(executed="walk")
    def task_extract() -> Iterator[dict]:
        """extract text from every walked file (one subtask per file)"""
        yield from extract_tasks(run)

    def task__extract_finish() -> dict:
        """write extract.jsonl and extract.summary.json"""
        return finish_task(run)

    return {
        "DOIT_CONFIG": doit_config(run.cfg, doitdb.NAME),
        "task_walk": task_walk,
        "task_extract": task_extract,
        "task__extract_finish": task__extract_finish,
    }


def describe_walk(summary: dict | None, out: Path) -> str:
    if not summary:
        return "walk: nothing done"
    return (f"walk: {summary['files']} files ({summary['bytes']} bytes) in "
            f"{summary['duration_s']} s: {summary['hashed']} hashed, {summary['reused']} "
            f"unchanged, {summary['not_hashed']} not hashed, {summary['symlinks']} symlinks, "
            f"{summary['other']} other, {summary['errors']} errors, {summary['warnings']} "
            f"warnings; records in {out / 'walk.jsonl'}")


def describe_extract(summary: dict | None, out: Path) -> str:
    if not summary:
        return "extract: nothing done"
    c = summary["counts"]
    kinds = ", ".join(f"{k} {n}" for k, n in summary.get("error_kinds", {}).items())
    return (f"extract: {summary['records']} files in {summary['duration_s']} s: {c['ok']} ok, "
            f"{c['empty']} empty, {c['unsupported']} unsupported, {c['error']} errors"
            f"{' (' + kinds + ')' if kinds else ''}, {c['skipped']} skipped; "
            f"{summary['reused']} reused, {summary['extracted']} extracted now, "
            f"{summary['chars']} characters; records in {out / 'extract.jsonl'}")
