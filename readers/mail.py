"""Placeholder until the mail reader lands (being written now)."""

from .base import Reader
from .errors import Unsupported


def read(doc, sink, ctx):
    raise Unsupported("reader not built yet")


READER = Reader(name="mail", version=0, mimes=(), read=read)
