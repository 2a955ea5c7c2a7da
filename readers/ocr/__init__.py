"""Optical character recognition with tesseract.

- ``reader``: the image reader, and the OCR helper the PDF reader uses for scanned pages
- ``engine``: a warm tesseract through libtesseract's C API, loaded once per worker
- ``memo``  : what a worker's tesseract already read, so an image repeated in a run is read once
- ``packs`` : the installed language packs, their scripts and identities, and the conditions on them
- ``choose``: the language pack(s) that read a page, chosen per page or fixed by the manifest
"""
