"""The machine's own limits, measured in the same run as the brokers.

A broker cannot beat these: sendfile from a file to a loopback socket (the
fetch path's ceiling), a blocking TCP copy over loopback (any socket path),
writes with an fsync every MiB (durable produce), and CRC-32C over 1 MiB
buffers (what produce validation costs per byte).
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

import crc32c

MIB = 1 << 20


def _drain(conn: socket.socket, total: int) -> None:
    buf = bytearray(4 * MIB)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n


def _pair() -> tuple[socket.socket, socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    return a, b


def sendfile_gbps(total_mb: int = 512) -> float:
    with tempfile.NamedTemporaryFile() as f:
        chunk = os.urandom(MIB)
        for _ in range(64):
            f.write(chunk)
        f.flush()
        size = 64 * MIB
        a, b = _pair()
        total = total_mb * MIB
        reader = threading.Thread(target=_drain, args=(b, total))
        reader.start()
        t0 = time.perf_counter()
        sent = 0
        while sent < total:
            off = 0
            while off < size and sent < total:
                n = os.sendfile(a.fileno(), f.fileno(), off, min(size - off, total - sent))
                off += n
                sent += n
        reader.join(60)
        elapsed = time.perf_counter() - t0
        a.close()
        b.close()
    return total / elapsed / 1e9


def tcp_gbps(total_mb: int = 512) -> float:
    a, b = _pair()
    total = total_mb * MIB
    reader = threading.Thread(target=_drain, args=(b, total))
    reader.start()
    buf = os.urandom(MIB)
    t0 = time.perf_counter()
    for _ in range(total_mb):
        a.sendall(buf)
    reader.join(60)
    elapsed = time.perf_counter() - t0
    a.close()
    b.close()
    return total / elapsed / 1e9


def fsync_gbps(total_mb: int = 128, directory: str | None = None) -> float:
    buf = os.urandom(MIB)
    with tempfile.NamedTemporaryFile(dir=directory) as f:
        fd = f.fileno()
        t0 = time.perf_counter()
        for _ in range(total_mb):
            os.write(fd, buf)
            os.fsync(fd)
        elapsed = time.perf_counter() - t0
    return total_mb * MIB / elapsed / 1e9


def crc32c_gbps(total_mb: int = 1024) -> float:
    buf = os.urandom(MIB)
    t0 = time.perf_counter()
    for _ in range(total_mb):
        crc32c.crc32c(buf)
    return total_mb * MIB / (time.perf_counter() - t0) / 1e9


def measure(scale: float = 1.0) -> dict[str, float]:
    def mb(n: int) -> int:
        return max(8, int(n * scale))

    return {
        "sendfile_gbps": sendfile_gbps(mb(512)),
        "tcp_gbps": tcp_gbps(mb(512)),
        "fsync_1mib_gbps": fsync_gbps(mb(128)),
        "crc32c_gbps": crc32c_gbps(mb(1024)),
    }
