"""The tools of a run, probed once and cached by binary in ``.bastion/tools.json``, and for
the user in ``tools.json`` of the user's cache (tasks/extract/usercache.py).

A tool's version is asked only when its binary is new to the cache (path, size, mtime, ctime,
inode: :class:`bastion.readers.runtime.toolset.ToolProbe`); so is tesseract's data directory
and each language pack's digest.  Those are facts of a binary or a file, whatever the output:
a new output takes the ones the user's cache holds (each still checked against its file's
stat before use), so its first run starts no version question and hashes no pack that an
earlier run on this machine already did (≈ 60 ms of CPU beside the workers' start; issue 40).
Both caches are written back at the end of a run when they changed: the output's as before,
the user's without an fsync (a lost write is only asked again), keeping only the entries
whose file is still what it was (:data:`USER_KEPT` at most).
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from bastion.readers.runtime.toolset import Tool, ToolProbe

from ..output.atomic import STATE_DIR, read_json_file
from ..output.directory import OutputDir
from . import usercache

TOOLS_CACHE = f"{STATE_DIR}/tools.json"  # in the output directory
USER_CACHE = "tools.json"  # in the user's cache directory
USER_KEPT = 256  # entries the user's cache keeps (tools, data directories, language packs)
TESSDATA_KEY = "tessdata:"  # a tesseract binary's data directory: keyed by that binary


class ToolCache:
    def __init__(self, out: Path, no_external: bool) -> None:
        self.no_external = no_external
        try:  # read before the output is locked (a listing command never locks it)
            known = read_json_file(out / TOOLS_CACHE)
        except (OSError, ValueError):
            known = {}
        mine = known if isinstance(known, dict) else {}
        self.before = dict(mine)
        self.user = _read_user()
        # the user's entries first, the output's over them: each is used only while its
        # binary's stat matches (ToolProbe), so either may be stale, neither wrongly trusted
        self.known: dict[str, list] = {**self.user, **mine}
        self._probe: ToolProbe | None = None

    def ask(self) -> None:
        """Look the tools up and start asking the new ones their versions (a process each),
        so that the answers come while the caller goes on; :attr:`tools` collects them."""
        if self._probe is None:
            self._probe = ToolProbe(self.no_external, known=self.known)
            self._probe.ask()

    @cached_property
    def tools(self) -> dict[str, Tool]:
        """Every known tool found on PATH, with its version and identity."""
        self.ask()
        assert self._probe is not None
        return self._probe.result()

    def save(self, od: OutputDir) -> None:
        if self.known != self.before:
            od.write_json(TOOLS_CACHE, self.known)
            self.before = dict(self.known)
        if any(self.user.get(k) != v for k, v in self.known.items()):
            _write_user({**self.user, **self.known})
            self.user = {**self.user, **self.known}


def _read_user() -> dict[str, list]:
    entries = usercache.read(USER_CACHE)
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, list)}


def _current(key: str, entry: list) -> bool:
    """Whether the file an entry was made for is still the one it describes (its stat)."""
    path = key[len(TESSDATA_KEY):] if key.startswith(TESSDATA_KEY) else key
    try:
        st = os.stat(path)
    except OSError:
        return False
    return entry[:4] == [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _write_user(entries: dict[str, list]) -> None:
    kept = {k: v for k, v in entries.items() if _current(k, v)}
    usercache.write(USER_CACHE, dict(list(kept.items())[-USER_KEPT:]))
