"""Shared helpers for the real-client integration tests.

What they own: the sample records every client produces (keys, headers,
explicit timestamps, null keys/values), a normalised `Rec` to compare what
came back with what was sent, and the confluent-kafka plumbing several test
files share (admin client, topic creation that waits for a leader, a
consume-to-end reader, segment-file batch walking for the crash tests).

Rules the tests follow: every wait has a deadline (`wait_until` or an explicit
monotonic deadline), every loop is bounded, and a read "to the end" stops
only when every assigned partition has reported end-of-partition, so extra
records are caught as well as missing ones. No consumer groups: consumers
assign() partitions and never commit.
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.wait import wait_until

CODECS = ("gzip", "snappy", "lz4", "zstd")
# Short client timeouts keep a broken broker from stalling CI for minutes.
CK_COMMON = {
    "socket.timeout.ms": 10000,
    "metadata.max.age.ms": 5000,
    "topic.metadata.refresh.interval.ms": 1000,
}


@dataclass(frozen=True, slots=True)
class Rec:
    """One record as a client saw it; headers as a tuple of (key, value|None)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


@dataclass(frozen=True, slots=True)
class Sample:
    """One record to produce (offset unknown until the broker assigns it)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def recent_base_ts() -> int:
    """Explicit timestamps an hour in the past: old enough to be obviously
    client-chosen, young enough that 7-day retention never deletes them."""
    return int(time.time() * 1000) - 3_600_000


def sample_records(
    n: int, *, base_ts: int, null_header_values: bool = True, both_null: bool = True
) -> list[Sample]:
    """Keys (some null), values (some null = tombstones), headers (none, one,
    repeated keys, null values), strictly increasing explicit timestamps.

    kafka-python and aiokafka refuse a null header value and a record with
    neither key nor value; they pass null_header_values/both_null=False."""
    out: list[Sample] = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 5 == 4 else (f"value-{i}-" * (1 + i % 9)).encode()
        if key is None and value is None and not both_null:
            key = f"key-{i}".encode()
        if i % 3 == 0:
            headers: tuple[tuple[str, bytes | None], ...] = (
                ("h", str(i).encode()),
                ("dup", b"a"),
                ("dup", b"b"),
            )
        elif i % 3 == 1:
            headers = ()
        else:
            headers = (
                (("nullv", None),) if null_header_values else (("bin", bytes([0, 255, i % 256])),)
            )
        out.append(Sample(key=key, value=value, headers=headers, timestamp=base_ts + 17 * i))
    return out


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def assert_same_records(
    got: Sequence[Rec], sent: Sequence[Sample], *, first_offset: int = 0, partition: int = 0
) -> None:
    """Record-by-record comparison with a readable first difference."""
    assert len(got) == len(sent), f"expected {len(sent)} records, got {len(got)}"
    for i, (g, s) in enumerate(zip(got, sent, strict=True)):
        want = Rec(partition, first_offset + i, s.key, s.value, s.headers, s.timestamp)
        assert g == want, f"record {i} differs:\n got  {g}\n want {want}"


# ---------------------------------------------------------------- confluent-kafka


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **CK_COMMON})


def ck_wait_topic(admin: AdminClient, topic: str, partitions: int, timeout: float = 20.0) -> None:
    """Wait until metadata shows `partitions` partitions of `topic`, each with a leader."""

    def ready() -> bool:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return False
        return len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions.values())

    wait_until(ready, timeout=timeout, message=f"topic {topic} with {partitions} led partitions")


def ck_create_topic(
    admin: AdminClient, topic: str, partitions: int = 1, config: dict[str, str] | None = None,
    replication_factor: int = 1,
) -> None:
    futs = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=config or {})],
        operation_timeout=10,
        request_timeout=15,
    )
    futs[topic].result(timeout=20)
    ck_wait_topic(admin, topic, partitions)


def ck_producer(bootstrap: str, conf: dict[str, object] | None = None) -> Producer:
    base = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "message.timeout.ms": 15000,
        **CK_COMMON,
    }
    base.update(conf or {})
    return Producer(base)


def ck_produce_samples(
    producer: Producer, topic: str, samples: Iterable[Sample], *, partition: int | None = 0
) -> list[tuple[int, int]]:
    """Produce in order, flush, and return (partition, offset) per sample from
    the delivery reports; any delivery error fails the test."""
    samples = list(samples)
    reports: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def cb(i: int):  # noqa: ANN202
        def on_delivery(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                reports[i] = (msg.partition(), msg.offset())

        return on_delivery

    for i, s in enumerate(samples):
        kwargs: dict[str, object] = {
            "key": s.key,
            "value": s.value,
            "timestamp": s.timestamp,
            "on_delivery": cb(i),
        }
        if s.headers:
            kwargs["headers"] = list(s.headers)
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records still undelivered after 30s"
    assert not errors, f"delivery errors: {errors[:5]}"
    return [reports[i] for i in range(len(samples))]


def ck_msg_to_rec(msg) -> Rec:  # noqa: ANN001
    return Rec(
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=msg.value(),
        headers=tuple(msg.headers() or ()),
        timestamp=msg.timestamp()[1],
    )


def ck_consumer(bootstrap: str, conf: dict[str, object] | None = None) -> Consumer:
    base = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("g"),  # required by librdkafka; never used: assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "check.crcs": True,
        "fetch.wait.max.ms": 100,
        **CK_COMMON,
    }
    base.update(conf or {})
    return Consumer(base)


def ck_read_to_end(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int] = (0,),
    *,
    start: int = OFFSET_BEGINNING,
    timeout: float = 30.0,
    conf: dict[str, object] | None = None,
) -> list[Rec]:
    """Read every assigned partition from `start` until each reports EOF.

    Use only after the producer has flushed: then EOF means "everything".
    Any consumer error (a corrupt batch, a CRC failure) fails the test.
    """
    c = ck_consumer(bootstrap, conf)
    try:
        c.assign([TopicPartition(topic, p, start) for p in partitions])
        at_eof = {p: False for p in partitions}
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while not all(at_eof.values()):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read of {topic} did not reach the end in {timeout}s; eof={at_eof}, got {len(got)}"
                )
            msg = c.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_eof[msg.partition()] = True
                    continue
                raise AssertionError(f"consumer error on {topic}: {err}")
            at_eof[msg.partition()] = False
            got.append(ck_msg_to_rec(msg))
        return got
    finally:
        c.close()


def ck_list_offset(admin: AdminClient, topic: str, partition: int, spec) -> int:  # noqa: ANN001
    from confluent_kafka.admin import OffsetSpec  # noqa: F401 - documents the spec type

    tp = TopicPartition(topic, partition)
    res = admin.list_offsets({tp: spec}, request_timeout=15)
    return res[tp].result(timeout=20).offset


def kafka_error_code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


# ---------------------------------------------------------------- segment files


def partition_dir(log_dir: Path, topic: str, partition: int = 0) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def batch_spans(log_file: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base_offset, last_offset) of every whole record batch
    v2 in a segment file: baseOffset int64, batchLength int32, ...,
    lastOffsetDelta int32 at byte 23 (Kafka's DefaultRecordBatch layout)."""
    data = Path(log_file).read_bytes()
    out = []
    pos = 0
    while pos + 27 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        size = 12 + length
        if length <= 0 or pos + size > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, size, base_offset, base_offset + last_delta))
        pos += size
    return out


# Low three bits of the batch attributes (int16 at byte 21 of a v2 batch).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batch_codecs(log_file: Path) -> list[int]:
    """Compression codec id of every whole batch in a segment file."""
    data = Path(log_file).read_bytes()
    return [
        struct.unpack_from(">h", data, pos + 21)[0] & 0x07
        for pos, _size, _b, _l in batch_spans(log_file)
    ]


def segment_files(log_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted(partition_dir(log_dir, topic, partition).glob("*.log"))


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A broker's Prometheus endpoint: every sample by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
