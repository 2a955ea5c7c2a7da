"""The reader runtime: the processes that read documents and everything that confines them.

- ``job``       : one document to read, the one type from the plan's decision to the worker's job line
- ``pool``      : the pool of workers, parent side: jobs in, verdicts out, every limit enforced
- ``worker``    : one worker seen from the parent: its start, job line, deadline, caps and death
- ``workermain``: the worker process's own main loop: the sandbox first, then one job after another
- ``zygote``    : one document, one process: the worker forks a child per document, sweeps after it
- ``procs``     : starting and killing processes: the only module that starts a child process
- ``answers``   : a worker's answer, trusted for nothing: checked field by field, its text taken
- ``sandbox``   : what a worker enters as its first act: limits, private I/O, no root, Landlock
- ``identity``  : who a worker is: its slot's own uid, and its identity measured from /proc
- ``seccomp``   : the seccomp filter a worker loads last: no socket, namespace, tracing, mount
- ``toolset``   : external tools as sensors: found on PATH at run time, or absent, with their versions
- ``toolcall``  : one call of an external tool: a deadline, an output cap, a group kill, a reap
- ``context``   : the read context of one document: limits, tools, scratch directory, deadline
- ``verdict``   : the verdict on one document, the one type from the worker to the record
"""
