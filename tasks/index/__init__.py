"""The index stage: a full-text index (SQLite FTS5) of the stored texts, kept in step with the records.

- ``database``: the index's SQLite file: its schema, opened to write (through the output's descriptor) or to read
- ``stage``   : the index brought in step with the records: each text added once, dropped when no record names it
- ``query``   : a search: bm25-ranked texts, the walked paths that name them, a snippet of each
"""
