"""Certificates for a local secure cluster (`kavka cluster up --secure`): one CA, one node
certificate per node, written as PEM files with `cryptography`.

Layout under a directory (the cluster's `<data-dir>/secure/`):

    ca.pem          the CA certificate: clients trust it (ssl.ca.location, ssl.truststore.location)
    ca.key          the CA's private key, 0600 (kept so that a node added later can be signed)
    node<i>.pem     node i's PEM keystore as kavka and Kafka read it (ssl.keystore.type=PEM): the
                    unencrypted private key, then its certificate and the CA's (leaf first), 0600.
                    The certificate serves the node's listeners and is its client certificate on its
                    own connections to the other nodes (mutual TLS on the controller listener), so
                    its extended key usage is serverAuth and clientAuth.

Keys are EC P-256 (generated in milliseconds; every client kavka is tested with accepts them). A
server certificate names `localhost` and 127.0.0.1 (the cluster listens on loopback only), so
clients keep host name verification on (librdkafka's default `ssl.endpoint.identification.algorithm
=https`). Certificates are valid for `VALID_DAYS` from one day before they are made (clock skew).
Files holding keys are created 0600 before a byte is written, so a key is never readable by others
even for a moment. Existing files are reused, never overwritten: starting the cluster again keeps
its CA, so clients configured once keep working. The one exception: a node keystore whose
certificate lacks clientAuth (made before the cluster's own connections used TLS) is issued anew
by the same CA, which clients already trust.

Called from the CLI's thread before any node starts; no event loop.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365
ORGANIZATION = "kavka local cluster"


@dataclass(frozen=True, slots=True)
class LocalCa:
    cert_path: Path
    key_path: Path


def write_private(path: Path, data: bytes) -> Path:
    """Write `data` to a new or existing file that is 0600 from its creation (umask cannot widen it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT; narrow it too
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _validity() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(days=1), now + datetime.timedelta(days=VALID_DAYS)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def ensure_ca(directory: Path, *, cn: str = "kavka local CA") -> LocalCa:
    """The CA in `directory`: made the first time, read back afterwards."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = LocalCa(directory / "ca.pem", directory / "ca.key")
    if ca.cert_path.exists() and ca.key_path.exists():
        return ca
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity()
    name = _name(cn)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(ca.key_path, _key_pem(key))
    ca.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ca


NODE_USAGES = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)


def _has_node_usages(path: Path) -> bool:
    leaf = x509.load_pem_x509_certificates(path.read_bytes())[0]
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True  # no extended key usage: any use
    return all(u in usages for u in NODE_USAGES)


def ensure_server_keystore(ca: LocalCa, path: Path, *, cn: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Path:
    """A PEM keystore at `path` (key, leaf, CA) signed by `ca`, for `hosts`, usable as a server and a
    client certificate; made once, then reused (reissued if it lacks clientAuth)."""
    if path.exists() and _has_node_usages(path):
        return path
    ca_key = serialization.load_pem_private_key(ca.key_path.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_path.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    start, end = _validity()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(NODE_USAGES)), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    return write_private(path, _key_pem(key) + chain)
