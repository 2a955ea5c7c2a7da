"""Validate a bastion output directory against the published JSON Schemas (schemas/).

``validate_output(out)`` checks every line of ``walk.jsonl`` and ``extract.jsonl``, both
summaries and every PDF sidecar (``extract/<aa>/<stem>.meta.json``) and returns the
problems, one line each (empty: all valid).  ``find_outputs(tree)`` finds the output
directories under a tree (those tagged with bastion's ``CACHEDIR.TAG``).  Used by
tests/test_schemas.py and by the autouse check in tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from bastion.tasks.output.atomic import OUTPUT_TAG, is_output_tag

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
FILES = {  # output file -> schema
    "walk.jsonl": "walk-record",
    "extract.jsonl": "extract-record",
    "walk.summary.json": "walk-summary",
    "extract.summary.json": "extract-summary",
}
MAX_PROBLEMS = 20


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    s = schema(name)
    Draft202012Validator.check_schema(s)
    return Draft202012Validator(s)


def _problems(name: str, doc: Any, where: str) -> Iterator[str]:
    for err in validator(name).iter_errors(doc):
        at = "/".join(str(p) for p in err.absolute_path) or "(top)"
        yield f"{where}: {at}: {err.message[:200]}"


def validate_output(out: Path) -> list[str]:
    """Every schema violation in the output directory ``out`` (at most MAX_PROBLEMS)."""
    out = Path(out)
    problems: list[str] = []
    for file, name in FILES.items():
        path = out / file
        if not path.is_file():
            continue
        if file.endswith(".jsonl"):
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    try:
                        doc = json.loads(line)
                    except ValueError as e:
                        problems.append(f"{path}:{n}: not JSON: {e}")
                        continue
                    problems.extend(_problems(name, doc, f"{path}:{n}"))
                    if len(problems) >= MAX_PROBLEMS:
                        return problems
        else:
            try:
                doc = json.loads(path.read_bytes())
            except ValueError as e:
                problems.append(f"{path}: not JSON: {e}")
                continue
            problems.extend(_problems(name, doc, str(path)))
    store = out / "extract"
    if store.is_dir():
        for bucket in os.scandir(store):
            if not bucket.is_dir():
                continue
            for entry in os.scandir(bucket.path):
                if entry.name.endswith(".meta.json") and entry.is_file(follow_symlinks=False):
                    doc = json.loads(Path(entry.path).read_bytes())
                    problems.extend(_problems("pdf-sidecar", doc, entry.path))
    return problems[:MAX_PROBLEMS]


def find_outputs(tree: Path) -> list[Path]:
    """The bastion output directories under ``tree`` (not descending into them)."""
    found = []
    for top, dirs, files in os.walk(tree):
        if OUTPUT_TAG in files:
            head = b""
            try:  # never blocks: a test may leave a FIFO (or anything) under that name
                fd = os.open(os.path.join(top, OUTPUT_TAG),
                             os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        head = os.read(fd, 256)
                finally:
                    os.close(fd)
            except OSError:
                pass
            if is_output_tag(head):
                found.append(Path(top))
                dirs[:] = []
                continue
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return found
