"""Documents that hold documents: archives and e-mail, read member by member.

- ``nested`` : the one mechanism for embedded documents: detect, select a reader, read within the budget
- ``archive``: zip, tar, single-file gzip/bzip2/xz and 7z
- ``mail``   : RFC 822 / MIME e-mail
- ``outlook``: Outlook .msg messages
"""
