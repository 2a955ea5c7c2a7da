"""Text-like formats, and the one place that turns bytes into text.

- ``textcodec``: bytes to text: the encoding chosen once, for every reader that decodes bytes
- ``plaintext``: text/*, JSON, YAML, XML, source code
- ``delimited``: CSV and TSV
- ``markup``   : HTML and XHTML
- ``rtf``      : RTF
- ``rtfinfo``  : an RTF document's info group as its metadata
- ``epub``     : EPUB 2 and 3 through the HTML reader
- ``langid``   : the language of a text (py3langid): every document's, and a page's for OCR
- ``langmodel``: py3langid's model unpacked once into the user's cache, mapped by every worker
"""
