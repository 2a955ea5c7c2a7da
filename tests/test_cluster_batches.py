"""How a cluster run cuts its batches (tasks/cluster_batches.batch_count): no Dask needed."""

from __future__ import annotations

from bastion.tasks.cluster.batches import (BATCH_COUNT, BATCH_SECONDS, PROBE_COUNT,
                                           TASKS_PER_SECOND, batch_count)


def run_sizes(total: int, threads: int, cost: float) -> list[int]:
    """The batch sizes of a run of ``total`` documents of ``cost`` seconds each, the cost
    learnt from the batches as they finish (the first wave, before any did, unknown)."""
    sizes: list[int] = []
    done = 0
    while sum(sizes) < total:
        timed = sum(sizes[:done])
        size = min(batch_count(total - sum(sizes), threads, timed, timed * cost),
                   total - sum(sizes))
        sizes.append(size)
        if len(sizes) > 2 * threads:  # a window of 2 per thread: the oldest has finished
            done += 1
    return sizes


def test_before_any_batch_finished_the_batches_are_probes() -> None:
    assert batch_count(20_000, 2, 0, 0.0) == PROBE_COUNT
    assert batch_count(3, 2, 0, 0.0) == 1  # fewer items than threads: one each


def test_cheap_documents_fill_a_batch_to_the_count() -> None:
    assert batch_count(20_000, 2, 400, 0.2) == BATCH_COUNT  # 0.5 ms a document


def test_slow_documents_make_short_batches() -> None:
    # PDFs at 0.1 s each: 0.25 s of reading is 2 of them, however many are left
    assert batch_count(70, 2, 10, 1.0) == int(BATCH_SECONDS / 0.1)
    # one document slower than a batch's time: alone
    assert batch_count(70, 2, 1, 4.5) == 1


def test_a_large_cluster_gets_longer_batches() -> None:
    # 800 threads at 50 ms a document: 800 / TASKS_PER_SECOND = 4 s of reading, 80 documents
    threads = 800
    assert batch_count(10_000_000, threads, 1000, 50.0) == int(
        threads / TASKS_PER_SECOND / 0.05)


def test_batches_shrink_toward_the_end() -> None:
    sizes = run_sizes(20_000, 2, 0.0005)
    assert sizes[:4] == [PROBE_COUNT] * 4
    assert max(sizes) == BATCH_COUNT
    assert sizes[-8:] == [1] * 8  # the last batches hold one document each
    first = sizes.index(BATCH_COUNT)  # once the cost is known, never growing again
    assert sizes[first:] == sorted(sizes[first:], reverse=True)
    assert sum(sizes) == 20_000
    pdfs = run_sizes(80, 2, 0.1)
    assert max(pdfs) <= PROBE_COUNT and pdfs[-4:] == [1] * 4
