"""JBOD against real broker processes and real clients: moves between log dirs (KIP-113),
kill -9 at every step of a move, failed disks (KIP-112), the move throttle, startup refusals (KIP-858)."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError as CkError
from confluent_kafka import TopicPartition

from kavka.client.admin import AdminClient
from kavka.client.errors import KafkaError
from kavka.storage.meta_properties import read_meta_properties, write_meta_properties
from tests.broker_harness import KAVKA, BrokerProcess
from tests.integration.helpers import (
    ck_admin,
    ck_consumer,
    ck_create_topic,
    ck_producer,
    ck_read_to_end,
)
from tests.wait import wait_until

STORAGE_ERROR = 56
LEADER_NOT_AVAILABLE = 5


def placement(b: BrokerProcess, topic: str) -> dict[int, tuple[str, bool]]:
    """partition -> (log dir, is_future) from DescribeLogDirs; futures listed under their own key."""
    with AdminClient(b.bootstrap) as a:
        dirs = a.describe_log_dirs([b.node_id], [topic])[b.node_id]
    out: dict[int, tuple[str, bool]] = {}
    for d in dirs:
        for r in d.replicas:
            out[r.partition + (1000 if r.is_future else 0)] = (d.path, r.is_future)
    return out


def produce_acked(bootstrap: str, topic: str, n: int, *, partitions: int, size: int = 100, tag: str = "v") -> dict[int, list[tuple[int, bytes]]]:
    p = ck_producer(bootstrap, {"acks": "all", "enable.idempotence": True, "linger.ms": 20, "batch.size": 16384})
    acked: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(partitions)}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    for i in range(n):
        value = f"{tag}-{i}-".encode().ljust(size, b"x")
        p.produce(topic, value=value, partition=i % partitions, on_delivery=on_delivery)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return {k: sorted(v) for k, v in acked.items()}


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    got: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(partitions)}
    for r in ck_read_to_end(bootstrap, topic, list(range(partitions)), timeout=60):
        got[r.partition].append((r.offset, r.value))
    return got


def other_dir(b: BrokerProcess, path: str) -> str:
    return str(b.log_dirs[1] if path == str(b.log_dirs[0]) else b.log_dirs[0])


def special_dirs(b: BrokerProcess) -> list[str]:
    return sorted(p.name for d in b.log_dirs for p in d.iterdir() if p.name.endswith(("-future", "-delete")))


# ---------------------------------------------------------------- live moves under load


def test_move_every_partition_under_continuous_produce_and_consume(broker_factory, topic_name):
    b = broker_factory(log_dirs=2, overrides={"log.segment.bytes": "131072"}).start()
    parts = 4
    ck_create_topic(ck_admin(b.bootstrap), topic_name, parts)
    before = placement(b, topic_name)
    assert sorted({d for d, _ in before.values()}) == sorted(str(d) for d in b.log_dirs)
    prefill = produce_acked(b.bootstrap, topic_name, 8000, partitions=parts, size=500, tag="pre")
    # Slow the copy so the moves overlap plenty of produce and fetch traffic.
    with AdminClient(b.bootstrap) as a:
        a.incremental_alter_configs("broker", "1", set={"replica.alter.log.dirs.io.max.bytes.per.second": "2000000"})

    stop = threading.Event()
    acked: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(parts)}
    producer_errors: list[str] = []
    consumed: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(parts)}
    consumer_errors: list[str] = []

    def produce() -> None:
        p = ck_producer(b.bootstrap, {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384})

        def on_delivery(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                producer_errors.append(str(err))
            else:
                acked[msg.partition()].append((msg.offset(), msg.value()))

        i = 0
        while not stop.is_set() and i < 200_000:
            p.produce(topic_name, value=b"live-%d" % i, partition=i % parts, on_delivery=on_delivery)
            i += 1
            p.poll(0.002 if i % 10 == 0 else 0)
        assert p.flush(30) == 0

    def consume() -> None:
        c = ck_consumer(b.bootstrap, {"enable.partition.eof": False})
        c.assign([TopicPartition(topic_name, i, 0) for i in range(parts)])
        deadline = time.monotonic() + 120
        while not (stop.is_set() and done_consuming()) and time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is not None:
                    consumer_errors.append(str(m.error()))
                else:
                    consumed[m.partition()].append((m.offset(), m.value()))
        c.close()

    def done_consuming() -> bool:
        return all(len(consumed[i]) >= len(prefill[i]) + len(acked[i]) for i in range(parts))

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: sum(len(v) for v in acked.values()) > 500, 30, message="live traffic")
        moves = {(1, topic_name, p): other_dir(b, before[p][0]) for p in range(parts)}
        with AdminClient(b.bootstrap) as a:
            assert set(a.alter_replica_log_dirs(moves).values()) == {0}
        seen_future = wait_until(lambda: any(f for _, f in placement(b, topic_name).values()), 10, 0.02, "a future replica")
        assert seen_future

        def moved() -> bool:
            now = placement(b, topic_name)
            return all(now.get(p, ("", True))[0] == moves[(1, topic_name, p)] for p in range(parts)) and len(now) == parts

        wait_until(moved, 90, 0.1, "every partition in its new dir")
        count_at_swap = sum(len(v) for v in acked.values())
        wait_until(lambda: sum(len(v) for v in acked.values()) > count_at_swap + 300, 30, message="traffic after the swap")
    finally:
        stop.set()
        for t in threads:
            t.join(150)
    assert not producer_errors, producer_errors[:3]
    assert not consumer_errors, consumer_errors[:3]
    for i in range(parts):
        expected = prefill[i] + sorted(acked[i])
        # Offsets unchanged, nothing lost or duplicated: the consumer saw exactly the acked log.
        assert [o for o, _ in expected] == list(range(len(expected)))
        assert consumed[i] == expected, f"partition {i}: consumed {len(consumed[i])}, acked {len(expected)}"
    wait_until(lambda: special_dirs(b) == [], 20, message="-delete dirs removed")
    again = read_all(b.bootstrap, topic_name, parts)
    for i in range(parts):
        assert again[i] == prefill[i] + sorted(acked[i])
        assert (Path(moves[(1, topic_name, i)]) / f"{topic_name}-{i}").is_dir()
        assert not (Path(before[i][0]) / f"{topic_name}-{i}").exists()
    assert b.stop() == 0


# ---------------------------------------------------------------- kill -9 at every step


@pytest.mark.parametrize("step", ["future-created", "copying", "caught-up", "source-renamed", "future-promoted"])
def test_kill_at_each_step_of_a_move_recovers(broker_factory, topic_name, step):
    b = broker_factory(log_dirs=2, overrides={"log.segment.bytes": "65536", "kavka.test.fault.injection.enable": "true"})
    b.start(env={"KAVKA_TEST_CRASH_POINT": step})
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    acked = produce_acked(b.bootstrap, topic_name, 3000, partitions=1, size=200)
    src = placement(b, topic_name)[0][0]
    dest = other_dir(b, src)
    try:
        with AdminClient(b.bootstrap, timeout_s=5) as a:
            a.alter_replica_log_dirs({(1, topic_name, 0): dest})
    except Exception:  # the broker may die before it answers
        pass
    wait_until(lambda: not b.alive(), 20, message=f"the broker to kill itself at {step}")
    assert b.proc is not None and b.proc.returncode == -9
    src_p, dest_p = Path(src), Path(dest)
    names = {p.name for p in (*src_p.iterdir(), *dest_p.iterdir())}
    future = [n for n in names if n.endswith("-future")]
    delete = [n for n in names if n.endswith("-delete")]
    current_in_src = (src_p / f"{topic_name}-0").is_dir()
    current_in_dest = (dest_p / f"{topic_name}-0").is_dir()
    expected_layout = {
        "future-created": (True, False, 1, 0),
        "copying": (True, False, 1, 0),
        "caught-up": (True, False, 1, 0),
        "source-renamed": (False, False, 1, 1),
        "future-promoted": (False, True, 0, 1),
    }[step]
    assert (current_in_src, current_in_dest, len(future), len(delete)) == expected_layout, names

    b.start()  # no crash point now
    wait_until(lambda: placement(b, topic_name) == {0: (dest, False)}, 30, message="the move to finish")
    wait_until(lambda: special_dirs(b) == [], 20, message="no -future or -delete dirs")
    assert not (src_p / f"{topic_name}-0").exists()
    assert read_all(b.bootstrap, topic_name, 1) == acked
    more = produce_acked(b.bootstrap, topic_name, 10, partitions=1, tag="after")
    assert [o for o, _ in more[0]] == list(range(3000, 3010))
    assert b.stop() == 0


# ---------------------------------------------------------------- disk failures (KIP-112)


def test_injected_disk_failure_isolates_one_dir_then_all_dirs_stop_the_broker(broker_factory, topic_name, tmp_path):
    control = tmp_path / "failing-dirs"
    control.write_text("")
    b = broker_factory(log_dirs=2, overrides={"kavka.test.fault.injection.enable": "true"})
    b.start(env={"KAVKA_FAULT_INJECTION_FILE": str(control)})
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    where = placement(b, topic_name)
    assert where == {0: (str(b.log_dirs[0]), False), 1: (str(b.log_dirs[1]), False)}
    acked = produce_acked(b.bootstrap, topic_name, 200, partitions=2)

    control.write_text(f"{b.log_dirs[1]}\n")
    p = ck_producer(b.bootstrap, {"acks": "all", "retries": 0, "message.timeout.ms": 5000})
    results: list[tuple[int, int]] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        results.append((msg.partition(), err.code() if err else 0))

    late_acks = 0  # acked before the broker noticed the control file (it looks every 20 ms)

    def produce_to(partition: int) -> int:
        nonlocal late_acks
        results.clear()
        p.produce(topic_name, value=b"after-failure", partition=partition, on_delivery=on_delivery)
        assert p.flush(20) == 0
        late_acks += results[0][1] == 0
        return results[0][1]

    # The write that meets the EIO answers KAFKA_STORAGE_ERROR.
    wait_until(lambda: produce_to(1) != 0, 10, message="an error from the failed dir")
    wait_until(lambda: "is offline" in b.log_text(), 5, message="the failure logged")
    # KIP-858: the heartbeat tells the controller, which takes the partition's leadership away; with
    # no other replica it is offline (leader -1, its last ISR member kept), as in Kafka's KRaft mode.
    wait_until(
        lambda: ck_admin(b.bootstrap).list_topics(topic_name, timeout=5).topics[topic_name].partitions[1].leader == -1,
        10,
        message="the failed dir's partition without a leader",
    )
    assert produce_to(1) != 0
    # The healthy dir keeps serving real clients, with no pause.
    more = produce_acked(b.bootstrap, topic_name, 100, partitions=1, tag="healthy")
    assert read_all(b.bootstrap, topic_name, 1)[0] == acked[0] + more[0]
    # Reads find no leader either (librdkafka retries a fetch's error silently, so ask ListOffsets).
    with AdminClient(b.bootstrap) as a, pytest.raises(KafkaError) as info:
        a.list_offsets({(topic_name, 1): "latest"})
    assert info.value.code == LEADER_NOT_AVAILABLE
    with AdminClient(b.bootstrap) as a:
        dirs = {d.path: d for d in a.describe_log_dirs([1])[1]}
    assert dirs[str(b.log_dirs[1])].error_code == STORAGE_ERROR and dirs[str(b.log_dirs[1])].replicas == ()
    assert dirs[str(b.log_dirs[0])].error_code == 0
    with AdminClient(b.bootstrap) as a:
        refused = a.alter_replica_log_dirs({(1, topic_name, 0): str(b.log_dirs[1])})
        assert refused == {(1, topic_name, 0): STORAGE_ERROR}  # no moves onto a failed disk
        assert a.alter_replica_log_dirs({(1, topic_name, 0): "/not/a/log/dir"}) == {(1, topic_name, 0): 57}
    assert b.log_text().count("is offline") == 1, "the reason is logged once"
    assert "OfflineLogDirectoryCount=1" in b.log_text()
    assert b.alive()

    # Every dir failed: the broker shuts down.
    control.write_text(f"{b.log_dirs[0]}\n{b.log_dirs[1]}\n")
    p.produce(topic_name, value=b"x", partition=0)
    p.flush(10)
    wait_until(lambda: not b.alive(), 20, message="the broker to shut down")
    assert b.proc is not None and b.proc.returncode == 1
    wait_until(lambda: "shutting down:" in b.log_text(), 10, message="the reason in the broker log")

    # Disk repaired: after a restart every dir is online and the acked data is there.
    control.write_text("")
    b.start()
    with AdminClient(b.bootstrap) as a:
        assert [d.error_code for d in a.describe_log_dirs([1])[1]] == [0, 0]
    got = read_all(b.bootstrap, topic_name, 2)
    assert got[0] == acked[0] + more[0]
    assert got[1] == acked[1] + [(len(acked[1]) + i, b"after-failure") for i in range(late_acks)]
    assert b.stop() == 0


def test_a_dir_unreadable_at_start_is_offline_and_the_others_serve(broker_factory, topic_name):
    b = broker_factory(log_dirs=2)
    b.format()
    broken = b.log_dirs[1]
    shutil.rmtree(broken)
    broken.write_text("not a directory any more")  # reads of broken/meta.properties fail: ENOTDIR
    b.start()
    assert "is offline" in b.log_text() and str(broken) in b.log_text()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    assert {d for d, _ in placement(b, topic_name).values()} == {str(b.log_dirs[0])}
    acked = produce_acked(b.bootstrap, topic_name, 100, partitions=2)
    assert read_all(b.bootstrap, topic_name, 2) == acked
    with AdminClient(b.bootstrap) as a:
        assert [d.error_code for d in a.describe_log_dirs([1])[1]] == [0, STORAGE_ERROR]
    assert b.stop() == 0


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, timeout=10)
    return res.returncode == 0


def test_a_full_filesystem_takes_only_its_dir_offline(broker_factory, topic_name, tmp_path):
    """A real failure: one log dir is a 2 MiB tmpfs that fills up (ENOSPC)."""
    b = broker_factory(log_dirs=2, overrides={"log.index.size.max.bytes": "65536"})
    small = b.log_dirs[1]
    if not _mount_tmpfs(small, "2m"):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)")
    try:
        b.start()
        # The size strategy keeps new replicas off the nearly full 2 MiB disk, so
        # ask for partition 1 there before it exists: REPLICA_NOT_AVAILABLE, remembered.
        with AdminClient(b.bootstrap) as a:
            assert a.alter_replica_log_dirs({(1, topic_name, 1): str(small)}) == {(1, topic_name, 1): 9}
        ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
        assert placement(b, topic_name) == {0: (str(b.log_dirs[0]), False), 1: (str(small), False)}
        p = ck_producer(b.bootstrap, {"acks": "all", "retries": 0, "message.timeout.ms": 5000, "linger.ms": 0})
        codes: list[int] = []
        acked_small = 0

        def on_delivery(err, msg) -> None:  # noqa: ANN001
            nonlocal acked_small
            codes.append(err.code() if err else 0)
            acked_small += 0 if err else 1

        for i in range(200):  # 200 x 20 KB = 4 MB > 2 MiB
            p.produce(topic_name, value=b"%d" % i + b"z" * 20000, partition=1, on_delivery=on_delivery)
            p.flush(10)
            if codes and codes[-1] != 0:
                break
        assert codes[-1] == CkError.KAFKA_STORAGE_ERROR, codes[-5:]
        assert 0 < acked_small < 200
        wait_until(lambda: "is offline" in b.log_text(), 10, message="the failure in the broker log")
        assert "No space left on device" in b.log_text()
        more = produce_acked(b.bootstrap, topic_name, 300, partitions=1, tag="healthy")
        assert read_all(b.bootstrap, topic_name, 1)[0] == more[0]
        with AdminClient(b.bootstrap) as a:
            dirs = {d.path: d.error_code for d in a.describe_log_dirs([1])[1]}
        assert dirs == {str(b.log_dirs[0]): 0, str(small): STORAGE_ERROR}
        assert b.alive()
        assert b.stop() == 0
    finally:
        b.kill()
        subprocess.run(["umount", "-l", str(small)], capture_output=True, timeout=10)


# ---------------------------------------------------------------- throttle


def test_throttle_holds_the_move_rate(broker_factory, topic_name):
    rate = 1_000_000
    b = broker_factory(log_dirs=2, overrides={"log.segment.bytes": "1048576"}).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    produce_acked(b.bootstrap, topic_name, 4000, partitions=1, size=1000)
    src = placement(b, topic_name)[0][0]
    with AdminClient(b.bootstrap) as a:
        a.incremental_alter_configs("broker", "1", set={"replica.alter.log.dirs.io.max.bytes.per.second": str(rate)})
        started = time.monotonic()
        assert a.alter_replica_log_dirs({(1, topic_name, 0): other_dir(b, src)}) == {(1, topic_name, 0): 0}
    wait_until(lambda: placement(b, topic_name) == {0: (other_dir(b, src), False)}, 60, 0.05, "the move")
    wall = time.monotonic() - started
    m = wait_until(
        lambda: re.search(r"moved \S+ to \S+: (\d+) bytes copied in ([\d.]+)s \((\d+) bytes/s\)", b.log_text()),
        10,
        message="the mover's report in the broker log",
    )
    moved, seconds, measured = int(m.group(1)), float(m.group(2)), int(m.group(3))
    assert moved > 4_000_000
    # The limit is an upper bound; a loaded machine may well copy slower.
    assert measured <= 1.15 * rate, f"{measured} bytes/s against {rate}"
    # Seen from outside too: the move cannot have been faster than the limit allows.
    assert wall >= 0.85 * moved / rate and seconds <= wall
    assert b.stop() == 0


# ---------------------------------------------------------------- startup refusals (KIP-858)


def _refused(b: BrokerProcess) -> str:
    res = subprocess.run([*KAVKA, "server", "start", "--config", str(b.config_file)], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    return res.stdout + res.stderr


def _edit_meta(d: Path, **changes: object) -> None:
    import dataclasses

    write_meta_properties(d, dataclasses.replace(read_meta_properties(d), **changes))


def test_dirs_of_different_clusters_are_refused(broker_factory):
    b = broker_factory(log_dirs=2)
    b.format()
    _edit_meta(b.log_dirs[1], cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    out = _refused(b)
    assert "different clusters" in out and str(b.log_dirs[1]) in out and "AAAAAAAAAAAAAAAAAAAAAA" in out


def test_dirs_of_another_node_are_refused(broker_factory):
    b = broker_factory(log_dirs=2)
    b.format()
    _edit_meta(b.log_dirs[1], node_id=7)
    out = _refused(b)
    assert f"log dir {b.log_dirs[1]}" in out and "node.id=7" in out


def test_dirs_sharing_a_directory_id_are_refused(broker_factory):
    b = broker_factory(log_dirs=2)
    b.format()
    _edit_meta(b.log_dirs[1], directory_id=read_meta_properties(b.log_dirs[0]).directory_id)
    out = _refused(b)
    assert "share directory.id" in out and str(b.log_dirs[0]) in out and str(b.log_dirs[1]) in out


def test_an_unformatted_dir_among_formatted_ones_is_refused(broker_factory):
    b = broker_factory(log_dirs=2)
    b.format()
    (b.log_dirs[1] / "meta.properties").unlink()
    out = _refused(b)
    assert f"log dir {b.log_dirs[1]} is not formatted" in out


def test_a_corrupt_meta_properties_is_refused(broker_factory):
    b = broker_factory(log_dirs=2)
    b.format()
    (b.log_dirs[1] / "meta.properties").write_text("version=9\nnode.id=1\n")
    out = _refused(b)
    assert str(b.log_dirs[1]) in out and "unsupported version 9" in out


@pytest.mark.parametrize(("key", "value"), [("log.dir.select.strategy", "biggest"), ("num.replica.alter.log.dirs.threads", "0")])
def test_a_bad_jbod_config_names_the_key(broker_factory, key, value):
    b = broker_factory(log_dirs=2)
    b.format()
    b.config_file.write_text(b.config_file.read_text() + f"{key}={value}\n")
    out = _refused(b)
    assert key in out and value in out


def test_a_dir_without_directory_id_gets_one_and_every_replica_has_one(broker_factory, topic_name):
    b = broker_factory(log_dirs=2)
    b.format()
    meta = read_meta_properties(b.log_dirs[1])
    _edit_meta(b.log_dirs[1], directory_id=None)
    b.start()
    new_id = read_meta_properties(b.log_dirs[1]).directory_id
    assert new_id and new_id != meta.directory_id
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    ids = {read_meta_properties(d).directory_id for d in b.log_dirs}
    # One line per log, or one per dir for the logs a metadata delta created together.
    logged = wait_until(
        lambda: set(
            re.findall(rf"created log for {topic_name}-\d in \S+ \(directory.id (\S+)\)", b.log_text())
            + re.findall(rf"created \d+ logs? in \S+ \(directory.id (\S+)\): [^\n]*\b{topic_name}-\d", b.log_text())
        ) == ids,
        10,
        message="both directory ids in the broker log",
    )
    assert logged
    assert b.stop() == 0
