"""The output directory: checked once, then written only through its descriptor.

- ``directory``: the output directory: its checks, its descriptor, the writes through it
- ``atomic``   : atomic file writes and the output directory's lock
- ``held``     : the output one run holds: locked once with the manifest's modes, released at its end
- ``ops``      : the *at system calls on descriptors inside a checked output, never following a link
- ``tag``      : what makes a directory a bastion output, and where an output may not be
- ``modes``    : the rules an output is held to, and the walk that gives its tree its modes
- ``splice``   : the one writer of a sorted JSON Lines export: in full, or a change spliced in by byte offset
- ``readonly`` : an output opened to read only: checked, nothing created, tightened, locked or written
"""
