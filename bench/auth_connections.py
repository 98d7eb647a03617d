"""`python -m bench.auth_connections`: new connections per second, plaintext, TLS and SASL, one broker.

What a client pays, and what the broker pays, for each new connection: from this process, in a
loop, open a TCP connection, do the listener's handshake, send ApiVersions, read the answer, close.
Modes (one kavka broker with a listener for each):

- `plaintext`: ApiVersions only (the baseline);
- `tls`: a full TLS handshake (no session resumption, as librdkafka's new connections; TLS 1.3,
  an EC P-256 certificate from kavka.certs, verified with the CA), then ApiVersions;
- `sasl_plain`: SASL_PLAINTEXT, SaslHandshake v1 (PLAIN) + SaslAuthenticate v2, then ApiVersions;
- `sasl_ssl_plain`: the TLS handshake, then the same SASL exchange;
- `scram_sha_256` (`--scram`): SASL_PLAINTEXT with SCRAM-SHA-256 (RFC 5802/7677: client-first,
  server-first, client-final with the proof, server-final checked), the user made through
  AlterUserScramCredentials with `--scram-iterations` (Kafka's default 4096). It runs on a second
  broker, and is skipped with the broker's own startup message while kavka refuses
  SCRAM-SHA-256. The client derives its salted password with PBKDF2 on every connection, as Kafka's
  clients do, so the iteration count dominates the client's cost per connection; the broker keeps
  only StoredKey and ServerKey and spends a few HMACs per login, whatever the count.

The rounds alternate the order of the modes (a, b, c, then c, b, a, ...) so the machine's load
drifts onto all of them. Prints the median connections/s and broker CPU ms per connection of
each, and each mode's ratio to plaintext.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.raw_client import request_frame

from bench.servers import Broker, cpu_seconds, free_port, start_kavka, start_kavka_listeners
from kavka import certs
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.framing import read_response

USER, PASSWORD = "bench", "bench-secret-pw"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
MODES = ("plaintext", "tls", "sasl_plain", "sasl_ssl_plain")
SCRAM = "scram_sha_256"
_SIZE = struct.Struct(">i")


# ------------------------------------------------------------------ a SCRAM client (RFC 5802)


def scram_client_first(user: str, nonce: str) -> tuple[bytes, str]:
    """The client-first message (no channel binding: `n,,`) and its bare part."""
    bare = f"n={user},r={nonce}"
    return f"n,,{bare}".encode(), bare


def scram_client_final(client_first_bare: str, server_first: str, password: str, *,
                       digest: str = "sha256") -> tuple[bytes, bytes]:
    """The client-final message (with the proof) and the ServerSignature the server must send."""
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored_key, auth_message, digest).digest(), strict=True))
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    server_signature = hmac.new(server_key, auth_message, digest).digest()
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), server_signature


# ------------------------------------------------------------------ one connection


class Connection:
    def __init__(self, port: int, tls: ssl.SSLContext | None) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
        self.corr = 0

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    def call(self, key: ApiKey, version: int, **values: object) -> object:
        self.corr += 1
        self.sock.sendall(request_frame(key, version, correlation_id=self.corr, client_id="bench", **values))
        (size,) = _SIZE.unpack(self._exact(4))
        corr, resp = read_response(self._exact(size), api.response_schema(key, version),
                                   flexible_header=api.response_header_flexible(key, version))
        assert corr == self.corr
        return resp

    def authenticate(self, token: bytes) -> bytes:
        r = self.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token)
        if r.error_code != 0:  # type: ignore[attr-defined]
            raise RuntimeError(f"SaslAuthenticate: {r.error_code} {r.error_message}")  # type: ignore[attr-defined]
        return r.auth_bytes  # type: ignore[attr-defined]

    def sasl(self, mechanism: str) -> None:
        r = self.call(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
        if r.error_code != 0:  # type: ignore[attr-defined]
            raise RuntimeError(f"SaslHandshake {mechanism}: {r.error_code}")  # type: ignore[attr-defined]
        if mechanism == "PLAIN":
            self.authenticate(f"\0{USER}\0{PASSWORD}".encode())
            return
        first, bare = scram_client_first(USER, base64.b64encode(os.urandom(18)).decode())
        server_first = self.authenticate(first).decode()
        final, server_signature = scram_client_final(bare, server_first, PASSWORD)
        server_final = self.authenticate(final).decode()
        if server_final != "v=" + base64.b64encode(server_signature).decode():
            raise RuntimeError(f"SCRAM server-final does not prove the server knows the key: {server_final}")

    def api_versions(self) -> None:
        r = self.call(ApiKey.API_VERSIONS, 3, client_software_name="bench", client_software_version="1")
        if r.error_code != 0 or not r.api_keys:  # type: ignore[attr-defined]
            raise RuntimeError(f"ApiVersions: {r.error_code}")  # type: ignore[attr-defined]

    def close(self) -> None:
        self.sock.close()


def connector(port: int, tls: ssl.SSLContext | None, mechanism: str | None) -> Callable[[], None]:
    def once() -> None:
        c = Connection(port, tls)
        try:
            if mechanism:
                c.sasl(mechanism)
            c.api_versions()
        finally:
            c.close()

    return once


def measure(once: Callable[[], None], broker_pid: int, seconds: float) -> dict:
    once()  # warm: imports, the first handshake
    n, b0, t0 = 0, cpu_seconds(broker_pid), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        once()
        n += 1
    elapsed = time.perf_counter() - t0
    return {
        "connections": n,
        "connections_per_s": n / elapsed,
        "broker_cpu_ms_per_connection": (cpu_seconds(broker_pid) - b0) * 1000 / n,
        "client_ms_per_connection": elapsed * 1000 / n,
    }


# ------------------------------------------------------------------ brokers


def start_main(work: Path) -> tuple[Broker, dict[str, Callable[[], None]]]:
    ca = certs.ensure_ca(work / "certs")
    keystore = certs.ensure_server_keystore(ca, work / "certs" / "broker.pem", cn="bench broker")
    broker, ports = start_kavka_listeners(
        ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        lambda ports: {
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        },
        work=work,
    )
    tls = ssl.create_default_context(cafile=str(ca.cert_path))
    return broker, {
        "plaintext": connector(ports["PLAINTEXT"], None, None),
        "tls": connector(ports["SSL"], tls, None),
        "sasl_plain": connector(ports["SASL_PLAINTEXT"], None, "PLAIN"),
        "sasl_ssl_plain": connector(ports["SASL_SSL"], tls, "PLAIN"),
    }


def start_scram(work: Path, iterations: int) -> tuple[Broker | None, Callable[[], None] | str]:
    """A broker with SCRAM-SHA-256 on a SASL_PLAINTEXT listener and the user made, or the reason it
    could not be (kavka refusing the mechanism at startup: its own message)."""
    plain, sasl = free_port(), free_port()
    try:
        broker = start_kavka(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                # Kafka's broker needs a JAAS entry per SASL listener and mechanism; SCRAM's has no options.
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            },
            work=work,
            port=plain,
        )
    except (subprocess.CalledProcessError, RuntimeError, TimeoutError) as e:
        text = ((getattr(e, "stderr", b"") or b"").decode(errors="replace")
                + ((work / "broker.log").read_text(errors="replace") if (work / "broker.log").exists() else ""))
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        reason = next((x for x in lines if "invalid config" in x or "scram" in x.lower()), lines[-1] if lines else str(e))
        shutil.rmtree(work, ignore_errors=True)
        return None, f"skipped: the broker refused SCRAM-SHA-256 ({reason})"
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, iterations),
                                          PASSWORD.encode())
    try:
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(20)
    except Exception as e:  # noqa: BLE001 -- reported as the reason for the skip
        broker.stop()
        return None, f"skipped: AlterUserScramCredentials failed ({e})"
    once = connector(sasl, None, "SCRAM-SHA-256")
    deadline = time.monotonic() + 20  # the credential record reaches the broker's image
    while True:
        try:
            once()
            return broker, once
        except RuntimeError:
            if time.monotonic() > deadline:
                broker.stop()
                raise
            time.sleep(0.1)


# ------------------------------------------------------------------ the run


def run(*, rounds: int, seconds: float, scram: bool, iterations: int, log=print) -> dict:  # noqa: ANN001
    brokers: list[Broker] = []
    result: dict = {"rounds": rounds, "seconds": seconds, "runs": {}, "skipped": {}}
    work = Path(tempfile.mkdtemp(prefix="kavka-bench-conn-"))
    try:
        broker, loops = start_main(work)
        brokers.append(broker)
        pids = dict.fromkeys(loops, broker.proc.pid)
        if scram:
            (work / "scram").mkdir()
            sb, once_or_reason = start_scram(work / "scram", iterations)
            if sb is None:
                result["skipped"][SCRAM] = once_or_reason
                log(f"{SCRAM}: {once_or_reason}")
            else:
                brokers.append(sb)
                loops[SCRAM], pids[SCRAM] = once_or_reason, sb.proc.pid  # type: ignore[assignment]
        modes = list(loops)
        result["runs"] = {m: [] for m in modes}
        for i in range(rounds):
            for m in modes if i % 2 == 0 else modes[::-1]:
                log(f"round {i + 1}/{rounds}: {m}")
                result["runs"][m].append(measure(loops[m], pids[m], seconds))
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    result["median"] = {m: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for m, rs in result["runs"].items()}
    return result


def table(result: dict) -> str:
    med = result["median"]
    base = med["plaintext"]
    lines = ["| mode | connections/s | / plaintext | broker CPU ms per connection | / plaintext |",
             "|---|---:|---:|---:|---:|"]
    for m, r in med.items():
        lines.append(f"| {m} | {r['connections_per_s']:,.0f} | {r['connections_per_s'] / base['connections_per_s']:.2f} "
                     f"| {r['broker_cpu_ms_per_connection']:.2f} "
                     f"| {r['broker_cpu_ms_per_connection'] / base['broker_cpu_ms_per_connection']:.2f} |")
    for m, why in result["skipped"].items():
        lines.append(f"| {m} | {why} | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.auth_connections", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="runs per mode, alternating order (default 3)")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each run (default 5)")
    ap.add_argument("--scram", action="store_true", help="also SCRAM-SHA-256 (skipped while the broker refuses it)")
    ap.add_argument("--scram-iterations", type=int, default=4096)
    ap.add_argument("--smoke", action="store_true", help="short runs: checks the harness, figures mean nothing")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw runs and medians here")
    a = ap.parse_args(argv)
    rounds, seconds = (2, 0.3) if a.smoke else (a.rounds, a.seconds)
    result = run(rounds=rounds, seconds=seconds, scram=a.scram, iterations=a.scram_iterations,
                 log=lambda m: print(m, file=sys.stderr, flush=True))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, default=str))
    print(f"{rounds} alternating rounds of {seconds:g} s per mode, medians")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
