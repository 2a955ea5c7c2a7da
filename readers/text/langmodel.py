"""py3langid's model unpacked once into a cache file, then memory-mapped read-only by every worker.

py3langid ships its model LZMA-compressed (a 4.5 MB ``model.npz.xz``, 68 MB unpacked): loading
it costs each worker ≈ 0.5 s of CPU (the decompression, then the parse and copies of the
arrays) and ≈ 200 MB at the peak.  The unpacked arrays are written once, by the first process
that needs them, into a file of the user's cache (:func:`cache_dir`), named by py3langid's
version and the SHA-256 of its model file (a new model is a new name; a file of another
format than this module's ``MAGIC`` is made again);
every later load maps that file read-only (``mmap(2)``): the arrays are views of the mapping, the
pages are the page cache's, shared by all workers and their document processes, and nothing
is decompressed.  The arrays have the same bytes as the ones py3langid's own loader makes, so
every probability is the same (tests/test_langmodel.py compares them).

The file: ``MAGIC``, a little-endian 4-byte header length, a JSON header (the classes, and per
array its dtype, shape and offset), then the arrays, each at a 64-byte boundary.  It is made in
a temporary file beside it and renamed into place (two makers write the same bytes; the last
rename wins, a reader never sees half a file), mode 0444; a temporary file a killed writer
left is removed by the next writer after an hour.  A file is mapped only when this
user owns it, its directory too, and neither is writable by group or others; anything else —
no home, a read-only cache, a file that does not parse — makes :func:`mapped` return None and
the caller unpacks in memory as before.

A worker opens and maps the file before it enters its sandbox (readers/runtime/workermain.py):
the sandbox's view may hide the cache directory, and the mapping outlives that.  The mapping
stays for the life of the process, and no descriptor of the file stays open (every document's
process inherits the worker's descriptors).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"bastion-langid-1\n"
ALIGN = 64
ARRAYS = ("ptc", "pc", "nextmove", "nextmove_row", "out_feat")
_TYPECODES = {("u", 2): "H", ("u", 4): "I", ("u", 8): "L", ("i", 4): "i"}


@dataclass(frozen=True)
class Source:
    """py3langid's model file and what names its unpacked copy."""

    path: Path
    version: str
    sha256: str

    @property
    def name(self) -> str:
        return f"langid-{self.version}-{self.sha256[:32]}.bin"


MODEL = ("data", "model.npz.xz")  # py3langid's MODEL_DIR / MODEL_FILE, under its package


def source() -> Source:
    """The installed py3langid's model file, its version and SHA-256 (4.5 MB: ≈ 5 ms),
    found without importing py3langid (which imports NumPy).  Raises ImportError without
    it, OSError when its model cannot be read."""
    from importlib.util import find_spec

    spec = find_spec("py3langid")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("py3langid is not installed")
    package = Path(list(spec.submodule_search_locations)[0])
    path = package.joinpath(*MODEL)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    number = _beside(package)
    if number is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("py3langid")
        except PackageNotFoundError:
            raise ImportError("py3langid has no distribution metadata") from None
    return Source(path, number, digest.hexdigest())


def _beside(package: Path) -> str | None:
    """The version in the metadata of the one ``py3langid-*.dist-info`` beside the package
    (how pip installs it), else None (and :mod:`importlib.metadata` is asked).  Read
    directly: importing ``importlib.metadata`` (and the ``email`` package it parses metadata
    with) cost every worker's start ≈ 25 ms of CPU before its first document."""
    try:
        found = [p for p in os.listdir(package.parent)
                 if p.startswith("py3langid-") and p.endswith(".dist-info")]
        if len(found) != 1:
            return None
        with open(package.parent / found[0] / "METADATA", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    return None  # the headers end: no version among them
                if line.startswith("Version:"):
                    return line[len("Version:"):].strip() or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/bastion``, else ``~/.cache/bastion`` of this user's home in the
    password database (a worker's environment has no ``HOME``); None without a home."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "bastion"
    try:
        import pwd

        home = pwd.getpwuid(os.geteuid()).pw_dir
    except (KeyError, ImportError):
        return None
    return Path(home) / ".cache" / "bastion" if home and os.path.isabs(home) else None


def unpack(src: Source) -> dict[str, Any]:
    """The model's arrays (NumPy) and ``classes`` from the compressed file, in memory."""
    import io
    import lzma

    import numpy as np

    with lzma.open(src.path) as f:
        raw = io.BytesIO(f.read())
    with np.load(raw, allow_pickle=False) as d:
        out: dict[str, Any] = {name: np.ascontiguousarray(d[name]) for name in ARRAYS}
        out["classes"] = d["classes"].tolist()
    return out


def encode(model: dict[str, Any]) -> bytes:
    """The cache file's bytes for ``model`` (:func:`unpack`'s)."""
    arrays: dict[str, dict[str, Any]] = {}
    body: list[bytes] = []
    offset = 0
    for name in ARRAYS:
        arr = model[name]
        pad = -offset % ALIGN
        body.append(b"\0" * pad)
        offset += pad
        arrays[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset,
                        "nbytes": int(arr.nbytes)}
        body.append(arr.tobytes())
        offset += arr.nbytes
    header = json.dumps({"classes": model["classes"], "arrays": arrays},
                        sort_keys=True).encode()
    start = len(MAGIC) + 4 + len(header)
    lead = MAGIC + struct.pack("<I", len(header) + (-start % ALIGN)) + header
    return lead + b" " * (-start % ALIGN) + b"".join(body)


def _safe(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def write(directory: Path, src: Source, model: dict[str, Any]) -> Path:
    """Write the cache file for ``model`` into ``directory`` (made 0700 when missing) by a
    temporary file and a rename; its path.  Raises OSError."""
    import tempfile

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / src.name
    _sweep(directory)
    # a name of its own (workers in PID namespaces all have pid 1), mode 0600
    fd, name = tempfile.mkstemp(prefix=f".{src.name}.", suffix=".tmp", dir=directory)
    tmp = Path(name)
    try:
        data = memoryview(encode(model))
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    return path


STALE = 3600.0  # seconds: a temporary file this old was left by a writer that died


def _sweep(directory: Path) -> None:
    """Remove the temporary files of writers that died (``kill -9`` mid-write)."""
    import time

    for entry in directory.glob(".langid-*.tmp"):
        try:
            if time.time() - entry.stat().st_mtime > STALE:
                entry.unlink()
        except OSError:
            pass


class Mapped:
    """The cache file mapped read-only: its header, and views of its arrays."""

    def __init__(self, region: memoryview) -> None:
        if region[:len(MAGIC)] != MAGIC:
            raise ValueError("not a bastion language model file")
        (size,) = struct.unpack_from("<I", region, len(MAGIC))
        start = len(MAGIC) + 4
        header = json.loads(bytes(region[start:start + size]))
        self.region = region
        self.classes: list[str] = [str(c) for c in header["classes"]]
        self.arrays: dict[str, dict[str, Any]] = header["arrays"]
        end = start + size
        for name in ARRAYS:
            spec = self.arrays[name]
            if spec["offset"] < 0 or end + spec["offset"] + spec["nbytes"] > len(region):
                raise ValueError(f"the model file is cut short ({name})")
        self.base = end

    def numpy(self, name: str) -> Any:
        """The array ``name`` as a read-only NumPy view."""
        import numpy as np

        spec = self.arrays[name]
        dtype = np.dtype(spec["dtype"])
        count = spec["nbytes"] // dtype.itemsize
        return np.frombuffer(self.region, dtype=dtype, count=count,
                             offset=self.base + spec["offset"]).reshape(spec["shape"])

    def flat(self, name: str) -> memoryview:
        """The array ``name`` as a flat memoryview of its integers (what py3langid's
        automaton indexes: the same values as the ``array`` its loader makes)."""
        spec = self.arrays[name]
        kind, size = spec["dtype"][1], int(spec["dtype"][2:])
        start = self.base + spec["offset"]
        view: Any = memoryview(self.region)[start:start + spec["nbytes"]]
        return view.cast(_TYPECODES[(kind, size)])  # a format from a table (typeshed: literals)


def _map(fd: int, size: int) -> tuple[memoryview, int]:
    """``size`` bytes of the file ``fd`` mapped shared and read-only, as a read-only byte
    view, and the mapping's address.  By ``mmap(2)`` itself: Python's ``mmap`` object keeps a
    descriptor of the file open (before 3.13), which every document's process would inherit.
    Raises OSError."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    view = ctypes.pythonapi.PyMemoryView_FromMemory
    view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
    view.restype = ctypes.py_object
    return view(addr, size, 0x100), addr  # PyBUF_READ


def _unmap(region: memoryview, addr: int) -> None:
    import ctypes

    size = len(region)
    region.release()
    libc = ctypes.CDLL(None)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.munmap(addr, size)


def _open(path: Path) -> Mapped | None:
    """The file at ``path`` mapped (for the rest of the process), when it is safe to map
    and whole; None otherwise.  No descriptor of it stays open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or not st.st_size or not _safe(st)
                or not _safe(os.stat(path.parent))):
            return None
        region, addr = _map(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return Mapped(region)
    except (ValueError, KeyError, TypeError, struct.error):
        _unmap(region, addr)
        return None


def mapped(directory: Path | None = None, make: bool = True) -> Mapped | None:
    """The cache file of the installed model, mapped; written first when missing and
    ``make`` (unpacking the model: ≈ 0.5 s, once per user and model).  ``directory``:
    :func:`cache_dir` by default.  None when it cannot be had (see the module docstring)."""
    try:
        src = source()
    except (ImportError, OSError):
        return None
    where = directory if directory is not None else cache_dir()
    if where is None:
        return None
    got = _open(where / src.name)
    if got is not None or not make:
        return got
    try:
        path = write(where, src, unpack(src))
    except (OSError, MemoryError):
        return None
    return _open(path)
