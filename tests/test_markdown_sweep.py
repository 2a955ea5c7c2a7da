"""The Markdown where users get it: the manifest's ``markdown: true``, the task key, the store's
``.md`` beside each ``.txt``, the record's ``markdown`` field, its clean-up, the API and
``bastion text --markdown``; and the worker's Markdown file, checked like its text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import officegen as og
from bastion.errors import ManifestError
from bastion.readers.base import Limits
from bastion.readers.dispatch import BUILTIN
from bastion.tasks.cli import main
from bastion.tasks.extract.plan import task_key
from bastion.tasks.extract.table import markdown_of
from bastion.tasks.manifest import parse_manifest
from test_markdown import blocks, links, tables

REPO = Path(__file__).resolve().parent.parent
PAGE = ("<html><body><h1>HEADMARK</h1><p>a <a href='https://x.example/'>link</a></p>"
        "<ul><li>item</li></ul><table><tr><td>c1</td><td>c2</td></tr></table></body></html>")


def manifest_text(root: Path, extra: str = "") -> str:
    return f"version: 1\nroots:\n  - name: r\n    path: {root}\n{extra}"


def test_the_manifest_key_is_strict(tmp_path):
    (tmp_path / "tree").mkdir()
    path = tmp_path / "m.yaml"
    ok = parse_manifest(manifest_text(tmp_path / "tree", "markdown: true\n").encode(), path)
    assert ok.markdown is True
    assert parse_manifest(manifest_text(tmp_path / "tree").encode(), path).markdown is False
    for bad in ("markdown: 1\n", "markdown: \"yes please\"\n", "markdown: [true]\n"):
        with pytest.raises(ManifestError) as e:
            parse_manifest(manifest_text(tmp_path / "tree", bad).encode(), path)
        assert "markdown" in str(e.value) and "boolean" in str(e.value)


def test_the_rendering_is_in_the_key_only_when_on():
    reader = BUILTIN.select("text/html", "a.html")
    limits = Limits()
    plain = task_key(reader, "text/html", limits, {})
    assert task_key(reader, "text/html", limits, {}, markdown=False) == plain
    assert task_key(reader, "text/html", limits, {}, markdown=True) != plain


def run(manifest: Path, out: Path) -> int:
    return main(["sweep", str(manifest), "--out", str(out), "-q", "-j", "2"])


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "extract.jsonl").read_bytes().splitlines()]


@pytest.mark.slow
def test_a_sweep_stores_the_markdown_beside_every_text_and_forgets_it_when_off(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "page.html").write_text(PAGE)
    (tree / "notes.txt").write_text("plain * text\n")
    (tree / "report.docx").write_bytes(og.docx(og.w_p("Word body")))
    (tree / "empty.txt").write_text("   \n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(manifest_text(tree, "markdown: true\n"))
    out = tmp_path / "out"
    assert run(manifest, out) == 0
    recs = {r["path"]: r for r in records(out)}
    for name in ("page.html", "notes.txt", "report.docx"):
        rec = recs[name]
        md = markdown_of(out, rec)
        assert md is not None and md.is_file() and md.with_suffix(".txt").is_file()
        assert rec["markdown"] == rec["text"][:-4] + ".md"
    assert "markdown" not in recs["empty.txt"]  # not ok: no Markdown
    md = markdown_of(out, recs["page.html"]).read_text()
    assert blocks(md)[:1] == ["heading_open"] and links(md) == [("link", "https://x.example/")]
    assert tables(md) == [[["c1", "c2"]]]
    # on again: nothing is read; the texts are the ones a run without Markdown stores
    assert run(manifest, out) == 0
    assert json.loads((out / "extract.summary.json").read_text())["extracted"] == 0
    plain_out = tmp_path / "plain"
    plain_manifest = tmp_path / "p.yaml"
    plain_manifest.write_text(manifest_text(tree))
    assert run(plain_manifest, plain_out) == 0
    for rec in records(plain_out):
        assert "markdown" not in rec
        if rec["text"]:
            assert (plain_out / rec["text"]).read_bytes() == (out / rec["text"]).read_bytes()
    # off: each document read once more; no .md is left, no record names one
    manifest.write_text(manifest_text(tree))
    assert run(manifest, out) == 0
    assert not list((out / "extract").glob("*/*.md"))
    assert all("markdown" not in r for r in records(out))


@pytest.mark.slow
def test_the_api_and_the_text_command_give_both(tmp_path):
    import bastion

    doc = tmp_path / "page.html"
    doc.write_text(PAGE)
    result = bastion.extract_file(doc, markdown=True, tools=None)
    assert result.ok and result.markdown is not None and "# HEADMARK" in result.markdown
    assert "# " not in result.text and result.text.startswith("HEADMARK")
    assert bastion.extract_file(doc, tools=None).markdown is None
    xlsx = tmp_path / "book.xlsx"
    xlsx.write_bytes(og.xlsx([("Sheet1", "sheet1.xml", '<row r="1"><c r="A1" t="s"><v>0</v>'
                                                        '</c><c r="B1"><v>2</v></c></row>')],
                             shared=["name"]))
    pptx = tmp_path / "deck.pptx"
    pptx.write_bytes(og.pptx([(og.a_sp("Title words", ph="title") + og.a_sp("- body"), None)]))
    docx = tmp_path / "doc.docx"
    docx.write_bytes(og.docx(og.w_p("Body") + "<w:tbl><w:tr><w:tc>" + og.w_p("a")
                             + "</w:tc><w:tc>" + og.w_p("b") + "</w:tc></w:tr></w:tbl>"))
    cmd = [sys.executable, "-m", "bastion", "text", "--no-external"]
    files = [str(p) for p in (doc, xlsx, pptx, docx)]
    md = subprocess.run(cmd + ["--markdown"] + files, capture_output=True, text=True,
                        cwd=REPO, timeout=120)
    plain = subprocess.run(cmd + files, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert md.returncode == 0 and plain.returncode == 0, md.stderr + plain.stderr
    for syntax in ("# HEADMARK", "- item", "| c1 | c2 |", "| --- |", "[link](https://x.example/)",
                   "# Sheet1", "| name | 2 |", "# slide 1", "## Title words", "\\- body",
                   "| a | b |"):
        assert syntax in md.stdout, syntax
    for syntax in ("](", "| --- |", "- item", "# HEADMARK"):
        assert syntax not in plain.stdout, syntax


@pytest.mark.slow
def test_a_worker_that_names_another_file_as_its_markdown_fails_its_job(tmp_path):
    """The Markdown file is taken like the text: a name of the worker's own form, a regular
    file of its own, within the cap; anything else is the document's error."""
    from bastion.readers.runtime import answers as answers_mod
    from bastion.readers.runtime.job import Job
    from bastion.readers.runtime.pool import WorkerPool

    doc = tmp_path / "p.html"
    doc.write_text(PAGE)
    import hashlib

    sha = hashlib.sha256(doc.read_bytes()).hexdigest()
    got = []
    pool = WorkerPool(1, Limits(name_languages=False), tmp_path / "pool", got.append)
    try:
        pool.submit(Job(1, str(doc), "p.html", "text/html", sha, doc.stat().st_size, 30.0,
                        reader="markup", markdown=True))
        pool.drain()
        (result,) = got
        # the good answer: its Markdown was handed over (and removed after the callback)
        assert result.verdict.status.value == "ok"
        assert result.markdown_path is not None and not result.markdown_path.exists()
        got.clear()
        real = answers_mod._MARKDOWN_NAME
        answers_mod._MARKDOWN_NAME = answers_mod.re.compile(r"never")
        try:
            pool.submit(Job(2, str(doc), "p.html", "text/html", sha, doc.stat().st_size, 30.0,
                            reader="markup", markdown=True))
            pool.drain()
        finally:
            answers_mod._MARKDOWN_NAME = real
        (failed,) = got
        assert failed.verdict.status.value == "error" and failed.verdict.error_kind == "worker"
    finally:
        pool.close()


@pytest.mark.slow
def test_a_cluster_batch_carries_the_markdown_back(tmp_path):
    """What a cluster worker sends back (``extract_batch``): the Markdown's bytes beside the
    text's, and a verdict that says so; none for a job that did not ask."""
    import hashlib

    from bastion.readers.runtime.job import Job
    from bastion.tasks.extract.batch import close_pools, extract_batch

    doc = tmp_path / "p.html"
    doc.write_text(PAGE)
    sha = hashlib.sha256(doc.read_bytes()).hexdigest()
    jobs = [Job(0, str(doc), "p.html", "text/html", sha, doc.stat().st_size, 30.0,
                reader="markup", key="k1", markdown=True),
            Job(0, str(doc), "p.html", "text/html", sha, doc.stat().st_size, 30.0,
                reader="markup", key="k2")]
    try:
        with_md, plain = extract_batch(jobs, limits=Limits(name_languages=False), workers=1,
                                       tmp_root=tmp_path / "pools")
    finally:
        close_pools()
    assert with_md.verdict.markdown and with_md.markdown is not None
    assert b"# HEADMARK" in with_md.markdown and with_md.text == plain.text
    assert not plain.verdict.markdown and plain.markdown is None
