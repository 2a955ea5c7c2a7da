"""The ODF reader's CPU on two large generated documents, for two source trees side by side.

    python bench/odf_reader.py OLD_TREE NEW_TREE [--rounds 7]   # trees: `git archive` snapshots

A spreadsheet of 20,000 rows × 10 string cells and a text of 100,000 paragraphs (each with a
span) are built in memory, read with ``read_document`` in a fresh interpreter per tree and
round (the rounds interleave the trees), and the reader's CPU seconds (``process_time``) are
printed as the median and minimum per tree, with the ratio NEW / OLD of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CHILD = r'''
import io, sys, time, zipfile
sys.path.insert(0, sys.argv[1])
import bastion
assert bastion.__file__.startswith(sys.argv[1]), bastion.__file__
from bastion.readers.base import Document, Limits
from bastion.readers.runtime.context import LocalContext
from bastion.readers.dispatch import read_document
NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"')
cell = '<table:table-cell office:value-type="string"><text:p>r{r}c{c} word</text:p></table:table-cell>'
rows = "".join("<table:table-row>" + "".join(cell.format(r=r, c=c) for c in range(10))
               + "</table:table-row>" for r in range(20000))
paras = "".join(f"<text:p>Paragraph {i} with some words <text:span>inside</text:span> it.</text:p>"
                for i in range(100000))
BASE = "application/vnd.oasis.opendocument."
def pkg(kind, body):
    xml = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NS}><office:body>'
           f"{body}</office:body></office:document-content>")
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", BASE + kind)
        z.writestr("content.xml", xml)
    return b.getvalue()
docs = {"ods": pkg("spreadsheet", f'<office:spreadsheet><table:table table:name="S">{rows}'
                                  "</table:table></office:spreadsheet>"),
        "odt": pkg("text", f"<office:text>{paras}</office:text>")}
for kind, data in docs.items():
    t = time.process_time()
    out = read_document(Document(data, "big." + kind, BASE + ("spreadsheet" if kind == "ods" else "text")),
                        LocalContext(Limits()))
    assert out.status == "ok", out.error
    print(kind, time.process_time() - t)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, tree in (("old", args.old), ("new", args.new)):
            out = subprocess.run([sys.executable, "-c", CHILD, tree], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                kind, secs = line.split()
                times.setdefault((kind, label), []).append(float(secs))
    for kind in ("ods", "odt"):
        old, new = times[(kind, "old")], times[(kind, "new")]
        print(f"{kind}: old median {statistics.median(old):.3f} s (min {min(old):.3f}), "
              f"new median {statistics.median(new):.3f} s (min {min(new):.3f}), "
              f"new/old {statistics.median(new) / statistics.median(old):.3f}")


if __name__ == "__main__":
    main()
