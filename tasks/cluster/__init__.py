"""The extract stage on a Dask distributed cluster (``--cluster``).

- ``run``    : the client side of a cluster run
- ``spec``   : what --cluster names, and the error of a cluster that cannot go on
- ``connect``: the client's connection to the cluster: getting there, what is on it, leaving
- ``batches``: the batches: cut, submitted with their keys and resources, collected
- ``worker`` : what a Dask worker runs and advertises
- ``plugin`` : the worker plugin that keeps a warm sandboxed pool
- ``local``  : local:N: a scheduler and N worker processes of this machine, for one run
- ``preload``: what local:N's helper imports and probes before it forks its workers
"""
