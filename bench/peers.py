"""Bastion against the tools users would otherwise pick, on the same real files, side by side.

    python bench/corpus.py                              # once: the corpus (bench/.corpus/peers)
    python bench/peers.py [--corpus DIR] [--rounds N] [--formats pdf,docx,...] [--out FILE]
                          [--bastion SOURCE_TREE]   # e.g. a `git archive HEAD` snapshot
                          [--against OLDER_TREE]    # bastion-j1-before, bastion-j2-before
                          [--whole]                 # also one run over the whole corpus

For every format directory of the corpus (see bench/corpus.py) and every round, in a rotating
order so that drift on a shared machine hits every tool alike, it runs one process per tool over
all the files of that format:

* ``bastion-j1`` / ``bastion-j2``: ``python -m bastion sweep <manifest> --out <fresh> -q -j N``
  (pdftotext, pdftoppm and tesseract present: the default reader chain);
* ``markitdown`` and ``kreuzberg``: each in its own venv under ``bench/.venvs/`` (created when
  missing), offline (``HF_HUB_OFFLINE=1`` …), through a driver that converts every file of the
  list in ONE process, catching per-file exceptions.  ``kreuzberg-batch`` is Kreuzberg as its
  users run it: ``kreuzberg.batch_extract_files_sync(all files)`` in one call, which extracts
  them concurrently on every core (a failed file comes back as an ``"Error: …"`` content and
  scores nothing); ``kreuzberg`` is the one-file loop (``extract_file_sync`` per file).
  markitdown has no batch or concurrent API (``MarkItDown().convert`` per file is what it
  offers), so its one row is the loop;
* on .doc/.xls/.ppt also the C tools a user might call instead, as sensors: ``antiword``,
  ``catdoc``, ``xls2csv``, ``catppt`` (each present on PATH; GPL, so never a dependency);
* on the PDFs also: a bare ``pdftotext -layout`` loop, a bare pdfplumber process
  (``page.extract_text()`` per page), and bastion's PDF paths: pdftotext first (``-j 1``),
  the built-in default (PDFium, ``--no-external``, ``-j 1`` and ``-j 2``) and pdfplumber only
  (``--no-external``, ``pdf_engines: [pdfplumber]``, ``-j 2``).

With ``--against TREE`` a second bastion tree runs beside the first (``bastion-j1-before``,
``bastion-j2-before``), and a table compares them format by format.  With ``--whole`` every
general tool also runs once over every file of the corpus at once (one directory: one sweep,
one batch call), as a user sweeps a tree; that row is reported apart, since the per-format sums
charge each tool's start-up once per format.

Wall time, CPU (user + system of the process tree, from ``os.wait4``) and peak RSS (the largest
single process of the tree, ``ru_maxrss``) are measured per process.  Agreement is measured
against an independent reference per format (cached in ``bench/.corpus/refs/``): token recall
and precision over lower-cased ``\\w+`` tokens as multisets, summed over the files of a format
(a file a tool fails on contributes no tokens).  References:

* DOCX, ODT, RTF, DOC: LibreOffice ``soffice --headless --convert-to txt:Text``;
* XLSX, ODS, XLS: LibreOffice ``--convert-to csv`` with every sheet exported;
* PPTX, ODP, PPT: LibreOffice ``--convert-to pdf``, then ``pdftotext`` (Impress has no text
  export);
* Outlook .msg: ``msgconvert`` (Perl Email::Outlook::Message) to MIME, then the e-mail
  reference;  EPUB: every (X)HTML member through ``html.parser``;
* zip, tar.gz, 7z: unpacked by 7-Zip (``7zz x``), each member through its format's reference
  (images, e-mails and nested archives included; other UTF-8 members as themselves);
* PDF: ``pdftotext -layout``, and MuPDF (``mutool draw -F txt``) as a third engine independent
  of both pdftotext and PDFium, for the PDF engine comparison;
* images: ``tesseract FILE stdout -l eng``;
* HTML: Python's ``html.parser`` (text outside script/style);  CSV: the ``csv`` module (cells);
  e-mail: the ``email`` module (From, To, Cc, Subject headers and the text parts; HTML parts
  through ``html.parser`` when a message has no text/plain part), and every attachment and
  embedded part through the reference of its format, as for archive members (an attached
  message through this reference, an image through ``tesseract``; a text attachment as itself).

Prints a Markdown report (tables of medians, ratios taken pairwise per round, target checks)
and writes it to ``--out`` (default ``bench/results/peers.md``).  It ends with the table of
issue 20's classes of office text (comments, list numbers, headers and footers, charts,
SmartArt, alt text, embedded documents, numbers as shown, …): one run of each general tool over
``tests/officegen.issue20_documents`` and real samples of ``tests/samples``, scored by the share
of each class's phrases shown; ``--classes-only`` runs just that (no corpus needed).
"""

from __future__ import annotations

import argparse
import csv
import email
import email.policy
import html.parser
import io
import json
import mimetypes
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib import compile_trees

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the bastion measured (--bastion; default this checkout)
VENVS = HERE / ".venvs"
TOKEN = re.compile(r"\w+")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "KREUZBERG_OFFLINE": "1", "NO_PROXY": "*", "OMP_THREAD_LIMIT": "1"}
KREUZBERG = "4.10.4"  # the version the figures in docs/performance.md were measured with
PEERS = {"markitdown": "markitdown[all]", "kreuzberg": f"kreuzberg=={KREUZBERG}"}
RUN_TIMEOUT = 900.0
PDFS = ("pdf", "pdf-text")
LEGACY_TOOLS = {"antiword": ("doc",), "catdoc": ("doc",), "xls2csv": ("xls",),
                "catppt": ("ppt",)}  # GPL C tools, measured as sensors (never dependencies)
ARCHIVES = ("zip", "tgz", "7z")
REF_BY_EXT = {".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".odt": "odt", ".ods": "ods",
              ".odp": "odp", ".rtf": "rtf", ".pdf": "pdf", ".html": "html", ".htm": "html",
              ".csv": "csv", ".eml": "eml", ".doc": "doc", ".xls": "xls", ".ppt": "ppt",
              ".msg": "msg", ".epub": "epub", ".png": "image", ".jpg": "image",
              ".jpeg": "image", ".gif": "image", ".tif": "image", ".tiff": "image",
              ".bmp": "image", ".webp": "image", ".zip": "zip", ".tgz": "tgz", ".7z": "7z"}
# The references that changed (the cache name carries the version): e-mail and Outlook
# messages now include their attachments (2), and so the archives holding them, whose image
# members are now read by the image reference too.
REF_VERSION = {"eml": 2, "msg": 2, "zip": 2, "tgz": 2, "7z": 2}
# measured, but not part of the overall sums: "pdf-text", the PDFs with a text layer pdftotext
# reads; "startup", one small file; "all" (--whole), every file of the corpus in one run
EXTRA = ("pdf-text", "startup", "all")

# ---------------------------------------------------------------------------------------------
# drivers: one process converts a list of files, one text per file, exceptions caught per file

PEER_DRIVER = r'''
import json, os, signal, sys
tool, listing, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
files = open(listing, encoding="utf-8").read().splitlines()

class Late(Exception):
    pass

def _alarm(*_):
    raise Late("per-file timeout (120 s)")

signal.signal(signal.SIGALRM, _alarm)
if tool == "markitdown":
    from markitdown import MarkItDown
    md = MarkItDown(enable_plugins=False)
    convert = lambda p: md.convert(p).text_content
elif tool == "kreuzberg":  # its result cache off: else a later round is answered from it
    import kreuzberg
    convert = lambda p: kreuzberg.extract_file_sync(
        p, config=kreuzberg.ExtractionConfig(use_cache=False)).content
elif tool == "pdfplumber":
    import pdfplumber
    def convert(p):
        with pdfplumber.open(p) as pdf:
            return "\f".join((page.extract_text() or "") for page in pdf.pages)
elif tool in ("antiword", "catdoc", "xls2csv", "catppt"):  # the legacy formats' C tools
    import subprocess
    def convert(p):
        argv = [tool, "-w", p] if tool == "antiword" else [tool, p]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=110)
        if r.returncode:
            raise RuntimeError(f"{tool} exit {r.returncode}")
        return r.stdout.decode("utf-8", "replace")
elif tool == "pdftotext":
    import subprocess
    def convert(p):
        r = subprocess.run(["pdftotext", "-layout", "-enc", "UTF-8", p, "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if r.returncode:
            raise RuntimeError(f"pdftotext exit {r.returncode}")
        return r.stdout.decode("utf-8", "replace")
status = {}
if tool == "kreuzberg-batch":  # its users' API: every file at once, run concurrently inside
    import kreuzberg
    signal.alarm(120 * max(1, len(files)))
    try:
        results = kreuzberg.batch_extract_files_sync(
            files, kreuzberg.ExtractionConfig(use_cache=False))
    except BaseException as e:  # noqa: BLE001 - the whole batch failed: no file scores
        if isinstance(e, KeyboardInterrupt):
            raise
        results = [None] * len(files)
        failure = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.alarm(0)
    for i, (path, res) in enumerate(zip(files, results)):
        text = res.content if res is not None else ""
        if res is None:
            status[path] = failure
        elif text.startswith("Error: ") and not res.metadata:  # how a batch reports a failure
            status[path], text = text[:200], ""
        else:
            status[path] = "ok"
        with open(os.path.join(outdir, f"{i}.txt"), "w", encoding="utf-8",
                  errors="replace") as f:
            f.write(text)
    files = []
for i, path in enumerate(files):
    signal.alarm(120)
    try:
        text = convert(path) or ""
        status[path] = "ok"
    except BaseException as e:  # noqa: BLE001 - a file that fails scores no tokens
        if isinstance(e, KeyboardInterrupt):
            raise
        text = ""
        status[path] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.alarm(0)
    with open(os.path.join(outdir, f"{i}.txt"), "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
with open(os.path.join(outdir, "status.json"), "w") as f:
    json.dump(status, f)
'''

PDFTOTEXT_FIRST = r'''
import sys
sys.path.insert(0, sys.argv.pop(1))
from bastion.tasks.cli import main
sys.exit(main(sys.argv[1:]))
'''


# ---------------------------------------------------------------------------------------------
# processes

# The spawner's program: one JSON request per line on stdin ({argv, env, cwd, timeout}), one
# JSON result per line on stdout (the same fields as run_tree's).  Standard library only (-I -S).
SPAWNER = r'''
import json, os, selectors, signal, subprocess, sys, time
for line in sys.stdin:
    req = json.loads(line)
    t0 = time.monotonic()
    proc = subprocess.Popen(req["argv"], cwd=req["cwd"], env=req["env"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    err = bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    while True:
        left = req["timeout"] - (time.monotonic() - t0)
        if left <= 0:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        if not sel.select(min(left, 1.0)):
            continue
        chunk = os.read(proc.stderr.fileno(), 65536)
        if not chunk:
            break
        err += chunk
        del err[:-8192]
    _, status, ru = os.wait4(proc.pid, 0)
    proc.stderr.close()
    sel.close()
    print(json.dumps({"wall": time.monotonic() - t0, "cpu": ru.ru_utime + ru.ru_stime,
                      "rss": ru.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status),
                      "stderr": err.decode(errors="replace"), "child_rss": 0, "root_rss": 0}),
          flush=True)
'''



def start_spawner() -> None:
    """A small process that starts and reaps every measured command.  Linux carries a
    process's peak RSS over ``fork`` + ``exec`` (``signal->maxrss``), so children of this
    script, which holds every text it read, would report its RSS as theirs; children of a
    10 MiB spawner report their own.  Start it first, while this process is still small."""
    global _spawner
    _spawner = subprocess.Popen([sys.executable, "-I", "-S", "-c", SPAWNER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _descendants_hwm(root: int, hwm: dict[int, int]) -> None:
    """Record VmHWM (KiB) of every descendant of ``root`` (read from /proc)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    for pid in parent:
        p, hops = pid, 0
        while p in parent and p != root and hops < 20:
            p, hops = parent[p], hops + 1
        if p == root:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm[pid] = max(hwm.get(pid, 0), int(line.split()[1]))
            except OSError:
                pass


def run_tree(argv: list[str], *, env: dict | None = None, cwd: Path | None = None,
             timeout: float = RUN_TIMEOUT, sample_children: bool = False) -> dict:
    """One process (and the children it waits for): wall, CPU, peak RSS, exit code.
    With ``sample_children``, run here and also sample the peak RSS (VmHWM) of its largest
    descendant from /proc; otherwise run through the spawner."""
    if _spawner is not None and not sample_children:
        _spawner.stdin.write(json.dumps({"argv": argv, "env": env or dict(os.environ),
                                         "cwd": str(cwd) if cwd else None,
                                         "timeout": timeout}) + "\n")
        _spawner.stdin.flush()
        return json.loads(_spawner.stdout.readline())
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    hwm: dict[int, int] = {}
    err = bytearray()
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    while True:
        left = timeout - (time.monotonic() - t0)
        if left <= 0:
            os.killpg(proc.pid, 9)
            break
        if sample_children:
            _descendants_hwm(proc.pid, hwm)
        if not sel.select(min(left, 0.05 if sample_children else 1.0)):
            continue
        chunk = os.read(proc.stderr.fileno(), 65536)
        if not chunk:
            break
        err += chunk
        del err[:-8192]
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.stderr.close()
    sel.close()
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024,
            "rc": os.waitstatus_to_exitcode(status), "stderr": err.decode(errors="replace"),
            "child_rss": max((v for k, v in hwm.items() if k != proc.pid), default=0) / 1024,
            "root_rss": hwm.get(proc.pid, 0) / 1024}


def ensure_venv(name: str, spec: str) -> Path:
    py = VENVS / name / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", f"import {name}"],
                                      capture_output=True).returncode == 0:
        return py
    print(f"creating venv {VENVS / name} ({spec})", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", spec], check=True)
    return py


def peer_env() -> dict:
    env = dict(os.environ)
    env.update(OFFLINE_ENV)
    return env


# ---------------------------------------------------------------------------------------------
# tools

class Tool:
    name: str
    formats: tuple[str, ...] | None = None  # None: every format

    def run(self, files: list[Path], fmt_dir: Path, work: Path) -> tuple[dict, dict, dict]:
        """-> (measurement, {path: text}, {path: status})"""
        raise NotImplementedError


class Driver(Tool):
    def __init__(self, name: str, python: Path, driver: Path, formats=None):
        self.name, self.python, self.driver, self.formats = name, python, driver, formats

    def run(self, files, fmt_dir, work):
        out = work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        listing = work / "files.txt"
        listing.write_text("\n".join(str(f) for f in files), encoding="utf-8")
        m = run_tree([str(self.python), str(self.driver), self.name, str(listing), str(out)],
                     env=peer_env(), cwd=work)
        texts, status = {}, {}
        st = json.loads((out / "status.json").read_text()) if (out / "status.json").exists() \
            else {}
        for i, f in enumerate(files):
            p = out / f"{i}.txt"
            texts[f] = p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""
            status[f] = st.get(str(f), "not run (process died)")
        return m, texts, status


class Bastion(Tool):
    def __init__(self, name: str, jobs: int, *, no_external=False, engines=None,
                 pdftotext_first=False, formats=None, sample=False, root=None):
        self.name, self.jobs, self.no_external, self.sample = name, jobs, no_external, sample
        self.engines, self.pdftotext_first, self.formats = engines, pdftotext_first, formats
        self.root = root  # the source tree measured (None: --bastion)

    def run(self, files, fmt_dir, work):
        manifest = work / "manifest.yaml"
        text = (f"version: 1\nroots:\n  - name: c\n    path: {fmt_dir}\n"
                "limits:\n  max_file_bytes: 64MiB\n")
        if self.engines:
            text += f"  pdf_engines: [{', '.join(self.engines)}]\n"
        manifest.write_text(text)
        out = work / "out"
        shutil.rmtree(out, ignore_errors=True)
        root = self.root or ROOT
        if self.pdftotext_first:
            shim = work / "bastion_shim.py"
            shim.write_text(PDFTOTEXT_FIRST)
            argv = [sys.executable, str(shim), str(root)]
        else:
            # a tree from before the one import name runs its top-level tasks.cli
            cli = "bastion" if (root / "bastion" / "__main__.py").is_file() else "tasks.cli"
            argv = [sys.executable, "-m", cli]
        argv += ["sweep", str(manifest), "--out", str(out), "-q", "-j", str(self.jobs)]
        if self.no_external:
            argv.append("--no-external")
        m = run_tree(argv, cwd=root, sample_children=getattr(self, "sample", False))
        if m["rc"] not in (0, 2):
            raise SystemExit(f"{self.name} failed ({m['rc']}): {m['stderr'][-1500:]}")
        texts, status, extractors = {}, {}, Counter()
        by_name = {f.name: f for f in files}
        for line in (out / "extract.jsonl").read_text().splitlines():
            rec = json.loads(line)
            f = by_name.get(rec["path"])
            if f is None:
                continue
            status[f] = rec["status"] if rec["status"] == "ok" else \
                f"{rec['status']}: {rec.get('error') or ''}"[:200]
            extractors[rec.get("extractor")] += 1
            t = ""
            if rec["status"] == "ok":
                p = out / "extract" / rec["sha256"][:2] / f"{rec['sha256']}.txt"
                if p.exists():
                    t = p.read_text(encoding="utf-8", errors="replace")
            texts[f] = t
        m["extractors"] = dict(extractors)
        return m, texts, status


# ---------------------------------------------------------------------------------------------
# references

class _HTMLText(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_text(markup: str) -> str:
    p = _HTMLText()
    try:
        p.feed(markup)
        p.close()
    except Exception:  # noqa: BLE001
        pass
    return " ".join(p.parts)


def decode(data: bytes) -> str:
    for enc in ("utf-8", "cp1252"):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def eml_text(data: bytes, refs: Path | None = None) -> str:
    """Headers From, To, Cc, Subject, then the text of every inline text part; of a
    multipart/alternative, the text/plain version when it has text, else the HTML one.

    With ``refs`` (the reference cache), also every attachment and embedded part, as the
    archive reference does for members: an attached message through this reference, any
    other part that is a file (a name, or a non-text type) through the reference of its
    format (:func:`part_refs`), a text attachment as its text."""
    msg = email.message_from_bytes(data, policy=email.policy.default)
    out = [str(msg.get(h, "")) for h in ("From", "To", "Cc", "Subject")]
    files: list[tuple[str, bytes]] = []  # (file name, bytes) of the parts read as files

    def body(part) -> str:
        try:
            got = part.get_content()
        except Exception:  # noqa: BLE001
            got = decode(part.get_payload(decode=True) or b"")
        if not isinstance(got, str):
            return ""
        return html_text(got) if part.get_content_type() == "text/html" else got

    def attached(part) -> None:
        if refs is None:
            return
        if part.get_content_type() == "message/rfc822":
            for inner in part.iter_parts():
                out.append(eml_text(inner.as_bytes(), refs))
            return
        payload = part.get_payload(decode=True) or b""
        name = part.get_filename() or ""
        ext = Path(name).suffix.lower() or mimetypes.guess_extension(part.get_content_type()) or ""
        if part.get_content_maintype() == "text" and ext not in REF_BY_EXT:
            out.append(body(part))
        elif payload:
            files.append((f"part{len(files)}{ext}", payload))

    def walk(part) -> None:
        if part.get_content_disposition() == "attachment" or \
                part.get_content_type() == "message/rfc822":
            attached(part)
            return
        if part.is_multipart():
            kids = list(part.iter_parts())
            if part.get_content_subtype() == "alternative":
                texts = [body(k) for k in kids if k.get_content_type() == "text/plain"]
                if any(t.strip() for t in texts):
                    out.extend(texts)
                    return
                kids = [k for k in kids if k.get_content_type() != "text/plain"]
            for k in kids:
                walk(k)
        elif part.get_content_maintype() == "text":
            out.append(body(part))
        else:  # an inline image, a PDF shown in the body: a file of the message
            attached(part)

    walk(msg)
    if files and refs is not None:
        out.append(part_refs(files, refs))
    return "\n".join(out)


def part_refs(files: list[tuple[str, bytes]], refs: Path) -> str:
    """The references of embedded files (e-mail attachments, archive members), each through
    its format's reference by extension (:data:`REF_BY_EXT`); files of other types, none."""
    tmp = Path(tempfile.mkdtemp(prefix="parts-"))
    try:
        groups: dict[str, list[Path]] = {}
        for name, payload in files:
            kind = REF_BY_EXT.get(Path(name).suffix.lower())
            if kind:
                (tmp / name).write_bytes(payload)
                groups.setdefault(kind, []).append(tmp / name)
        got = build_refs(groups, refs)["main"] if groups else {}
        return "\n".join(got[m] for ms in groups.values() for m in ms)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def csv_text(data: bytes) -> str:
    rows = csv.reader(io.StringIO(decode(data)))
    try:
        return "\n".join(" ".join(r) for r in rows)
    except csv.Error:
        return decode(data)


def soffice(files: list[Path], target: str, outdir: Path, profile: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(files), 20):
        subprocess.run(["soffice", f"-env:UserInstallation=file://{profile}", "--headless",
                        "--norestore", "--convert-to", target, "--outdir", str(outdir),
                        *map(str, files[i:i + 20])], capture_output=True, timeout=900)


def msg_ref(f: Path, refs: Path) -> str:
    """An Outlook message through Perl's Email::Outlook::Message (``msgconvert``, Debian
    libemail-outlook-message-perl) to MIME, then the e-mail reference with its attachments."""
    if not shutil.which("msgconvert"):
        return ""
    tmp = Path(tempfile.mkdtemp(prefix="msg-"))
    try:
        shutil.copy2(f, tmp / "m.msg")
        subprocess.run(["msgconvert", "m.msg"], cwd=tmp, capture_output=True, timeout=300)
        got = tmp / "m.eml"
        if not got.exists():
            return ""
        try:
            return eml_text(got.read_bytes(), refs)
        except Exception:  # noqa: BLE001
            return ""
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def epub_ref(data: bytes) -> str:
    """Every (X)HTML member of the EPUB through ``html.parser`` (order does not matter to
    token agreement)."""
    import zipfile
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return ""
    return "\n".join(html_text(decode(zf.read(n))) for n in sorted(zf.namelist())
                     if n.lower().endswith((".xhtml", ".html", ".htm")))


def archive_ref(f: Path, refs: Path) -> str:
    """An archive unpacked by 7-Zip (``7zz x``, independent of Python's zipfile/tarfile), each
    member through the reference of its format (UTF-8 text as itself, other binaries none)."""
    seven = shutil.which("7zz") or shutil.which("7z")
    if seven is None:
        return ""
    tmp = Path(tempfile.mkdtemp(prefix="unpack-"))
    try:
        subprocess.run([seven, "x", "-y", "-bd", "-pnone", f"-o{tmp}", str(f)],
                       capture_output=True, timeout=600, stdin=subprocess.DEVNULL)
        if f.name.endswith((".tar.gz", ".tgz")):
            for inner in list(tmp.glob("*.tar")):
                subprocess.run([seven, "x", "-y", "-bd", f"-o{tmp}", str(inner)],
                               capture_output=True, timeout=600, stdin=subprocess.DEVNULL)
                inner.unlink()
        members: list[tuple[str, bytes]] = []
        plain: list[str] = []
        for m in sorted(p for p in tmp.rglob("*") if p.is_file()):
            if m.suffix.lower() in REF_BY_EXT:
                members.append((f"member{len(members)}{m.suffix.lower()}", m.read_bytes()))
            else:
                try:
                    plain.append(m.read_bytes().decode("utf-8"))
                except UnicodeDecodeError:
                    pass
        return "\n".join([*plain, part_refs(members, refs)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SHEETS_CSV = 'csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1'


def build_refs(by_fmt: dict[str, list[Path]], refs: Path) -> dict[str, dict[Path, str]]:
    """{kind: {file: reference text}}; kinds: 'main' for every format, 'mupdf' for PDFs."""
    refs.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[Path, str]] = {"main": {}, "mupdf": {}}

    def cached(f: Path, kind: str) -> Path:
        import hashlib
        version = REF_VERSION.get(fmt, 1) if kind == "main" else 1
        tag = f"{kind}.v{version}" if version > 1 else kind
        return refs / f"{hashlib.sha256(f.read_bytes()).hexdigest()}.{tag}.txt"

    profile = Path(tempfile.mkdtemp(prefix="lo-profile-"))
    try:
        for fmt, files in by_fmt.items():
            todo = [f for f in files if not cached(f, "main").exists()]
            if todo:
                print(f"  references for {len(todo)} {fmt} files", file=sys.stderr)
            if todo and fmt in ARCHIVES:
                for f in todo:
                    cached(f, "main").write_text(archive_ref(f, refs))
            if todo and fmt in ("docx", "odt", "rtf", "xlsx", "ods", "pptx", "odp", "doc", "xls",
                                "ppt"):
                tmp = Path(tempfile.mkdtemp(prefix="ref-"))
                if fmt in ("docx", "odt", "rtf", "doc"):
                    soffice(todo, "txt:Text", tmp, profile)
                    for f in todo:
                        p = tmp / (f.stem + ".txt")
                        cached(f, "main").write_text(
                            p.read_text(encoding="utf-8", errors="replace") if p.exists() else "")
                elif fmt in ("xlsx", "ods", "xls"):
                    soffice(todo, SHEETS_CSV, tmp, profile)
                    for f in todo:
                        parts = sorted(tmp.glob(f"{f.stem}*.csv"))
                        parts = [p for p in parts if p.stem == f.stem
                                 or p.stem.startswith(f.stem + "-")]
                        cached(f, "main").write_text("\n".join(
                            csv_text(p.read_bytes()) for p in parts))
                else:
                    soffice(todo, "pdf", tmp, profile)
                    for f in todo:
                        p = tmp / (f.stem + ".pdf")
                        t = ""
                        if p.exists():
                            t = subprocess.run(["pdftotext", "-enc", "UTF-8", str(p), "-"],
                                               capture_output=True).stdout.decode("utf-8",
                                                                                  "replace")
                        cached(f, "main").write_text(t)
                shutil.rmtree(tmp, ignore_errors=True)
            for f in todo:
                c = cached(f, "main")
                if c.exists():
                    continue
                data = f.read_bytes()
                if fmt == "pdf":
                    t = subprocess.run(["pdftotext", "-layout", "-enc", "UTF-8", str(f), "-"],
                                       capture_output=True).stdout.decode("utf-8", "replace")
                elif fmt == "image":
                    t = subprocess.run(["tesseract", str(f), "stdout", "-l", "eng"],
                                       capture_output=True).stdout.decode("utf-8", "replace")
                elif fmt == "html":
                    t = html_text(decode(data))
                elif fmt == "csv":
                    t = csv_text(data)
                elif fmt == "eml":
                    try:
                        t = eml_text(data, refs)
                    except Exception:  # noqa: BLE001
                        t = ""
                elif fmt == "msg":
                    t = msg_ref(f, refs)
                elif fmt == "epub":
                    t = epub_ref(data)
                else:
                    t = ""
                c.write_text(t)
            for f in files:
                out["main"][f] = cached(f, "main").read_text()
            if fmt == "pdf" and shutil.which("mutool"):
                for f in files:
                    c = cached(f, "mupdf")
                    if not c.exists():
                        r = subprocess.run(["mutool", "draw", "-q", "-F", "txt", "-o", "-",
                                            str(f)], capture_output=True)
                        c.write_text(r.stdout.decode("utf-8", "replace"))
                    out["mupdf"][f] = c.read_text()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------------
# scoring

def tokens(text: str) -> Counter:
    return Counter(TOKEN.findall(text.lower()))


def agreement(texts: dict[Path, str], ref: dict[Path, str], files: list[Path]) -> dict:
    common = mine = theirs = 0
    per_file = {}
    for f in files:
        a, b = tokens(texts.get(f, "")), tokens(ref.get(f, ""))
        c = sum((a & b).values())
        na, nb = sum(a.values()), sum(b.values())
        common, mine, theirs = common + c, mine + na, theirs + nb
        per_file[f] = (c / nb if nb else None, na, nb)
    recall = common / theirs if theirs else 1.0
    precision = common / mine if mine else 0.0
    f1 = 2 * common / (mine + theirs) if mine + theirs else 1.0
    return {"recall": recall, "precision": precision, "f1": f1, "per_file": per_file}


def pdf_pages(files: list[Path]) -> int:
    import pypdfium2 as pdfium
    total = 0
    for f in files:
        try:
            d = pdfium.PdfDocument(str(f))
        except Exception:  # noqa: BLE001
            continue
        total += len(d)
        d.close()
    return total


# =============================================================================================
# Issue 20: classes of office text (comments, list numbers, headers and footers, charts, …).
# Kept apart from the per-format tables above: one run of each tool over small documents, each
# holding one class, scored by the phrases a reader must show.  `--classes-only` runs just this.
# =============================================================================================

# real documents of tests/samples (origins in their ORIGIN.md): (class, path, phrases, match);
# every phrase occurs only in that class's text of the file
CLASS_SAMPLES = (
    ("comments", "office/comments-rich-para.docx",
     ["Paragraph with Heading 2 paragraph style"], "exact"),
    ("comments", "office/test_comments_excel.xlsx", ["1st line 2nd line"], "exact"),
    ("comments", "office/test_comments_gdocs.xlsx", ["Just a test"], "exact"),
    ("list numbering", "office/num-having-numbering-part.docx",
     ["1 Paragraph having List Number style"], "words"),
    ("list numbering", "office/definitionlists.odt", ["1 nummer 1", "2 nummer 2"], "words"),
    ("headers and footers", "office/headerfooter.odt", ["Bottom"], "exact"),
    ("headers and footers", "office/input-weird.xlsx", ["Company Confidential"], "exact"),
    ("headers and footers", "rtf/headers_footers.rtf",
     ["Odd Page Header", "First Page Footer"], "exact"),
    ("charts", "office/shp-inline-shape-access.docx", ["Category 3", "Series 2"], "exact"),
    ("SmartArt", "office/shp-shapes.pptx", ["Smart Art"], "exact"),
    ("alt text", "office/shp-shapes.pptx", ["python-powered.png"], "exact"),
    ("embedded objects", "office/emb_spreadsheet.odp", ["val11", "val33"], "exact"),
    ("numbers as shown", "office/percentage.xlsx", ["1.23%", "0.01%"], "exact"),
    ("numbers as shown", "office/timeformat.xlsx", ["14:40:30", "00:01:59"], "exact"),
)
_PUNCT = re.compile(r"[^\w]+")


def _norm(text: str, match: str) -> str:
    text = text.lower()
    if match == "words":
        text = _PUNCT.sub(" ", text)
    return " ".join(text.split())


def class_documents(work: Path) -> list[tuple[str, Path, list[str], str]]:
    """The documents of the class table, written to ``work/classes``: generated ones
    (``tests/officegen.issue20_documents``, a default-password workbook when msoffcrypto is
    installed) and the real ones of :data:`CLASS_SAMPLES`."""
    sys.path.insert(0, str(ROOT / "tests"))
    import officegen as og

    folder = work / "classes"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    docs = []
    for cls, name, data, phrases, match in og.issue20_documents():
        (folder / f"gen-{name}").write_bytes(data)
        docs.append((cls, folder / f"gen-{name}", phrases, match))
    try:
        from msoffcrypto.format.ooxml import OOXMLFile
    except ImportError:
        OOXMLFile = None
    if OOXMLFile is not None:
        m = og.zip_members(og.xlsx([("Locked", "sheet1.xml", '<row r="1"><c r="A1" t="inlineStr">'
                                     "<is><t>protectedamethyst</t></is></c></row>")]))
        m["docProps/thumbnail.jpeg"] = random.Random(3).randbytes(6000)
        buf = io.BytesIO()
        OOXMLFile(io.BytesIO(og.zip_bytes(m))).encrypt("VelvetSweatshop", buf)
        (folder / "gen-protected.xlsx").write_bytes(buf.getvalue())
        docs.append(("protected workbooks", folder / "gen-protected.xlsx", ["protectedamethyst"],
                     "exact"))
    for cls, rel, phrases, match in CLASS_SAMPLES:
        target = folder / f"real-{Path(rel).name}"
        shutil.copy2(ROOT / "tests" / "samples" / rel, target)
        docs.append((cls, target, phrases, match))
    return docs


def class_agreement(tools: list[Tool], work: Path) -> list[str]:
    """The Markdown table: per class, the share of its phrases each tool shows."""
    docs = class_documents(work)
    files = sorted({d[1] for d in docs})
    texts: dict[str, dict[Path, str]] = {}
    for tool in tools:
        tw = work / f"classes-{tool.name}"
        tw.mkdir(exist_ok=True)
        _, tx, _ = tool.run(files, files[0].parent, tw)
        texts[tool.name] = tx
    names = [t.name for t in tools]
    classes: dict[str, list[tuple[Path, list[str], str]]] = {}
    for cls, path, phrases, match in docs:
        classes.setdefault(cls, []).append((path, phrases, match))
    out = ["\n### Classes of office text (issue 20): share of each class's phrases shown\n",
           "| class | documents (generated + real) | phrases | " + " | ".join(names) + " |",
           "| --- | --- | ---: | " + " | ".join("---:" for _ in names) + " |"]
    totals = {n: [0, 0] for n in names}
    for cls, items in classes.items():
        gen = sum(1 for p, _, _ in items if p.name.startswith("gen-"))
        n_phr = sum(len(ph) for _, ph, _ in items)
        row = [cls, f"{gen} + {len(items) - gen}", str(n_phr)]
        for n in names:
            found = sum(1 for path, phrases, match in items for ph in phrases
                        if _norm(ph, match) in _norm(texts[n].get(path, ""), match))
            totals[n][0] += found
            totals[n][1] += n_phr
            row.append(f"{found / n_phr:.0%}")
        out.append("| " + " | ".join(row) + " |")
    out.append("| **all** | " + str(len(docs)) + " | " + str(totals[names[0]][1]) + " | "
               + " | ".join(f"**{totals[n][0] / totals[n][1]:.0%}**" for n in names) + " |")
    return out


# ---------------------------------------------------------------------------------------------

def main() -> int:
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=HERE / ".corpus" / "peers")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--formats", default="",
                    help="comma-separated format directories to run; with --whole, 'all' is the "
                         "whole-corpus run ('--formats all --whole': only that)")
    ap.add_argument("--tools", default="", help="comma-separated subset of the tools")
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "run")
    ap.add_argument("--refs", type=Path, default=HERE / ".corpus" / "refs")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "peers.md")
    ap.add_argument("--bastion", type=Path, default=ROOT,
                    help="the bastion source tree to measure (e.g. a `git archive` snapshot, so "
                         "that edits in this checkout during the run do not count)")
    ap.add_argument("--against", type=Path, default=None,
                    help="a second bastion tree (e.g. a `git archive` of the code before), run "
                         "side by side as bastion-j1-before and bastion-j2-before")
    ap.add_argument("--whole", action="store_true",
                    help="also one run of each general tool over the whole corpus at once (every "
                         "file in one directory: one sweep, one batch call), as a user runs a "
                         "tree; reported apart from the per-format sums")
    ap.add_argument("--big", type=int, default=1000, help="pages of the generated RSS PDF (0: skip)")
    ap.add_argument("--classes-only", action="store_true",
                    help="only the table of issue 20's classes of office text (no corpus)")
    ap.add_argument("--no-classes", action="store_true", help="skip that table")
    args = ap.parse_args()
    ROOT = args.bastion.resolve()
    start_spawner()
    against = args.against.resolve() if args.against else None
    compile_trees(ROOT, against)  # bytecode, as an installed package has it (bench/benchlib.py)
    if args.classes_only:
        work = args.work.resolve()
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        driver = work / "driver.py"
        driver.write_text(PEER_DRIVER)
        tools = [Bastion("bastion-j2", 2)] + [
            Driver(name, ensure_venv(name, spec), driver) for name, spec in PEERS.items()]
        report = "\n".join(class_agreement(tools, work)) + "\n"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        print(report)
        return 0
    corpus = args.corpus.resolve()
    if not (corpus / "MANIFEST.tsv").exists():
        raise SystemExit(f"no corpus in {corpus}: run python bench/corpus.py first")
    by_fmt: dict[str, list[Path]] = {}
    for line in (corpus / "MANIFEST.tsv").read_text().splitlines()[1:]:
        fmt, rel = line.split("\t")[:2]
        by_fmt.setdefault(fmt, []).append(corpus / rel)
    keep = set(args.formats.split(",")) if args.formats else None
    if keep is not None and not (args.whole and "all" in keep):
        by_fmt = {k: v for k, v in by_fmt.items() if k in keep}
    for v in by_fmt.values():
        v.sort()

    t_start = time.monotonic()
    load0 = os.getloadavg()
    print("references …", file=sys.stderr)
    refs = build_refs(by_fmt, args.refs.resolve())

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if "pdf" in by_fmt:
        # the PDFs with a text layer that pdftotext reads: the PDF-path targets are measured
        # here too, without the scanned (OCRed by bastion only) and password-protected files
        sub = work / "pdf-text"
        sub.mkdir()
        for f in by_fmt["pdf"]:
            if refs["main"][f].strip():
                shutil.copy2(f, sub / f.name)
        by_fmt["pdf-text"] = sorted(sub.iterdir())
        more = build_refs({"pdf": by_fmt["pdf-text"]}, args.refs.resolve())
        for kind in refs:
            refs[kind].update(more[kind])
    if args.whole:  # every file in one flat directory (the corpus's names are unique)
        one = work / "all"
        one.mkdir()
        every = [f for k, v in by_fmt.items() if k not in EXTRA for f in v]
        for f in every:
            shutil.copy2(f, one / f.name)
            for kind in refs:
                if f in refs[kind]:
                    refs[kind][one / f.name] = refs[kind][f]
        by_fmt["all"] = sorted(one.iterdir())
        if keep is not None:  # --formats all: only that run (the corpus's files made it)
            by_fmt = {k: v for k, v in by_fmt.items() if k in keep}
    if "csv" in by_fmt:  # fixed cost of one run: a single small file
        one = work / "startup"
        one.mkdir()
        shutil.copy2(by_fmt["csv"][0], one / by_fmt["csv"][0].name)
        by_fmt["startup"] = [one / by_fmt["csv"][0].name]
    driver = work / "driver.py"
    driver.write_text(PEER_DRIVER)
    pys = {name: ensure_venv(name, spec) for name, spec in PEERS.items()}
    tools: list[Tool] = [
        Bastion("bastion-j1", 1), Bastion("bastion-j2", 2),
        *((Bastion("bastion-j1-before", 1, root=against),
           Bastion("bastion-j2-before", 2, root=against)) if against else ()),
        Driver("markitdown", pys["markitdown"], driver),
        Driver("kreuzberg-batch", pys["kreuzberg"], driver),
        Driver("kreuzberg", pys["kreuzberg"], driver),
        Driver("pdftotext", Path(sys.executable), driver, formats=PDFS),
        *(Driver(name, Path(sys.executable), driver, formats=fmts)
          for name, fmts in LEGACY_TOOLS.items() if shutil.which(name)),
        Driver("pdfplumber", Path(sys.executable), driver, formats=PDFS),
        Bastion("bastion-pdftotext-j1", 1, pdftotext_first=True,
                engines=("pdftotext", "pdfium", "pdfplumber"), formats=PDFS),
        Bastion("bastion-builtin-j1", 1, no_external=True, formats=PDFS),
        Bastion("bastion-builtin-j2", 2, no_external=True, formats=PDFS),
        Bastion("bastion-plumber-j2", 2, no_external=True, engines=("pdfplumber",),
                formats=PDFS),
    ]
    if args.tools:
        keep = set(args.tools.split(","))
        tools = [t for t in tools if t.name in keep]

    # runs[fmt][tool] = [measurement per round]; texts from the last round
    runs: dict[str, dict[str, list[dict]]] = {f: {} for f in by_fmt}
    texts: dict[str, dict[str, dict]] = {f: {} for f in by_fmt}
    status: dict[str, dict[str, dict]] = {f: {} for f in by_fmt}
    rng = random.Random(8)
    for rnd in range(args.rounds):
        for fmt, files in by_fmt.items():
            order = [t for t in tools if (t.formats is None and fmt != "pdf-text")
                     or (t.formats and fmt in t.formats)]
            rng.shuffle(order)
            for tool in order:
                tw = work / tool.name
                tw.mkdir(exist_ok=True)
                m, tx, st = tool.run(files, files[0].parent, tw)
                runs[fmt].setdefault(tool.name, []).append(m)
                texts[fmt][tool.name], status[fmt][tool.name] = tx, st
                print(f"  round {rnd + 1} {fmt:6} {tool.name:22} {m['wall']:7.2f} s wall "
                      f"{m['cpu']:7.2f} s CPU {m['rss']:6.0f} MiB", file=sys.stderr)

    big = big_pdf_rss(args.big, work) if args.big else []
    report = render(by_fmt, runs, texts, status, refs, tools, args.rounds, load0,
                    os.getloadavg(), time.monotonic() - t_start, big)
    if not args.no_classes:  # issue 20's classes of office text
        general = [t for t in tools if t.formats is None and t.name != "bastion-j1"
                   and not t.name.endswith("-before")]
        report += "\n".join(class_agreement(general, work)) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    return 0


def big_pdf_rss(pages: int, work: Path) -> list[str]:
    """Peak RSS of bastion's process tree on a generated long PDF vs a 10-page one."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pdfgen import make_many_pages

    rows = []
    for n in (10, pages):
        d = work / f"big{n}"
        d.mkdir(exist_ok=True)
        (d / f"many-{n}.pdf").write_bytes(make_many_pages(n))
        for name, extra in (("pdfium", []), ("pdfplumber", ["pdfplumber"]),
                            ("pdftotext", ["pdftotext", "pdfium"])):
            tool = Bastion(f"big-{name}", 1, no_external=(name != "pdftotext"),
                           engines=tuple(extra) or None, pdftotext_first=(name == "pdftotext"),
                           sample=True)
            tw = work / f"big-{name}-{n}"
            tw.mkdir(exist_ok=True)
            m, tx, st = tool.run([d / f"many-{n}.pdf"], d, tw)
            rows.append(f"| {name} | {n} | {m['wall']:.2f} | {m['root_rss']:.0f} | "
                        f"{m['child_rss']:.0f} | "
                        f"{st.get(d / f'many-{n}.pdf')} |")
    return rows


# ---------------------------------------------------------------------------------------------
# the report

PEER_NAMES = ("markitdown", "kreuzberg-batch", "kreuzberg")


def med(ms: list[dict], key: str) -> float:
    return statistics.median(m[key] for m in ms)


def pairwise(a: list[dict], b: list[dict], key: str = "wall") -> float:
    """median over rounds of b[key] / a[key]: how many times faster a is than b."""
    return statistics.median(y[key] / x[key] for x, y in zip(a, b) if x[key] > 0)


def render(by_fmt, runs, texts, status, refs, tools, rounds, load0, load1, elapsed, big) -> str:
    out: list[str] = []
    w = out.append
    w(f"Rounds: {rounds}; load average before {load0[0]:.2f}, after {load1[0]:.2f}; "
      f"elapsed {elapsed / 60:.1f} min; 2 vCPU (shared).\n")
    general = [t.name for t in tools if t.formats is None]
    scores: dict[str, dict[str, dict]] = {}
    w("### Per format (median wall over rounds; agreement with the reference)\n")
    w("| format | files | tool | files/s | CPU s | peak RSS MiB | with text | recall | "
      "precision | F1 |")
    w("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fmt, files in by_fmt.items():
        scores[fmt] = {}
        for name in general + [t.name for t in tools if t.formats and fmt in t.formats]:
            if name not in runs[fmt]:
                continue
            ms = runs[fmt][name]
            tx = texts[fmt][name]
            a = agreement(tx, refs["main"], files)
            scores[fmt][name] = a
            with_text = sum(1 for f in files if tx.get(f, "").strip()) / len(files)
            w(f"| {fmt} | {len(files)} | {name} | {len(files) / med(ms, 'wall'):.1f} | "
              f"{med(ms, 'cpu'):.2f} | {max(m['rss'] for m in ms):.0f} | {with_text:.0%} | "
              f"{a['recall']:.3f} | {a['precision']:.3f} | {a['f1']:.3f} |")
    # overall: sum over formats per round
    w("\n### Overall (all formats; each tool started once per format, sums per round)\n")
    w("| tool | files | files/s | CPU s | peak RSS MiB | vs bastion-j2 (wall, pairwise) |")
    w("| --- | ---: | ---: | ---: | ---: | ---: |")
    total = {}
    nfiles = sum(len(v) for k, v in by_fmt.items() if k not in EXTRA)
    for name in general if nfiles else ():  # (--formats all: no per-format runs)
        per_round = []
        for r in range(rounds):
            fmts = [f for f in by_fmt if name in runs[f] and f not in EXTRA]
            per_round.append({k: sum(runs[f][name][r][k] for f in fmts) for k in ("wall", "cpu")}
                             | {"rss": max(runs[f][name][r]["rss"] for f in fmts)})
        total[name] = per_round
    for name in general if nfiles else ():
        ratio = pairwise(total["bastion-j2"], total[name]) if "bastion-j2" in total else 0
        w(f"| {name} | {nfiles} | {nfiles / med(total[name], 'wall'):.2f} | "
          f"{med(total[name], 'cpu'):.1f} | {max(m['rss'] for m in total[name]):.0f} | "
          f"{ratio:.2f}× |")

    if "all" in runs and runs["all"]:
        w("\n### One run over the whole corpus (--whole: every file at once, one sweep or one "
          "batch call)\n")
        w("| tool | files | files/s | CPU s | peak RSS MiB | F1 | vs bastion-j2 (wall, pairwise) |")
        w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        ra = runs["all"]
        for name in general:
            if name not in ra:
                continue
            ratio = pairwise(ra["bastion-j2"], ra[name]) if "bastion-j2" in ra else 0
            w(f"| {name} | {len(by_fmt['all'])} | {len(by_fmt['all']) / med(ra[name], 'wall'):.2f} "
              f"| {med(ra[name], 'cpu'):.1f} | {max(m['rss'] for m in ra[name]):.0f} | "
              f"{scores['all'][name]['f1']:.3f} | {ratio:.2f}× |")

    # --against: this tree and the one before, format by format (CPU of the process tree)
    for j in ("j1", "j2"):
        now, before = f"bastion-{j}", f"bastion-{j}-before"
        if not any(now in runs[f] and before in runs[f] for f in by_fmt):
            continue
        w(f"\n### bastion -{j[0]} {j[1]}, this tree against --against, per format "
          "(CPU s, median; before/now pairwise)\n")
        w("| format | files | CPU s now | CPU s before | before / now (CPU) | "
          "before / now (wall) | F1 now | F1 before |")
        w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for fmt, files in by_fmt.items():
            if now not in runs[fmt] or before not in runs[fmt]:
                continue
            a, b = runs[fmt][now], runs[fmt][before]
            w(f"| {fmt} | {len(files)} | {med(a, 'cpu'):.2f} | {med(b, 'cpu'):.2f} | "
              f"{pairwise(a, b, 'cpu'):.2f}× | {pairwise(a, b):.2f}× | "
              f"{scores[fmt][now]['f1']:.3f} | {scores[fmt][before]['f1']:.3f} |")
        if now in total and before in total:
            w(f"| **sum of the formats** | {nfiles} | {med(total[now], 'cpu'):.1f} | "
              f"{med(total[before], 'cpu'):.1f} | {pairwise(total[now], total[before], 'cpu'):.2f}× | "
              f"{pairwise(total[now], total[before]):.2f}× | | |")

    # PDF: pages/s and agreement against MuPDF
    checks: list[tuple[str, bool, str]] = []
    for key in ("pdf", "pdf-text"):
        if key not in by_fmt:
            continue
        files = by_fmt[key]
        pages = pdf_pages(files)
        what = "all PDFs" if key == "pdf" else "the PDFs with a text layer pdftotext reads"
        w(f"\n### PDF paths, {what} ({len(files)} PDFs, {pages} pages; agreement F1 against "
          "pdftotext -layout and against MuPDF `mutool draw -F txt`)\n")
        w("| tool | pages/s (wall) | pages per CPU s | CPU s | peak RSS MiB | F1 vs pdftotext "
          "| F1 vs MuPDF | recall vs MuPDF | extractors |")
        w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        mu = {}
        for name, ms in runs[key].items():
            a1 = agreement(texts[key][name], refs["main"], files)
            a2 = agreement(texts[key][name], refs["mupdf"], files) if refs["mupdf"] else None
            mu[name] = a2
            ex = ms[-1].get("extractors", "")
            w(f"| {name} | {pages / med(ms, 'wall'):.0f} | {pages / med(ms, 'cpu'):.0f} | "
              f"{med(ms, 'cpu'):.2f} | {max(m['rss'] for m in ms):.0f} | {a1['f1']:.3f} | "
              f"{a2['f1'] if a2 else float('nan'):.3f} | "
              f"{a2['recall'] if a2 else float('nan'):.3f} | {ex} |")
        pr = runs[key]
        tag = f"[{key}] "
        if {"bastion-pdftotext-j1", "pdftotext"} <= pr.keys():
            r = pairwise(pr["bastion-pdftotext-j1"], pr["pdftotext"])
            checks.append((tag + "issue 6: bastion pdftotext path -j 1 ≥ 0.9× bare pdftotext loop "
                           "(pages/s)", r >= 0.9, f"{r:.2f}×"))
        for name in ("bastion-plumber-j2", "bastion-builtin-j2"):
            if {name, "pdfplumber"} <= pr.keys():
                r = pairwise(pr[name], pr["pdfplumber"])
                checks.append((tag + f"issue 6: {name} ≥ 1.7× one bare pdfplumber process",
                               r >= 1.7, f"{r:.2f}×"))
        for name in ("bastion-builtin-j1", "bastion-builtin-j2"):
            if {name, "pdftotext"} <= pr.keys() and mu.get(name) and mu.get("pdftotext"):
                r = pairwise(pr[name], pr["pdftotext"])
                ok_agree = mu[name]["f1"] >= mu["pdftotext"]["f1"] - 0.0005
                checks.append((tag + f"issue 9: {name} (PDFium, --no-external) ≥ 1.5× bare pdftotext "
                               "-layout loop at equal or better agreement (F1 vs MuPDF)",
                               r >= 1.5 and ok_agree,
                               f"{r:.2f}×; F1 {mu[name]['f1']:.3f} vs "
                               f"{mu['pdftotext']['f1']:.3f}"))

    ra = runs.get("all") or {}
    if {"bastion-j2", "kreuzberg-batch"} <= ra.keys():
        r = pairwise(ra["bastion-j2"], ra["kreuzberg-batch"])
        checks.append(("issue 21, one run over the whole corpus (--whole): bastion -j 2 files/s "
                       "≥ 2× Kreuzberg's batch API", r >= 2.0, f"{r:.2f}×"))
    # targets of issue 8
    if "bastion-j2" in total:
        peers = [p for p in PEER_NAMES if p in total]
        if peers:
            fastest = max(peers, key=lambda p: nfiles / med(total[p], "wall"))
            r = pairwise(total["bastion-j2"], total[fastest])
            checks.insert(0, (f"issue 8: bastion -j 2 overall files/s ≥ 1.2× the faster peer "
                              f"({fastest})", r >= 1.2, f"{r:.2f}×"))
            if "kreuzberg-batch" in total:
                r = pairwise(total["bastion-j2"], total["kreuzberg-batch"])
                checks.insert(0, ("issue 21: bastion -j 2 overall files/s ≥ 2× Kreuzberg's batch "
                                  "API", r >= 2.0, f"{r:.2f}×"))
        for fmt in by_fmt:
            if fmt in EXTRA:
                continue
            s = scores[fmt]
            best = max((p for p in PEER_NAMES if p in s), key=lambda p: s[p]["f1"], default=None)
            if best and "bastion-j2" in s:
                ok = s["bastion-j2"]["f1"] >= s[best]["f1"] - 0.0005
                checks.append((f"issue 8: agreement (F1) {fmt}: bastion ≥ better peer ({best})",
                               ok, f"{s['bastion-j2']['f1']:.3f} vs {s[best]['f1']:.3f}"))
    # files where a peer finds text and bastion reports ok with less (or not ok)
    lesser = []
    for fmt, files in by_fmt.items():
        s = scores[fmt]
        if "bastion-j2" not in s or fmt in EXTRA:
            continue
        st = status[fmt]["bastion-j2"]
        for f in files:
            b_rec, b_n, ref_n = s["bastion-j2"]["per_file"][f]
            for p in PEER_NAMES:
                if p not in s:
                    continue
                p_rec, p_n, _ = s[p]["per_file"][f]
                if ref_n < 20 or p_rec is None or b_rec is None:
                    continue
                if p_rec - b_rec >= 0.15 and p_rec >= 0.3:
                    lesser.append(f"| {fmt} | {f.name} | {st.get(f)} | {b_rec:.2f} | {p} | "
                                  f"{p_rec:.2f} | {ref_n} |")
    checks.append(("issue 8: no file where a peer finds text and bastion reports ok with less "
                   "(peer recall ≥ bastion's + 0.15)",
                   not any("| ok |" in line for line in lesser), f"{len(lesser)} file(s)"))
    if big:
        w("\n### Memory on a long PDF (bastion -j 1; generated by tests/pdfgen.make_many_pages)\n")
        w("| engine | pages | wall s | peak RSS of bastion's parent MiB | peak RSS of the "
          "largest child (worker, pdftotext) MiB | status |")
        w("| --- | ---: | ---: | ---: | ---: | --- |")
        out.extend(big)
    w("\n### Targets\n")
    for what, ok, detail in checks:
        w(f"- {'PASS' if ok else 'MISS'} — {what}: {detail}")
    if lesser:
        w("\n### Files where a peer recalls more of the reference than bastion\n")
        w("| format | file | bastion status | bastion recall | peer | peer recall | ref tokens |")
        w("| --- | --- | --- | ---: | --- | ---: | ---: |")
        out.extend(sorted(lesser))
    # failures per tool
    w("\n### Files a tool did not convert (first 3 per tool and format)\n")
    for fmt in by_fmt:
        for name, st in status[fmt].items():
            bad = [(f.name, s) for f, s in st.items() if s != "ok"]
            if bad:
                shown = "; ".join(f"{n}: {s[:90]}" for n, s in bad[:3])
                w(f"- {fmt} / {name}: {len(bad)} — {shown}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
