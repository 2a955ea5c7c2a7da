"""The extract plan alone at size: ``plan()`` of N synthetic walk records (half of them repeating
the other half's bytes), then its stale items read back as a run hands them out; CPU seconds of
each and the process's peak RSS growth.  Run it with each tree's own Python to compare:

    .venv/bin/python bench/plan_size.py 1000000
    /tmp/plan-base/.venv/bin/python bench/plan_size.py 1000000
"""

import resource
import sys
import time

from bastion.readers.base import Limits
from bastion.readers.dispatch import select
from bastion.tasks.extract.plan import plan
from bastion.tasks.records import WalkRecord

N = int(sys.argv[1])


def walk():
    for n in range(N):
        yield WalkRecord("root", f"dir{n // 1000:04d}/some/deeper/name-{n:07d}.txt", "file",
                         n % 5000, 1, n, f"{n % (N // 2):064x}", None, "text/plain", None)


select("text/plain", "a.txt")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
p = plan(walk, {}, select, {}, Limits(), set())
t1 = time.process_time()
stale = p.stale
n = sum(1 for _ in stale)
t2 = time.process_time()
print(f"N={N} plan {t1 - t0:.2f} s CPU, stale read {t2 - t1:.2f} s CPU ({n}), "
      f"RSS +{(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024} MiB")
