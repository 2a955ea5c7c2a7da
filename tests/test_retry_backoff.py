"""Repeat offenders (issue 32): a document whose reading times out (or runs out of memory, or
crashes its worker) on the same bytes and key is not read again on every run: after its n-th
failure in a row it is tried 2**(n-1) runs later (tasks/extract/store.py), at once when its
key changes or with ``--retry-errors``; its record says when.  Other ``error`` kinds are still
tried on every run.

Real runs through the CLI's run_stages, real sandboxed workers, a real 1 s deadline: the
sleeper is ``tests.hostile_readers``' ``sleep`` (the parent plans ``.hostile`` files with it,
through the extra readers its run is given, as tests/test_cluster.py does)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from bastion.tasks.cli import run_stages
from bastion.tasks.config import RunConfig, forget_manifests
from bastion.tasks.extract.plan import describe

HOSTILE = ("tests.hostile_readers",)


def write_manifest(tmp: Path, max_chars: int | None = None) -> Path:
    limits: dict = {"deadline_s": 1}
    if max_chars is not None:
        limits["max_chars"] = max_chars
    doc = {"version": 1, "roots": [{"name": "r", "path": "root"}],
           "stages": ["walk", "extract"], "limits": limits}
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def sweep(m: Path, out: Path, **cfg: object) -> tuple[int, dict, dict[str, dict], float]:
    forget_manifests()  # read afresh, as each command does
    started = time.monotonic()
    rc = run_stages(RunConfig(manifest=m, out=out, jobs=1, quiet=True, **cfg),
                    ["walk", "extract"], extra_readers=HOSTILE)
    took = time.monotonic() - started
    summary = json.loads((out / "extract.summary.json").read_text())
    recs = {json.loads(line)["path"]: json.loads(line)
            for line in (out / "extract.jsonl").read_bytes().splitlines()}
    return rc, summary, recs, took


@pytest.mark.slow
def test_a_repeat_timeout_costs_nothing_until_its_backoff_ends(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "slow.hostile").write_bytes(b"sleep\n" + b"\x00" * 4000)
    (root / "broken.hostile").write_bytes(b"raise\n" + b"\x00" * 4000)  # an internal error
    (root / "fine.txt").write_text("fine\n")
    m = write_manifest(tmp_path)
    out = tmp_path / "out"

    def run(**cfg: object) -> tuple[dict, dict[str, dict], float]:
        rc, summary, recs, took = sweep(m, out, **cfg)
        assert rc == 2  # error records
        assert recs["slow.hostile"]["error_kind"] == "timeout", recs["slow.hostile"]
        assert recs["broken.hostile"]["status"] == "error"
        assert "retry" not in recs["broken.hostile"] and "retry" not in recs["fine.txt"]
        return summary, recs, took

    # run 1: the first timeout is tried again on the next run, as any error
    summary, recs, _ = run()
    assert summary["extracted"] == 3
    assert recs["slow.hostile"]["retry"] == {"failures": 1, "next_try_in_runs": 1}
    # run 2: the second in a row: left alone for the next run
    summary, recs, _ = run()
    assert summary["extracted"] == 2  # the timeout and the internal error
    assert recs["slow.hostile"]["retry"] == {"failures": 2, "next_try_in_runs": 2}
    # run 3: the repeat timeout costs nothing; the other error is still tried every run
    summary, recs, _ = run()
    assert summary["extracted"] == 1
    slow = recs["slow.hostile"]
    assert slow["reused"] is True and slow["retry"] == {"failures": 2, "next_try_in_runs": 1}
    # run 4: due again: read, times out a third time: 4 runs before the next try
    summary, recs, _ = run()
    assert summary["extracted"] == 2
    assert recs["slow.hostile"]["retry"] == {"failures": 3, "next_try_in_runs": 4}
    summary, recs, _ = run()
    assert summary["extracted"] == 1 and recs["slow.hostile"]["reused"] is True
    # --retry-errors: at once
    summary, recs, _ = run(retry_errors=True)
    assert summary["extracted"] == 2
    assert recs["slow.hostile"]["retry"] == {"failures": 4, "next_try_in_runs": 8}
    # a new key (another max_chars changes every reader's key): at once, counted afresh
    m = write_manifest(tmp_path, max_chars=1_000_000)
    summary, recs, _ = run()
    assert summary["extracted"] == 3  # every file is under a new key
    assert recs["slow.hostile"]["retry"] == {"failures": 1, "next_try_in_runs": 1}


def test_the_plan_says_when_a_repeat_offender_is_tried_again() -> None:
    from bastion.readers.runtime.verdict import Status, Verdict
    from bastion.tasks.extract.plan import Item

    item = Item.__new__(Item)
    object.__setattr__(item, "fresh", True)
    object.__setattr__(item, "key", "k")
    v = Verdict(status=Status.ERROR, error="timed out", error_kind="timeout")
    assert describe(item, v, forgotten=False, other_key=False, retry=(3, 2)) == (
        "up to date: error (timeout) 3 times in a row; tried again in 2 run(s), or now with "
        "--retry-errors")
