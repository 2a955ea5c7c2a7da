"""Nothing a worker says is believed (issue 41, docs/security.md#one-schema-for-answers).

Attacker code runs in a document's process inside the real sandbox (``tests/hostile_readers.py``
through the ``extra_readers`` seam, as a parser exploit would run it) and answers the parent
with forged lines; real sweeps through the CLI's ``run_stages``.  Each forged answer — a list
field sent as an integer, 200,000-deep nesting, a page count of ``"²"``, an outline of 32 MiB,
a subject of 30 MiB, counts of 2**64 and of 4,300 digits — is one ``error`` record of kind
``worker`` (or ``output_limit`` past the answer's byte cap) for the right file, its cap named;
the run completes, reruns too (``--retry-errors`` included), the parent stays under 400 MB and
the output under a few MB.  An honest document too big for an answer keeps what fits, the cut
named in its record.  The property tests throw arbitrary bytes and arbitrary JSON at the
answer path: always one verdict, never an exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bastion.readers.base import Limits
from bastion.readers.runtime.answers import Answers
from bastion.readers.runtime.handout import Misbehaved, Sent
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.schema import MAX_ANSWER, encode

REPO = Path(__file__).resolve().parent.parent
HOSTILE = ("tests.hostile_readers",)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the pool drops root only as root")

VERDICT = {"status": "ok", "extractor": "hostile", "chars": 0}


def manifest(tmp: Path) -> Path:
    doc = {"version": 1, "roots": [{"name": "r", "path": "root"}],
           "stages": ["walk", "extract"], "limits": {"deadline_s": 20}}
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def forge(spec: dict, command: str = "forge") -> bytes:
    """A ``.hostile`` document: its command, its argument, then control bytes (a sweep's
    detection takes it for binary, so it goes to its reader by its extension)."""
    return f"{command}\n{json.dumps(spec)}\n".encode() + b"\x00\x01\x02\x03" * 1000


def tree(tmp: Path, forged: dict[str, dict]) -> Path:
    """A tree of plain files around the forged ones (``<name>.hostile``: forge + its spec)."""
    root = tmp / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "z.txt").write_text("omega\n")
    for name, spec in forged.items():
        (root / f"{name}.hostile").write_bytes(forge(spec))
    return manifest(tmp)


def sweep(m: Path, out: Path, **cfg: object) -> tuple[int, dict[str, dict]]:
    from bastion.tasks.cli import run_stages
    from bastion.tasks.config import RunConfig, forget_manifests

    forget_manifests()
    rc = run_stages(RunConfig(manifest=m, out=out, jobs=1, quiet=True, **cfg),
                    ["walk", "extract"], extra_readers=HOSTILE)
    recs = {json.loads(line)["path"]: json.loads(line)
            for line in (out / "extract.jsonl").read_bytes().splitlines()}
    return rc, recs


def assert_one_error(rc: int, recs: dict[str, dict], name: str, kind: str, why: str) -> None:
    assert rc == 2, rc  # the run completed, with error records
    bad = recs[f"{name}.hostile"]
    assert (bad["status"], bad["error_kind"]) == ("error", kind), bad
    assert why in bad["error"], bad
    assert [p for p, r in recs.items() if r["status"] == "error"] == [f"{name}.hostile"]
    assert recs["a.txt"]["status"] == recs["z.txt"]["status"] == "ok"


# -- the three forged answers that stopped every run ------------------------------------------

FORGED = {
    # a list field as an int: TypeError in the parent before
    "list_as_int": ({"verdict": {**VERDICT, "languages": 5}},
                    "verdict.languages: a list expected, got integer"),
    # 200,000-deep nesting: RecursionError in the parent's JSON parser before
    "deep": ({"sidecar": {"outline": "$deep:200000"}}, "nested deeper than 12 levels"),
    # a page count of "²" (str.isdigit is true, int() refuses it): ValueError before
    "superscript": ({"sidecar": {"metadata": {"pages": "²"}}},
                    "sidecar.metadata.pages: an integer expected, got string"),
}


@as_root
@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_answer_is_one_record_and_every_run_completes(tmp_path: Path,
                                                               name: str) -> None:
    spec, why = FORGED[name]
    m, out = tree(tmp_path, {name: spec}), tmp_path / "out"
    rc, recs = sweep(m, out)
    assert_one_error(rc, recs, name, "worker", why)
    # a repeat offender: its process is killed on every try, so it backs off like a crash
    assert recs[f"{name}.hostile"]["retry"] == {"failures": 1, "next_try_in_runs": 1}
    rc, recs = sweep(m, out)  # tried again (the next run), the same one record
    assert_one_error(rc, recs, name, "worker", why)
    rc, recs = sweep(m, out, retry_errors=True)
    assert_one_error(rc, recs, name, "worker", why)


# -- answers too big, and counts no document has ----------------------------------------------

BIG = {
    "outline32m": ({"sidecar": {"outline": "$outline:33554432"}}, "output_limit",
                   "reader answer over the 4 MiB answer cap"),
    "subject30m": ({"verdict": {**VERDICT, "subject": "$str:31457280"}}, "output_limit",
                   "reader answer over the 4 MiB answer cap"),
    "subject1m": ({"verdict": {**VERDICT, "subject": "$str:1048576"}}, "worker",
                  "verdict.subject: over 500 characters"),
    "outline3m": ({"sidecar": {"outline": "$outline:3000000"}}, "worker",
                  "sidecar.outline: over 10000 items"),
    "chars": ({"verdict": {**VERDICT, "chars": 1 << 64}}, "worker",
              "verdict.chars: out of range 0..9007199254740992"),
    "pages": ({"verdict": {**VERDICT, "pages": 1 << 64}}, "worker",
              "verdict.pages: out of range"),
    "sidecar_pages": ({"sidecar": {"pages": 1 << 64}}, "worker", "sidecar.pages: out of range"),
    "members": ({"verdict": {**VERDICT, "members": {"ok": "$int:4300"}}}, "worker",
                "verdict.members.ok: out of range"),
    "brackets": ({"sidecar": {"outline": "$empties:250000"}}, "worker",
                 "an answer of over 200000 objects and arrays"),
}

_SWEEP = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from bastion.tasks.cli import run_stages
    from bastion.tasks.config import RunConfig
    m, out = Path(sys.argv[1]), Path(sys.argv[2])
    rc = run_stages(RunConfig(manifest=m, out=out, jobs=1, quiet=True), ["walk", "extract"],
                    extra_readers=("tests.hostile_readers",))
    print(json.dumps({"rc": rc, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
""")


def measured_sweep(m: Path, out: Path) -> tuple[int, int]:
    """A sweep in a process of its own: its exit code and its peak RSS (bytes)."""
    got = subprocess.run([sys.executable, "-c", _SWEEP, str(m), str(out)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    report = json.loads(got.stdout.strip().splitlines()[-1])
    return report["rc"], report["maxrss_kib"] * 1024


def output_bytes(out: Path) -> tuple[int, int]:
    """extract.jsonl's size, and the biggest sidecar's."""
    sidecars = [p.stat().st_size for p in out.rglob("*.meta.json")]
    return (out / "extract.jsonl").stat().st_size, max(sidecars, default=0)


@as_root
@pytest.mark.slow
def test_oversized_answers_are_one_record_each_in_bounded_memory_and_output(
        tmp_path: Path) -> None:
    m, out = tree(tmp_path, {name: spec for name, (spec, _, _) in BIG.items()}), tmp_path / "out"
    rc, peak = measured_sweep(m, out)
    recs = {json.loads(line)["path"]: json.loads(line)
            for line in (out / "extract.jsonl").read_bytes().splitlines()}
    assert rc == 2
    for name, (_, kind, why) in BIG.items():
        rec = recs[f"{name}.hostile"]
        assert (rec["status"], rec["error_kind"]) == ("error", kind), rec
        assert why in rec["error"], rec
    assert recs["a.txt"]["status"] == recs["z.txt"]["status"] == "ok"
    assert peak < 400 << 20, f"the parent peaked at {peak >> 20} MiB"
    jsonl, sidecar = output_bytes(out)
    assert jsonl < 64 << 10 and sidecar < 64 << 10, (jsonl, sidecar)


@as_root
@pytest.mark.slow
def test_an_honest_giant_result_keeps_what_fits_and_says_so(tmp_path: Path) -> None:
    """A reader's own result too big for an answer (50,000 outline entries of 400
    characters, three attachments' metadata of 8 MB each): the worker cuts its sidecar to
    the cap, the record names each cut, the text is kept, and the sidecar is a few MB."""
    root = tmp_path / "root"
    root.mkdir()
    spec = {"outline": 50_000, "title": 400, "embedded": 3, "fields": 40, "subject": 9000}
    (root / "giant.hostile").write_bytes(forge(spec, "giant"))
    (root / "a.txt").write_text("alpha\n")
    out = tmp_path / "out"
    rc, peak = measured_sweep(manifest(tmp_path), out)
    recs = {json.loads(line)["path"]: json.loads(line)
            for line in (out / "extract.jsonl").read_bytes().splitlines()}
    assert rc == 0
    giant = recs["giant.hostile"]
    assert giant["status"] == "ok" and giant["chars"] == len("giant\n"), giant
    assert giant["subject"] == "s" * 500  # the record's cap, at the source
    notes = [w for w in giant["warnings"] if w.startswith("sidecar ")]
    assert "sidecar outline cut to 10000 of 50000 entries: its cap reached" in notes, notes
    assert any("answer cap of 4 MiB reached" in w for w in notes), notes
    jsonl, sidecar = output_bytes(out)
    assert sidecar <= MAX_ANSWER and jsonl < 64 << 10, (jsonl, sidecar)
    assert peak < 400 << 20, f"the parent peaked at {peak >> 20} MiB"


def test_the_worker_cuts_an_honest_sidecar_to_the_cap() -> None:
    big = {"id": 1, "verdict": {**VERDICT, "warnings": ["w"] * 20}, "text": "t1.txt", "rss": 1,
           "fatal": False,
           "sidecar": {"outline": [{"title": "x" * 400, "page": 1, "level": 1}] * 50_000,
                       "embedded": [{"path": "a", "metadata": {"fields": {
                           f"f{i}": ["v" * 2000] * 100 for i in range(40)}}}] * 3,
                       "pages": 3}}
    line = encode(big)
    assert len(line) <= MAX_ANSWER
    got = json.loads(line)
    assert got["sidecar"]["pages"] == 3 and "embedded" not in got["sidecar"]
    assert 0 < len(got["sidecar"]["outline"]) < 10_000
    warnings = got["verdict"]["warnings"]
    assert len(warnings) == 20 and warnings[-3:] == [
        "sidecar outline cut to 10000 of 50000 entries: its cap reached",
        f"sidecar outline cut to {len(got['sidecar']['outline'])} of 10000 entries: answer "
        "cap of 4 MiB reached",
        "sidecar embedded left out: answer cap of 4 MiB reached"]
    small = dict(big, sidecar={"pages": 3})
    assert encode(small) == json.dumps(small, separators=(",", ":")).encode() + b"\n"


# -- any bytes, any JSON: one verdict -----------------------------------------------------------


class _Answers:
    """The parent's answer path as the fleet takes it: a real text file and its descriptor
    per job, the answer line read through :meth:`Answers.result`."""

    def __init__(self, tmp: Path) -> None:
        self.answers = Answers(tmp / "answers", Limits(max_output_bytes=1 << 20))
        self.seq = 0

    def take(self, line: bytes) -> str:
        """``ok``/``alone`` when the line was taken as an answer, else the worker error."""
        self.seq += 1
        text, fd = self.answers.text_file("w", self.seq)
        sent = Sent(Job(7, "x", "x", "text/plain", "0" * 64, 1, 1.0), False, self.seq, text, fd,
                    True)
        try:
            result, _ = self.answers.result(sent, line)
        except Misbehaved as e:
            assert e.kind == "worker" and e.message, e
            return "worker"
        finally:
            sent.close()
        return "alone" if result is None else "ok"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=5),
    max_leaves=40)
_keys = st.sampled_from(["id", "verdict", "text", "sidecar", "rss", "fatal", "markdown",
                         "alone", "status", "chars", "pages", "languages", "members",
                         "outline", "metadata", "embedded", "page_sources", "warnings",
                         "title", "fields", "path", "code", "confidence", "subject"])
_shaped = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2, max_value=1 << 70)
    | st.sampled_from(["ok", "error", "t1.txt", "worker", "²", "", "\ud800"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=6),
    max_leaves=40)

_SETTINGS = settings(max_examples=300, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=st.binary(max_size=400))
def test_any_bytes_are_one_verdict(tmp_path: Path, data: bytes) -> None:
    assert _Answers(tmp_path).take(data) in ("ok", "alone", "worker")


@_SETTINGS
@given(value=_json | _shaped)
def test_any_json_is_one_verdict(tmp_path: Path, value: object) -> None:
    try:
        line = json.dumps(value).encode()
    except (ValueError, UnicodeEncodeError):
        return
    assert _Answers(tmp_path).take(line) in ("ok", "alone", "worker")


@_SETTINGS
@given(verdict=st.dictionaries(_keys, _shaped, max_size=6),
       sidecar=st.dictionaries(_keys, _shaped, max_size=6) | st.none())
def test_any_answer_shaped_json_is_one_verdict(tmp_path: Path, verdict: dict,
                                               sidecar: dict | None) -> None:
    msg = {"id": 7, "verdict": {"status": "ok", **verdict}, "text": "t1.txt",
           "sidecar": sidecar, "rss": 0, "fatal": False}
    assert _Answers(tmp_path).take(json.dumps(msg).encode()) in ("ok", "worker")


@pytest.mark.parametrize("line", [
    b"[" * 200_000 + b"]" * 200_000,
    b'{"id":7,"verdict":' + b"[" * 100_000,
    b'{"id":7,"verdict":{"status":"ok","languages":5}}',
    b'{"id":7,"verdict":{"status":"ok"},"sidecar":{"metadata":{"pages":"\xc2\xb2"}}}',
    b'{"id":7,"verdict":{"status":"ok","chars":NaN}}',
    b'{"id":7,"verdict":{"status":"ok","title":"\\ud800"}}',
    b'{"id":7,"verdict":{"status":"ok","pages":' + b"9" * 5000 + b"}}",
    b'{"id":7,"verdict":{"status":"ok"},"text":"t1.txt","rss":0,"fatal":false,"x":1}',
    b"\xff\xfe{}",
    b"x" * (MAX_ANSWER + 1),
], ids=["deep", "open", "list_as_int", "superscript", "nan", "surrogate", "digits",
        "unknown", "not_utf8", "over_cap"])
def test_what_stopped_runs_before_is_a_worker_error(tmp_path: Path, line: bytes) -> None:
    assert _Answers(tmp_path).take(line) == "worker"


# -- the same through the real protocol: a hostile reader's forged lines, a real pool ---------


@pytest.fixture(scope="module")
def hostile_pool(tmp_path_factory: pytest.TempPathFactory):
    """A real pool with the hostile reader (its documents' processes forge the answers)."""
    import hashlib

    from bastion.readers.runtime.pool import WorkerPool

    tmp = tmp_path_factory.mktemp("hostile-pool")
    docs = tmp / "docs"
    docs.mkdir()
    results: dict[int, list] = {}
    pool = WorkerPool(1, Limits(deadline_s=30, max_output_bytes=1 << 20), tmp / "pool",
                      lambda r: results.setdefault(r.job.id, []).append(r),
                      extra_readers=HOSTILE)
    seq = [0]

    def run(data: bytes):
        seq[0] += 1
        path = docs / f"{seq[0]}.hostile"
        path.write_bytes(data)
        job = Job(seq[0], str(path), path.name, "application/x-hostile",
                  hashlib.sha256(data).hexdigest(), len(data), 30.0, reader="hostile")
        pool.submit(job)
        pool.drain()
        return results.get(job.id, [])

    yield run
    pool.close()


@as_root
@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verdict=st.dictionaries(_keys, _shaped, max_size=5),
       sidecar=st.dictionaries(_keys, _shaped, max_size=5) | _shaped)
@example(verdict={"languages": 5}, sidecar={})  # TypeError in the parent before
@example(verdict={}, sidecar={"metadata": {"pages": "²"}})  # ValueError before
def test_any_forged_answer_on_the_real_protocol_is_one_result(hostile_pool, verdict: dict,
                                                              sidecar: object) -> None:
    """Arbitrary JSON in an answer, written by a document's process on its real answer pipe:
    exactly one result for the job (ok or a worker error), and the pool reads the next."""
    spec = {"verdict": {**VERDICT, **verdict}, "sidecar": sidecar}
    got = hostile_pool(forge(spec))
    assert len(got) == 1 and got[0].status in ("ok", "error"), got
    if got[0].status == "error":
        assert got[0].error_kind == "worker", got[0]
    after = hostile_pool(b"ok\n")
    assert len(after) == 1 and after[0].status == "ok", after


def _depth(v: object) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


_text = st.text(alphabet=st.sampled_from('[]{}"\\ab\u00e9\x00'), max_size=8)
_nested = st.recursive(st.none() | st.integers() | _text,
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(_text, inner, max_size=3), max_leaves=30)


@_SETTINGS
@given(value=_nested, wraps=st.integers(min_value=0, max_value=14))
def test_the_nesting_bound_is_the_values_own_nesting(value: object, wraps: int) -> None:
    """The nesting counted on the bytes (brackets outside strings, whatever the strings hold:
    brackets, quotes, backslashes) is the value's own: a value within the bound loads as it
    is, one past it is refused before the parse."""
    from bastion.readers.runtime.schema import MAX_DEPTH, Invalid, load

    for _ in range(wraps):
        value = [value]
    for line in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()):
        if _depth(value) <= MAX_DEPTH:
            assert load(line) == value
        else:
            with pytest.raises(Invalid, match="nested deeper than"):
                load(line)
