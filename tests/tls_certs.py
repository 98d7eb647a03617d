"""Test certificates made with cryptography: a CA, server and client certificates signed by it,
written as PEM or PKCS12 files. Small EC keys keep generation fast (a few ms each)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)


def _name(cn: str, ou: str | None = None, o: str = "kavka-test") -> x509.Name:
    """The conventional order (O, OU, CN): its RFC 2253 string, as Kafka prints it, is CN=..,OU=..,O=.."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Identity:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def key_pem(self, password: str | None = None) -> bytes:
        enc = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class CA:
    identity: Identity

    @classmethod
    def create(cls, cn: str = "kavka test CA") -> CA:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(cn)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - datetime.timedelta(days=1))
            .not_valid_after(NOW + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(Identity(key, cert))

    def pem(self) -> bytes:
        return self.identity.cert_pem()

    def issue(
        self, cn: str, *, ou: str | None = None, server: bool = True, expired: bool = False, client_too: bool = False,
    ) -> Identity:
        """A certificate signed by this CA; `client_too` adds the client-authentication usage to a
        server certificate (a broker's, presented on its own connections to other nodes)."""
        key = ec.generate_private_key(ec.SECP256R1())
        start, end = (NOW - datetime.timedelta(days=10), NOW - datetime.timedelta(days=1)) if expired else (
            NOW - datetime.timedelta(days=1), NOW + datetime.timedelta(days=30))
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.identity.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server and client_too
                    else [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.identity.key.public_key()), critical=False
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        return Identity(key, b.sign(self.identity.key, hashes.SHA256()))


def write_pem_keystore(path: Path, ident: Identity, *, key_password: str | None = None) -> Path:
    """Kafka's PEM keystore file: the private key, then the certificate chain."""
    path.write_bytes(ident.key_pem(key_password) + ident.cert_pem())
    return path


def write_pkcs12(path: Path, ident: Identity | None, password: str, *, cas: list[x509.Certificate] = ()) -> Path:  # type: ignore[assignment]
    data = pkcs12.serialize_key_and_certificates(
        b"kavka",
        ident.key if ident else None,
        ident.cert if ident else None,
        list(cas) or None,
        serialization.BestAvailableEncryption(password.encode()),
    )
    path.write_bytes(data)
    return path
