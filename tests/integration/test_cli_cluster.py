"""`kavka cluster up` and `kavka cluster status` as a user runs them: real processes, Ctrl-C to stop."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.broker_harness import free_port, free_port_block
from tests.wait import wait_until


def _free_block() -> int:
    """A base port with base..base+2, base+100..base+102 and base+300..base+302 (the brokers'
    Prometheus endpoints) all free on loopback."""
    return free_port_block((0, 1, 2, 100, 101, 102, 300, 301, 302))


def _cluster_up(tmp_path: Path, base: int, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`kavka cluster up ARGS` under tmp_path/c; returns once it printed the bootstrap servers."""
    up = subprocess.Popen(
        [sys.executable, "-m", "kavka", "cluster", "up", *args, "--data-dir", str(tmp_path / "c"), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(x) for x in up.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        wait_until(lambda: any(x.startswith("bootstrap servers:") for x in lines), timeout=90,
                   message="kavka cluster up to print the bootstrap servers")
    except AssertionError:
        up.kill()
        raise
    return up, lines


def test_cluster_up_status_and_ctrl_c(tmp_path: Path) -> None:
    base = _free_block()
    kavka = [sys.executable, "-m", "kavka"]
    web = free_port()
    up, lines = _cluster_up(tmp_path, base, "--nodes", "3", "--racks", "r1,r2", "--console-port", str(web))
    try:
        # The web console runs next to the cluster (kavka.console; its own tests are test_console*.py).
        overview = wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{web}/", timeout=10).read().decode(),
                              timeout=30, message="the console to answer")
        assert overview.count('<tr data-broker="') == 3
        # The brokers' metrics endpoints are on (base+300...): from its second sample the
        # console's Overview shows bytes per second, read from them.
        again = urllib.request.urlopen(f"http://127.0.0.1:{web}/", timeout=10).read().decode()
        assert "<th>bytes in/s</th>" in again and 'id="metrics-unreachable"' not in again, again
        [line] = [x for x in lines if x.startswith("bootstrap servers:")]
        bootstrap = line.split(":", 1)[1].strip()
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))

        out = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base + 1}", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [(b["id"], b["rack"]) for b in data["brokers"]] == [(1, "r1"), (2, "r2"), (3, "r1")]
        q = data["quorum"]
        assert q["leader_id"] in (1, 2, 3) and q["leader_epoch"] >= 1
        assert sorted(v["id"] for v in q["voters"]) == [1, 2, 3]
        assert [v["status"] for v in q["voters"]].count("Leader") == 1

        table = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", bootstrap],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0, table.stderr
        assert f"LeaderId: {q['leader_id']}" in table.stdout and "LogEndOffset" in table.stdout

        made = subprocess.run([*kavka, "topics", "create", "--bootstrap-server", f"127.0.0.1:{base + 2}",
                               "--topic", "spread", "--partitions", "3"], capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stdout + made.stderr
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(90)
    text = "".join(lines)
    assert code == 0, text
    with pytest.raises(OSError):  # the console stopped with the cluster
        socket.create_connection(("127.0.0.1", web), timeout=2).close()
    for i in (1, 2, 3):
        assert f"stopping node {i}" in text
        log = (tmp_path / "c" / f"node{i}" / "server.log").read_text()
        assert "shut down cleanly" in log, log[-2000:]
    # The same command brings the same cluster back (its id is kept).
    assert (tmp_path / "c" / "cluster.id").read_text().strip() in text


def test_cluster_up_with_separate_controllers(tmp_path: Path) -> None:
    base = _free_block()
    kavka = [sys.executable, "-m", "kavka"]
    up, lines = _cluster_up(tmp_path, base, "--nodes", "2", "--controllers", "1")
    try:
        assert any("1 controllers + 2 brokers" in x for x in lines), "".join(lines)
        assert any("node 1 (controller) ready" in x for x in lines), "".join(lines)
        out = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base}", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [b["id"] for b in data["brokers"]] == [2, 3]
        assert data["quorum"]["leader_id"] == 1 and [v["id"] for v in data["quorum"]["voters"]] == [1]
        # The broker-only nodes follow the metadata log as observers.
        wait_until(lambda: [o["id"] for o in json.loads(subprocess.run(
            [*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base}", "--json"],
            capture_output=True, text=True, timeout=60).stdout)["quorum"]["observers"]] == [2, 3], timeout=10)
        props = (tmp_path / "c" / "node1" / "server.properties").read_text()
        assert "process.roles=controller\n" in props
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(90)
    assert code == 0, "".join(lines)


def _free_block_secure() -> int:
    """A base port with the client (+0, +1), controller (+100, +101), internal (+200, +201) and
    metrics (+300, +301) ports free."""
    return free_port_block((0, 1, 100, 101, 200, 201, 300, 301))


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def _produce_consume(conf: dict[str, str], topic: str, values: list[bytes], *, before: int = 0) -> list[bytes]:
    """Produce `values`, then read the partition from offset 0: the `before` records already there and these."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({**conf, "acks": "all"})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "secure-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []

    def read_all() -> bool:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
        return len(got) >= before + len(values)

    try:
        wait_until(read_all, timeout=30, interval=0, message=f"{before + len(values)} records read back over SASL_SSL")
    finally:
        c.close()
    return got


def _refused(conf: dict[str, str], expect: str = "") -> list[str]:
    """The errors a confluent-kafka client gets asking for metadata with `conf`, once one contains
    `expect` (an AssertionError if metadata is served)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    admin = AdminClient({**conf, "error_cb": lambda e: errors.append(str(e)), "log_level": 0})
    try:
        admin.list_topics(timeout=6)
        raise AssertionError(f"metadata served to {sorted(conf)}")
    except KafkaException as e:
        errors.append(str(e))
    # error_cb is served by poll().
    wait_until(lambda: admin.poll(0.2) is not None and any(expect in e for e in errors), timeout=10,
               message=f"an error containing {expect!r}")
    return errors


def test_cluster_up_secure(tmp_path: Path) -> None:
    """`cluster up --secure`: confluent-kafka with exactly the printed (and written) config produces
    and consumes on RF=2, replicated over INTERNAL (SASL_SSL, SCRAM-SHA-512, the broker user made by
    storage format --add-scram) with the quorum on CONTROLLER (mutual TLS); the printed kavka command
    with --command-config works; no credentials, a wrong password and plaintext are refused, on the
    INTERNAL and CONTROLLER ports too; no password reaches a node's log; keys and configs are 0600;
    `--json` restarts the same secure cluster."""
    from confluent_kafka.admin import AdminClient, NewTopic

    base = _free_block_secure()
    up, lines = _cluster_up(tmp_path, base, "--nodes", "2", "--secure")
    secure = tmp_path / "c" / "secure"
    try:
        start = lines.index("confluent-kafka / librdkafka settings:\n")
        printed = dict(x.strip().split("=", 1) for x in lines[start + 1:start + 7])
        assert list(printed) == ["bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username",
                                 "sasl.password", "ssl.ca.location"]
        assert printed["bootstrap.servers"] == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        assert printed["security.protocol"] == "SASL_SSL" and printed["sasl.username"] == "admin"
        password = printed["sasl.password"]
        assert len(password) >= 24
        assert _properties(secure / "librdkafka.properties") == printed
        java = _properties(secure / "client.properties")
        assert java["ssl.truststore.type"] == "PEM" and java["ssl.truststore.location"] == printed["ssl.ca.location"]
        assert f'username="admin" password="{password}";' in java["sasl.jaas.config"]
        for f in ["ca.key", "node1.pem", "node2.pem", "admin.password", "broker.password", "client.properties",
                  "librdkafka.properties"]:
            assert (secure / f).stat().st_mode & 0o777 == 0o600, f
        broker_password = (secure / "broker.password").read_text().strip()
        assert len(broker_password) >= 24 and broker_password not in "".join(lines)
        for i in (1, 2):
            assert (tmp_path / "c" / f"node{i}" / "server.properties").stat().st_mode & 0o777 == 0o600
            props = _properties(tmp_path / "c" / f"node{i}" / "server.properties")
            assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SSL"
            assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"

        admin = AdminClient(printed)
        admin.create_topics([NewTopic("secured", num_partitions=1, replication_factor=2)])["secured"].result(30)
        values = [f"v{i}".encode() for i in range(50)]
        assert _produce_consume(printed, "secured", values) == values
        # Replicated over INTERNAL, the follower logged in with SCRAM-SHA-512: both replicas in sync.
        wait_until(lambda: len(admin.list_topics("secured", timeout=5).topics["secured"].partitions[0].isrs) == 2,
                   timeout=30, message="both replicas of secured-0 in the ISR")

        # kavka's own CLI, exactly as printed: the CLIENT listeners with client.properties.
        command = next(x for x in lines if x.startswith("kavka's own commands: ")).split(": ", 1)[1].split()
        assert command == ["kavka", "topics", "list", "--bootstrap-server", printed["bootstrap.servers"],
                           "--command-config", str(secure / "client.properties")]
        listed = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "secured" in listed.stdout.split(), listed.stdout + listed.stderr
        assert f"127.0.0.1:{base + 200}" not in "".join(lines)  # no unauthenticated address to point tools at

        if shutil.which("kcat"):  # the README's `kcat -F <data-dir>/secure/librdkafka.properties`
            listed = subprocess.run(["kcat", "-F", str(secure / "librdkafka.properties"), "-L", "-t", "secured"],
                                    capture_output=True, text=True, timeout=30)
            assert listed.returncode == 0 and 'topic "secured" with 1 partitions' in listed.stdout, listed.stderr

        no_credentials = {k: printed[k] for k in ("bootstrap.servers", "ssl.ca.location")} | {"security.protocol": "SSL"}
        refusals = [
            (no_credentials, ""),
            ({**printed, "sasl.password": "not-" + password}, "Invalid username or password"),
            ({"bootstrap.servers": printed["bootstrap.servers"]}, ""),  # plaintext
            # The cluster's own listeners: INTERNAL wants TLS and then the broker's SCRAM login ...
            ({"bootstrap.servers": f"127.0.0.1:{base + 200}"}, ""),
            ({**printed, "bootstrap.servers": f"127.0.0.1:{base + 200}"}, "Unsupported SASL mechanism"),
        ]
        # Each waits out a metadata timeout: side by side, not one after another.
        with ThreadPoolExecutor(len(refusals)) as pool:
            assert all(pool.map(lambda r: _refused(*r), refusals))
        # ... and CONTROLLER a client certificate the cluster's CA signed.
        ctx = ssl.create_default_context(cafile=printed["ssl.ca.location"])
        with socket.create_connection(("127.0.0.1", base + 100), timeout=10) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    # TLS 1.3: the server refuses the missing certificate after the client's handshake;
                    # a server that accepted it would wait for a request, and this read time out.
                    assert tls.recv(1024) == b""
            except (ssl.SSLError, ConnectionResetError):
                pass
        wait_until(lambda: "PEER_DID_NOT_RETURN_A_CERTIFICATE" in (tmp_path / "c" / "node1" / "server.log").read_text(),
                   timeout=10, message="node 1 refuses a controller-listener client without a certificate")
        wait_until(lambda: "a plaintext client?" in (tmp_path / "c" / "node1" / "server.log").read_text()
                   + (tmp_path / "c" / "node2" / "server.log").read_text(),
                   timeout=20, message="the broker's log line for the plaintext client")
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(90)
    assert code == 0, "".join(lines)
    for i in (1, 2):
        log = (tmp_path / "c" / f"node{i}" / "server.log").read_text()
        assert "shut down cleanly" in log, log[-2000:]
        assert password not in log and broker_password not in log
        # The brokers' own logins all succeeded (the refusals above are the test's clients).
        assert not [x for x in log.splitlines() if "failed SASL authentication" in x and "(user 'broker')" in x]

    # Again, --json: the same cluster, CA and password, and the config works as given.
    again = subprocess.Popen(
        [sys.executable, "-m", "kavka", "cluster", "up", "--secure", "--json", "--nodes", "2",
         "--data-dir", str(tmp_path / "c"), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out: list[str] = []
    threading.Thread(target=lambda: [out.append(x) for x in again.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        data = json.loads(wait_until(lambda: out[:1], timeout=90, message="the JSON line of cluster up --json")[0])
        sec = data["secure"]
        assert data["cluster_id"] == (tmp_path / "c" / "cluster.id").read_text().strip()
        assert sec["librdkafka_config"] == printed
        assert sec["client_properties"] == str(secure / "client.properties")
        assert sec["librdkafka_properties"] == str(secure / "librdkafka.properties")
        assert sec["ca_location"] == printed["ssl.ca.location"]
        assert sec["kavka_command"].split() == command and "plaintext_internal_bootstrap_servers" not in sec
        assert _produce_consume(sec["librdkafka_config"], "secured", [b"after restart"], before=50) == values + [b"after restart"]
    finally:
        again.send_signal(signal.SIGINT)
        code = again.wait(90)
        err = again.stderr.read() if again.stderr else ""
    assert code == 0, err
    for i in (1, 2):
        assert password not in (tmp_path / "c" / f"node{i}" / "server.log").read_text()
