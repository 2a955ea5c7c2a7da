"""What the one schema of answers costs (issue 41): per answer, in the parent and the worker.

    python bench/answers.py [--rounds 7]

Four answers as workers send them — a plain text's, an e-mail's (metadata, three attachments'
metadata), a 200-page PDF's (page sources, a 300-entry outline, Info metadata) and the largest
that fits (an outline of 10,000 entries with 300-character titles, ≈ 3.4 MB) — each taken
three ways, alternated in every round so drift hits all alike:

* **json.loads**: what the parent did before (the JSON parse, then ad-hoc checks of a few
  fields: not counted here, so the ratio is against the parse alone);
* **schema.answer**: the bytes bounded (size, nesting, objects and arrays), the parse, every
  field typed and bounded (:mod:`bastion.readers.runtime.schema`);
* **schema.encode** against ``json.dumps``: the worker's side (the line made, and cut when over
  the cap).

Prints a table of medians (µs per answer) and ratios; CPU time of this one process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bastion.readers.runtime import schema  # noqa: E402

VERDICT = {"status": "ok", "extractor": "text:utf-8", "chars": 5120, "error": None,
           "error_kind": None, "limit": None, "tools_used": [], "pages": None, "title": None,
           "pages_ocr": None, "members": None, "encoding_source": "utf-8", "warnings": [],
           "authors": [], "created": None, "modified": None, "subject": None,
           "declared_language": None, "languages": [{"code": "en", "confidence": 0.97}],
           "ocr_languages": [], "ocr_missing": [], "ocr_packs": None}


def answers() -> dict[str, dict[str, Any]]:
    base = {"id": 17, "text": "t17.txt", "rss": 81_234_944, "fatal": False}
    meta = {"title": "Quarterly figures", "authors": ["A. Author", "B. Writer"],
            "created": "2024-03-01T10:00:00+01:00", "subject": "Re: the figures",
            "fields": {"from": "a@example.org", "to": ["b@example.org", "c@example.org"],
                       "message_id": "<1234@example.org>"}}
    mail = {**base, "verdict": {**VERDICT, "extractor": "mail", "subject": "Re: the figures",
                                "authors": ["a@example.org"]},
            "sidecar": {"metadata": meta,
                        "embedded": [{"path": f"att{i}.pdf", "metadata": {"title": f"t{i}",
                                                                          "pages": 3}}
                                     for i in range(3)]}}
    sources = [{"page": i, "source": "native", "engine": "pdfium", "version": "6721"}
               for i in range(1, 201)]
    sources[5] = {"page": 6, "source": "ocr", "engine": "tesseract", "version": "5.3.0",
                  "confidence": 91.5, "renderer": "pdfium", "dpi": 200, "languages": ["eng"],
                  "script": "Latin", "language": "en"}
    outline = [{"title": f"Section {i}: on the matter of things", "page": 1 + i % 200,
                "level": 1 + i % 3} for i in range(300)]
    pdf = {**base, "verdict": {**VERDICT, "extractor": "pdfium", "pages": 200,
                               "title": "A report", "chars": 400_000},
           "sidecar": {"pages": 200, "title": "A report", "outline": outline,
                       "page_sources": sources, "metadata": {"title": "A report", "pages": 200,
                                                             "fields": {"producer": "pdfTeX"}}}}
    big = {**base, "verdict": VERDICT,
           "sidecar": {"outline": [{"title": "x" * 300, "page": 1, "level": 2}] * 10_000}}
    return {"text": {**base, "verdict": VERDICT, "sidecar": {}}, "mail": mail, "pdf": pdf,
            "largest": big}


def per_call(fn: Callable[[], Any], budget_s: float = 0.2) -> float:
    """CPU µs of one call, over as many calls as fit in about ``budget_s``."""
    n, spent = 1, 0.0
    while spent < budget_s:
        started = time.process_time()
        for _ in range(n):
            fn()
        spent = time.process_time() - started
        if spent < budget_s:
            n *= 2
    return spent / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    cases = answers()
    rows: dict[str, dict[str, list[float]]] = {k: {} for k in cases}
    for _ in range(args.rounds):
        for name, msg in cases.items():
            line = schema.encode(msg)[:-1]
            assert schema.answer(line) == json.loads(line)
            got = rows[name]
            for label, fn in (("json.loads", lambda: json.loads(line)),
                              ("schema.answer", lambda: schema.answer(line)),
                              ("json.dumps", lambda: json.dumps(msg, ensure_ascii=True,
                                                                separators=(",", ":"))),
                              ("schema.encode", lambda: schema.encode(msg))):
                got.setdefault(label, []).append(per_call(fn))
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"{'answer':8} {'bytes':>9} {'json.loads':>11} {'schema.answer':>14} {'ratio':>6}"
          f" {'json.dumps':>11} {'schema.encode':>14} {'ratio':>6}")
    for name, got in rows.items():
        med = {k: statistics.median(v) for k, v in got.items()}
        size = len(schema.encode(cases[name]))
        print(f"{name:8} {size:9d} {med['json.loads']:10.1f}µ {med['schema.answer']:13.1f}µ "
              f"{med['schema.answer'] / med['json.loads']:5.2f}x {med['json.dumps']:10.1f}µ "
              f"{med['schema.encode']:13.1f}µ {med['schema.encode'] / med['json.dumps']:5.2f}x")


if __name__ == "__main__":
    main()
