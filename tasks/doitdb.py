"""doit's database backend for bastion: doit's JSON backend, written atomically, and the bridge
that makes ``doit forget`` reach bastion's store.

doit's own ``json`` backend rewrites its file in place, so a kill or a full disk during the
write leaves it truncated and doit then refuses every later run; its ``sqlite3`` backend cannot
store task names that are not valid UTF-8 (bastion's task names are file paths).  This one
writes a temp file, fsyncs it and renames it over the old one, and writes nothing when nothing
changed (``doit list`` and ``doit info`` leave the output as it was).

bastion decides up to date from its own store, so the database is only a cache.  Forgetting an
``extract:…`` task (``doit forget``) is recorded beside it in ``forgotten.json``; the next run's
plan treats those files as not extracted and redoes them (:func:`forgotten`).

Registered as the doit backend ``bastion-json`` through an entry point (``pyproject.toml``) and,
for the CLI, through ``DoitMain(extra_config=...)``.  :class:`DumpDB` replaces doit's ``dumpdb``
command, which reads only dbm files, so that it prints this JSON database too.
"""

from __future__ import annotations

import json
import pprint
from pathlib import Path
from typing import Any

from doit.cmd_dumpdb import DumpDB as _DoitDumpDB
from doit.dependency import JsonDB

from .forgotten import ALL, forgotten, set_forgotten
from .output.atomic import STATE_DIR, OutputError, write_file_atomically
from .output.directory import open_output

NAME = "bastion-json"
LOCATION = "bastion.tasks.doitdb:AtomicJsonDB"


class AtomicJsonDB(JsonDB):
    desc = "doit's JSON database, written atomically (temp file, fsync, rename)"

    def __init__(self, name: str, codec: Any, **kwargs: Any) -> None:
        super().__init__(name, codec, **kwargs)
        self._loaded = json.dumps(self._db, sort_keys=True, default=str)
        self._forgot: set[str] = set()

    def remove(self, task_id: str) -> None:
        super().remove(task_id)
        if task_id.startswith("extract:"):
            self._forgot.add(task_id)

    def remove_all(self) -> None:
        super().remove_all()
        self._forgot.add(ALL)

    def dump(self) -> None:
        # Per-file extract tasks are decided from bastion's store and never read back from
        # here; keeping their entries would only make every later run parse them (an
        # ``ignore`` mark is kept: doit reads it).
        kept = {k: v for k, v in self._db.items()
                if not k.startswith("extract:") or "ignore:" in v}
        path = Path(self.name)
        changed = json.dumps(kept, sort_keys=True, default=str) != self._loaded
        forgot, self._forgot = self._forgot, set()
        if not changed and not forgot:
            return  # nothing changed: a listing command writes nothing
        data = self.codec.encode(kept).encode("utf-8", "surrogateescape")
        if path.parent.name != STATE_DIR:  # a database put outside an output (doit --db-file)
            if changed:
                write_file_atomically(path, data)
            return
        # bastion's place for it (tasks/config.py doit_db): inside the output, written through
        # the output's checked descriptor (opened and checked for this write, then closed)
        od = open_output(path.parent.parent)
        try:
            if forgot:
                try:
                    od.dir_fd(STATE_DIR)
                    set_forgotten(od, forgotten(path.parent) | forgot)
                except (OSError, OutputError):
                    pass
            if changed:
                od.dir_fd(STATE_DIR)
                od.write(f"{STATE_DIR}/{path.name}", data)
        finally:
            od.close()


class DumpDB(_DoitDumpDB):
    """doit's ``dumpdb``, for bastion's JSON database as well as dbm ones."""

    def execute(self, opt_values: dict, pos_args: list) -> int | None:
        dep_file = Path(opt_values["dep_file"])
        if not dep_file.exists() and str(dep_file) == ".doit.db":
            # doit gives dumpdb no dodo config: find bastion's database from the variables
            from doit import get_var

            from .config import RunConfig, doit_db

            dep_file = Path(doit_db(RunConfig.from_vars(get_var)))
        try:
            head = dep_file.read_bytes()[:1]
        except OSError:
            print(f"no doit database at {dep_file} (nothing has run yet)")
            return 0
        if head != b"{":
            return super().execute(opt_values, pos_args)
        print(f"JSON database {dep_file} (backend {NAME}; extract tasks are decided from "
              "bastion's store, .bastion/verdicts.sqlite)")
        data = json.loads(dep_file.read_text(encoding="utf-8", errors="surrogateescape"))
        for key, value in sorted(data.items()):
            print(f"{key} -> {pprint.pformat(value, indent=4, width=100)}")
        return 0


def registered() -> bool:
    """Whether doit will find the backend by name (bastion installed with its entry point)."""
    from importlib.metadata import entry_points

    return any(ep.name == NAME for ep in entry_points(group="doit.BACKEND"))
