"""doit's database backend for bastion: doit's JSON backend, written atomically.

doit's own ``json`` backend rewrites its file in place, so a kill or a full disk during the
write leaves it truncated and doit then refuses every later run; its ``sqlite3`` backend cannot
store task names that are not valid UTF-8 (bastion's task names are file paths).  This one
writes a temp file, fsyncs it and renames it over the old one.  The database is only a cache:
bastion decides up-to-date from its own store.

Registered as the doit backend ``bastion-json`` through an entry point (``pyproject.toml``) and,
for the CLI, through ``DoitMain(extra_config=...)``.
"""

from __future__ import annotations

from pathlib import Path

from doit.dependency import JsonDB

from .fsio import atomic_write

NAME = "bastion-json"
LOCATION = "tasks.doitdb:AtomicJsonDB"


class AtomicJsonDB(JsonDB):
    desc = "doit's JSON database, written atomically (temp file, fsync, rename)"

    def dump(self) -> None:
        # Per-file extract tasks are decided from bastion's store and never read back from
        # here; keeping their entries would only make every later run parse them.
        kept = {k: v for k, v in self._db.items() if not k.startswith("extract:")}
        atomic_write(Path(self.name), self.codec.encode(kept).encode("utf-8", "surrogateescape"))


def registered() -> bool:
    """Whether doit will find the backend by name (bastion installed with its entry point)."""
    from importlib.metadata import entry_points

    return any(ep.name == NAME for ep in entry_points(group="doit.BACKEND"))
