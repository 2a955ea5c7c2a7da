"""The commit side of an extract session, local or on a cluster: each verdict's text placed in
the store, then the verdicts committed in batches.

A verdict's text is moved (or written) into the store first, then the verdict is queued; the
queue is committed with one ``syncfs`` and one transaction per :data:`COMMIT_EVERY` verdicts or
:data:`COMMIT_SECONDS`, whichever comes first, so a verdict in the store always has its text
and a ``kill -9`` redoes at most that much finished work.  :class:`Commits` is the base of
both sessions (:class:`bastion.tasks.extract.session.ExtractSession`, the local workers, and
:class:`bastion.tasks.cluster.run.ClusterSession`, the Dask cluster's batches): the client is
the only writer of the store either way.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from bastion.readers.runtime.verdict import Status, Verdict

from ..output.atomic import STATE_DIR, OutputError
from ..interrupts import critical
from .plan import Item
from .store import Store

__all__ = ["COMMIT_EVERY", "COMMIT_SECONDS", "RUNNING", "Commits"]

# verdicts per commit (one syncfs + one transaction), or the verdicts of COMMIT_SECONDS: a
# kill -9 redoes at most that much finished work.  Each commit costs ≈ 15–25 ms whatever its
# size (the syncfs's journal commit, the WAL's checkpoint), so at a few thousand small
# documents a second the count, not the time, would decide how often: 500 made it 40 commits
# per 20,000 files (docs/performance.md, issue 40).
COMMIT_EVERY = 5000
COMMIT_SECONDS = 2.0
RUNNING = f"{STATE_DIR}/extracting"  # present while a session may be writing the store


class Commits:
    """The store a session writes and the verdicts queued for it.  ``on_verdict(item,
    verdict)`` is told of every verdict once it is recorded (the progress display)."""

    def __init__(self, *, out: Path, store: Store,
                 on_verdict: Callable[[Item, Verdict], None] | None = None) -> None:
        self.out = out
        self.store = store
        self.on_verdict = on_verdict
        self.pending: list[tuple[str, str, Verdict]] = []  # texts not yet known durable
        self.pending_plain: list[tuple[str, str]] = []  # their pairs whose texts are plain-named
        self.last_commit = time.monotonic()

    def claim_store(self) -> None:
        """Clear the temp files a killed run left in the output and the store (the texts and
        sidecars it was writing), and mark the store as being written.  Only a run that did
        not close its session leaves the marker, so a million-text store is not listed on
        every run."""
        od = self.store.dir
        od.remove_stale_temps("")
        try:
            od.stat(RUNNING)
            unfinished = True
        except OSError:
            unfinished = False
        buckets = self.store._bucket_dirs()
        if unfinished:
            for bucket in buckets:
                od.remove_stale_temps(f"extract/{bucket}")
        else:
            od.dir_fd(STATE_DIR)
            od.write(RUNNING, b"", sync=False)
        # a store without a bucket holds no text or sidecar: nothing to remove before a
        # text is placed (each (sha256, key) is placed once a run: Plan.hand_out)
        self.store.empty = not buckets

    def release_store(self) -> None:
        """Nothing of this run writes the store any more: the marker goes."""
        self.store.dir.unlink(RUNNING)

    def take(self, item: Item) -> bool:
        """Whether ``item`` is work for a worker: not when no reader takes its type (recorded
        here as ``unsupported``).  (An item whose (sha256, key) was handed out already in this
        run never comes: :meth:`bastion.tasks.extract.plan.Plan.hand_out`.)"""
        if item.reader is None:
            self.record(item, Verdict(status=Status.UNSUPPORTED,
                                      error=f"no reader for {item.mime}"), None, {})
            return False
        return True

    # -- commits --------------------------------------------------------------------------------

    def record(self, item: Item, verdict: Verdict, text_path: Path | None,
               sidecar: dict[str, Any], text: bytes | None = None, *,
               markdown_path: Path | None = None, markdown: bytes | None = None) -> None:
        """Put a verdict's text (a worker's file, or ``text`` bytes made elsewhere: a cluster
        worker), its Markdown (``markdown_path`` or ``markdown``, when the job asked for it)
        and sidecar in place and queue the verdict for commit.  The sidecar (PDFs: pages,
        title, outline, how each page's text was made; any document's metadata and its
        embedded documents') is kept beside a text that has any."""
        with critical():  # a text in the store always has its verdict queued
            verdict = self.place(item, verdict, text_path, sidecar, text,
                                 markdown_path=markdown_path, markdown=markdown)
            self.queue(item, verdict)

    def place(self, item: Item, verdict: Verdict, text_path: Path | None,
              sidecar: dict[str, Any], text: bytes | None = None, *,
              markdown_path: Path | None = None, markdown: bytes | None = None) -> Verdict:
        """The text, Markdown and sidecar of a verdict into the store (or out of it): files
        only, so several items may be placed at once from threads (tasks/cluster/run.py
        does).  The verdict to record: with ``markdown`` set when its Markdown was stored."""
        stem = item.stem
        if verdict.status is Status.OK and (text_path is not None or text is not None):
            if text is not None:
                self.store.write_text(stem, text)
            elif text_path is not None:
                self.store.adopt_text(stem, text_path)
            if markdown is not None:
                self.store.write_text(stem, markdown, ".md")
            elif markdown_path is not None:
                self.store.adopt_text(stem, markdown_path, ".md")
            elif not self.store.empty:
                self.store.remove_meta(stem, ".md")  # (one an earlier run left)
            verdict = replace(verdict, markdown=markdown is not None
                              or markdown_path is not None)
            if ("outline" in sidecar or "page_sources" in sidecar or "metadata" in sidecar
                    or "embedded" in sidecar):
                self.store.write_meta(stem, sidecar)
            elif not self.store.empty:
                self.store.remove_meta(stem)
        elif not self.store.empty:
            self.store.remove_text(stem)
        return verdict

    def recorded(self, item: Item) -> bool:
        """Whether this run recorded a verdict of ``item``'s (sha256, key) already: queued,
        or committed under this run (the store's ``run`` column)."""
        pair = (item.sha256, item.key)
        return any(p[:2] == pair for p in self.pending) or pair in self.store.made([pair[0]])

    def queue(self, item: Item, verdict: Verdict) -> None:
        """Queue a placed verdict for commit (committing when the batch is full or old)."""
        self.pending.append((item.sha256, item.key, verdict))
        if verdict.status is Status.OK and item.stem == item.sha256:
            self.pending_plain.append((item.sha256, item.key))
        if (len(self.pending) >= COMMIT_EVERY
                or time.monotonic() - self.last_commit >= COMMIT_SECONDS):
            self.commit()
        if self.on_verdict is not None:
            self.on_verdict(item, verdict)

    def commit(self) -> None:
        """Make the pending verdicts (and their texts) durable."""
        with critical():
            self.store.put_many(self.pending, self.pending_plain)
            self.pending, self.pending_plain = [], []
        self.last_commit = time.monotonic()

    def _commit_quietly(self) -> None:
        """Commit what is pending, on the way out: a failure here (the disk full) leaves
        texts without verdicts, which the next run simply redoes."""
        if self.pending:
            try:
                self.commit()
            except (OutputError, OSError):
                pass
