"""The ``bastion`` command: the same doit tasks, run in-process, with friendly options.

Exit codes: 0 clean; 1 usage error (no command, unknown option, ``-j`` out of range), invalid
manifest, signature, stage not in ``stages``, missing prerequisite, locked or unwritable
output; 2 completed with ``error`` records.  Errors go to stderr on one line, without a
traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NoReturn, Sequence

from bastion.errors import CANNOT_START, OutputError

from . import interrupts
from .config import (DEFAULT_MANIFEST, JOBS_PER_CORE, RunConfig, forget_manifests, jobs_error,
                     load)
from .names import shown
from .output.atomic import OutputLock

if TYPE_CHECKING:
    from .extract.run import Run

EXIT_OK, EXIT_INVALID, EXIT_ERRORS, EXIT_PARTIAL = 0, 1, 2, 3
EXIT_ERRORS_AND_PARTIAL = 4  # both 2 and 3: error records, and a walk that missed something
EXIT_DIFFERENT = 5  # bastion compare: the two outputs differ
# Files handed to doit per run: doit holds ~5 KB per task, so a first run of a million files
# goes through in slices of this many and the parent's memory stays bounded.
EXTRACT_SLICE = 20_000
TRUSTED_KEYS_HELP = ("file of trusted public keys, one 'ed25519 <base64> <comment>' line each "
                     "as 'bastion keygen' writes them (default: $BASTION_TRUSTED_KEYS, else "
                     "/etc/bastion/trusted_keys)")


class CliError(Exception):
    """A one-line error for stderr, exit 1."""


def _fail(message: str) -> int:
    print(f"bastion: error: {shown(message)}", file=sys.stderr)
    return EXIT_INVALID


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 1: bastion's exit code 2 means "completed with
    ``error`` records", which a CI job must be able to tell from a mistyped option."""

    usage_exit = EXIT_INVALID  # grep and search say 2 for a usage error, as grep does

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: found only when asked (reading the version costs a file read)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: object, values: object,
                 option_string: str | None = None) -> NoReturn:
        import platform

        from doit.version import VERSION

        doit_version = ".".join(str(v) for v in VERSION)
        print(f"bastion {version()} (doit {doit_version}, Python "
              f"{platform.python_version()})")
        parser.exit(EXIT_OK)


def version() -> str:
    """bastion's version: a checkout's pyproject.toml, else the installed distribution's."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "bastion" and isinstance(project.get("version"), str):
            return project["version"]
    except (OSError, ValueError):
        pass
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("bastion")
    except PackageNotFoundError:
        return "unknown"


def _stage_parser(sub, name: str, help_: str, *, extract: bool, walk: bool) -> None:
    p = sub.add_parser(name, help=help_, description=help_)
    p.add_argument("manifest", nargs="?", type=Path, default=None,
                   help="the manifest (default: manifest.yaml in the current directory)")
    p.add_argument("--out", type=Path, help="output directory (default with one root: "
                   "<root>/.agent)")
    p.add_argument("--require-signed", action="store_true",
                   help="refuse a manifest without a valid Ed25519 signature (manifest.yaml.sig)")
    p.add_argument("--trusted-keys", type=Path, help=TRUSTED_KEYS_HELP)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress display (errors and the final summary line are still "
                        "printed)")
    if walk:
        p.add_argument("--no-hash", action="store_true",
                       help="record files without reading them (no sha256: nothing to extract)")
    if extract:
        p.add_argument("--no-external", action="store_true",
                       help="built-in readers only: never run pdftotext, tesseract, … "
                            "(also BASTION_NO_EXTERNAL=1)")
        p.add_argument("--retry-errors", action="store_true",
                       help="try again now the documents whose reading timed out, ran out "
                            "of memory, crashed or broke the worker's protocol more than once "
                            "(else: after 1, 2, 4 … runs)")
        p.add_argument("-j", "--jobs", type=int, default=None,
                       help=f"reader worker processes, 1 to {JOBS_PER_CORE} × the cores "
                            "(default: the number of cores)")
        p.add_argument("--cluster", metavar="ADDRESS", default="",
                       help="extract on a Dask cluster: a scheduler address (tcp://host:8786) "
                            "or local:N (a local cluster of N worker processes); needs "
                            "pip install 'bastion[dask]' (docs/scale.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bastion",
        description="Turn a tree of untrusted files into clean, searchable plain text.",
        epilog="exit codes: 0 done, 1 refused (usage, manifest, signature, output), "
               "2 done with error records, 3 done but the walk could not read everything, "
               "4 both 2 and 3; compare: 5 the outputs differ, 1 not outputs")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _stage_parser(sub, "walk", "walk the manifest's roots into walk.jsonl",
                  extract=False, walk=True)
    _stage_parser(sub, "extract", "extract text from the walked files into the text store",
                  extract=True, walk=False)
    _stage_parser(sub, "index", "index the stored texts for bastion search (the records "
                  "already there)", extract=False, walk=False)
    _stage_parser(sub, "sweep", "run the manifest's stages in order (walk, extract, index)",
                  extract=True, walk=True)

    from .commands.onefile import add_parser as add_text_parser

    add_text_parser(sub)
    from .commands import grep, search, show

    for command in (show, grep, search):
        command.add_parser(sub)

    p = sub.add_parser("keygen", help="create an Ed25519 key pair for signing manifests",
                       description="create an Ed25519 key pair for signing manifests")
    p.add_argument("private_key", type=Path, help="where to write the private key (PEM, 0600)")
    p.add_argument("public_key", type=Path,
                   help="where to write the public key line (for the trusted-keys file)")
    p.add_argument("--comment", help="comment on the public key line (default user@host)")

    p = sub.add_parser("sign", help="sign a manifest (writes <manifest>.sig)",
                       description="sign a manifest (writes <manifest>.sig)")
    p.add_argument("manifest", type=Path)
    p.add_argument("private_key", type=Path)

    p = sub.add_parser("verify", help="check a manifest's signature against trusted keys",
                       description="check a manifest's signature against trusted keys")
    p.add_argument("manifest", type=Path, help="the manifest (its signature: <manifest>.sig)")
    p.add_argument("--trusted-keys", type=Path, help=TRUSTED_KEYS_HELP)

    p = sub.add_parser("compare", help="compare two output directories (records and text "
                       "store); exit 5 on any difference",
                       description="compare two output directories: the text store byte for "
                       "byte, extract.jsonl without 'reused', walk.jsonl without mtime_ns and "
                       "inode; every difference on its own line; exit 5 on any, 1 when a "
                       "path is not a bastion output")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--strict", action="store_true",
                   help="also require walk.jsonl and extract.jsonl to be byte-identical")

    p = sub.add_parser("report", help="what a sweep did: counts, errors, caps, tools, the "
                       "walk's warnings (text, or one HTML page)",
                       description="summarise an output directory for a person: counts by "
                       "status and type, the errors by kind with their files, the caps "
                       "reached, the tools, the walk's warnings; plain text on stdout, or "
                       "with --html one self-contained page")
    p.add_argument("out", type=Path, help="the output directory of a sweep")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the page to FILE")
    p.add_argument("--max-files", type=int, default=None, metavar="N",
                   help="files listed per error kind, cap and type (default 50)")

    p = sub.add_parser("pdftext", help="the PDF child: a PDF on stdin, JSON lines on stdout",
                       description="read a PDF on stdin; write a meta line then one line per "
                       "page (exit 0 ok, 3 encrypted, 4 unreadable, 1 other)")
    p.add_argument("-max-pages", "--max-pages", dest="max_pages", type=int, default=None)
    p.add_argument("-engine", "--engine", dest="engine", default=None)
    return parser


def _config(args: argparse.Namespace, walk_mode: str, stages: Sequence[str] = ()) -> RunConfig:
    return RunConfig(
        manifest=Path(args.manifest).resolve(),
        out=Path(os.path.abspath(args.out)) if args.out else None,
        no_external=bool(getattr(args, "no_external", False)),
        require_signed=bool(args.require_signed),
        trusted_keys=args.trusted_keys,
        jobs=max(0, getattr(args, "jobs", 0) or 0),
        quiet=bool(args.quiet),
        no_hash=bool(getattr(args, "no_hash", False)),
        retry_errors=bool(getattr(args, "retry_errors", False)),
        walk=walk_mode,
        slice=EXTRACT_SLICE,
        cluster=str(getattr(args, "cluster", "") or "").strip(),
        stages=tuple(stages),
    )


class _OneLineErrors:
    """stderr while doit runs: doit prints a traceback for its own internal errors (e.g. it
    cannot write its database on a full disk); bastion keeps to one line per error."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.failed = False  # a one-line error was already printed

    def write(self, text: str) -> int:
        if text.startswith("Traceback (most recent call last)"):
            if self.failed:  # the consequence of an error already reported (e.g. disk full)
                return len(text)
            last = [ln for ln in text.strip().splitlines() if ln.strip()][-1]
            text = f"bastion: error: doit: {shown(last.strip())}\n"
        self.failed = self.failed or text.startswith("bastion: error:")
        return self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def run_stages(cfg: RunConfig, stages: list[str], *,
               extra_readers: tuple[str, ...] = (), lock: OutputLock | None = None) -> int:
    """Run ``walk`` and/or ``extract`` through doit in-process; returns the exit code.
    ``extra_readers`` are modules whose READER the workers put first (the tests' misbehaving
    readers); ``lock``: the output's, already taken by the caller (who releases it), else the
    run takes it and releases it before this returns."""
    started = _start(cfg, stages, extra_readers, lock)
    if isinstance(started, int):
        return started
    run, out = started
    if _doit(cfg, stages, run) != 0:
        return EXIT_INVALID
    return _ended(run, stages, out)


def _start(cfg: RunConfig, stages: list[str], extra_readers: tuple[str, ...],
           lock: OutputLock | None) -> tuple[Run, Path] | int:
    """The run made, its output locked and (to extract) its workers started; or the exit code
    of a run that cannot start (said in one line)."""
    from .extract.run import Run, check_stages

    if cfg.cluster and "extract" in stages:
        from .cluster.run import ClusterError, parse_cluster, require_dask

        try:  # a bad address or a missing Dask: one line before anything is done
            parse_cluster(cfg.cluster)
            require_dask()
        except ClusterError as e:
            return _fail(str(e))
    run = Run(cfg, extra_readers=extra_readers, lock=lock)
    run.announce_in_actions = False
    try:
        given = run.given()
        manifest, out = given.manifest, given.out
        check_stages(manifest, out, stages)
        run.lock()
    except CANNOT_START as e:
        run.release()
        return _fail(str(e))
    if "extract" in stages:
        # The workers start first: they boot on the other cores while this process loads
        # doit (~40 ms), walks and plans.
        run.prestart()
        failed = run.session.failed if run.session else None  # a cluster that cannot be used
        if failed:
            run.release()
            return _fail(failed)
    return run, out


def _doit(cfg: RunConfig, stages: list[str], run: Run) -> int:
    """doit run in-process over the stages' tasks, once per slice; its exit code.  The run is
    released (its workers, its lock) however this ends."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from . import doitdb, pipeline

    tasks = targets(stages)
    argv = ["run", "--db-file", pipeline.doit_db(cfg), "--backend", doitdb.NAME, *tasks]
    real_stderr = sys.stderr
    sys.stderr = _OneLineErrors(real_stderr)
    try:
        backends = {"BACKEND": {doitdb.NAME: doitdb.LOCATION}}
        with _no_plugin_scan():
            while True:  # one doit run per slice of files to extract (RunConfig.slice)
                # config_filenames=(): the pyproject.toml or doit.cfg of the directory the
                # command runs in is the user's, not bastion's (a broken or foreign one
                # must not change or stop a run)
                rc = DoitMain(ModuleTaskLoader(pipeline.namespace(run)), config_filenames=(),
                              extra_config=backends).run(argv)
                more = rc == 0 and run.more_slices
                run.slices.done(more)  # the collector may take the slice's garbage (tasks/extract/slices.py)
                if not more:
                    break
    finally:
        sys.stderr = real_stderr
        run.release()  # workers of a run that stopped before finishing, and the lock
    return rc


def _ended(run: Run, stages: list[str], out: Path) -> int:
    """The final summary and the walk's problems printed (even under -q, which silences the
    progress display only); the exit code they make."""
    from . import pipeline
    from .walk.stage import describe_problems

    code = EXIT_OK
    walked = run.outcomes.walked or {}
    problems = describe_problems(walked, out) if walked else None
    if "extract" in stages:
        end = run.end  # what the run's finish returned (tasks/extract/values.py RunEnd)
        summary = end.summary.to_json() if end is not None else {}
        if summary.get("counts", {}).get("error"):
            code = EXIT_ERRORS
        if problems:
            print(shown(problems), file=sys.stderr)
        print(shown(pipeline.describe_extract(summary, out)), file=sys.stderr)
    elif "walk" in stages:
        print(shown(pipeline.describe_walk(run.outcomes.walked, out)), file=sys.stderr)
        if problems:
            print(shown(problems), file=sys.stderr)
    if "index" in stages:
        print(shown(_describe_index(run.outcomes.index, out)), file=sys.stderr)
    if walked.get("partial"):  # like rsync's "partial transfer": docs/architecture.md
        code = EXIT_ERRORS_AND_PARTIAL if code == EXIT_ERRORS else EXIT_PARTIAL
    return code


def _describe_index(summary: Any, out: Path) -> str:
    """The index stage's line: what it did, or (doit found it up to date) the index as it
    stands."""
    from .index.stage import describe, standing
    from .output.readonly import open_read

    if summary is None:
        try:
            with open_read(out) as read:
                summary = standing(read)
        except OutputError:
            pass
    return describe(summary, out)


def targets(stages: Sequence[str]) -> list[str]:
    """The doit tasks that run ``stages``: the last one's (``index`` follows ``extract``,
    which follows ``walk``); ``walk`` too for an index without an extract stage."""
    if "index" in stages:
        return ["index"] if "extract" in stages else [s for s in ("walk", "index")
                                                      if s in stages]
    return ["extract"] if "extract" in stages else ["walk"]


@contextmanager
def _no_plugin_scan() -> Iterator[None]:
    """doit looks up its plugins (commands, loaders, backends, reporters) through
    ``doit.plugin.entry_points_impl``: a scan of every installed distribution's metadata,
    ~7–15 ms per doit run.  The bastion command runs its own tasks with its own backend and
    reporter (given directly), so while it runs doit that lookup finds nothing: doit plugins
    installed beside bastion are not loaded into its runs, and no run pays for the scan.
    ``doit`` on a dodo.py (and other in-process doit users) still sees them."""
    import doit.plugin

    saved = doit.plugin.entry_points_impl
    doit.plugin.entry_points_impl = lambda: _no_entry_points
    try:
        yield
    finally:
        doit.plugin.entry_points_impl = saved


def _no_entry_points(group: str) -> tuple[()]:
    return ()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and getattr(args, "command", None) in ("show", "search") and not any(
            a.startswith("-") and a != "-" for a in rest):
        args.args += rest  # positionals after an option (show OUT --json PATH): argparse
        rest = []          # stops at the option with an nargs="+" positional
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command is None:  # the usage, with the commands, and exit 1 (2 means "errors")
        parser.print_help(sys.stderr)
        parser.exit(EXIT_INVALID, "\nbastion: error: a command is required\n")
    problem = jobs_error(getattr(args, "jobs", None))
    if problem is not None:
        return _fail(problem)
    forget_manifests()  # each call is a new run: read (and verify) the manifest afresh
    restore = interrupts.install()
    try:
        return _dispatch(args)
    except interrupts.Terminated:
        print("bastion: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("bastion: interrupted", file=sys.stderr)
        return 130
    except CliError as e:
        return _fail(str(e))
    finally:
        restore()


def _dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "text":
        from .commands.onefile import run as run_text

        return run_text(args)
    if cmd in ("show", "grep", "search"):
        from .commands import grep, search, show

        return {"show": show, "grep": grep, "search": search}[cmd].run(args)
    if cmd in ("walk", "extract", "index", "sweep"):
        return _stage_command(args)
    if cmd in ("keygen", "sign", "verify"):
        return _signing(args)
    if cmd == "compare":
        return _compare(args)
    if cmd == "report":
        return _report(args)
    if cmd == "pdftext":
        return _pdftext(args)
    raise CliError(f"unknown command {cmd}")


def _stage_command(args: argparse.Namespace) -> int:
    """``walk``, ``extract``, ``index``: that stage; ``sweep``: the manifest's stages."""
    cmd = args.command
    refusal = _manifest_problem(args)
    if refusal is not None:
        return _fail(refusal)
    if cmd in ("walk", "extract", "index"):
        return run_stages(_config(args, "run" if cmd == "walk" else "reuse", [cmd]), [cmd])
    cfg = _config(args, "run")
    try:
        manifest, _ = load(cfg)
    except Exception as e:  # noqa: BLE001 — every load failure is a one-line refusal
        return _fail(str(e))
    return run_stages(_config(args, "run", manifest.stages), list(manifest.stages))


def _compare(args: argparse.Namespace) -> int:
    """``compare A B``: the differences listed, the exit code saying whether there were any."""
    from .commands.compare import compare_outputs, not_an_output

    for path in (args.a, args.b):
        why = not_an_output(path)
        if why is not None:
            return _fail(f"cannot compare {path}: {why}")
    from .commands.stdout import Stdout

    differences = compare_outputs(args.a, args.b, strict=args.strict)
    stdout = Stdout()  # `| head`: a closed pipe ends the listing quietly, same exit code
    for line in differences:
        if not stdout.write(shown(line) + "\n"):
            break
    stdout.flush()
    if differences:
        print(f"bastion: {len(differences)} difference(s)", file=sys.stderr)
        return EXIT_DIFFERENT
    print("identical", file=sys.stderr)
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    """``report OUT``: as text on stdout, or as an HTML file."""
    from .commands.report import MAX_FILES, ReportError, gather, render_html, render_text

    try:
        report = gather(args.out, args.max_files if args.max_files is not None
                        else MAX_FILES)
    except ReportError as e:
        return _fail(str(e))
    if args.html is None:
        from .commands.stdout import Stdout

        stdout = Stdout()  # (a closed pipe: quiet)
        stdout.write(render_text(report))
        stdout.flush()
        return EXIT_OK
    from .output.atomic import write_file_atomically

    try:
        write_file_atomically(args.html, render_html(report).encode("utf-8"))
    except OutputError as e:
        return _fail(str(e))
    print(f"report: {args.html}", file=sys.stderr)
    return EXIT_OK


def _pdftext(args: argparse.Namespace) -> int:
    """``pdftext``: the PDF engines' child (reads a PDF on stdin)."""
    from bastion.readers.pdf.engines import pdftext_main

    child_argv: list[str] = []
    if args.max_pages is not None:
        child_argv += ["-max-pages", str(args.max_pages)]
    if args.engine:
        child_argv += ["-engine", args.engine]
    return pdftext_main(child_argv, sys.stdin.buffer, sys.stdout)


MANIFEST_SUFFIXES = (".yaml", ".yml")


def _manifest_problem(args: argparse.Namespace) -> str | None:
    """Why the stage command cannot take its manifest argument, said helpfully: none given
    and no ``manifest.yaml`` here (the bundled example is never swept unasked), or a file
    that is a document rather than a manifest (``bastion extract report.pdf``).  Sets
    ``args.manifest`` to ``./manifest.yaml`` when none was given and it exists."""
    if args.manifest is None:
        here = Path("manifest.yaml")
        if here.is_file():
            args.manifest = here
            return None
        return (f"no manifest given and no manifest.yaml in {os.getcwd()}: bastion "
                f"{args.command} MANIFEST (the bundled example: bastion {args.command} "
                f"{DEFAULT_MANIFEST}); to print one file's text: bastion text FILE")
    path = Path(args.manifest)
    if path.suffix.lower() in MANIFEST_SUFFIXES or not path.is_file():
        return None
    try:
        load(_config(args, "run"))
    except Exception as e:  # noqa: BLE001 — the same refusal, with the likely intent
        return (f"{e} ({path} is not a manifest: manifests are YAML, docs/manifest.md; to "
                f"print its text: bastion text {path})")
    return None


def _signing(args: argparse.Namespace) -> int:
    from .signing import SignatureError, keygen, sign, verify

    try:
        if args.command == "keygen":
            line = keygen(args.private_key, args.public_key, comment=args.comment)
            print(line)
        elif args.command == "sign":
            print(sign(args.manifest, args.private_key))
        else:
            print(f"good signature by {verify(args.manifest, args.trusted_keys)}")
    except (SignatureError, OSError) as e:
        return _fail(str(e))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
