"""A real Apache Kafka broker for tests: the reference kavka's answers are compared with.

`KafkaReference(tmp_dir, overrides).start()` runs Apache Kafka (tests/java/versions.env's
KAFKA_VERSION, 4.4.0, from the jars scripts/java-deps.sh puts in .cache/java/kafka-<version>/) as
one KRaft node in combined mode (process.roles=broker,controller, a one-voter quorum), the way
bin/kafka-storage.sh and bin/kafka-server-start.sh run it: `kafka.tools.StorageTool format`, then
`kafka.Kafka server.properties`. Both listeners on free loopback ports, the log dir and the
server's output under `tmp_dir`. `start()` returns once the broker answers ApiVersions and a
Metadata naming itself (deadline-bound); `.bootstrap`, `.port` (so tests.raw_client's `raw_call`
takes it like a BrokerProcess), `.log_dirs`, `.cluster_id`, `.log_text()`; `.stop()` (SIGTERM,
then SIGKILL after a deadline) is safe to call twice, and the `kafka_reference` fixture
(tests/conftest.py, one per session and xdist worker) stops it on every path.

Kafka's settings for one node (internal topics with one replica, no initial rebalance delay) are
here; `overrides` adds or replaces server.properties keys. A missing jar directory fails with
scripts/java-deps.sh's instruction, as every test of Kafka's Java parts does (tests/java_deps.py).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
from pathlib import Path

from kavka.protocol.api import ApiKey
from tests.broker_harness import free_port
from tests.java_deps import KAFKA_VERSION, java, kafka_classpath
from tests.raw_client import RawClient

# A JVM that starts fast and stays small: C1 only, the serial collector, class data sharing.
JVM_FLAGS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-Djava.awt.headless=true")

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


class KafkaReference:
    def __init__(self, tmp_dir: Path, overrides: dict[str, str] | None = None, *,
                 version: str = KAFKA_VERSION, log_level: str = "INFO", jvm_flags: tuple[str, ...] = JVM_FLAGS,
                 node_id: int = 1, ports: tuple[int, int] | None = None, voters: str | None = None,
                 cluster_id: str | None = None) -> None:
        """One node by default; a node of a larger combined quorum (bench/servers.py's 3-node
        Kafka) takes its `node_id`, its (client, controller) `ports`, the quorum's `voters`
        (`id@host:port,...`) and the shared `cluster_id`. `jvm_flags` replaces the small test JVM
        (a benchmark runs Kafka's own default heap and collector)."""
        self.root = Path(tmp_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.version = version
        self.jvm_flags = jvm_flags
        self.node_id = node_id
        self.port, self.controller_port = ports or (free_port(), free_port())
        self.log_dirs = [self.root / "kafka-logs"]
        self.cluster_id = cluster_id or base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.partitions": "1",
            "log.retention.check.interval.ms": "500",  # as tests/broker_harness.py gives kavka
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(overrides or {})
        self.config_file = self.root / "server.properties"
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log4j_file = self.root / "log4j2.properties"
        self.log4j_file.write_text(_LOG4J2.format(level=log_level))
        self.output_file = self.root / "kafka.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main_class: str, *args: str) -> list[str]:
        return [java(), *self.jvm_flags, f"-Dlog4j2.configurationFile={self.log4j_file}",
                "-cp", kafka_classpath(self.version), main_class, *args]

    def format(self) -> None:
        res = subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",  # an id may start with "-"
                                        "-c", str(self.config_file)),
                             capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({res.returncode}):\n{res.stdout}{res.stderr}")

    def start(self, timeout: float = 90.0) -> KafkaReference:
        """Format (the first time), start, and wait until the broker answers; on any failure the
        process is killed and the error carries the end of its output."""
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def launch(self) -> None:
        """Format (the first time) and start the process without waiting: the nodes of a quorum
        are all launched before any can answer."""
        if not (self.log_dirs[0] / "meta.properties").exists():
            self.format()
        with open(self.output_file, "ab") as out:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(self.config_file)),
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if self._answers():
                    return
            except (OSError, ConnectionError) as e:
                last = e
            time.sleep(0.2)
        raise TimeoutError(f"Kafka did not answer within {timeout}s (last: {last!r}):\n{self.log_text()}")

    def _answers(self) -> bool:
        """ApiVersions, then a Metadata that lists this broker and its controller: Kafka opens
        its client listener only once the broker is unfenced, so this is the first moment
        CreateTopics can succeed."""
        with RawClient(self.port, timeout=5, client_id="kafka-reference") as c:
            if c.call(ApiKey.API_VERSIONS, 3, client_software_name="kavka-tests",
                      client_software_version="1").error_code != 0:
                return False
            md = c.call(ApiKey.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False)
            return any(b.node_id == self.node_id for b in md.brokers) and md.controller_id >= 0

    def log_text(self, lines: int = 200) -> str:
        try:
            text = self.output_file.read_text(errors="replace")
        except OSError:
            return ""
        return "".join(text.splitlines(keepends=True)[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (Kafka's clean shutdown), SIGKILL if it is not gone by `timeout`; the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> KafkaReference:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
