"""The language model's unpacked copy (readers/text/langmodel.py): the same answers as
py3langid's own loader, made once, mapped only when it is this user's and whole, and mapped by
every worker before its sandbox."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

import pytest

import langpages as lp
from bastion.readers.base import Limits
from bastion.readers.text import langid, langmodel

TEXTS = [s.text for s in lp.SAMPLES] + [
    "ok", "", "1234 5678", "Grüße aus Köln und Zürich", "ΑΒΓ", "صباح الخير", "中文", "x" * 50,
    "The quick brown fox. Der schnelle braune Fuchs. Le renard brun rapide. " * 20,
]


@pytest.mark.slow
def test_the_mapped_model_answers_exactly_as_py3langids_own_loader(tmp_path):
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    own = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    mapped = langmodel.mapped(tmp_path)
    assert mapped is not None
    ours = langid.of_mapped(mapped)
    assert ours.nb_classes == own.nb_classes
    assert ours.nb_ptc.tobytes() == own.nb_ptc.tobytes()
    assert list(ours.tk_nextmove) == list(own.tk_nextmove)
    assert list(ours.tk_output) == list(own.tk_output)
    for text in TEXTS:
        assert ours.rank(text) == own.rank(text), text[:40]
        assert ours.classify(text) == own.classify(text)
    assert not ours.nb_ptc.flags.writeable and ours.tk_nextmove.readonly
    with pytest.raises(TypeError):
        mapped.region[0:1] = b"x"  # a read-only mapping


@pytest.mark.slow
def test_the_copy_is_made_once_read_only_and_named_by_the_models_bytes(tmp_path):
    src = langmodel.source()
    assert src.sha256 == hashlib.sha256(src.path.read_bytes()).hexdigest()
    first = langmodel.mapped(tmp_path / "cache")
    path = tmp_path / "cache" / src.name
    assert first is not None and path.is_file()
    assert re.fullmatch(r"langid-[\w.]+-[0-9a-f]{32}\.bin", path.name)
    made = path.stat()
    assert stat.S_IMODE(made.st_mode) == 0o444
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    again = langmodel.mapped(tmp_path / "cache")
    assert again is not None and again.classes == first.classes
    assert path.stat().st_ino == made.st_ino and path.stat().st_mtime_ns == made.st_mtime_ns
    assert os.listdir(tmp_path / "cache") == [path.name]  # no temporary file left


def _copy(tmp_path: Path) -> Path:
    assert langmodel.mapped(tmp_path / "cache") is not None
    return tmp_path / "cache" / langmodel.source().name


@pytest.mark.slow
def test_a_copy_others_may_change_is_not_mapped(tmp_path):
    path = _copy(tmp_path)
    os.chmod(path.parent, 0o777)
    assert langmodel.mapped(path.parent, make=False) is None
    os.chmod(path.parent, 0o700)
    os.chmod(path, 0o666)
    assert langmodel.mapped(path.parent, make=False) is None
    os.chmod(path, 0o444)
    assert langmodel.mapped(path.parent, make=False) is not None
    if os.geteuid() == 0:  # another user's file
        os.chown(path, 65534, 65534)
        assert langmodel.mapped(path.parent, make=False) is None


@pytest.mark.slow
def test_a_copy_cut_short_or_foreign_is_not_mapped_and_is_made_again(tmp_path):
    path = _copy(tmp_path)
    whole = path.read_bytes()
    for broken in (whole[: len(whole) // 2], b"not a model\n" + whole[12:], b""):
        os.chmod(path, 0o644)
        path.write_bytes(broken)
        os.chmod(path, 0o444)
        assert langmodel.mapped(path.parent, make=False) is None
    mapped = langmodel.mapped(path.parent)
    assert mapped is not None and path.read_bytes() == whole


@pytest.mark.slow
def _links(fd_dir: str) -> dict[str, str]:
    """A live process's descriptors and what each names (one it closes meanwhile, as the
    zygote does around a fork, is left out)."""
    found = {}
    for fd in os.listdir(fd_dir):
        try:
            found[fd] = os.readlink(f"{fd_dir}/{fd}")
        except FileNotFoundError:
            continue
    return found


def test_a_worker_maps_the_copy_before_its_sandbox_and_names_languages(tmp_path):
    """The worker's zygote has the user's cache file mapped (its pages shared with every
    other worker), not the model unpacked, and its documents get their languages."""
    from bastion.readers.runtime.pool import Job, WorkerPool

    path = tmp_path / "vertrag.txt"
    path.write_text(lp.sample("deu").text, encoding="utf-8")
    data = path.read_bytes()
    results: list = []
    pool = WorkerPool(1, Limits(), tmp_path / "pool", results.append)
    try:
        pool.submit(Job(id=1, path=str(path), name=path.name, mime="text/plain",
                        sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                        deadline_s=30.0))
        pool.drain()
        pid = pool.pids()[0]
        maps = Path(f"/proc/{pid}/maps").read_text()
        fds = _links(f"/proc/{pid}/fd")
    finally:
        pool.close()
    assert results[0].verdict.languages == (("de", 1.0),)
    cache = langmodel.cache_dir()
    assert cache is not None
    name = str(cache / langmodel.source().name)
    assert name in maps and name not in fds.values()  # mapped, no descriptor of it left
    line = next(l for l in maps.splitlines() if l.endswith(name))
    assert line.split()[1].startswith("r--")  # read-only


@pytest.mark.slow
def test_a_writer_killed_mid_write_blocks_no_later_one(tmp_path):
    """Workers in PID namespaces all have pid 1: a temporary file a killed writer left never
    stands in the next one's way, and one over an hour old is removed."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    name = langmodel.source().name
    old = cache / f".{name}.1.tmp"
    fresh = cache / f".{name}.abc.tmp"
    for left in (old, fresh):
        left.write_bytes(b"half a model")
    os.utime(old, (0, os.stat(old).st_mtime - 2 * langmodel.STALE))
    assert langmodel.mapped(cache) is not None
    assert not old.exists() and fresh.exists()
    assert sorted(p.name for p in cache.iterdir()) == sorted([name, fresh.name])


def test_the_models_version_is_read_beside_it_without_importlib_metadata():
    """A worker names its model's cache file by py3langid's version: read from the
    ``.dist-info`` beside the package, the same as importlib.metadata's, without importing
    that (≈ 25 ms of every worker's start, the email package among it)."""
    import subprocess
    import sys
    from importlib.metadata import version

    code = ("import sys; from bastion.readers.text import langmodel; s = langmodel.source(); "
            "print(s.version, 'importlib.metadata' in sys.modules, 'email' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [version("py3langid"), "False", "False"]


def test_a_version_beside_the_package_only_when_it_is_unambiguous(tmp_path):
    package = tmp_path / "py3langid"
    package.mkdir()
    assert langmodel._beside(package) is None  # no metadata: importlib.metadata is asked
    one = tmp_path / "py3langid-1.2.3.dist-info"
    one.mkdir()
    (one / "METADATA").write_text("Metadata-Version: 2.4\nName: py3langid\nVersion: 1.2.3\n\n"
                                  "Version: 9 (the description)\n")
    assert langmodel._beside(package) == "1.2.3"
    (tmp_path / "py3langid-2.0.dist-info").mkdir()  # two installs: not guessed
    assert langmodel._beside(package) is None
