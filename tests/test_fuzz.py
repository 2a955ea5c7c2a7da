"""A short, deterministic slice of the fuzzing campaign (the long run is ``bench/fuzz.py``).

Every reader and MIME detection get mutated fixtures (bytes and structure, see
``tests/robust_fuzzlib.py``); on every input detection returns a type without raising (the
same in memory and from a file) and ``read_document`` gives exactly one outcome with a status
in ok/empty/unsupported/error, no exception escaping.  A sample goes through a real
``WorkerPool``: exactly one ``JobResult`` per job.  The reproducers of bugs the fuzzer found
(``tests/robust_crashes/``) stay as regressions.

Hypothesis runs derandomized (fixed examples, no database), so the slice is the same on
every run; ``max_examples`` keeps it to some 20–30 s.
"""

from __future__ import annotations

import hashlib
import random
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bastion.readers.base import Limits, MiB
from bastion.readers.runtime.context import LocalContext
from bastion.readers.detect import detect_bytes
from bastion.readers.dispatch import read_nested
from bastion.readers.runtime.pool import Job, WorkerPool
from tests import robust_fuzzlib as fl

CRASHES = Path(__file__).resolve().parent / "robust_crashes"

SEEDS = fl.all_seeds()
FAMILIES = sorted({f for f, _, _ in SEEDS})
# examples per family: the structural mutators (zip, PDF objects) get more
EXAMPLES = {"pdf": 800, "ooxml": 800, "odf": 800}

MUTATION = st.tuples(st.sampled_from(fl.OPS), st.integers(0, 2**32 - 1),
                     st.integers(0, 2**32 - 1), st.binary(max_size=16))
MUTATIONS = st.lists(MUTATION, min_size=1, max_size=5)


def slice_settings(examples: int) -> settings:
    return settings(derandomize=True, database=None, deadline=None, print_blob=True,
                    max_examples=examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> LocalContext:
    return LocalContext(fl.fuzz_limits(), {}, tmp_path_factory.mktemp("fuzzctx"),
                        nested=read_nested)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    import logging

    warnings.simplefilter("ignore")  # zipfile's "Duplicate name" on rebuilt packages
    logging.disable(logging.CRITICAL)  # pdfminer's warnings on broken objects
    yield
    logging.disable(logging.NOTSET)


def _assert_holds(v: fl.Verdict, data: bytes, name: str) -> None:
    assert v.failure is None, (
        f"{v.failure} on {name} ({len(data)} bytes, {v.mime}); head {data[:80]!r}")
    assert v.status in fl.STATUSES


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_reader_invariant_on_mutated_fixtures(family: str, ctx: LocalContext) -> None:
    seeds = [s for s in SEEDS if s[0] == family]
    others = [s[2] for s in SEEDS]

    @slice_settings(EXAMPLES.get(family, 400))
    @given(st.integers(0, len(seeds) - 1), st.integers(0, len(others) - 1), MUTATIONS)
    def run(i: int, j: int, mutations: list[fl.Mutation]) -> None:
        _, name, data = seeds[i]
        data = fl.apply(data, mutations, others[j])
        _assert_holds(fl.check(data, name, ctx), data, name)

    run()


def test_unmutated_seeds_read_cleanly(ctx: LocalContext) -> None:
    """The seeds themselves: the invariant, and a text for the well-formed ones."""
    for family, name, data in SEEDS:
        v = fl.check(data, name, ctx)
        _assert_holds(v, data, name)
        if family in ("markup", "delimited", "mail", "rtf", "text") \
                or name.startswith("gen."):
            assert v.status == "ok", (name, v)


@pytest.mark.slow
def test_detection_agrees_in_memory_and_from_a_file(tmp_path: Path, ctx: LocalContext) -> None:
    """detect_bytes (the readers' view) and detect_file (the walk's) never raise and agree."""
    others = [s[2] for s in SEEDS]

    @slice_settings(500)
    @given(st.integers(0, len(SEEDS) - 1), st.integers(0, len(others) - 1),
           st.lists(MUTATION, max_size=4), st.sampled_from(["", "x.txt", "x.csv", "x.docx",
                                                             "x.pdf", "x.html", "x.eml", "X.XLS"]))
    def run(i: int, j: int, mutations: list[fl.Mutation], rename: str) -> None:
        _, name, data = SEEDS[i]
        data = fl.apply(data, mutations, others[j]) if mutations else data
        name = rename or name
        from bastion.readers.detect import HEAD_BYTES, detect_file

        path = tmp_path / "input"
        path.write_bytes(data)
        a = detect_bytes(data, name)
        b = detect_file(str(path), name, data[:HEAD_BYTES])
        assert isinstance(a, str) and a and a == b, (a, b, name)

    run()


def test_arbitrary_bytes_under_every_name(ctx: LocalContext) -> None:
    """Bytes from nowhere, named for every reader: detection and the reader hold."""
    names = sorted({n for _, n, _ in SEEDS} | {"x", "x.rtf", "x.tsv", "x.odt", "x.pptx"})

    @slice_settings(500)
    @given(st.binary(max_size=2048), st.sampled_from(names),
           st.sampled_from([b"", b"%PDF-1.4\n", b"{\\rtf1 ", b"PK\x03\x04", b"<html>",
                            b"From: a\nSubject: b\nDate: c\n\n", b"\xef\xbb\xbf", b"\xff\xfe",
                            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"<?xml version='1.0'?>"]))
    def run(data: bytes, name: str, prefix: bytes) -> None:
        data = prefix + data
        _assert_holds(fl.check(data, name, ctx), data, name)

    run()


@pytest.mark.parametrize("path", sorted(CRASHES.glob("*")) if CRASHES.is_dir() else [],
                         ids=lambda p: p.name)
def test_fuzzer_findings_stay_fixed(path: Path, ctx: LocalContext) -> None:
    """Each input the fuzzer once broke the invariant with (see docs/robustness.md)."""
    data = path.read_bytes()
    _assert_holds(fl.check(data, path.name, ctx), data, path.name)


def test_sample_through_a_real_worker_pool(tmp_path: Path) -> None:
    """Mutated inputs as files through 2 sandboxed workers: exactly one JobResult per job,
    with a status in the four, and never ``internal`` (a reader exception) or ``crash``."""
    rng = random.Random(20240607)
    limits = Limits(deadline_s=60.0, memory_bytes=1 << 30, max_output_bytes=8 * MiB,
                    max_chars=1 * MiB, max_pages=50)
    docs = tmp_path / "docs"
    docs.mkdir()
    results: dict[int, list] = {}
    jobs: dict[int, tuple[str, bytes]] = {}
    pool = WorkerPool(2, limits, tmp_path / "pool",
                      lambda r: results.setdefault(r.job.id, []).append(r))
    try:
        per_family = {f: [s for s in SEEDS if s[0] == f] for f in FAMILIES}
        for i in range(1, 61):
            family = FAMILIES[i % len(FAMILIES)]
            _, name, data = rng.choice(per_family[family])
            data = fl.apply(data, fl.random_mutations(rng, family), rng.choice(SEEDS)[2])
            path = docs / f"{i}-{name}"
            path.write_bytes(data)
            jobs[i] = (name, data)
            pool.submit(Job(i, str(path), name, detect_bytes(data, name),
                            hashlib.sha256(data).hexdigest(), len(data), limits.deadline_s))
        pool.drain()
    finally:
        pool.close()
    assert sorted(results) == sorted(jobs)
    for job_id, got in results.items():
        assert len(got) == 1, (job_id, got)
        r = got[0]
        assert r.status in fl.STATUSES, r
        assert r.error_kind not in ("internal", "crash"), (jobs[job_id][0], r.error)
