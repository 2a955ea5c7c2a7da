"""The tools of a run, probed once and cached by binary in ``.bastion/tools.json``.

A tool's version is asked only when its binary is new to the cache (path, size, mtime, ctime,
inode: :class:`bastion.readers.runtime.toolset.ToolProbe`); the cache is written back at the end of the run when
it changed.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from bastion.readers.runtime.toolset import Tool, ToolProbe

from ..output.atomic import STATE_DIR, read_json_file
from ..output.directory import OutputDir

TOOLS_CACHE = f"{STATE_DIR}/tools.json"  # in the output directory


class ToolCache:
    def __init__(self, out: Path, no_external: bool) -> None:
        self.no_external = no_external
        try:  # read before the output is locked (a listing command never locks it)
            known = read_json_file(out / TOOLS_CACHE)
        except (OSError, ValueError):
            known = {}
        self.known: dict[str, list] = known if isinstance(known, dict) else {}
        self.before = dict(self.known)
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
