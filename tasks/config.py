"""One run's settings, from doit variables (``doit extract manifest=… out=…``) or the CLI.

The CLI turns its options into the same doit variables, so ``bastion extract`` and
``doit extract`` run the very same tasks with the very same settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bastion.errors import PrerequisiteError
from .output.atomic import STATE_DIR
from .manifest import Manifest, parse_manifest, read_manifest_bytes

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MANIFEST = REPO / "examples" / "manifest.yaml"
# The extract group's hidden setup task: drains the workers and writes the records
FINISH_TASK = "_extract_finish"


_TRUE = {"1", "true", "yes", "on"}
JOBS_PER_CORE = 4  # -j (jobs=) accepts 1 … JOBS_PER_CORE × cores


def max_jobs() -> int:
    """The largest ``-j``: JOBS_PER_CORE workers per core (a reader mostly waits on its
    tools or the disk, so a few per core can pay; 500 workers never do)."""
    return JOBS_PER_CORE * (os.cpu_count() or 1)


def jobs_error(jobs: int | None) -> str | None:
    """Why ``-j jobs`` is refused, or None (``None``: not given, one worker per core)."""
    if jobs is None or 1 <= jobs <= max_jobs():
        return None
    cores = os.cpu_count() or 1
    return (f"-j {jobs}: the number of reader workers must be between 1 and {max_jobs()} "
            f"({JOBS_PER_CORE} × {cores} core{'s' if cores != 1 else ''})")


@dataclass(frozen=True)
class RunConfig:
    manifest: Path = DEFAULT_MANIFEST
    out: Path | None = None  # None: <root>/.agent when the manifest has exactly one root
    no_external: bool = False
    require_signed: bool = False
    trusted_keys: Path | None = None
    jobs: int = 0  # 0: the number of cores
    quiet: bool = False
    no_hash: bool = False
    retry_errors: bool = False  # repeat offenders (timeout, memory, crash, worker) tried now
    walk: str = "run"  # "run": walk the tree; "reuse": extract from the existing walk only
    all_tasks: bool = False  # generate a subtask even for up-to-date files (see names_tasks)
    slice: int = 0  # files to extract per doit run (0: all in one); bounds the parent's memory
    command: str = "run"  # the doit command this run serves (list, info, clean, …)
    requested: tuple[str, ...] = ()  # the extract:… task names the command line gives
    doit_processes: int = 0  # doit's own -n N (refused: bastion has its own workers)
    verbosity: int = 0  # doit's -v N (2: a line per file extracted)
    cluster: str = ""  # a Dask cluster to extract on: tcp://host:8786 or local:N (tasks/cluster/run.py)
    # the stages this invocation runs (the CLI's: ``bastion index`` runs the index alone);
    # empty: doit's graph (``doit index`` extracts first)
    stages: tuple[str, ...] = ()

    @classmethod
    def from_vars(cls, get, argv: list[str] | None = None) -> "RunConfig":
        """Build from a ``get(name, default)`` such as ``doit.get_var``; ``argv`` is doit's
        command line (``dodo.py`` passes it), which says whether single tasks are named."""

        def flag(name: str) -> bool:
            return str(get(name, "") or "").strip().lower() in _TRUE

        manifest = get("manifest", None)
        out = get("out", None)
        keys = get("trusted_keys", None)
        jobs = str(get("jobs", "0") or "0")
        return cls(
            manifest=Path(manifest).resolve() if manifest else DEFAULT_MANIFEST,
            out=Path(os.path.abspath(out)) if out else None,
            no_external=flag("no_external") or os.environ.get("BASTION_NO_EXTERNAL") == "1",
            require_signed=flag("require_signed"),
            trusted_keys=Path(keys) if keys else None,
            jobs=int(jobs) if jobs.isdigit() else 0,
            quiet=flag("quiet"),
            no_hash=flag("no_hash"),
            retry_errors=flag("retry_errors"),
            walk=str(get("walk", "run") or "run"),
            all_tasks=flag("all_tasks") or names_tasks(argv or []),
            command=doit_command(argv or []),
            requested=tuple(a for a in (argv or []) if a.startswith("extract:")),
            doit_processes=doit_processes(argv or []),
            verbosity=_option(argv or [], "-v", "--verbosity"),
            cluster=str(get("cluster", "") or "").strip(),
        )

    @property
    def listing(self) -> bool:
        """A doit command that looks at tasks instead of running them (no walk, no workers)."""
        return self.command in _LISTING

    @property
    def workers(self) -> int:
        return self.jobs if self.jobs > 0 else (os.cpu_count() or 1)


_LISTING = {"list", "info", "forget", "ignore", "clean", "strace", "dumpdb", "graph"}


# doit's options that take a value as the next argument (doit help run)
_VALUED = {"-v", "--verbosity", "-n", "--process", "-P", "--parallel-type", "-f", "--file",
           "-d", "--dir", "--db-file", "--backend", "--codec-cls", "-r", "--reporter", "-o",
           "--output-file", "--check_file_uptodate", "--seek-file", "--failure-verbosity"}


def doit_command(argv: list[str]) -> str:
    """The doit command a command line runs (``run`` unless it names another)."""
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in _VALUED:
            skip = True
            continue
        if a.startswith("-") or "=" in a:
            continue
        return a if a in _LISTING or a in ("run", "help", "tabcompletion") else "run"
    return "run"


def doit_processes(argv: list[str]) -> int:
    """doit's ``-n N`` / ``--process=N`` on a run command line (0 when not given)."""
    if doit_command(argv) != "run":
        return 0
    return _option(argv, "-n", "--process")


def _option(argv: list[str], short: str, long: str) -> int:
    """The integer value of a doit option (``-n 2``, ``-n2``, ``--process=2``), else 0; a
    value that is not a number counts as 2 (so that it is refused, not ignored)."""
    for i, a in enumerate(argv):
        value = None
        if a in (short, long) and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(long + "="):
            value = a.split("=", 1)[1]
        elif a.startswith(short) and a[2:].isdigit():
            value = a[2:]
        if value is not None:
            return int(value) if value.isdigit() else 2
    return 0


def names_tasks(argv: list[str]) -> bool:
    """Whether a doit command line names single ``extract:…`` tasks or lists tasks: only then
    are up-to-date files given a subtask of their own."""
    if doit_command(argv) in _LISTING:
        return True
    return any(a.startswith("extract:") for a in argv)


@lru_cache(maxsize=8)
def _load(manifest: Path, require_signed: bool, trusted_keys: Path | None) -> Manifest:
    path = manifest.absolute()
    data = read_manifest_bytes(path)  # read once: the bytes verified are the bytes parsed
    if require_signed:
        from .signing import signature_path, verify_data

        verify_data(data, signature_path(path), trusted_keys)
    return parse_manifest(data, path)


def forget_manifests() -> None:
    """Drop the loaded manifests: the next :func:`load` reads (and verifies) the file again.

    The cache only spares re-reading within one run; a process that runs several (the CLI's
    ``main`` called in-process, tests) must not see a manifest edited, re-signed or tampered
    with between runs as the old one.
    """
    _load.cache_clear()


def load(cfg: RunConfig) -> tuple[Manifest, Path]:
    """The manifest (signature checked when required) and the output directory.

    Raises ManifestError, SignatureError or PrerequisiteError.
    """
    manifest = _load(cfg.manifest, cfg.require_signed, cfg.trusted_keys)
    return manifest, output_dir(cfg, manifest)


def output_dir(cfg: RunConfig, manifest: Manifest) -> Path:
    if cfg.out is not None:
        return cfg.out
    if len(manifest.roots) == 1:
        return manifest.roots[0].path / ".agent"
    raise PrerequisiteError(
        f"{manifest.path.name} has {len(manifest.roots)} roots: give the output directory "
        "(--out DIR, or out=DIR for doit)")


def doit_db(cfg: RunConfig) -> str:
    """Where doit keeps its database: under the output directory's state dir when known."""
    try:
        _, out = load(cfg)
    except Exception:  # noqa: BLE001 — the tasks report a bad manifest or output themselves
        return ".doit.db"
    # nothing is created here: a listing command (doit list) must leave no trace, and the
    # backend makes the directory when it first writes
    return str(out / STATE_DIR / "doit.json")
