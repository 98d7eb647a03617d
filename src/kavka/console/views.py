"""What each console page shows, read from the cluster through kavka's admin client.

Every function takes a connected `AdminClient` (blocking, not thread-safe: the caller holds
`Backend.lock`) and returns plain dicts and lists for the templates. Nothing here knows about
HTTP; bad input raises `UserError` with a message for the page.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kavka.client.admin import AdminClient, NewTopic
from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError
from kavka.client.fetcher import Fetcher, OffsetOutOfRangeError
from kavka.client.producer import Producer, ProducerConfig
from kavka.coordinator.records import partition_owners
from kavka.protocol.api import ApiKey

INACTIVE_STATES = ("Empty", "Dead")
MAX_MESSAGES = 500


class UserError(Exception):
    """Bad input or a missing resource: shown to the user as a message, with an HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------- capabilities


def kavka_features(admin: AdminClient) -> dict[str, bool]:
    """Which pages the cluster can back. The generic pages need only Kafka's common APIs; the disk
    page needs DescribeLogDirs with sizes (v4: total/usable bytes, Kafka 3.3+ and kavka) and
    AlterReplicaLogDirs; the reassignment page KIP-455's two APIs; elections ElectLeaders; the
    tiered storage page ListOffsets v9 and kavka."""
    conn = admin._any()
    versions = conn.broker_versions
    log_dirs = versions.get(int(ApiKey.DESCRIBE_LOG_DIRS))
    return {
        "quorum": int(ApiKey.DESCRIBE_QUORUM) in versions,
        # KIP-966's ELR columns, where the cluster answers DescribeTopicPartitions (Kafka 3.8+, kavka)
        "elr": int(ApiKey.DESCRIBE_TOPIC_PARTITIONS) in versions,
        # Finding each broker's Prometheus endpoint from its configs is kavka's (Tansu closes the
        # connection on a DescribeConfigs naming keys); --metrics-url names them on any cluster.
        "metrics": int(ApiKey.CREATE_REPLICA_PLACEMENT) in versions,
        "disks": log_dirs is not None and log_dirs[1] >= 4 and int(ApiKey.ALTER_REPLICA_LOG_DIRS) in versions,
        "reassignments": int(ApiKey.ALTER_PARTITION_REASSIGNMENTS) in versions
        and int(ApiKey.LIST_PARTITION_REASSIGNMENTS) in versions,
        "elections": int(ApiKey.ELECT_LEADERS) in versions,
        # ListOffsets v9 answers the latest tiered offset (KIP-1005), v8 the earliest local one;
        # Tansu advertises v9 but closes the connection on those specs (and on DescribeConfigs
        # naming keys), so the page is kavka's: it answers CreateReplicaPlacement, its own API.
        "tiered": versions.get(int(ApiKey.LIST_OFFSETS), (0, 0))[1] >= 9
        and int(ApiKey.CREATE_REPLICA_PLACEMENT) in versions,
    }


# ---------------------------------------------------------------------- overview


def rack_tree(brokers: Sequence[Any]) -> dict[str, Any]:
    """Racks as a tree: `/dc1/rack2` -> {"dc1": {"rack2": {"brokers": [...]}}}; no rack -> "(no rack)"."""
    root: dict[str, Any] = {}
    for b in brokers:
        parts = [p for p in (b.rack or "").split("/") if p] or ["(no rack)"]
        node = root
        for p in parts:
            node = node.setdefault(p, {})
        node.setdefault("brokers", []).append(b.node_id)
    return root


class Throughput:
    """Records per second per topic and per leader broker, from the log end offsets the console
    samples at every Overview refresh (ListOffsets latest): the difference between the newest
    sample and the oldest one kept (at most `WINDOW_S` old) over the time between them. Works on
    any Kafka-compatible cluster. Bytes per second come from the brokers' own counters (Kafka's
    BytesInPerSec and BytesOutPerSec per topic, scraped from their Prometheus endpoints at the same
    refresh) where the console can reach them: a broker scraped in both samples counts, one that
    was not is listed as unreachable. Time is passed in; the caller holds `Backend.lock`."""

    WINDOW_S = 60.0

    def __init__(self) -> None:
        # (time, log end per partition, per broker its byte counters or None if its scrape failed)
        self.samples: list[tuple[float, dict[tuple[str, int], int], dict[int, Counters | None]]] = []

    def add(self, now: float, ends: dict[tuple[str, int], int] | None,
            scraped: dict[int, Counters | None] | None = None) -> None:
        """A sample; `ends` None when the log end offsets could not be read this time (the
        records rates then span the samples that have them)."""
        self.samples.append((now, ends, scraped or {}))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.WINDOW_S:
            self.samples.pop(0)

    def rates(self, leaders: dict[tuple[str, int], int]) -> dict[str, Any] | None:
        """Per topic and per leader: records and records/s over the window, and bytes in and out
        (and per second) where scraped; None with one sample."""
        if len(self.samples) < 2:
            return None
        (t0, _, old_bytes), (t1, _, new_bytes) = self.samples[0], self.samples[-1]
        seconds = max(t1 - t0, 1e-3)
        counted = [(t, ends) for t, ends, _ in self.samples if ends is not None]
        (r0, old), (r1, new) = (counted[0], counted[-1]) if len(counted) >= 2 else ((t0, {}), (t0, {}))
        record_seconds = max(r1 - r0, 1e-3)
        topics: dict[str, int] = defaultdict(int)
        brokers: dict[int, int] = defaultdict(int)
        for tp, end in new.items():
            delta = max(0, end - old.get(tp, 0))  # a partition new since the old sample started at 0
            topics[tp[0]] += delta
            if leaders.get(tp, -1) >= 0:
                brokers[leaders[tp]] += delta
        topic_bytes: dict[str, dict[str, int]] = defaultdict(lambda: {"in": 0, "out": 0})
        broker_bytes: dict[int, dict[str, int]] = {}
        # Not scraped at one end of the window (down, fenced, or its endpoint not answering).
        unreachable = sorted({b for b in new_bytes if new_bytes[b] is None or old_bytes.get(b) is None}
                             | {b for b in old_bytes if old_bytes[b] is not None and b not in new_bytes})
        for b, counters in new_bytes.items():
            before = old_bytes.get(b)
            if counters is None or before is None:
                continue
            totals = broker_bytes[b] = {"in": 0, "out": 0}
            for (direction, topic), n in counters.items():
                delta = n - before.get((direction, topic), 0)
                delta = n if delta < 0 else delta  # the broker restarted: its counters began again
                topic_bytes[topic][direction] += delta
                totals[direction] += delta

        def with_bytes(row: dict[str, Any], counted: dict[str, int] | None) -> dict[str, Any]:
            if counted is not None:
                row.update(bytes_in=counted["in"], bytes_out=counted["out"], bytes_in_rate=counted["in"] / seconds,
                           bytes_out_rate=counted["out"] / seconds)
            return row

        busy = {t for t, n in topics.items() if n} | {t for t, c in topic_bytes.items() if c["in"] or c["out"]}
        return {
            "seconds": round(seconds, 1),
            "bytes": bool(broker_bytes),
            "unreachable": unreachable,
            "topics": sorted((with_bytes({"name": t, "records": topics.get(t, 0), "rate": round(topics.get(t, 0) / record_seconds, 1)},
                                         topic_bytes[t] if broker_bytes else None) for t in busy),
                             key=lambda r: (-r["records"], -r.get("bytes_in", 0), r["name"])),
            "brokers": [with_bytes({"id": b, "records": brokers.get(b, 0), "rate": round(brokers.get(b, 0) / record_seconds, 1)},
                                   broker_bytes.get(b)) for b in sorted(set(brokers) | set(broker_bytes))],
        }


# ---------------------------------------------------------------------- brokers' metrics

Counters = dict[tuple[str, str], int]  # ("in" | "out", topic) -> bytes since the broker started
BYTE_COUNTERS = {"kafka_server_brokertopicmetrics_bytesin": "in", "kafka_server_brokertopicmetrics_bytesout": "out"}
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def parse_metrics_urls(specs: Sequence[str]) -> dict[int, str]:
    """`--metrics-url BROKER=URL` options: broker id -> its Prometheus endpoint."""
    out: dict[int, str] = {}
    for spec in specs:
        broker, sep, url = spec.partition("=")
        if not sep or not broker.strip().isdigit() or not url.startswith(("http://", "https://")):
            raise ValueError(f"a metrics URL is BROKER_ID=http://HOST:PORT/metrics, got {spec!r}")
        out[int(broker)] = url.strip()
    return out


def metrics_urls(admin: AdminClient, brokers: Sequence[Any], features: dict[str, bool],
                 given: dict[int, str]) -> dict[int, str]:
    """Each broker's Prometheus endpoint: the one given (--metrics-url), else, on kavka, the one
    its own configs name (`metrics.prometheus.port`, and `metrics.prometheus.host`, or the broker's
    advertised host when that is a wildcard). A broker without the endpoint (port -1), or with a
    port picked at start (0: the config does not tell which), has none."""
    out: dict[int, str] = {}
    for b in brokers:
        if b.node_id in given:
            out[b.node_id] = given[b.node_id]
            continue
        if not features.get("metrics") or b.fenced:  # a fenced broker may be down: no config to ask
            continue
        try:
            entries = {e.name: e.value for e in admin.describe_configs(
                "broker", str(b.node_id), include_documentation=False,
                keys=["metrics.prometheus.port", "metrics.prometheus.host"])}
            port = int(entries.get("metrics.prometheus.port") or "-1")
        except (KafkaError, KafkaConnectionError, ValueError):  # down, or stopping: no endpoint this time
            continue
        if port <= 0:
            continue
        host = entries.get("metrics.prometheus.host") or ""
        host = b.host if host in WILDCARD_HOSTS else host
        out[b.node_id] = f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"
    return out


@dataclass(frozen=True)
class Scraped:
    """What the console reads from one broker's Prometheus endpoint."""

    bytes: Counters  # its byte counters per topic
    state: int | None  # Kafka's BrokerState gauge, None if not exported
    remote_fetch_rate: float | None  # bytes/s read from remote storage (the remote fetch quota's measure)


BROKER_STATES = {1: "starting", 2: "recovering", 3: "running", 6: "controlled shutdown", 7: "shutting down"}


def scrape(url: str, timeout_s: float = 2.0) -> Scraped | None:
    """A broker's metrics the console shows; None if its endpoint does not answer."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 -- an http(s) URL, checked above
            text = r.read(16 << 20).decode("utf-8", "replace")
        counters: Counters = {}
        gauges: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            direction = BYTE_COUNTERS.get(family.name)
            for sample in family.samples:
                if direction is not None and sample.name in (family.name, family.name + "_total") and "topic" in sample.labels:
                    counters[(direction, sample.labels["topic"])] = int(sample.value)
                elif family.name in ("kafka_server_kafkaserver_brokerstate", "kafka_server_rlmfetch_byte_rate"):
                    gauges[family.name] = sample.value
        state = gauges.get("kafka_server_kafkaserver_brokerstate")
        return Scraped(counters, int(state) if state is not None else None, gauges.get("kafka_server_rlmfetch_byte_rate"))
    except (OSError, ValueError):
        return None


def broker_state(fenced: bool, scraped: Scraped | None) -> str:
    """A broker's state as the Overview shows it: fenced (the controller's view, DescribeCluster),
    else what its own BrokerState gauge says, else running."""
    if fenced:
        return "fenced"
    if scraped is not None and scraped.state is not None:
        return BROKER_STATES.get(scraped.state, f"state {scraped.state}")
    return "running"


SAMPLE_RETRY_S = 3.0


@contextmanager
def retrying_for(admin: AdminClient, seconds: float) -> Iterator[None]:
    """The admin client retries a partition whose leader moved or cannot tell its offsets yet
    until its timeout (15 s): for the Overview's throughput sample, where one such partition (a
    leader just elected after a broker stopped) would hold the whole page that long, it gives up
    sooner and the sample is skipped. The caller holds `Backend.lock`."""
    saved, before = admin.timeout_s, dict(admin._conns)
    admin.timeout_s = min(saved, seconds)
    try:
        yield
    finally:
        admin.timeout_s = saved
        # A connection opened meanwhile has the short timeout: closed, so that a later request
        # (a CreateTopics that waits) opens one with the client's own.
        for key, conn in list(admin._conns.items()):
            if before.get(key) is not conn:
                conn.close()
                del admin._conns[key]


def overview(admin: AdminClient, features: dict[str, bool], throughput: Throughput | None = None,
             now: float | None = None, given_metrics: dict[int, str] | None = None) -> dict[str, Any]:
    cluster = admin.describe_cluster()
    urls = metrics_urls(admin, cluster.brokers, features, given_metrics or {})
    scraped = {b: scrape(url) for b, url in urls.items()}
    quorum = None
    if features.get("quorum"):
        try:
            q = admin.describe_quorum()
        except KafkaError:
            q = None
        if q is not None:
            quorum = {
                "leader": q.leader_id,
                "epoch": q.leader_epoch,
                "high_watermark": q.high_watermark,
                "voters": [{"id": v.node_id, "log_end": v.log_end_offset, "lag": q.high_watermark - v.log_end_offset}
                           for v in q.voters],
                "observers": [{"id": v.node_id, "log_end": v.log_end_offset, "lag": q.high_watermark - v.log_end_offset}
                              for v in q.observers],
            }
    topics = admin.list_topics(include_internal=True)
    described = admin.describe_topics([t.name for t in topics]) if topics else []
    partitions = under_replicated = offline = under_min_isr = 0
    short: dict[str, list[Any]] = defaultdict(list)
    for d in described:
        for p in d.partitions:
            partitions += 1
            if p.leader < 0:
                offline += 1
            if len(p.isr) < len(p.replicas):
                under_replicated += 1
                short[d.name].append(p)
    if short:
        for name, parts in short.items():
            entries = admin.describe_configs("topic", name, include_documentation=False, keys=["min.insync.replicas"])
            min_isr = int(next((e.value for e in entries if e.value), "1"))
            under_min_isr += sum(1 for p in parts if len(p.isr) < min_isr)
    rates = None
    if throughput is not None and now is not None:
        leaders = {(d.name, p.partition): p.leader for d in described for p in d.partitions}
        # Led by a live broker: a fenced one (stopped, its leaderships not moved yet) cannot answer.
        live = {b.node_id for b in cluster.brokers if not b.fenced}
        online = [tp for tp, leader in leaders.items() if leader in live]
        ends: dict[tuple[str, int], int] | None
        try:
            with retrying_for(admin, SAMPLE_RETRY_S):
                ends = {tp: o.offset for tp, o in admin.list_offsets(dict.fromkeys(online, "latest")).items()} if online else {}
        except (KafkaError, KafkaConnectionError):
            ends = None  # no log end offsets this time: the bytes still count
        throughput.add(now, ends, {b: sc.bytes if sc else None for b, sc in scraped.items()})
        rates = throughput.rates(leaders)
        if rates is not None:
            # The metrics are scraped as the console, not as the user: per topic, only the
            # topics this user may describe (log-in mode's ACLs); per broker, totals.
            visible = {t.name for t in topics}
            rates["topics"] = [r for r in rates["topics"] if r["name"] in visible]
    return {
        "throughput": rates,
        "cluster_id": cluster.cluster_id,
        # KRaft: the active controller is the quorum leader (DescribeCluster names any broker to clients).
        "controller": quorum["leader"] if quorum else cluster.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": b.fenced,
                     "state": broker_state(b.fenced, scraped.get(b.node_id)),
                     "state_code": (sc.state if (sc := scraped.get(b.node_id)) else None)}
                    for b in cluster.brokers],
        "racks": rack_tree(cluster.brokers),
        "quorum": quorum,
        "topics": len([t for t in topics if not t.is_internal]),
        "partitions": partitions,
        "under_replicated": under_replicated,
        "under_min_isr": under_min_isr,
        "offline": offline,
    }


# ---------------------------------------------------------------------- topics


def topics(admin: AdminClient, query: str = "") -> list[dict[str, Any]]:
    listed = [t for t in admin.list_topics(include_internal=True) if query.lower() in t.name.lower()]
    described = {d.name: d for d in admin.describe_topics([t.name for t in listed])} if listed else {}
    out = []
    for t in sorted(listed, key=lambda t: (t.is_internal, t.name)):
        d = described.get(t.name)
        parts = d.partitions if d else ()
        out.append({
            "name": t.name,
            "internal": t.is_internal,
            "partitions": t.partition_count,
            "replication_factor": d.replication_factor if d else 0,
            "under_replicated": sum(1 for p in parts if len(p.isr) < len(p.replicas)),
            "offline": sum(1 for p in parts if p.leader < 0),
        })
    return out


def describe_topic(admin: AdminClient, name: str) -> Any:
    known = {t.name for t in admin.list_topics(include_internal=True)}
    if name not in known:
        raise UserError(f"Topic '{name}' does not exist.", 404)
    [d] = admin.describe_topics([name])
    return d


def topic(admin: AdminClient, name: str, features: dict[str, bool]) -> dict[str, Any]:
    d = describe_topic(admin, name)
    tps = [(name, p.partition) for p in d.partitions]
    starts = admin.list_offsets(dict.fromkeys(tps, "earliest")) if tps else {}
    ends = admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
    sizes: dict[int, int] = {}
    if features.get("disks"):
        try:
            for dirs in admin.describe_log_dirs(topics=[name]).values():
                for ld in dirs:
                    for r in ld.replicas:
                        if r.topic == name and not r.is_future:
                            sizes[r.partition] = max(sizes.get(r.partition, 0), r.size)
        except KafkaError:
            sizes = {}
    elr = eligible_leaders(admin, name) if features.get("elr") else None
    entries = admin.describe_configs("topic", name, include_documentation=False)
    return {
        "elr": elr is not None,  # the columns show where the cluster answers, empty or not
        "name": name,
        "topic_id": d.topic_id,
        "internal": d.is_internal,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "preferred": p.replicas[0] if p.replicas else None,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline": list(p.offline_replicas),
                "start": starts[(name, p.partition)].offset if (name, p.partition) in starts else None,
                "end": ends[(name, p.partition)].offset if (name, p.partition) in ends else None,
                "size": sizes.get(p.partition),
                "eligible": list((elr or {}).get(p.partition, ((), ()))[0]),
                "last_known": list((elr or {}).get(p.partition, ((), ()))[1]),
            }
            for p in d.partitions
        ],
        "configs": [{"name": e.name, "value": e.value, "source": e.source, "default": e.is_default,
                     "read_only": e.is_read_only, "sensitive": e.is_sensitive} for e in sorted(entries, key=lambda e: e.name)],
    }


def eligible_leaders(admin: AdminClient, name: str) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """KIP-966 per partition: the eligible leader replicas (out of the ISR yet safe to elect, they
    have every committed record) and the last known ELR, from DescribeTopicPartitions (Metadata
    does not carry them). None if the cluster does not answer it."""
    from kavka.client.negotiation import request_class
    from kavka.protocol.messages import make, nested

    cls = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    out: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    cursor = None
    try:
        conn = admin._any()
        while True:
            resp = conn.send(make(cls, topics=(make(nested(cls, "TopicRequest"), name=name),),
                                  response_partition_limit=2000, cursor=cursor))
            for t in resp.topics:
                if t.error_code:
                    return None
                for p in t.partitions:
                    out[p.partition_index] = (tuple(p.eligible_leader_replicas or ()), tuple(p.last_known_elr or ()))
            nxt = resp.next_cursor
            if nxt is None or nxt.topic_name != name:
                return out
            cursor = make(nested(cls, "Cursor"), topic_name=name, partition_index=nxt.partition_index)
    except (KafkaError, KafkaProtocolError, AttributeError):
        return None
    except KafkaConnectionError:  # a broker that advertises the API but hangs up on it
        admin.close()  # the next call connects afresh
        return None


@dataclass(frozen=True)
class TopicForm:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def parse_topic_form(form: Any) -> TopicForm:
    name = str(form.get("name", "")).strip()
    if not name:
        raise UserError("A topic needs a name.")
    partitions = parse_int(form.get("partitions") or "-1", "partitions", minimum=-1)
    rf = parse_int(form.get("replication_factor") or "-1", "replication factor", minimum=-1)
    if partitions == 0 or rf == 0:
        raise UserError("Partitions and replication factor must be at least 1 (or empty for the broker default).")
    configs: dict[str, str] = {}
    for line in str(form.get("configs", "")).splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise UserError(f"A config line must be key=value, got {line.strip()!r}.")
        configs[key.strip()] = value.strip()
    return TopicForm(name, partitions, rf, configs)


def create_topic(admin: AdminClient, t: TopicForm) -> None:
    admin.create_topics([NewTopic(t.name, t.partitions, t.replication_factor, t.configs)])


# ---------------------------------------------------------------------- messages


def parse_int(text: Any, what: str, *, minimum: int | None = None) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UserError(f"The {what} must be a whole number, got {str(text)!r}.") from None
    if minimum is not None and value < minimum:
        raise UserError(f"The {what} must be at least {minimum}, got {value}.")
    return value


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date-time (UTC if no zone)."""
    from datetime import UTC, datetime

    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"The timestamp must be milliseconds since the epoch or an ISO-8601 date-time, got {text!r}.") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def render_bytes(data: bytes | None) -> dict[str, str]:
    """How a key, value or header shows: null, JSON (pretty-printed), UTF-8 text, or hex."""
    if data is None:
        return {"kind": "null", "text": "null"}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": "hex", "text": data.hex(" ")}
    if text[:1] in "{[":
        try:
            return {"kind": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False)}
        except ValueError:
            pass
    if text and not text.isprintable() and not all(c.isprintable() or c in "\n\r\t" for c in text):
        return {"kind": "hex", "text": data.hex(" ")}
    return {"kind": "text", "text": text}


def messages(
    admin: AdminClient, fetcher: Fetcher, name: str, partition: int, *, offset: int | None,
    timestamp: int | None, newest_first: bool, limit: int, needle: str,
) -> dict[str, Any]:
    d = describe_topic(admin, name)
    if partition not in {p.partition for p in d.partitions}:
        raise UserError(f"Topic '{name}' has no partition {partition} (it has {len(d.partitions)}).", 404)
    tp = (name, partition)
    lo = admin.list_offsets({tp: "earliest"})[tp].offset
    hi = admin.list_offsets({tp: "latest"})[tp].offset
    found_at = None
    if timestamp is not None:
        found = admin.list_offsets({tp: timestamp})[tp].offset
        found_at = found if found >= 0 else hi
        offset = found_at
    limit = max(1, min(limit, MAX_MESSAGES))
    if newest_first:
        end = hi if offset is None else min(max(offset + 1, lo), hi)
        start = max(lo, end - limit)
        if timestamp is not None:  # from the first record at or after the time, going back
            start, end = max(lo, (offset or 0) - limit + 1), min(hi, (offset or 0) + 1)
    else:
        start = lo if offset is None else min(max(offset, lo), hi)
        end = min(hi, start + limit)
    rows: list[dict[str, Any]] = []
    if start < end:
        try:
            for cols in fetcher.read_range(name, partition, start, end, include_headers=True):
                for i, off in enumerate(cols.offsets):
                    headers = cols.headers[i] if cols.headers is not None else []
                    rows.append({
                        "offset": off,
                        "timestamp": cols.timestamps[i],
                        "time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(cols.timestamps[i] / 1000))
                        + f".{cols.timestamps[i] % 1000:03d}Z",
                        "key": render_bytes(cols.keys[i]),
                        "value": render_bytes(cols.values[i]),
                        "headers": [(k, render_bytes(v)) for k, v in headers],
                    })
        except OffsetOutOfRangeError as e:
            raise UserError(str(e)) from None
    if needle:
        low = needle.lower()
        rows = [r for r in rows if low in r["key"]["text"].lower() or low in r["value"]["text"].lower()]
    if newest_first:
        rows.reverse()
    return {"name": name, "partition": partition, "partitions": len(d.partitions), "log_start": lo,
            "log_end": hi, "start": start, "end": end, "rows": rows, "found_at": found_at}


def produce(bootstrap: str, security: Any, name: str, partition: int | None, key: str, value: str,
            headers: str) -> None:
    parsed: list[tuple[str, bytes | None]] = []
    for line in headers.splitlines():
        if line.strip():
            k, sep, v = line.partition("=")
            if not sep or not k.strip():
                raise UserError(f"A header line must be name=value, got {line.strip()!r}.")
            parsed.append((k.strip(), v.encode()))
    p = Producer(bootstrap, ProducerConfig(enable_idempotence=False, client_id="kavka-console",
                                           request_timeout_ms=15_000, delivery_timeout_ms=15_000),
                 security=security)
    try:
        p.send(name, value.encode(), key.encode() if key else None, headers=parsed, partition=partition)
        p.flush()
    finally:
        p.close()


# ---------------------------------------------------------------------- groups


def groups(admin: AdminClient) -> list[dict[str, Any]]:
    return [{"id": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in admin.list_groups()]


class LagHistory:
    """Each group's lag per partition as sampled at every refresh of its page, for the trend
    charts: up to `KEEP` samples over at most `WINDOW_S`, of the `GROUPS` groups looked at last.
    Samples closer than `MIN_GAP_S` (two tabs on one group) replace each other. Time is passed
    in; the caller holds `Backend.lock`."""

    KEEP, WINDOW_S, MIN_GAP_S, GROUPS = 60, 600.0, 1.0, 50

    def __init__(self) -> None:
        self.groups: dict[str, list[tuple[float, dict[tuple[str, int], int]]]] = {}

    def add(self, group_id: str, now: float, lags: dict[tuple[str, int], int]) -> list[tuple[float, dict[tuple[str, int], int]]]:
        samples = self.groups.pop(group_id, [])
        self.groups[group_id] = samples  # the most recently looked at last
        if samples and now - samples[-1][0] < self.MIN_GAP_S:
            samples.pop()
        samples.append((now, lags))
        while len(samples) > self.KEEP or now - samples[0][0] > self.WINDOW_S:
            samples.pop(0)
        while len(self.groups) > self.GROUPS:
            del self.groups[next(iter(self.groups))]
        return samples


def sparkline(values: Sequence[int | None], width: int = 120, height: int = 24) -> str:
    """SVG polyline points for `values` (oldest first; None: not committed then), scaled to the box."""
    top = max([v for v in values if v is not None] + [1])
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - 2 - (height - 4) * v / top:.1f}"
                    for i, v in enumerate(values) if v is not None)


def group(admin: AdminClient, group_id: str, history: LagHistory | None = None, now: float | None = None) -> dict[str, Any]:
    desc = admin.describe_group(group_id)
    committed = admin.list_group_offsets(group_id)
    if desc.state == "Dead" and not desc.members and not committed:
        raise UserError(f"Consumer group '{group_id}' does not exist.", 404)
    owner = partition_owners(desc.protocol_type, desc.members)
    tps = sorted(set(committed) | set(owner))
    ends = admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends[tp].offset if tp in ends else None
        m = owner.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed": cur, "end": end,
                     "lag": end - cur if cur is not None and end is not None else None,
                     "member": m.member_id if m else None, "client_id": m.client_id if m else None,
                     "host": m.client_host if m else None})
    max_lag = max([r["lag"] or 0 for r in rows] + [1])
    if history is not None and now is not None:
        samples = history.add(group_id, now, {(r["topic"], r["partition"]): r["lag"] for r in rows if r["lag"] is not None})
        for r in rows:
            r["trend"] = [lags.get((r["topic"], r["partition"])) for _, lags in samples]
            r["spark"] = sparkline(r["trend"])
            r["trend_text"] = ",".join("" if v is None else str(v) for v in r["trend"])
        trend_seconds = round(samples[-1][0] - samples[0][0])
    else:
        trend_seconds = 0
    return {
        "id": group_id, "state": desc.state, "protocol_type": desc.protocol_type, "protocol": desc.protocol,
        "members": [{"id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                     "partitions": [f"{t}-{p}" for t, p in sorted(tp for tp, o in owner.items() if o is m)]}
                    for m in desc.members],
        "offsets": rows, "total_lag": sum(r["lag"] or 0 for r in rows), "max_lag": max_lag, "trend_seconds": trend_seconds,
        "inactive": desc.state in INACTIVE_STATES,
    }


RESET_TARGETS = ("earliest", "latest", "timestamp", "offset")


def plan_reset(admin: AdminClient, group_id: str, target: str, value: str, topic_filter: str) -> dict[str, Any]:
    """The offsets a reset would commit (Kafka's --dry-run): per partition current -> new."""
    if target not in RESET_TARGETS:
        raise UserError(f"Unknown reset target {target!r}: one of {', '.join(RESET_TARGETS)}.")
    desc = admin.describe_group(group_id)
    committed = admin.list_group_offsets(group_id)
    tps = sorted(tp for tp in committed if not topic_filter or tp[0] == topic_filter)
    if topic_filter and not tps:
        d = describe_topic(admin, topic_filter)
        tps = [(topic_filter, p.partition) for p in d.partitions]
    if not tps:
        raise UserError(f"Group '{group_id}' has no committed offsets to reset; name a topic.")
    earliest = admin.list_offsets(dict.fromkeys(tps, "earliest"))
    latest = admin.list_offsets(dict.fromkeys(tps, "latest"))
    by_time = None
    to_offset = None
    if target == "timestamp":
        by_time = admin.list_offsets(dict.fromkeys(tps, parse_timestamp(value)))
    elif target == "offset":
        to_offset = parse_int(value, "offset", minimum=0)
    rows = []
    for tp in tps:
        lo, hi = earliest[tp].offset, latest[tp].offset
        if target == "earliest":
            new = lo
        elif target == "latest":
            new = hi
        elif to_offset is not None:
            new = min(max(to_offset, lo), hi)
        else:
            assert by_time is not None
            new = hi if by_time[tp].offset < 0 else by_time[tp].offset
        rows.append({"topic": tp[0], "partition": tp[1], "current": committed.get(tp), "new": new})
    return {"group": group_id, "state": desc.state, "inactive": desc.state in INACTIVE_STATES,
            "target": target, "value": value, "topic": topic_filter, "rows": rows}


def execute_reset(admin: AdminClient, plan: dict[str, Any]) -> None:
    if not plan["inactive"]:
        raise UserError(f"Offsets can only be reset while the group '{plan['group']}' has no active members "
                        f"(it is {plan['state']}); stop its consumers first.", 409)
    admin.alter_group_offsets(plan["group"], {(r["topic"], r["partition"]): r["new"] for r in plan["rows"]})


def delete_group(admin: AdminClient, group_id: str) -> None:
    from kavka.client.errors import error_name

    code = admin.delete_groups([group_id]).get(group_id, 0)
    if code:
        raise UserError(f"Group '{group_id}' was not deleted: {error_name(code)}.", 409)


# ---------------------------------------------------------------------- tiered storage

TIERED_CONFIGS = ("remote.storage.enable", "local.retention.bytes", "local.retention.ms", "retention.bytes", "retention.ms",
                  "segment.bytes")


def tiered(admin: AdminClient) -> list[dict[str, Any]]:
    """Every topic with remote.storage.enable=true (KIP-405), and per partition where its offsets
    live: from the log start to the earliest local offset only in remote storage, from there to
    the latest tiered offset in both, above it (the active segment and closed segments not copied
    yet: the copy lag) only on local disk; the leader's bytes on local disk and, from kavka (its
    DescribeLogDirs entry `remote:<plugin>`), in remote storage. No segment counts: the Kafka
    protocol does not tell them."""
    names = [t.name for t in admin.list_topics(include_internal=False)]
    out = []
    for name in sorted(names):
        entries = {e.name: e for e in admin.describe_configs("topic", name, include_documentation=False,
                                                             keys=list(TIERED_CONFIGS))}
        enabled = entries.get("remote.storage.enable")
        if enabled is None or (enabled.value or "").lower() != "true":
            continue
        [d] = admin.describe_topics([name])
        tps = [(name, p.partition) for p in d.partitions]
        offsets = {spec: admin.list_offsets(dict.fromkeys(tps, spec))
                   for spec in ("earliest", "earliest-local", "latest-tiered", "latest")}
        leaders = {p.partition: p.leader for p in d.partitions}
        local_bytes: dict[int, int] = {}
        remote_bytes: dict[int, int] = {}
        try:
            for broker, dirs in admin.describe_log_dirs(sorted({b for b in leaders.values() if b >= 0}), [name]).items():
                for ld in dirs:
                    # kavka's `remote:<plugin>` entry holds the remote bytes of the partitions the broker leads.
                    into = remote_bytes if ld.path.startswith("remote:") else local_bytes
                    for r in ld.replicas:
                        if not r.is_future and leaders.get(r.partition) == broker:
                            into[r.partition] = r.size
        except KafkaError:
            pass
        rows = []
        for tp in tps:
            start, local, tier, end = (offsets[s][tp].offset for s in ("earliest", "earliest-local", "latest-tiered", "latest"))
            rows.append({"partition": tp[1], "leader": leaders[tp[1]], "log_start": start, "local_start": local,
                         "tiered": tier, "end": end, "remote_only": max(0, local - start),
                         "copy_lag": end - (tier + 1) if tier >= 0 else end - start,
                         "local_bytes": local_bytes.get(tp[1]), "remote_bytes": remote_bytes.get(tp[1])})
        out.append({"name": name, "partitions": rows,
                     "configs": {k: entries[k].value for k in TIERED_CONFIGS if k in entries and k != "remote.storage.enable"}})
    return out


LONG_MAX = 2**63 - 1


def remote_fetch_quota(admin: AdminClient, features: dict[str, bool], given: dict[int, str]) -> list[dict[str, Any]]:
    """Per broker, the remote fetch quota (KIP-956, `remote.log.manager.fetch.max.bytes.per.second`,
    DescribeConfigs) and how much of it is in use: the bytes per second read from remote storage
    as the broker's quota measures them (its `kafka_server_rlmfetch_byte_rate` gauge); None where
    its metrics are out of reach."""
    out = []
    brokers = admin.describe_cluster().brokers
    urls = metrics_urls(admin, brokers, features, given)
    for b in brokers:
        quota = None
        if not b.fenced:
            try:
                [entry] = admin.describe_configs("broker", str(b.node_id), include_documentation=False,
                                                 keys=["remote.log.manager.fetch.max.bytes.per.second"]) or [None]
                quota = int(entry.value) if entry is not None and entry.value else None
            except (KafkaError, KafkaConnectionError, ValueError):
                pass
        sc = scrape(urls[b.node_id]) if b.node_id in urls else None
        rate = sc.remote_fetch_rate if sc is not None else None
        limited = quota is not None and quota < LONG_MAX
        out.append({"broker": b.node_id, "quota": quota if limited else None, "rate": rate,
                    "pct": round(100 * rate / quota, 1) if limited and rate is not None and quota else None})
    return out


# ---------------------------------------------------------------------- topic changes

TOPIC_ACTIONS = ("set-config", "delete-config", "add-partitions", "delete-records", "delete-topic")


@dataclass(frozen=True)
class TopicChange:
    """One change to a topic, parsed from its form: what the confirm page shows, then does."""

    topic: str
    action: str
    summary: tuple[tuple[str, str], ...]
    config: tuple[str, str] | None = None
    partitions: int | None = None
    records_before: dict[int, int] | None = None


def plan_topic_change(admin: AdminClient, name: str, form: Any) -> TopicChange:
    action = str(form.get("action", ""))
    if action not in TOPIC_ACTIONS:
        raise UserError(f"Unknown topic action {action!r}: one of {', '.join(TOPIC_ACTIONS)}.")
    d = describe_topic(admin, name)
    if action in ("set-config", "delete-config"):
        key = str(form.get("key", "")).strip()
        if not key:
            raise UserError("Name the config to change.")
        value = str(form.get("value", "")).strip()
        if action == "set-config":
            return TopicChange(name, action, (("Topic", name), ("Set", f"{key}={value}")), config=(key, value))
        return TopicChange(name, action, (("Topic", name), ("Remove the override of", key)), config=(key, ""))
    if action == "add-partitions":
        total = parse_int(form.get("partitions", ""), "new partition count", minimum=1)
        if total <= len(d.partitions):
            raise UserError(f"Topic '{name}' has {len(d.partitions)} partitions: the new count must be more, got {total}.")
        return TopicChange(name, action, (("Topic", name), ("Partitions", f"{len(d.partitions)} -> {total}")),
                           partitions=total)
    if action == "delete-records":
        partition = parse_int(form.get("partition", ""), "partition", minimum=0)
        if partition not in {p.partition for p in d.partitions}:
            raise UserError(f"Topic '{name}' has no partition {partition} (it has {len(d.partitions)}).", 404)
        before = parse_int(form.get("before", ""), "offset", minimum=0)
        hi = admin.list_offsets({(name, partition): "latest"})[(name, partition)].offset
        if before > hi:
            raise UserError(f"Partition {partition} ends at offset {hi}: records can be deleted up to there, not {before}.")
        return TopicChange(name, action, (("Topic", name), ("Partition", str(partition)),
                                          ("Delete records before offset", str(before))),
                           records_before={partition: before})
    return TopicChange(name, action, (("Topic", name), ("Partitions", str(len(d.partitions))),
                                      ("Effect", "the topic and all its records are deleted")))


CONFIG_VISIBLE_S = 5.0


def apply_topic_change(admin: AdminClient, c: TopicChange) -> None:
    if c.action in ("set-config", "delete-config") and c.config:
        key, value = c.config
        if c.action == "set-config":
            admin.incremental_alter_configs("topic", c.topic, set={key: value})
        else:
            admin.incremental_alter_configs("topic", c.topic, delete=[key])
        # The change is committed by the controller; the broker the topic page asks may apply it a
        # moment later. Wait (briefly) until it shows, so the page after the redirect is current.
        deadline = time.monotonic() + CONFIG_VISIBLE_S
        while time.monotonic() < deadline:
            [entry] = admin.describe_configs("topic", c.topic, include_documentation=False, keys=[key]) or [None]
            dynamic = entry is not None and entry.source == "DYNAMIC_TOPIC_CONFIG"
            if (c.action == "set-config" and dynamic and entry.value == value) or (c.action == "delete-config" and not dynamic):
                return
            time.sleep(0.05)
    elif c.action == "add-partitions" and c.partitions:
        admin.create_partitions({c.topic: c.partitions})
    elif c.action == "delete-records" and c.records_before:
        admin.delete_records({(c.topic, p): o for p, o in c.records_before.items()})
    elif c.action == "delete-topic":
        admin.delete_topics([c.topic])
