"""The language of a text: py3langid's naive Bayes model (BSD, shipped in the package, offline).

Two uses.  OCR asks :func:`identify` which language a first reading of a page is in, to choose
the pack that reads it (readers/ocr/choose.py).  Every document with text gets its main
languages (:func:`main_languages`) in its record, so the stages after bastion can route by
language.  The model is loaded on first use, once per worker: a view of its unpacked copy in
the user's cache, mapped read-only and shared by every worker (readers/text/langmodel.py;
≈ 0.1 s of CPU, most of it importing NumPy), else unpacked in memory (≈ 0.5 s more).  Its
version (the ``py3langid`` distribution's) is in every task key (tasks/extract/plan.py).

Why py3langid: docs/performance.md, "OCR in the document's language".
"""

from __future__ import annotations

import functools
import io
import lzma
import re
from array import array
from typing import Any

DISTRIBUTION = "py3langid"
SAMPLE_CHARS = 2000  # characters of one chunk
MAX_CHUNKS = 24  # chunks looked at, spread over the document
MIN_LETTERS = 20  # a text with fewer letters has no language
PIECE_LETTERS = 200  # letters of one piece identified on its own
MIN_CHUNK_PROB = 0.5  # a chunk counts for its language from this probability
MIN_SHARE = 0.2  # a language is one of the document's from this share of its counted text

_NOT_LETTERS = re.compile(r"[\W\d_]+", re.UNICODE)  # what is left is the letters
_NOT_LANGUAGES = {"zxx", "und"}


def _array(arr: Any) -> array:
    """A NumPy unsigned array as the stdlib array py3langid's automaton walks."""
    import numpy as np

    out = array({2: "H", 4: "I", 8: "L"}[arr.dtype.itemsize])
    buffer: Any = np.ascontiguousarray(arr)  # a NumPy array is a buffer (its stubs say not)
    out.frombytes(memoryview(buffer).cast("B"))
    return out


class Unavailable(Exception):
    """The model does not fit this process's memory cap (``memory_bytes``): no language."""


def _identifier() -> Any:
    """py3langid's identifier with normalised probabilities (:func:`_load`).  Its own
    loader unpacks the 65 MiB model into a temporary file, which a worker may not write (its
    file size cap and Landlock): the model is mapped from its unpacked copy in the user's
    cache (≈ 220 MB of address space with NumPy's, the model's 68 MB shared), else unpacked in
    memory into the same arrays (≈ 310 MB at the peak, 100 MB resident after).  Raises
    :class:`Unavailable` when that does not fit, then at once for the rest of the process."""
    got = _model()
    if got is None:
        raise Unavailable(UNAVAILABLE)
    return got


@functools.cache
def _model() -> Any:
    """:func:`_load`'s identifier, once per process; None when it did not fit."""
    try:
        return _load()
    except MemoryError:
        return None


UNAVAILABLE = "languages not identified: the language model does not fit the memory cap"


def _load() -> Any:
    """The identifier, its arrays views of the unpacked model's cache file
    (readers/text/langmodel.py: mapped, nothing decompressed) when it can be had, else
    unpacked here in memory.  The same arrays either way, so the same answers."""
    from py3langid.langid import LanguageIdentifier

    mapped = _mapped()
    if mapped is not None:
        return of_mapped(mapped)
    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    with lzma.open(MODEL_DIR / MODEL_FILE) as src:
        raw = io.BytesIO(src.read())
    with np.load(raw, allow_pickle=False) as d:
        model = LanguageIdentifier(
            np.asarray(d["ptc"]), np.asarray(d["pc"]), d["classes"].tolist(),
            _array(d["nextmove"]), d["out_feat"].tolist(), norm_probs=True,
            tk_row=_array(d["nextmove_row"]))
    del raw
    return model


def of_mapped(mapped: Any) -> Any:
    """py3langid's identifier over the arrays of a mapped cache file
    (:class:`~bastion.readers.text.langmodel.Mapped`), normalised probabilities."""
    from py3langid.langid import LanguageIdentifier

    return LanguageIdentifier(
        mapped.numpy("ptc"), mapped.numpy("pc"), list(mapped.classes),
        mapped.flat("nextmove"), mapped.flat("out_feat"), norm_probs=True,
        tk_row=mapped.flat("nextmove_row"))


def map_model() -> None:
    """Map the model's cache file now, making it when missing (a worker, before it enters
    its sandbox, whose view may hide the cache and which may not write there): the later
    load in this process (:func:`preload`) uses this mapping or, when there is none,
    unpacks in memory without trying again."""
    _mapped()


@functools.cache
def _mapped() -> Any:
    """The model's cache file mapped (readers/text/langmodel.py), once per process; None
    when it cannot be had."""
    from . import langmodel

    return langmodel.mapped()


def preload() -> None:
    """Load the model now (a worker's zygote, before it forks a process per document: each
    inherits it); :class:`Unavailable` when it does not fit, remembered for the process."""
    _identifier()


def letters(text: str) -> int:
    """How many letters ``text`` has (the characters of ``[^\\W\\d_]``, counted as what is
    left when the others are removed: half the cost of listing them)."""
    return len(_NOT_LETTERS.sub("", text))


def identify(text: str) -> tuple[str | None, float]:
    """The language of ``text`` (ISO 639-1) and its probability (0-1); ``(None, 0.0)`` for a
    text of fewer than MIN_LETTERS letters, or when the model does not fit the memory cap
    (the document's record says so: :func:`main_languages`)."""
    sample = text[:SAMPLE_CHARS * 4]
    if letters(sample) < MIN_LETTERS:
        return None, 0.0
    try:
        model = _identifier()
    except Unavailable:
        return None, 0.0
    lang, prob = model.classify(sample)
    if lang in _NOT_LANGUAGES:
        return None, 0.0
    return str(lang), float(prob)


def _chunks(text: str) -> list[str]:
    """At most MAX_CHUNKS pieces of about SAMPLE_CHARS characters, cut at line ends, spread
    evenly over ``text`` (the same pieces for the same text)."""
    if len(text) <= SAMPLE_CHARS:
        return [text]
    n = min(MAX_CHUNKS, -(-len(text) // SAMPLE_CHARS))
    step = len(text) / n
    out = []
    for k in range(n):
        start = int(k * step)
        if k:
            nl = text.find("\n", start, start + SAMPLE_CHARS // 4)
            start = nl + 1 if nl >= 0 else start
        out.append(text[start:start + SAMPLE_CHARS])
    return out


def _pieces(window: str) -> list[tuple[str, int]]:
    """``window`` cut at line ends into pieces of at least PIECE_LETTERS letters (the last
    may be shorter), so that a document whose paragraphs alternate languages is counted
    paragraph by paragraph; each with its number of letters."""
    out: list[tuple[str, int]] = []
    cur: list[str] = []
    n = 0
    for line in window.split("\n"):
        cur.append(line)
        n += letters(line)
        if n >= PIECE_LETTERS:
            out.append(("\n".join(cur), n))
            cur, n = [], 0
    if cur:
        out.append(("\n".join(cur), n))
    return out


def main_languages(text: str) -> tuple[tuple[str, float], ...]:
    """The main languages of a document's text: each piece (:func:`_pieces`) of each window
    (:func:`_chunks`) identified, and the languages holding at least MIN_SHARE of the
    letters of the pieces identified with MIN_CHUNK_PROB or more, most first, each with a confidence — its share times the mean
    probability of its pieces, two decimals.  Empty for a text without enough letters."""
    weights: dict[str, float] = {}
    probs: dict[str, list[float]] = {}
    total = 0
    for chunk, n in (piece for window in _chunks(text) for piece in _pieces(window)):
        if n < MIN_LETTERS:
            continue
        lang, prob = _identifier().classify(chunk)
        if lang in _NOT_LANGUAGES or prob < MIN_CHUNK_PROB:
            continue
        weights[lang] = weights.get(lang, 0) + n
        probs.setdefault(lang, []).append(prob)
        total += n
    out = []
    for lang, w in weights.items():
        share = w / total
        if share >= MIN_SHARE:
            conf = round(share * sum(probs[lang]) / len(probs[lang]), 2)
            out.append((str(lang), conf))
    out.sort(key=lambda x: (-x[1], x[0]))
    return tuple(out)
