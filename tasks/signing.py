"""Detached Ed25519 signatures over the exact bytes of a manifest.

All cryptography is done by the ``cryptography`` library.  The files involved:

* private key: PEM, PKCS#8, unencrypted, written with mode 0600 by :func:`keygen`;
* public key: one line ``ed25519 <base64 of the raw 32-byte key> <comment>``;
* signature: ``<manifest>.sig`` next to the manifest, the base64 of the 64-byte signature
  and a newline, written atomically by :func:`sign`;
* trusted keys: one public-key line per key, ``#`` comments and blank lines allowed.  Its
  location is ``$BASTION_TRUSTED_KEYS`` when set and non-empty, else
  ``/etc/bastion/trusted_keys`` (:func:`default_trusted_keys`).

:func:`verify` checks the manifest's bytes against every trusted key and names the one that
signed it; every failure is a :class:`SignatureError` with a one-line message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from bastion.errors import SignatureError

# ``cryptography`` is imported where a key or signature is handled: most runs verify nothing,
# and the import costs ~11 ms of every run's start (SignatureError is caught everywhere).
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                                   Ed25519PublicKey)

DEFAULT_TRUSTED_KEYS = Path("/etc/bastion/trusted_keys")
TRUSTED_KEYS_ENV = "BASTION_TRUSTED_KEYS"
KEY_TYPE = "ed25519"
SIGNATURE_SUFFIX = ".sig"
_MAX_SIGNATURE_FILE = 4096
_MAX_KEYS_FILE = 1024 * 1024


def default_trusted_keys() -> Path:
    """The trusted-keys file: ``$BASTION_TRUSTED_KEYS`` if set and non-empty, else
    :data:`DEFAULT_TRUSTED_KEYS`."""
    env = os.environ.get(TRUSTED_KEYS_ENV)
    return Path(env) if env else DEFAULT_TRUSTED_KEYS


def signature_path(manifest_path: Path) -> Path:
    """Where the detached signature of ``manifest_path`` lives: ``<manifest>.sig``."""
    manifest_path = Path(manifest_path)
    return manifest_path.with_name(manifest_path.name + SIGNATURE_SUFFIX)


def fingerprint(raw_public_key: bytes) -> str:
    """``SHA256:<unpadded base64>`` of a raw 32-byte public key."""
    digest = hashlib.sha256(raw_public_key).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def keygen(private_path: Path, public_path: Path, comment: str | None = None) -> str:
    """Create a key pair; return the public-key line (also written to ``public_path``).

    The private key is PEM PKCS#8 with mode 0600.  Neither file may exist already.  The
    comment defaults to ``user@host``.  Raises :class:`SignatureError`.
    """
    private_path, public_path = Path(private_path), Path(public_path)
    if private_path.absolute() == public_path.absolute():
        raise SignatureError("the private and public key paths must differ")
    if comment is None:
        comment = _default_comment()
    if any(not c.isprintable() for c in comment):
        raise SignatureError("the key comment must be printable text on one line")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    line = f"{KEY_TYPE} {base64.b64encode(raw).decode('ascii')} {comment}".rstrip()
    created: list[Path] = []
    try:
        for path, data, mode in ((private_path, pem, 0o600),
                                 (public_path, (line + "\n").encode("utf-8"), 0o644)):
            _write_new(path, data, mode)
            created.append(path)
    except OSError as e:
        for path in created:
            path.unlink(missing_ok=True)
        what = "already exists" if isinstance(e, FileExistsError) else e.strerror
        raise SignatureError(f"cannot write key file {e.filename}: {what}") from None
    return line


def sign(manifest_path: Path, private_key_path: Path) -> Path:
    """Sign the manifest's exact bytes; write ``<manifest>.sig`` atomically and return it.

    Raises :class:`SignatureError`.
    """
    manifest_path = Path(manifest_path)
    key = _load_private_key(Path(private_key_path))
    data = _read(manifest_path, "manifest")
    signature = key.sign(data)
    out = signature_path(manifest_path)
    try:
        _write_atomic(out, base64.b64encode(signature) + b"\n")
    except OSError as e:
        raise SignatureError(f"cannot write signature file {out}: {e.strerror}") from None
    return out


def verify(manifest_path: Path, trusted_keys: Path | None = None) -> str:
    """Check ``<manifest>.sig`` against the manifest's exact bytes and the trusted keys.

    Returns the signing key's ``comment (SHA256:fingerprint)`` (just the fingerprint when
    the key line has no comment).  ``trusted_keys`` defaults to
    :func:`default_trusted_keys`.  Raises :class:`SignatureError`.
    """
    manifest_path = Path(manifest_path)
    return verify_data(_read(manifest_path, "manifest"), signature_path(manifest_path),
                       trusted_keys)


def verify_data(data: bytes, sig_path: Path, trusted_keys: Path | None = None) -> str:
    """:func:`verify` for manifest bytes already read, so a caller can verify and then parse
    the very same bytes (no window for the file to change in between)."""
    from cryptography.exceptions import InvalidSignature

    signature = _load_signature(Path(sig_path))
    keys_path = Path(trusted_keys) if trusted_keys is not None else default_trusted_keys()
    keys = _load_trusted_keys(keys_path)
    for key, name in keys:
        try:
            key.verify(signature, data)
        except InvalidSignature:
            continue
        return name
    raise SignatureError(
        f"signature {sig_path} is not valid under any of the {len(keys)} trusted key(s) in "
        f"{keys_path} (the manifest was changed, or signed by an untrusted key)"
    )


def _default_comment() -> str:
    import getpass  # imported here: only keygen names a user and a host
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "bastion"
    return f"{user}@{socket.gethostname()}"


def _read(path: Path, what: str, limit: int | None = None) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read() if limit is None else f.read(limit + 1)
    except FileNotFoundError:
        raise SignatureError(f"{what} {path} does not exist") from None
    except OSError as e:
        raise SignatureError(f"cannot read {what} {path}: {e.strerror}") from None


def _load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = _read(path, "private key file")
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        raise SignatureError(f"private key file {path} is encrypted (not supported)") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SignatureError(f"private key file {path} is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"private key file {path} is not an Ed25519 key")
    return key


def _load_signature(path: Path) -> bytes:
    raw = _read(path, "signature file", _MAX_SIGNATURE_FILE)
    if len(raw) > _MAX_SIGNATURE_FILE:
        raise SignatureError(f"malformed signature file {path}: too large")
    if not raw.strip():
        raise SignatureError(f"malformed signature file {path}: empty")
    try:
        signature = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"malformed signature file {path}: not base64") from None
    if len(signature) != 64:
        raise SignatureError(
            f"malformed signature file {path}: {len(signature)} bytes, expected 64")
    return signature


def _load_trusted_keys(path: Path) -> list[tuple[Ed25519PublicKey, str]]:
    """The keys of a trusted-keys file, each with its description for :func:`verify`."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = _read(path, "trusted-keys file", _MAX_KEYS_FILE)
    if len(raw) > _MAX_KEYS_FILE:
        raise SignatureError(f"trusted-keys file {path} is over 1 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SignatureError(f"trusted-keys file {path} is not UTF-8 text") from None
    keys: list[tuple[Ed25519PublicKey, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(maxsplit=2)
        problem = None
        if fields[0] != KEY_TYPE:
            problem = f"key type {fields[0]!r}, expected {KEY_TYPE!r}"
        elif len(fields) < 2:
            problem = "no key after the key type"
        else:
            try:
                raw_key = base64.b64decode(fields[1], validate=True)
            except (binascii.Error, ValueError):
                raw_key = b""
            if len(raw_key) != 32:
                problem = "the key is not the base64 of 32 bytes"
        if problem is not None:
            raise SignatureError(f"{path}:{lineno}: malformed trusted key line: {problem}")
        comment = fields[2] if len(fields) > 2 else ""
        fp = fingerprint(raw_key)
        keys.append((Ed25519PublicKey.from_public_bytes(raw_key),
                     f"{comment} ({fp})" if comment else fp))
    if not keys:
        raise SignatureError(f"trusted-keys file {path} contains no keys")
    return keys


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (never overwriting) with ``mode``, write ``data`` and fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, mode)  # the umask may have narrowed it
        f.write(data)
        f.flush()
        os.fsync(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, 0o644)
            f.write(data)
            f.flush()
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
