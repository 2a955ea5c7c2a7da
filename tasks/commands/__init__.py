"""The commands besides the stages: one document's text, two outputs compared, an output reported, read back and searched.

- ``entry``  : the console script's entry: ``bastion text`` dispatched before the pipeline loads
- ``onefile``: ``bastion text FILE…``: each file's text through the sweep's sandboxed worker
- ``compare``: ``bastion compare``: do two outputs hold the same records and texts?
- ``report`` : ``bastion report``: what a sweep did, for a person (text, or one HTML page)
- ``stored`` : an output's records and texts as the reading commands see them: a walked file by the path a person gives
- ``show``   : ``bastion show``: the stored text of walked files
- ``grep``   : ``bastion grep``: a regular expression over the stored texts, grep's output and exit codes
- ``search`` : ``bastion search``: the full-text index queried, ranked files with snippets
- ``stdout`` : what a command prints: escaped on a terminal, quiet when the pipe closes
"""
