"""Placeholder until the pdf reader lands (being written now)."""

from .base import Reader
from .errors import Unsupported


def read(doc, sink, ctx):
    raise Unsupported("reader not built yet")


READER = Reader(name="pdf", version=0, mimes=(), read=read)
