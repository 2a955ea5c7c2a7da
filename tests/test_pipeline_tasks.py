"""The per-file extract task bastion builds directly (tasks/pipeline.py ``FileTask``) is the
task doit's loader would make from the same dict, and its action behaves as doit's
``PythonAction`` does for what bastion's actions return."""

from __future__ import annotations

from typing import Any

import pytest
from doit.action import PythonAction
from doit.exceptions import TaskError, TaskFailed
from doit.loader import generate_tasks
from doit.task import Task

from bastion.tasks.pipeline import Call, FileTask, Freshness


def _act(run: Any, item: Any) -> TaskFailed | None:
    return None


def _clean(run: Any, item: Any) -> None:
    pass


def _doits(uptodate: Any, doc: str | None = None) -> Task:
    """The task doit makes from the dict a generator used to yield for one file."""
    def gen():
        yield {"basename": "extract", "name": None, "doc": "group"}
        task = {"basename": "extract", "name": "docs/a b.txt",
                "actions": [(_act, ("run", "item"))], "clean": [(_clean, ("run", "item"))],
                "verbosity": 0, "uptodate": [uptodate]}
        if doc is not None:
            task["doc"] = doc
        yield task

    return {t.name: t for t in generate_tasks("task_extract", gen())}["extract:docs/a b.txt"]


def _ours(uptodate: Any, doc: str | None = None) -> FileTask:
    return FileTask("extract:docs/a b.txt", Call(_act, ("run", "item")),
                    Call(_clean, ("run", "item")), uptodate, doc)


@pytest.mark.parametrize("uptodate", [True, False, Freshness(True, "up to date: ok")])
def test_a_file_task_is_the_task_doit_would_make(uptodate: Any) -> None:
    doc = "up to date: ok under key 0123" if isinstance(uptodate, Freshness) else None
    theirs, ours = _doits(uptodate, doc), _ours(uptodate, doc)
    assert isinstance(ours, Task)
    assert set(vars(ours)) == set(vars(theirs))  # no attribute doit sets is missing
    actions = {"_actions", "_action_instances", "clean_actions", "uptodate", "io"}
    for name in set(vars(theirs)) - actions:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert vars(ours.io) == vars(theirs.io)
    assert ours.uptodate == theirs.uptodate
    (a,), (b,) = ours.actions, theirs.actions
    assert (a.func, a.args, a.task) == (b.py_callable, tuple(b.args), b.task) == (
        _act, ("run", "item"), b.task)
    assert a.task is ours
    (c,), (d,) = ours.clean_actions, theirs.clean_actions
    assert (c.func, c.args, c.task, str(c)) == (d.py_callable, tuple(d.args), ours, str(d))
    assert repr(ours) == repr(theirs) and ours.title() == theirs.title()


def test_options_parse_like_doits_for_a_task_without_parameters() -> None:
    theirs, ours = _doits(True), _ours(True)
    # named on the command line, the words after it are left for the next task name
    assert ours.init_options(["extract:x"]) == theirs.init_options(["extract:x"]) \
        == ["extract:x"]
    assert ours.options == theirs.options == {}
    assert ours.init_options(["again"]) is theirs.init_options(["again"]) is None
    fresh_ours, fresh_theirs = _ours(True), _doits(True)
    assert fresh_ours.init_options() is None and fresh_theirs.init_options() is None


def test_the_call_returns_what_python_action_returns() -> None:
    failed = TaskFailed("cannot write")

    def fails() -> TaskFailed:
        return failed

    def raises() -> None:
        raise OSError("disk gone")

    def odd() -> int:
        return 3

    task = _ours(True)
    task.init_options()
    assert Call(_act, ("run", "item"), task).execute() is None
    assert Call(fails, (), task).execute() is failed
    assert PythonAction(fails, task=task).execute() is failed
    error = Call(raises, (), task).execute()
    theirs = PythonAction(raises, task=task).execute()
    assert isinstance(error, TaskError) and isinstance(theirs, TaskError)
    assert "disk gone" in error.get_msg() and "disk gone" in theirs.get_msg()
    assert isinstance(Call(odd, (), task).execute(), TaskError)
    assert isinstance(PythonAction(odd, task=task).execute(), TaskError)


def test_an_interrupt_is_not_caught() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Call(interrupted, ()).execute()
