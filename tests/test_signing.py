"""bastion.tasks.signing: keygen / sign / verify round trip and every distinct refusal."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bastion.tasks.signing import (
    DEFAULT_TRUSTED_KEYS,
    SignatureError,
    default_trusted_keys,
    fingerprint,
    keygen,
    sign,
    signature_path,
    verify,
    verify_data,
)

MANIFEST = b"version: 1\nroots:\n  - {name: d, path: data}\n"


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A signed manifest: (manifest, private key, trusted-keys file)."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_bytes(MANIFEST)
    private, public = tmp_path / "key", tmp_path / "key.pub"
    keygen(private, public, comment="ops@example")
    sign(manifest, private)
    return manifest, private, public


def other_key_line(tmp_path: Path, name: str, comment: str = "other") -> str:
    return keygen(tmp_path / name, tmp_path / f"{name}.pub", comment=comment)


def test_keygen_files(tmp_path: Path) -> None:
    private, public = tmp_path / "k", tmp_path / "k.pub"
    line = keygen(private, public, comment="alice@host")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(private.read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_text() == line + "\n"
    kind, b64, comment = line.split(" ", 2)
    assert kind == "ed25519" and comment == "alice@host"
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    assert base64.b64decode(b64) == raw and len(raw) == 32


def test_keygen_default_comment(tmp_path: Path) -> None:
    line = keygen(tmp_path / "k", tmp_path / "k.pub")
    assert "@" in line.split(" ", 2)[2]


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    private, public = tmp_path / "k", tmp_path / "k.pub"
    private.write_text("precious")
    with pytest.raises(SignatureError, match="already exists"):
        keygen(private, public)
    assert private.read_text() == "precious" and not public.exists()
    private.unlink()
    public.write_text("precious")
    with pytest.raises(SignatureError, match="already exists"):
        keygen(private, public)
    assert public.read_text() == "precious" and not private.exists()
    with pytest.raises(SignatureError, match="must differ"):
        keygen(tmp_path / "same", tmp_path / "same")


def test_keygen_refuses_multiline_comment(tmp_path: Path) -> None:
    with pytest.raises(SignatureError, match="one line"):
        keygen(tmp_path / "k", tmp_path / "k.pub", comment="a\nb")


def test_round_trip(setup: tuple[Path, Path, Path]) -> None:
    manifest, _, public = setup
    sig = signature_path(manifest)
    assert sig == manifest.with_name("manifest.yaml.sig")
    text = sig.read_bytes()
    assert text.endswith(b"\n") and len(base64.b64decode(text.strip(), validate=True)) == 64
    assert stat.S_IMODE(sig.stat().st_mode) == 0o644
    raw = base64.b64decode(public.read_text().split()[1])
    assert verify(manifest, public) == f"ops@example ({fingerprint(raw)})"
    assert verify_data(MANIFEST, sig, public) == verify(manifest, public)


def test_sign_returns_path_and_replaces_atomically(setup: tuple[Path, Path, Path]) -> None:
    manifest, private, public = setup
    old = signature_path(manifest).read_bytes()
    manifest.write_bytes(MANIFEST + b"# changed\n")
    assert sign(manifest, private) == signature_path(manifest)
    assert signature_path(manifest).read_bytes() != old
    verify(manifest, public)
    assert sorted(p.name for p in manifest.parent.iterdir()) == \
        ["key", "key.pub", "manifest.yaml", "manifest.yaml.sig"]  # no temp file left


def test_tampered_byte(setup: tuple[Path, Path, Path]) -> None:
    manifest, _, public = setup
    data = bytearray(MANIFEST)
    data[12] ^= 0x01
    manifest.write_bytes(bytes(data))
    with pytest.raises(SignatureError, match="not valid under any of the 1 trusted key"):
        verify(manifest, public)


def test_tampered_signature(setup: tuple[Path, Path, Path]) -> None:
    manifest, _, public = setup
    sig = bytearray(base64.b64decode(signature_path(manifest).read_bytes()))
    sig[0] ^= 0x01
    signature_path(manifest).write_bytes(base64.b64encode(bytes(sig)) + b"\n")
    with pytest.raises(SignatureError, match="not valid under any"):
        verify(manifest, public)


def test_wrong_key(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, _ = setup
    trusted = tmp_path / "trusted"
    trusted.write_text(other_key_line(tmp_path, "other") + "\n")
    with pytest.raises(SignatureError, match="signed by an untrusted key"):
        verify(manifest, trusted)


def test_second_key_matches(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, public = setup
    trusted = tmp_path / "trusted"
    trusted.write_text(
        "# bastion trusted keys\n\n"
        + other_key_line(tmp_path, "other", "first") + "\n"
        + "   \n"
        + public.read_text()
    )
    assert verify(manifest, trusted).startswith("ops@example (SHA256:")


def test_key_line_without_comment(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, public = setup
    kind, b64, _ = public.read_text().split(" ", 2)
    trusted = tmp_path / "trusted"
    trusted.write_text(f"{kind} {b64}\n")
    assert verify(manifest, trusted) == fingerprint(base64.b64decode(b64))


def test_missing_signature(setup: tuple[Path, Path, Path]) -> None:
    manifest, _, public = setup
    signature_path(manifest).unlink()
    with pytest.raises(SignatureError, match=r"signature file .*manifest\.yaml\.sig does not exist"):
        verify(manifest, public)


@pytest.mark.parametrize("content,problem", [
    (b"", "empty"),
    (b" \n", "empty"),
    (b"not base64!!\n", "not base64"),
    (base64.b64encode(b"x" * 63) + b"\n", "63 bytes, expected 64"),
    (base64.b64encode(b"x" * 65), "65 bytes, expected 64"),
    (b"A" * 5000, "too large"),
])
def test_malformed_signature(setup: tuple[Path, Path, Path], content: bytes,
                             problem: str) -> None:
    manifest, _, public = setup
    signature_path(manifest).write_bytes(content)
    with pytest.raises(SignatureError, match="malformed signature file") as info:
        verify(manifest, public)
    assert problem in str(info.value)


def test_unreadable_signature(setup: tuple[Path, Path, Path]) -> None:
    manifest, _, public = setup
    sig = signature_path(manifest)
    sig.unlink()
    sig.mkdir()
    with pytest.raises(SignatureError, match="cannot read signature file"):
        verify(manifest, public)


def test_missing_trusted_keys(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, _ = setup
    with pytest.raises(SignatureError, match="trusted-keys file .*absent does not exist"):
        verify(manifest, tmp_path / "absent")


def test_unreadable_trusted_keys(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, _ = setup
    with pytest.raises(SignatureError, match="cannot read trusted-keys file .*Is a directory"):
        verify(manifest, tmp_path)  # a directory: unreadable even as root


def test_no_keys(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, _ = setup
    trusted = tmp_path / "trusted"
    trusted.write_text("# nobody yet\n\n")
    with pytest.raises(SignatureError, match="contains no keys"):
        verify(manifest, trusted)


@pytest.mark.parametrize("line,problem", [
    ("ssh-ed25519 AAAA x", "key type 'ssh-ed25519'"),
    ("ed25519", "no key after the key type"),
    ("ed25519 not-base64 x", "not the base64 of 32 bytes"),
    ("ed25519 " + base64.b64encode(b"x" * 31).decode() + " x", "not the base64 of 32 bytes"),
])
def test_malformed_key_line(setup: tuple[Path, Path, Path], tmp_path: Path, line: str,
                            problem: str) -> None:
    manifest, _, public = setup
    trusted = tmp_path / "trusted"
    trusted.write_text(public.read_text() + "# comment\n\n" + line + "\n")
    with pytest.raises(SignatureError) as info:
        verify(manifest, trusted)
    assert str(info.value).startswith(f"{trusted}:4: malformed trusted key line: ")
    assert problem in str(info.value)


def test_missing_manifest(tmp_path: Path, setup: tuple[Path, Path, Path]) -> None:
    _, private, public = setup
    with pytest.raises(SignatureError, match="manifest .* does not exist"):
        sign(tmp_path / "absent.yaml", private)
    with pytest.raises(SignatureError, match="manifest .* does not exist"):
        verify(tmp_path / "absent.yaml", public)


def test_sign_with_bad_private_key(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, public = setup
    with pytest.raises(SignatureError, match="private key file .* does not exist"):
        sign(manifest, tmp_path / "absent")
    with pytest.raises(SignatureError, match="is not a PEM private key"):
        sign(manifest, public)
    encrypted = tmp_path / "enc"
    encrypted.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw")))
    with pytest.raises(SignatureError, match="is encrypted"):
        sign(manifest, encrypted)


def test_messages_are_one_line(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    manifest, _, public = setup
    manifest.write_bytes(b"changed")
    with pytest.raises(SignatureError) as info:
        verify(manifest, public)
    assert "\n" not in str(info.value)


def test_default_trusted_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                              setup: tuple[Path, Path, Path]) -> None:
    monkeypatch.delenv("BASTION_TRUSTED_KEYS", raising=False)
    assert default_trusted_keys() == DEFAULT_TRUSTED_KEYS == Path("/etc/bastion/trusted_keys")
    monkeypatch.setenv("BASTION_TRUSTED_KEYS", "")
    assert default_trusted_keys() == DEFAULT_TRUSTED_KEYS
    manifest, _, public = setup
    monkeypatch.setenv("BASTION_TRUSTED_KEYS", str(public))
    assert default_trusted_keys() == public
    assert verify(manifest).startswith("ops@example")
