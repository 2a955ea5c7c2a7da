"""The PDF reader.

- ``reader``: text per page from PDFium, pdfplumber or pdftotext, title, outline, OCR of scanned pages
- ``info``  : the document's Info dictionary and XMP packet as its metadata
"""
