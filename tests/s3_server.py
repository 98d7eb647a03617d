"""A real S3-protocol server on loopback for tests: moto's server mode as a subprocess, behind an
optional fault-injecting HTTP proxy (a thread in the test process).

The proxy forwards every request to moto unchanged, except that it answers some with HTTP 500
InternalError *instead of* forwarding them: ``fail_every`` = N fails every Nth PUT/POST (uploads,
multipart parts) and every Nth GET (reads). botocore's retries must hide these from kavka's S3
backend; ``injected`` counts them so a test can prove faults really happened.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.broker_harness import free_port

_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
          b"<Message>injected by the test proxy</Message></Error>")


class MotoServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/moto-api/")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto server did not answer within the deadline")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class FaultProxy:
    def __init__(self, upstream_port: int, *, fail_every: int = 0) -> None:
        self.upstream_port = upstream_port
        self.fail_every = fail_every
        self.seen: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.paths: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _handle(self) -> None:
                body = self._body()
                kind = "read" if self.command in ("GET", "HEAD") else "write"
                if self.command in ("PUT", "POST", "GET"):
                    with proxy._lock:
                        proxy.seen[kind] += 1
                        proxy.paths.append(f"{self.command} {self.path}")
                        fail = bool(proxy.fail_every) and proxy.seen[kind] % proxy.fail_every == 0
                        if fail:
                            proxy.injected[kind] += 1
                    if fail:
                        self.send_response(500)
                        self.send_header("Content-Type", "application/xml")
                        self.send_header("Content-Length", str(len(_ERROR)))
                        self.end_headers()
                        self.wfile.write(_ERROR)
                        return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("transfer-encoding", "content-length",
                                                "connection")}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "content-length", "connection",
                                             "server", "date"):
                            self.send_header(k, v)
                    if self.command != "HEAD":
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def aws_test_env() -> Iterator[None]:
    """Fake credentials for moto while the block runs; never real ones, restored after."""
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
