"""Structure as a second rendering: one typed event stream, the plain text and the Markdown.

- ``events``  : the typed structure events readers emit beside their text, and their recorded form
- ``markdown``: the Markdown rendering of the stream: CommonMark with GFM tables, escaped
- ``sink``    : the sink that keeps the plain text and renders the Markdown of the same stream
"""
