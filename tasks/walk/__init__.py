"""The walk stage: one record per file under each root, hashed and typed, incrementally.

- ``stage``    : the walk itself: roots, directories, records, the stat cache's reuse
- ``globs``    : which files a root records, which directories it prunes, which links it follows
- ``beneath``  : opening a path beneath a directory descriptor, no symlink followed on the way
- ``filehash`` : reading one regular file: its sha256 and MIME type, or why it has none
- ``statcache``: the previous walk's records by root, directory and name
- ``patch``    : a small change patched into the previous walk.jsonl and stat cache
- ``shared``   : a walk shared with forked helpers, each walking its share of the tree
"""
