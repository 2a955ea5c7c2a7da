"""The PDF reader.

- ``reader``     : the reader: engines tried in turn, each page judged, OCR where needed, the result
- ``engines``    : PDFium, pdfplumber and pdftotext as one protocol of page events; their versions; ``bastion pdftext``
- ``pdfium``     : PDFium through its C API: per-character calls, glued words' gaps, rotated text
- ``text``       : a page's text: cleaned, C1 bytes repaired, how printable, what kind of page
- ``outline``    : the outline (bookmarks) as title, page and level entries
- ``pages``      : the typed values: an engine's meta and page events, outline entries, each page's provenance
- ``annotations``: a page's annotation notes and form field values as lines of text
- ``ocrpass``    : the pages to OCR rendered, read in their language, turned when on their side
- ``info``       : the document's Info dictionary and XMP packet as its metadata
"""
