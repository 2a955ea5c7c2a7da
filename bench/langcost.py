"""What naming a small text's languages costs in a warm process and in a freshly forked one.

    python bench/langcost.py [--texts 2560] [--rounds 3] [--tree DIR]

Every document's record names its main languages (readers/text/langid.py: py3langid's model,
mapped from the user's cache).  In the runtime a batch of plain texts, HTML pages or e-mails is
read by a process forked from the zygote, which holds the model: this measures, in one process
that loads what a zygote loads (the model mapped and preloaded, ``gc.freeze()``), the CPU of
:func:`~bastion.readers.text.langid.main_languages` per text

* in that process itself (warm: its page tables, caches and heap already hold what naming
  touches);
* in children forked from it, each naming ``k`` texts and exiting, for ``k`` = 64 (the runtime's
  :data:`~bastion.readers.runtime.batch.BATCH_DOCS`), 256 and all of them in one child; and
  children that fork and exit without naming anything (the fork's own cost, per text of a
  64-text batch);

beside the minor page faults per text (``ru_minflt`` of the reaped children).  The texts: the
30-word texts of bench/smalldocs.py's ``texts`` tree (made there when missing).  Medians of
``--rounds``; wall time is not printed (the children run one at a time; CPU is the figure).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def children(texts: list[str], per: int, name: bool) -> tuple[float, float]:
    """CPU seconds and minor faults per text of children that each name ``per`` texts."""
    from bastion.readers.text import langid

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for start in range(0, len(texts), per):
        pid = os.fork()
        if pid == 0:
            if name:
                for text in texts[start:start + per]:
                    langid.main_languages(text)
            os._exit(0)
        os.waitpid(pid, 0)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return cpu / len(texts), (r1.ru_minflt - r0.ru_minflt) / len(texts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=2560)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=HERE / ".corpus" / "smalldocs" / "trees" / "texts")
    args = ap.parse_args()
    if not args.tree.is_dir():
        import smalldocs

        smalldocs.make_texts(args.tree)
    files = sorted(args.tree.rglob("*.txt"))[:args.texts]
    texts = [f.read_text() for f in files]

    from bastion.readers.runtime.batch import BATCH_DOCS
    from bastion.readers.text import langid

    langid.map_model()
    langid.preload()
    langid.main_languages(texts[0])
    gc.freeze()  # as the zygote does before it forks

    rows: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        c0 = time.process_time()
        for text in texts:
            langid.main_languages(text)
        rows.setdefault("this process (warm)", []).append(
            ((time.process_time() - c0) / len(texts), 0.0))
        rows.setdefault(f"fork + exit only, per text of {BATCH_DOCS}", []).append(
            children(texts, BATCH_DOCS, name=False))
        for per in (BATCH_DOCS, 256, len(texts)):
            rows.setdefault(f"children of {per} texts each", []).append(
                children(texts, per, name=True))
    print(f"{len(texts)} texts of {args.tree}; medians of {args.rounds}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'where':40s} {'CPU µs/text':>12s} {'faults/text':>12s}")
    for label, got in rows.items():
        cpu = statistics.median(g[0] for g in got) * 1e6
        faults = statistics.median(g[1] for g in got)
        print(f"{label:40s} {cpu:12.0f} {faults:12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
