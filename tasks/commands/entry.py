"""The ``bastion`` command's entry point: ``bastion text`` without loading the pipeline.

``bastion text FILE`` needs the extractor and the readers, not the manifest, the signing, the
output directory or doit: it is dispatched here before :mod:`bastion.tasks.cli` (whose imports
cost ≈ 50 ms of CPU) is loaded.  Every other command is :func:`bastion.tasks.cli.main`'s.
"""

from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["text"]:
        from .onefile import main as text_main

        return text_main(args[1:])
    from ..cli import main as cli_main

    return cli_main(args)
