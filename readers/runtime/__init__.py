"""The reader runtime: the processes that read documents and everything that confines them.

- ``job``       : one document to read, the one type from the plan's decision to the worker's job line
- ``pool``      : the pool of workers, parent side: jobs in, verdicts out, every limit enforced
- ``fleet``     : the pool's workers and what they say: started, watched, retired; what came of
                  each job, as outcomes
- ``worker``    : one worker seen from the parent: its start, its control messages, its clock
                  and its death
- ``handout``   : the jobs one worker holds, how they reach its documents' processes (one
                  alone to a fresh process, pure ones many to a shared one), their clock
- ``workermain``: the worker's main (the sandbox, then the zygote) and a document's process's
- ``zygote``    : one document, one process: forked ahead of need, swept after; it never sees a
                  job or an answer (each process talks to the parent on a channel of its own)
- ``batch``     : the pure-Python batch: which documents may share a process, and the read that
                  refuses a native part
- ``procs``     : starting and killing processes: every program bastion starts, every fork but
                  the zygote's
- ``answers``   : a document's answer, trusted for nothing: parsed and checked field by field,
                  its text file the parent's own
- ``schema``    : the one schema of an answer: its bytes bounded before the parse (size, depth,
                  containers), every field typed and bounded; the worker's answer cut to fit
- ``sandbox``   : what a worker enters as its first act: limits, private I/O, no root, Landlock
- ``identity``  : who a worker is: its slot's own uid, and its identity measured from /proc
- ``seccomp``   : the seccomp filter a worker loads last: no socket, namespace, tracing, mount
- ``toolset``   : external tools as sensors: found on PATH at run time, or absent, with their versions
- ``toolcall``  : one call of an external tool: a deadline, an output cap, a group kill, a reap
- ``context``   : the read context of one document: limits, tools, scratch directory, deadline
- ``verdict``   : the verdict on one document, the one type from the worker to the record
"""
