"""A run's state as returned values (issue 33, "a run is plain values"): the extract stage's
:class:`Decision` (refused, nothing to do, planned) and the run's :class:`RunEnd` are frozen
values returned by ``Run.decide`` and ``Run.finish``, read by the pipeline and the CLI; the
flags a step used to set on the run for another to read are gone."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from bastion.tasks import pipeline
from bastion.tasks.clean import clean_extract, clean_item
from bastion.tasks.config import RunConfig
from bastion.tasks.extract.run import Run
from bastion.tasks.extract.values import Decision, Outcomes, RunEnd, RunInputs, run_inputs


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha words\n")
    (root / "sub" / "b.txt").write_text("beta words\n")
    (root / "c.txt").write_text("alpha words\n")  # the same bytes as a.txt
    m = tmp_path / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    return m


def new_run(m: Path, out: Path, **kw) -> Run:
    run = Run(RunConfig(manifest=m, out=out, jobs=1, quiet=True, no_external=True, **kw))
    run.console = io.StringIO()  # what it says, kept
    return run


def sweep(run: Run) -> tuple[Decision, RunEnd | None]:
    """The walk, the decision, the documents, the end: what the doit tasks do, in order."""
    try:
        run.walk()
        decision = run.decide()
        if decision.refused is None and not decision.nothing_to_do:
            for item in run.items_for():
                run.extract(item)
        return decision, run.finish() if decision.refused is None else None
    finally:
        run.release()


def test_the_decision_and_the_end_of_a_first_run_and_a_no_op(tmp_path: Path) -> None:
    m, out = tree(tmp_path), tmp_path / "out"
    run = new_run(m, out)
    decision, end = sweep(run)
    assert decision == Decision()  # planned: neither refused nor nothing to do
    assert end is not None and not end.noop and end.not_yet == 0
    # c.txt has a.txt's bytes: one reading for both, the copy's record counted reused
    assert end.summary.records == 3 and end.summary.extracted == 2 and end.summary.reused == 1
    assert run.finish() is end  # the run's end is one value
    with pytest.raises(dataclasses.FrozenInstanceError):
        end.not_yet = 1  # type: ignore[misc]
    for gone in ("refused", "not_yet", "cleaned_all", "noop_from", "finished", "summary"):
        assert not hasattr(run, gone), gone

    again = new_run(m, out)
    decision, end = sweep(again)
    assert decision.nothing_to_do and decision.refused is None
    assert decision.noop_from is not None and decision.noop_from["records"] == 3
    assert end is not None and end.noop and end.summary.records == 3
    assert end.summary.reused == 3 and end.summary.extracted == 0
    assert again.decide() is decision  # decided once, the same value for every doit slice


def test_a_refused_extract_is_a_decision_the_tasks_fail_with(tmp_path: Path) -> None:
    """Extracting from a walk that is not there: refused, once, with the reason; the finish
    task fails with it and writes nothing."""
    m, out = tree(tmp_path), tmp_path / "out"
    run = new_run(m, out, walk="reuse")
    decision = run.decide()
    assert decision.refused is not None and "no walk in" in decision.refused
    assert not decision.nothing_to_do and run.decide() is decision
    failed = pipeline._finish_action(run)
    assert failed is not None and failed.message == decision.refused
    assert run.end is None and not (out / "extract.summary.json").exists()
    run.release()


def test_cleaning_one_file_after_the_group_was_cleaned_finds_nothing_left(
        tmp_path: Path) -> None:
    """``doit clean extract`` then ``doit clean extract:<file>`` in another run: the second
    one decides from the output, not from a flag the first set on its run, that nothing of
    the file is left: it says nothing and writes nothing."""
    m, out = tree(tmp_path), tmp_path / "out"
    first = new_run(m, out)
    sweep(first)
    item = next(i for i in first.plan().items if i.path == "sub/b.txt")
    cleaner = new_run(m, out)
    clean_extract(cleaner)
    cleaner.release()
    assert not (out / "extract.jsonl").exists() and not (out / "extract").exists()
    later = new_run(m, out)
    clean_item(later, item)
    later.release()
    assert later.console.getvalue() == ""
    assert not (out / "extract.jsonl").exists() and not (out / "extract").exists()


def test_the_cli_and_dodo_build_the_same_frozen_inputs(tmp_path: Path) -> None:
    m, out = tree(tmp_path), tmp_path / "out"
    cfg = RunConfig(manifest=m, out=out, jobs=1, quiet=True)
    given = Run(cfg).given()
    assert isinstance(given, RunInputs) and given == run_inputs(cfg)
    assert given.out == out and given.manifest.digest == run_inputs(cfg).manifest.digest
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.out = tmp_path  # type: ignore[misc]


def test_what_each_step_returned_is_kept_once_in_one_frozen_value(tmp_path: Path) -> None:
    """The run keeps what its steps returned in one frozen :class:`Outcomes` (issue 44): the
    walk's summary, the walk read back, the decision, the plan (with the tools its keys were
    planned with: the ones the session is handed with each item), the end."""
    m, out = tree(tmp_path), tmp_path / "out"
    run = new_run(m, out)
    decision, end = sweep(run)
    done = run.outcomes
    assert isinstance(done, Outcomes) and done.decision is decision and done.end is end
    assert done.walked is not None and done.walked["files"] == 3
    assert done.walk_read["manifest_digest"] == run.given().manifest.digest
    assert done.planned is not None and run.toolcache is not None
    assert done.planned.tools is run.toolcache.tools
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.end = None  # type: ignore[misc]
