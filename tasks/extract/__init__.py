"""The extract stage: plan, read in the sandbox, store the verdicts, write the records.

- ``plan``     : the plan: each walked file's reader and key, whether its verdict still stands, in a database of its own
- ``runplan``  : the plan step of a run, as functions: the walk checked, the no-op check, the plan made, the key inputs' digest
- ``steps``    : a run's other steps, as functions: the walk, the session opened, one document handed out, the index
- ``run``      : one invocation: the Run the CLI and dodo.py build and the task generators close over (its values and resources)
- ``values``   : a run's plain values: its frozen inputs, decision, plan, end, and what its steps returned
- ``slices``   : the stale items handed to doit a slice at a time, and the collector kept off a slice's objects
- ``session``  : the running side: the Session protocol, and the local one over the sandboxed worker pool
- ``commits``  : a session's commit side: texts placed in the store, verdicts committed in batches
- ``docopen``  : a document's path for its worker: its directory opened beneath its root
- ``batch``    : one batch of documents through the sandboxed workers: plain data in, verdicts out
- ``store``    : the content-addressed text store and its verdicts database
- ``owners``   : whose text the plain-named files of a sha256 hold
- ``backoff``  : repeat offenders (timeout, memory, crash, worker) tried again after 1, 2, 4 … runs
- ``records``  : the records and extract.summary.json, built from the plan and the verdicts
- ``finish``   : the end of a run: drain, write records and summary, drop unreferenced texts
- ``table``    : the records table, its export extract.jsonl, and what the walk changed since it
- ``stamp``    : the no-op check, decided without reading the walk
- ``toolcache``: the tools of a run, probed once and cached by binary
- ``usercache``: what is kept for the user across outputs (the registry's digest, the tools' versions)
"""
