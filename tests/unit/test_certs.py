"""kavka.certs: the local cluster's CA and server keystores complete a real TLS handshake (OpenSSL
through Python's ssl, in memory) with host name checking on, keys are 0600, and files are reused."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from kavka import certs


def _handshake(keystore: Path, ca: Path, server_hostname: str, client_keystore: Path | None = None) -> str:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(keystore)  # kavka's PEM keystore: key, leaf, CA in one file
    client = ssl.create_default_context(cafile=str(ca))  # CERT_REQUIRED, check_hostname
    if client_keystore is not None:  # mutual TLS, as on the controller listener of `cluster up --secure`
        server.verify_mode = ssl.CERT_REQUIRED
        server.load_verify_locations(cafile=str(ca))
        client.load_cert_chain(client_keystore)
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    for _ in range(10):
        done = 0
        for end in (c, s):
            try:
                end.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == 2:
            return c.getpeercert()["subject"][-1][0][1]
    raise AssertionError("handshake did not finish")


def test_ca_and_server_keystore_serve_tls_for_loopback(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask: files would be 0644 without write_private
    try:
        ca = certs.ensure_ca(tmp_path / "secure")
        ks = certs.ensure_server_keystore(ca, tmp_path / "secure" / "node1.pem", cn="kavka node 1")
    finally:
        os.umask(old)
    assert ca.key_path.stat().st_mode & 0o777 == 0o600
    assert ks.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "secure").stat().st_mode & 0o777 == 0o700
    assert _handshake(ks, ca.cert_path, "127.0.0.1") == "kavka node 1"
    assert _handshake(ks, ca.cert_path, "localhost") == "kavka node 1"
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(ks, ca.cert_path, "kafka.example.com")


def test_files_are_reused_and_another_ca_is_not_trusted(tmp_path: Path) -> None:
    ca = certs.ensure_ca(tmp_path / "a")
    ks = certs.ensure_server_keystore(ca, tmp_path / "a" / "node1.pem", cn="n1")
    before = (ca.cert_path.read_bytes(), ks.read_bytes())
    again = certs.ensure_ca(tmp_path / "a")
    assert (again.cert_path.read_bytes(), certs.ensure_server_keystore(again, ks, cn="n1").read_bytes()) == before
    other = certs.ensure_ca(tmp_path / "b")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(ks, other.cert_path, "127.0.0.1")


def test_write_private_narrows_an_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_text("old")
    f.chmod(0o644)
    certs.write_private(f, b"secret")
    assert f.stat().st_mode & 0o777 == 0o600 and f.read_bytes() == b"secret"


def test_node_certificates_serve_both_ends_of_mutual_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca = certs.ensure_ca(tmp_path / "secure")
    n1 = certs.ensure_server_keystore(ca, tmp_path / "secure" / "node1.pem", cn="kavka node 1")
    with monkeypatch.context() as m:  # a keystore made before nodes used their certificates as clients
        m.setattr(certs, "NODE_USAGES", (ExtendedKeyUsageOID.SERVER_AUTH,))
        old = certs.ensure_server_keystore(ca, tmp_path / "secure" / "node2.pem", cn="kavka node 2").read_bytes()
    with pytest.raises(ssl.SSLError):  # a server-only certificate cannot be a client's
        _handshake(n1, ca.cert_path, "127.0.0.1", client_keystore=tmp_path / "secure" / "node2.pem")
    n2 = certs.ensure_server_keystore(ca, tmp_path / "secure" / "node2.pem", cn="kavka node 2")
    assert n2.read_bytes() != old  # issued anew, by the same CA
    assert _handshake(n1, ca.cert_path, "127.0.0.1", client_keystore=n2) == "kavka node 1"
    leaf = x509.load_pem_x509_certificates(n2.read_bytes())[0]
    assert set(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == set(certs.NODE_USAGES)
