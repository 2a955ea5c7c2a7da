"""The commands besides the stages: one document's text, two outputs compared, an output reported.

- ``entry``  : the console script's entry: ``bastion text`` dispatched before the pipeline loads
- ``onefile``: ``bastion text FILE…``: each file's text through the sweep's sandboxed worker
- ``compare``: ``bastion compare``: do two outputs hold the same records and texts?
- ``report`` : ``bastion report``: what a sweep did, for a person (text, or one HTML page)
"""
