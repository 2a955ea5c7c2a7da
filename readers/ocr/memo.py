"""What tesseract read in the images a worker has OCRed already, so that the same image is
recognised once in a run.

The same picture often comes back: a signature logo in every message of a mailbox, an
attachment forwarded along a thread, an archive holding documents that also lie beside it, a
scanned page repeated in a PDF.  Tesseract's answer is a function of the image's bytes, the
resolution it is told, its version and the call (text, or orientation): the same inputs give
the same output (tests/test_tessapi.py), so a worker keeps the answers it got, keyed by those
inputs with the SHA-256 of the bytes, and a repeated image costs a hash instead of a
recognition.  The records are the same with or without it (only successes are kept: a
failure or a timeout is tried again), so it keys no task.

One :class:`OcrMemo` belongs to one worker process (readers/runtime/workermain.py makes it and hands it
to each document's context as ``ctx.ocr_memo``); a context without one (a test, a direct
call) always runs tesseract.  It is bounded by entries and by the text it holds, the least
recently used answer going first.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Hashable

ENTRIES = 512  # answers kept
CHARS = 2_000_000  # text kept, all answers together: ≤ 8 MB even as UCS-4, ≈ 500 pages

MISSING = object()  # what get() returns for an image not seen yet


def digest(image: bytes) -> bytes:
    return hashlib.sha256(image).digest()


class OcrMemo:
    """Tesseract's answers by ``(call, inputs…, sha256 of the image)``; least recently used
    out first, past ``entries`` answers or ``chars`` characters of text."""

    def __init__(self, entries: int = ENTRIES, chars: int = CHARS) -> None:
        self.entries, self.chars = entries, chars
        self._answers: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._held = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any:
        """The answer kept for ``key``, or :data:`MISSING`."""
        got = self._answers.get(key)
        if got is None:
            self.misses += 1
            return MISSING
        self._answers.move_to_end(key)
        self.hits += 1
        return got[0]

    def put(self, key: Hashable, answer: Any, size: int = 0) -> None:
        """Keep ``answer`` (``size``: the characters of text it holds)."""
        if size > self.chars:
            return
        old = self._answers.pop(key, None)
        if old is not None:
            self._held -= old[1]
        self._answers[key] = (answer, size)
        self._held += size
        while len(self._answers) > self.entries or self._held > self.chars:
            _, (_, freed) = self._answers.popitem(last=False)
            self._held -= freed

    def __len__(self) -> int:
        return len(self._answers)
