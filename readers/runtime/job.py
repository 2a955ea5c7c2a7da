"""One document to read: the one type from the plan's decision to the worker's job line.

A :class:`Job` is made where a planned file's path is resolved (the extract session, a cluster
batch, the public ``Extractor``) and travels unchanged through the batches (pickled to a Dask
worker) and the pool to the worker: the parent's choice of reader, its deadline and tools, and
the (sha256, task key) pair the verdict is recorded under.  What comes back is a different
thing: the pool's :class:`bastion.readers.runtime.pool.JobResult`, a batch's
:class:`bastion.tasks.extract.batch.JobOutcome`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Job:
    """One document for a worker, as the parent decided it."""

    id: int  # unique among the jobs of one pool (the worker's answer names it)
    path: str  # absolute, as the reading machine sees it; non-UTF-8 bytes as surrogate escapes
    name: str  # the file name (the readers look at its extension)
    mime: str
    sha256: str
    size: int
    deadline_s: float
    tools: dict[str, str] = field(default_factory=dict)  # the reader's tools: name -> path
    reader: str | None = None  # the reader the parent chose (None: the worker's registry's)
    key: str = ""  # the task key it was planned under (the parent's; the worker never sees it)
    markdown: bool = False  # render the Markdown beside the text (issue 43)

    @property
    def pair(self) -> tuple[str, str]:
        """(sha256, task key): what its verdict is recorded under."""
        return (self.sha256, self.key)
