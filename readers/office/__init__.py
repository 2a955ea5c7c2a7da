"""Office documents: OOXML, ODF and the OLE2 formats of Office 97–2003.

- ``ooxml``      : DOCX, XLSX and PPTX, streamed
- ``odf``        : ODT, ODS and ODP, packaged and flat
- ``legacy``     : .doc, .xls and .ppt: which OLE2 document it is, and its reader
- ``worddoc``    : the piece table of a .doc's WordDocument stream
- ``pptdoc``     : the records of a .ppt's PowerPoint Document stream
- ``ole``        : opening an OLE2 compound file and reading its streams
- ``officecrypt``: files under Office's well-known default password, decrypted
- ``numfmt``     : spreadsheet number formats: a number as a person sees it
- ``flow``       : the line builder: paragraphs, rows and cells as lines, and their structure
- ``xmlsafe``    : the office readers' safety layer: capped zip members, a refusing XML parser
- ``docprops``   : document properties in XML: OOXML docProps, ODF meta.xml, XMP, EPUB OPF
"""
