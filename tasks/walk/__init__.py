"""The walk stage: one record per file under each root, hashed and typed, incrementally.

- ``stage``    : the walk itself: roots, directories, records, the reuse of unchanged rows
- ``globs``    : which files a root records, which directories it prunes, which links it follows
- ``beneath``  : opening a path beneath a directory descriptor, no symlink followed on the way
- ``filehash`` : reading one regular file: its sha256 and MIME type, or why it has none
- ``table``    : the walk's rows in the output's database: the previous walk by directory, batches
- ``export``   : walk.jsonl, the export of the walk table (a small change spliced into the last one)
- ``upgrade``  : an output of the earlier layout (walk.jsonl + stat cache) imported once
- ``shared``   : a walk shared with forked helpers, each walking its share of the tree
"""
