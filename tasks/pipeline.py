"""The doit task generators, wired by ``dodo.py`` and run in-process by the CLI.

``walk``              walk the manifest's roots into walk.jsonl (always runs: the tree may change)
``extract``           created after ``walk``; one subtask per hashed file (``extract:<root>/<path>``)
``_extract_finish``   setup of the ``extract`` group: drain the workers, write extract.jsonl and
                      extract.summary.json (hidden from ``doit list``)
``index``             after ``extract``: the full-text index brought in step with the records
                      (up to date while extract.jsonl is the one it was last brought in step
                      with; tasks/index/stage.py)

Every generator closes over one :class:`bastion.tasks.extract.run.Run` (built by the CLI or ``dodo.py``).
Every failure that is the run's (bad manifest, missing walk, cannot write) is a failed task
with a one-line message; a document's failure is only ever a record.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from doit.action import BaseAction
from doit.exceptions import BaseFail, TaskError, TaskFailed
from doit.reporter import ConsoleReporter
from doit.task import IOConfig, Task, first_line

from bastion.errors import CANNOT_START, OutputError, WorkerError

from . import doitdb
from .config import FINISH_TASK, RunConfig, doit_db, jobs_error
from .names import shown, task_name

if TYPE_CHECKING:  # the extract stage (and every reader) is imported when a run extracts
    from .extract.plan import Item
    from .extract.run import Run
    from .extract.values import RunEnd


class Reporter(ConsoleReporter):
    """doit's console reporter, minus a line per task (100k files make 100k lines): only
    failures are printed, one line each; with ``-v 2`` a line per task run, as doit does."""

    verbose = False  # set per run (doit_config): doit gives a reporter no verbosity
    run: Any = None  # the run, whose progress display the error lines go above

    def _say(self, line: str) -> None:
        line = shown(line)  # a name in an error is shown escaped, never obeyed
        progress = getattr(self.run, "progress", None)
        if progress is None or progress.quiet or not progress.tty:
            sys.stderr.write(line + "\n")  # no live display to keep clear of
            return
        progress.print(line)  # above the live display
        if hasattr(sys.stderr, "failed"):  # the CLI's one-line filter: an error was said
            sys.stderr.failed = True

    def execute_task(self, task: Any) -> None:
        if self.verbose and task.actions and task.name[0] != "_":
            self.write(f".  {shown(task.title())}\n")

    def skip_uptodate(self, task: Any) -> None:
        pass

    def skip_ignore(self, task: Any) -> None:
        pass

    def add_failure(self, task: Any, fail: Any) -> None:
        message = fail.get_msg().strip().splitlines() if hasattr(fail, "get_msg") else [str(fail)]
        first = message[-1] if message else "failed"
        self._say(f"bastion: error: {task.name}: {first}")
        self.failures.append({"task": task, "exception": fail})

    def cleanup_error(self, exception: Any) -> None:
        sys.stderr.write(f"bastion: error: {shown(str(exception).strip().splitlines()[-1])}\n")

    def complete_run(self) -> None:
        # failures were printed as they happened; doit's own errors still get their detail
        for message in self.runtime_errors:
            sys.stderr.write(f"bastion: error: {shown(message)}\n")


DOIT_CONFIG = {
    "default_tasks": ["extract"],
    "reporter": Reporter,
    "verbosity": 0,
    "minversion": "0.36.0",
}

PARALLEL_REFUSED = ("doit's -n/--process is not used by bastion: its reader workers are "
                    "already parallel and sandboxed; use jobs=N (bastion: -j N)")


def refused_settings(cfg: RunConfig) -> str | None:
    """Why settings given to doit are refused (doit's -n, jobs= out of range), or None."""
    if cfg.doit_processes > 1:
        return PARALLEL_REFUSED
    problem = jobs_error(cfg.jobs if cfg.jobs else None)
    return problem.replace("-j ", "jobs=", 1) if problem else None


# -- actions (plain functions carrying their own __signature__: doit inspects an action's
# callable every time it runs it, and a bound method costs ~60 µs to inspect) ----------------


def _refuse(message: str) -> TaskFailed:
    return TaskFailed(message)


def _walk_action(run: Run) -> TaskFailed | None:
    try:
        run.walk()
    except CANNOT_START as e:
        return TaskFailed(str(e))
    if run.announce_in_actions and run.outcomes.walked is not None:
        from .walk.stage import describe_problems

        run.announce(describe_walk(run.outcomes.walked, run.out))
        problems = describe_problems(run.outcomes.walked, run.out)
        if problems:
            run.say(problems)
    return None


def _refused(run: Run) -> str | None:
    """Why the extract stage cannot run, as decided (``Run.decide``), or None."""
    decision = run.outcomes.decision
    return decision.refused if decision is not None else None


def _extract_action(run: Run, item: Item) -> TaskFailed | None:
    """doit action of ``extract:<root>/<path>``: hand the document to a worker."""
    refused = _refused(run)
    if refused:
        return TaskFailed(refused)

    try:
        run.extract(item)
    except (OutputError, WorkerError) as e:
        return TaskFailed(str(e))
    return None


def _finish_action(run: Run) -> TaskFailed | None:
    run.slices.resume_gc()  # the slice's tasks are done (tasks/extract/slices.py)
    refused = _refused(run)
    if refused:
        run.close()
        return TaskFailed(refused)
    try:
        end = run.finish()
    except CANNOT_START as e:
        run.close()
        return TaskFailed(str(e))
    if end is not None and run.announce_in_actions:
        run.say(describe_partial(run, end) or describe_extract(end.summary.to_json(), run.out))
    return None


def _finish_teardown(run: Run) -> None:
    """Teardown of a single-file run (``doit extract:<root>/<path>``)."""
    failed = _finish_action(run)
    if failed is not None:
        raise OutputError(failed.message)


def _clean_extract(run: Run) -> None:
    """``doit clean extract``: the records, the summary, the store and its verdicts."""
    from .clean import clean_extract

    clean_extract(run)


def _clean_item(run: Run, item: Item) -> None:
    """``doit clean extract:<file>``: that file's text, sidecar and verdict; its record
    becomes ``skipped`` (not extracted yet)."""
    from .clean import clean_item

    clean_item(run, item)


def _clean_walk(run: Run) -> None:
    from .clean import clean_walk

    clean_walk(run)


def _unknown_task(name: str, close: list[str]) -> TaskFailed:
    hint = f"; closest: {', '.join(close)}" if close else ""
    return TaskFailed(f"no walked file is named {name}{hint}")


def _index_action(run: Run) -> TaskFailed | None:
    """doit action of ``index``: the index brought in step with the records (only after the
    last doit slice of a run: the records are written then)."""
    if run.more_slices:
        return None
    from .index.stage import describe

    try:
        summary = run.index()
    except CANNOT_START as e:
        return TaskFailed(str(e))
    if run.announce_in_actions:
        run.announce(describe(summary, run.out))
    return None


def _clean_index(run: Run) -> None:
    """``doit clean index``: the index file and its journals."""
    from .index.database import INDEX_DB

    od = run.lock()
    for suffix in ("", "-wal", "-shm"):
        od.unlink(INDEX_DB + suffix)
    run.say(f"removed the index in {run.out}")


for _f in (_refuse, _walk_action, _extract_action, _finish_action, _finish_teardown,
           _clean_extract, _clean_item, _clean_walk, _unknown_task, _index_action,
           _clean_index):
    setattr(_f, "__signature__", inspect.signature(_f))


class Call(BaseAction):
    """One Python call as a doit action: what a per-file task runs.  doit's ``PythonAction``
    pays, on every run of every task, for capturing stdout and stderr into fresh buffers and
    for inspecting the callable's signature (its keyword arguments); bastion's actions print
    nothing and take only their arguments, so a call is all they need.  The result is read as
    ``PythonAction`` reads it (``None`` or a :class:`doit.exceptions.TaskFailed`), and an
    exception that escapes the action is the task's error, as there."""

    def __init__(self, func: Any, args: tuple, task: Any = None) -> None:
        self.func = func
        self.args = args
        self.task = task
        self.out = self.err = self.result = None
        self.values: dict[str, Any] = {}

    def execute(self, out: Any = None, err: Any = None) -> Any:
        try:
            returned = self.func(*self.args)
        except Exception as e:  # noqa: BLE001 — as doit's PythonAction: the task's error
            return TaskError("PythonAction Error", e)
        if returned is None or isinstance(returned, BaseFail):
            return returned
        return TaskError(f"{self.func.__name__} returned {returned!r}, not None or a failure")

    def __str__(self) -> str:
        return f"Python: function {self.func.__name__}"

    def __repr__(self) -> str:
        return f"<PythonAction: '{self.func!r}'>"


_IO = IOConfig({})


class FileTask(Task):
    """One walked file's ``extract:<root>/<path>`` task, made directly rather than from a
    dict: doit's ``Task.__init__`` checks nineteen fields and wraps each action and clean
    action in a ``PythonAction``, which at 20,000 files a slice is a tenth of what the parent
    spends on a small document (docs/performance.md, issue 40).  The attributes are the ones
    ``Task.__init__`` sets for a task with one action, a clean action, an ``uptodate`` entry
    and nothing else (tests/test_pipeline_tasks.py compares them with doit's own)."""

    def __init__(self, name: str, action: BaseAction, clean: BaseAction, uptodate: Any,
                 doc: str | None = None, group: str = "extract") -> None:
        # pylint: disable=super-init-not-called — what Task.__init__ would set, set here
        self.name = name
        self.params = ()
        self.creator_params: list = []
        self.options: dict[str, Any] | None = None
        self.pos_arg = None
        self.pos_arg_val = None
        self.setup_tasks: list = []
        self.io = _IO
        self._actions = [action]
        action.task = self
        self._action_instances = [action]
        self.dep_changed = None
        self.file_dep: set = set()
        self.task_dep: list = []
        self.wild_dep: list = []
        self.calc_dep: set = set()
        self.loader = None
        self.getargs: dict = {}
        self.value_savers: list = []
        self.uptodate: list[tuple[Any, Any, Any]] = [
            (uptodate, [], {}) if callable(uptodate) else (uptodate, None, None)]
        self.targets: list = []
        self.subtask_of = group
        self.has_subtask = False
        self.result = None
        self.values: dict = {}
        self.verbosity = 0
        self.custom_title = None
        self.cfg_values = None
        self._remove_targets = False
        clean.task = self
        self.clean_actions = [clean]
        self.teardown: list = []
        self.doc = first_line(doc)
        self.watch = ()
        self.meta = None
        self.executed = False

    def init_options(self, args: Any = None) -> Any:
        """No parameters to parse (doit's builds a parser per task for none): the command
        line's other words are left to the caller, as doit's would leave them."""
        if self.options is None:
            self.options = {}
            return args
        return None


class Freshness:
    """An extract task's ``uptodate`` entry: whether its stored verdict stands, and why (doit
    prints it: ``doit info extract:<file>``)."""

    __slots__ = ("fresh", "reason")

    def __init__(self, fresh: bool, reason: str) -> None:
        self.fresh = fresh
        self.reason = reason

    def __call__(self, task: Any, values: Any) -> bool:
        return self.fresh

    def __repr__(self) -> str:
        return self.reason


class IndexFreshness:
    """The ``index`` task's ``uptodate`` entry: whether the index is in step with the
    records (asked read-only: ``doit list --status`` makes nothing)."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def __call__(self, task: Any, values: Any) -> bool:
        if self.run.more_slices:
            return True  # not the last doit slice of the run: the records are not written yet
        from bastion.errors import BastionError

        from .index.stage import is_current
        from .output.readonly import open_read

        try:
            given = self.run.given()
            manifest, out = given.manifest, given.out
            if "index" not in manifest.stages or not out.is_dir():
                return False  # (the action says why, or makes it)
            with open_read(out) as read:
                return is_current(read)
        except (BastionError, OSError):
            return False

    def __repr__(self) -> str:
        return "the index is in step with extract.jsonl"


# -- generators -----------------------------------------------------------------------------


def walk_task(run: Run) -> dict:
    task: dict[str, Any] = {
        "basename": "walk",
        "doc": "walk the manifest's roots into walk.jsonl (incremental: unchanged files are "
               "not read again)",
        "actions": [(_walk_action, (run,))],
        "uptodate": [False],
        "clean": [(_clean_walk, (run,))],
        "verbosity": 0,
    }
    refusal = refused_settings(run.cfg)
    if refusal:
        task["actions"] = [(_refuse, (refusal,))]
        task["clean"] = []
    elif run.cfg.requested and not run.cfg.listing:
        # single named tasks (doit extract:<file>) have no group to finish them: the walk,
        # which every run executes first, finishes at the end (doit runs teardowns after
        # every task), whether the named files were redone or up to date
        task["teardown"] = [(_finish_teardown, (run,))]
    return task


def extract_tasks(run: Run) -> Iterator[dict]:
    """The group first (so it exists even with nothing walked), then one subtask per file.

    A file that is up to date costs doit ~75 µs and ~5 KB as a Task object even when it does
    nothing, so its subtask is generated only when the command names ``extract:…`` tasks or
    lists tasks (``RunConfig.all_tasks``); otherwise only the stale files get one, in slices
    of ``RunConfig.slice``.
    """
    cfg = run.cfg
    doc = "extract text from every walked file (one subtask per file)"
    refusal = refused_settings(cfg)
    if refusal:
        yield {"basename": "extract", "name": None, "doc": doc,
               "actions": [(_refuse, (refusal,))]}
        return
    # the group as doit's loader makes it from {"name": None, …}; the subtasks are Task
    # objects (FileTask), which the loader takes as they are, so their names are added to
    # the group's task_dep here
    group = Task("extract", None, doc=doc, setup=[FINISH_TASK], task_dep=["walk"],
                 clean=[(_clean_extract, (run,))], has_subtask=True)
    yield group
    decision = run.decide()  # refused, nothing to do, or planned (tasks/extract/values.py)
    if decision.refused is not None:
        why = decision.refused
        for requested in cfg.requested:  # named on the command line: say why it is not here
            if "*" not in requested:
                yield {"basename": "extract", "name": requested.split(":", 1)[1],
                       "doc": f"not available: {why}",
                       "actions": [(_refuse, (why,))], "verbosity": 0}
        return
    if decision.nothing_to_do:
        return  # the last run's stamp holds: no per-file work (tasks/extract/stamp.py)
    from .extract import runplan

    plan = run.plan()
    planned = run.outcomes.planned
    every = cfg.all_tasks
    batch = plan.items if every else run.items_for()
    run.slices.pause_gc()  # until the slice's end (tasks/extract/slices.py: its tasks make no garbage)
    names = set()
    for item in batch:
        name = task_name(item.root, item.path)
        if name in names:
            continue  # the same path twice cannot happen in one walk; be safe with doit
        names.add(name)
        full = f"extract:{name}"
        action, clean = Call(_extract_action, (run, item)), Call(_clean_item, (run, item))
        if every:
            reason = runplan.why(item, planned, run.open_store())
            forgot = planned is not None and runplan.is_forgotten(planned.forgotten, item)
            task = FileTask(full, action, clean, Freshness(item.fresh and not forgot, reason),
                            reason)
        else:
            task = FileTask(full, action, clean, item.fresh)
        group.task_dep.append(full)  # (what doit's loader does for a subtask's dict)
        yield task
    if every and not cfg.listing:
        yield from _glob_tasks(cfg.requested, names)
    if every:
        for requested in cfg.requested:
            name = requested.split(":", 1)[1]
            if name in names or "*" in name:
                continue
            import difflib

            close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
            yield {"basename": "extract", "name": name,
                   "actions": [(_unknown_task, (requested, close))], "verbosity": 0}


def index_task(run: Run) -> dict:
    """The index stage's task: after ``extract`` (unless this invocation runs the index
    alone: ``bastion index``), up to date while the index is in step with the records."""
    task: dict[str, Any] = {
        "basename": "index",
        "doc": "index the stored texts for bastion search (SQLite FTS5; incremental)",
        "actions": [(_index_action, (run,))],
        "uptodate": [IndexFreshness(run)],
        "clean": [(_clean_index, (run,))],
        "verbosity": 0,
    }
    if not run.cfg.stages or "extract" in run.cfg.stages:
        task["task_dep"] = ["extract"]
    refusal = refused_settings(run.cfg)
    if refusal:
        task["actions"] = [(_refuse, (refusal,))]
        task["clean"] = []
    return task


def _glob_tasks(requested: tuple[str, ...], names: set[str]) -> Iterator[dict]:
    """A task named by each glob of the command line (``doit "extract:docs/reports/*"``):
    it depends on every file's task the glob matches, as doit's own wildcard selects plain
    tasks (``fnmatch`` over the task names), so doit runs exactly those (the ones not up to
    date; all of them with ``-a``); a glob that matches nothing fails, saying so.  doit
    matches a glob before the walk has run and the file tasks exist: :func:`after_walk`
    makes it wait for them (:func:`_glob_after_creation`)."""
    import fnmatch

    for pattern in requested:
        if "*" not in pattern:
            continue
        name = pattern.split(":", 1)[1]
        matched = sorted(n for n in names if fnmatch.fnmatch(f"extract:{n}", pattern))
        if matched:
            yield {"basename": "extract", "name": name, "verbosity": 0,
                   "doc": f"the {len(matched)} walked file(s) {pattern} matches",
                   "task_dep": [f"extract:{n}" for n in matched], "actions": []}
        else:
            yield {"basename": "extract", "name": name, "verbosity": 0,
                   "actions": [(_unknown_glob, (pattern,))]}


def _unknown_glob(pattern: str) -> TaskFailed:
    return TaskFailed(f"no walked file matches {pattern} (the task names: doit list --all)")


setattr(_unknown_glob, "__signature__", inspect.signature(_unknown_glob))


def _glob_after_creation() -> None:
    """Let a glob on the command line match the subtasks of a group doit creates later.

    doit expands a task name holding ``*`` (``doit run "extract:docs/*"``) in
    ``TaskControl._get_wild_tasks`` against the tasks that exist when the command line is
    read; the ``extract`` group is created after the walk (``create_after``), so the glob
    matched nothing and the run did nothing (doit 0.36 and 0.37 alike).  This wraps that
    method: a glob that matches nothing and names a subtask of a group still to be created
    (``extract:…``) is kept as one name, which doit then treats as it treats a named subtask
    of such a group (a placeholder, run once the group is created), and the group's
    generator yields a task of that very name, depending on the files the glob matches
    (:func:`_glob_tasks`).  Checked against doit 0.37.0 (run) and 0.36.0 (its control.py
    read: the same code); any other glob is expanded by doit as before.  Idempotent."""
    from doit.control import TaskControl

    current = TaskControl._get_wild_tasks
    if getattr(current, "bastion_after_creation", False):
        return

    def _get_wild_tasks(self: Any, pattern: str) -> list[str]:
        found = current(self, pattern)
        basename = pattern.split(":", 1)[0]
        if found or basename not in DELAYED_GROUPS or ":" not in pattern:
            return found
        group = self.tasks.get(basename)
        if group is None or not group.loader or getattr(group.loader, "created", True):
            return found
        return [pattern]

    setattr(_get_wild_tasks, "bastion_after_creation", True)
    TaskControl._get_wild_tasks = _get_wild_tasks


DELAYED_GROUPS = frozenset({"extract"})  # the groups created after the walk


def finish_task(run: Run) -> dict:
    return {
        "basename": FINISH_TASK,
        "doc": "write extract.jsonl and extract.summary.json",
        "actions": [(_finish_action, (run,))],
        "uptodate": [False],
        "verbosity": 0,
    }


def doit_config(cfg: RunConfig, backend: str | None = None, run: Run | None = None) -> dict:
    """DOIT_CONFIG for these settings.  The backend is bastion's atomic JSON one
    (tasks/doitdb.py); for the ``doit`` command it is found by its entry point, so a checkout
    that was never installed falls back to doit's plain ``json`` (the CLI registers it itself
    and passes ``backend``, sparing every run the entry-point scan)."""
    if backend is None:
        backend = doitdb.NAME if doitdb.registered() else "json"
    reporter = type("Reporter", (Reporter,), {"verbose": cfg.verbosity >= 2, "run": run})
    return dict(DOIT_CONFIG, dep_file=doit_db(cfg), backend=backend, reporter=reporter,
                default_tasks=default_tasks(cfg))


def default_tasks(cfg: RunConfig) -> list[str]:
    """What a plain ``doit`` runs: the last of the manifest's stages (``index`` pulls
    ``extract``, which pulls ``walk``); ``extract`` when the manifest cannot be read (its
    task says why)."""
    from .config import load

    try:
        manifest, _ = load(cfg)
    except Exception:  # noqa: BLE001 — the tasks report a bad manifest themselves
        return ["extract"]
    return ["index"] if "index" in manifest.stages else ["extract"]


def namespace(run: Run) -> dict[str, Any]:
    """The task generators as a doit namespace (what dodo.py wires, for the CLI)."""
    def task_walk() -> dict:
        """walk the manifest's roots into walk.jsonl"""
        return walk_task(run)

    def task_extract() -> Iterator[dict]:
        """extract text from every walked file (one subtask per file)"""
        yield from extract_tasks(run)

    task_extract = after_walk(run, task_extract)

    def task__extract_finish() -> dict:
        """write extract.jsonl and extract.summary.json"""
        return finish_task(run)

    def task_index() -> dict:
        """index the stored texts for bastion search"""
        return index_task(run)

    return {
        "DOIT_CONFIG": doit_config(run.cfg, doitdb.NAME, run),
        "task_walk": task_walk,
        "task_extract": task_extract,
        "task__extract_finish": task__extract_finish,
        "task_index": task_index,
    }


def after_walk(run: Run, generator: Any) -> Any:
    """The extract generator, created after the walk ran (doit's ``create_after``), except
    for the commands that look at tasks without running them (``list``, ``info``,
    ``forget``, ``clean``, …): those see the tasks of the walk already there."""
    if run.cfg.listing:
        return generator
    from doit import create_after

    _glob_after_creation()
    return create_after(executed="walk")(generator)


def describe_partial(run: Run, end: RunEnd) -> str | None:
    """What a run of single named tasks did (``doit extract:<file>``), or None."""
    if not run.cfg.all_tasks or run.cfg.listing:
        return None
    from .extract.runplan import made_items

    done = sorted(f"{i.root}/{i.path}" for i in made_items(run.plan(), run.open_store()))
    shown = ", ".join(done[:10]) + (f", … ({len(done) - 10} more)" if len(done) > 10 else "")
    return (f"extract: re-extracted {len(done)} file(s){': ' + shown if done else ''}; "
            f"{end.not_yet} file(s) not extracted yet (run doit extract); records in "
            f"{run.out / 'extract.jsonl'}")


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
