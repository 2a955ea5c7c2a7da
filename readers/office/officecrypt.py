"""Office files under the well-known default password, decrypted with ``msoffcrypto-tool`` (MIT).

Excel protects a workbook that is only *write*-protected ("read-only recommended" or a locked
structure) by encrypting it with the built-in password ``VelvetSweatshop``: anyone can open it,
so its text is not secret.  :func:`decrypt_default` tries that one password on an encrypted
OOXML package (``EncryptedPackage`` in an OLE2 file: ECMA-376 standard or agile encryption) or a
legacy ``.xls``/``.doc``/``.ppt`` (RC4, RC4 CryptoAPI, XOR obfuscation) and returns the
decrypted file, or raises :class:`~bastion.readers.errors.EncryptedDocument` when the file needs a real
password.  No other password is ever tried.

The reader here takes ``application/x-ooxml-encrypted`` (before the OOXML reader in the
registry) and hands the decrypted package to the reader of its type at the same nesting depth.
"""

from __future__ import annotations

import io
from dataclasses import replace

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, EncryptedDocument

DEFAULT_PASSWORD = "VelvetSweatshop"
ENCRYPTED_OOXML = "application/x-ooxml-encrypted"


def decrypt_default(data: bytes, what: str = "document") -> bytes:
    """The decrypted bytes of an Office file encrypted with the default password."""
    try:
        import msoffcrypto
        from msoffcrypto import exceptions as mx
    except ImportError:  # the dependency is declared; a broken install is still a clear error
        raise EncryptedDocument(f"encrypted {what} (msoffcrypto-tool is not installed to try "
                                "the default password)") from None
    try:
        office = msoffcrypto.OfficeFile(io.BytesIO(data))
        if not office.is_encrypted():
            raise EncryptedDocument(f"{what} marked encrypted in a form msoffcrypto-tool does "
                                    "not know")
        from msoffcrypto.format.ooxml import OOXMLFile

        if isinstance(office, OOXMLFile):
            office.load_key(password=DEFAULT_PASSWORD, verify_password=True)
        else:
            office.load_key(password=DEFAULT_PASSWORD)
        out = io.BytesIO()
        office.decrypt(out)
    except EncryptedDocument:
        raise
    except (mx.InvalidKeyError, mx.DecryptionError) as e:
        raise EncryptedDocument(f"encrypted {what}: a password is needed ({e})") from None
    except (mx.FileFormatError, mx.ParseError, AssertionError, ValueError, KeyError,
            IndexError, OSError, TypeError, AttributeError) as e:
        raise EncryptedDocument(f"encrypted {what}: cannot be decrypted "
                                f"({type(e).__name__}: {e})") from None
    except Exception as e:  # noqa: BLE001 - msoffcrypto on hostile bytes: still "encrypted"
        raise EncryptedDocument(f"encrypted {what}: cannot be decrypted "
                                f"({type(e).__name__}: {e})") from None
    return out.getvalue()


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    from ..containers.nested import read_embedded

    state = ctx.state
    if state.decrypting:  # a decrypted package that is encrypted again
        raise EncryptedDocument("encrypted package inside an encrypted package")
    plain = decrypt_default(doc.data, "Office document")
    state.decrypting = True
    try:
        result = read_embedded(ctx, plain, doc.name, sink, deeper=False)
    except CapReached as cap:
        cap.extractor = f"{cap.extractor}+velvetsweatshop" if cap.extractor else None
        raise
    finally:
        state.decrypting = False
    return replace(result, extractor=f"{result.extractor}+velvetsweatshop",
                   warnings=(*result.warnings,
                             "decrypted with the default password VelvetSweatshop"),
                   details={**result.details, "default_password": True})


READER = Reader(
    name="officecrypt",
    version=2,  # 2: the decrypted package's metadata (ooxml 5)
    mimes=(ENCRYPTED_OOXML,),
    settings=("max_member_bytes", "max_xml_bytes"),
    read=read,
    libraries=("msoffcrypto-tool",),
)
