"""`kavka transactions`: list, describe, describe-producers, abort and find-hanging (like Kafka's
kafka-transactions.sh, KIP-664). Columns are named as Kafka's tool names them.

- list: every broker's transactions, merged (ListTransactions); --duration-filter keeps those
  running longer than that many ms (ListTransactions v1).
- describe --transactional-id: the coordinator's view (FindCoordinator key_type 1, then
  DescribeTransactions).
- describe-producers --topic --partition [--broker-id]: a partition leader's active producers.
- abort --topic --partition --start-offset: finds the producer whose open transaction starts at
  that offset (DescribeProducers) and writes an ABORT marker with its producer id, epoch and
  coordinator epoch (WriteTxnMarkers: ClusterAction on the Cluster); or --producer-id,
  --producer-epoch, --coordinator-epoch given directly (a negative coordinator epoch is sent as
  0, as Kafka's tool does).
- find-hanging --broker-id | --topic [--partition] [--max-transaction-timeout MINUTES]: open
  transactions whose last write is older than the maximum transaction timeout (15 minutes by
  default) and which their coordinator does not know about (no transactional id lists that
  producer id, or its transaction does not include that partition), as Kafka's tool.
"""

from __future__ import annotations

import time
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table

PRODUCER_COLUMNS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]
DESCRIBE_COLUMNS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
LIST_COLUMNS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
HANGING_COLUMNS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


@click.group(name="transactions")
def transactions() -> None:
    """List, describe and abort transactions (like kafka-transactions.sh)."""


def _none(v: int) -> Any:
    return None if v < 0 else v


@transactions.command(name="list")
@bootstrap_option
@click.option("--duration-filter", type=int, default=None, metavar="MS",
              help="Only transactions running longer than this many ms (< 0: all).")
@json_option
def list_(bootstrap: str, duration_filter: int | None, as_json: bool) -> None:
    """List the transactions every coordinator knows."""
    with admin_client(bootstrap) as admin:
        listing = admin.list_transactions(duration_ms=-1 if duration_filter is None else duration_filter)
    data = [{"transactional_id": t.transactional_id, "coordinator": t.coordinator, "producer_id": t.producer_id,
             "state": t.state} for t in listing]
    emit(as_json, data, lambda con: con.print(table(None, LIST_COLUMNS, [
        (t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listing])))


@transactions.command(name="describe")
@bootstrap_option
@click.option("--transactional-id", required=True, help="The transactional id.")
@json_option
def describe(bootstrap: str, transactional_id: str, as_json: bool) -> None:
    """The state of one transactional id at its coordinator."""
    with admin_client(bootstrap) as admin:
        d = admin.describe_transaction(transactional_id)
    now = int(time.time() * 1000)
    start = _none(d.start_time_ms)
    data = {"coordinator_id": d.coordinator, "transactional_id": d.transactional_id, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "state": d.state, "transaction_timeout_ms": d.timeout_ms,
            "current_transaction_start_time_ms": start,
            "transaction_duration_ms": None if start is None else now - start,
            "topic_partitions": [f"{t}-{p}" for t, p in d.partitions]}
    emit(as_json, data, lambda con: con.print(table(None, DESCRIBE_COLUMNS, [(
        d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
        "None" if start is None else start, "None" if start is None else now - start,
        ",".join(data["topic_partitions"]))])))


def _producer_data(states: list[Any]) -> list[dict[str, Any]]:
    return [{"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "latest_coordinator_epoch": s.coordinator_epoch, "last_sequence": s.last_sequence,
             "last_timestamp": s.last_timestamp, "current_transaction_start_offset": _none(s.current_txn_start_offset)}
            for s in states]


@transactions.command(name="describe-producers")
@bootstrap_option
@click.option("--topic", required=True, help="Topic name.")
@click.option("--partition", type=int, required=True, help="Partition number.")
@click.option("--broker-id", type=int, default=None, help="Ask this broker rather than the partition's leader.")
@json_option
def describe_producers(bootstrap: str, topic: str, partition: int, broker_id: int | None, as_json: bool) -> None:
    """The active producers of a partition."""
    with admin_client(bootstrap) as admin:
        states = admin.describe_producers([(topic, partition)], broker_id=broker_id)[(topic, partition)]
    data = _producer_data(states)
    emit(as_json, data, lambda con: con.print(table(None, PRODUCER_COLUMNS, [
        (d["producer_id"], d["producer_epoch"], d["latest_coordinator_epoch"], d["last_sequence"],
         d["last_timestamp"], "None" if d["current_transaction_start_offset"] is None
         else d["current_transaction_start_offset"]) for d in data])))


@transactions.command(name="abort")
@bootstrap_option
@click.option("--topic", required=True, help="Topic name.")
@click.option("--partition", type=int, required=True, help="Partition number.")
@click.option("--start-offset", type=int, default=None, help="Start offset of the transaction to abort.")
@click.option("--producer-id", type=int, default=None, help="Producer id (instead of --start-offset).")
@click.option("--producer-epoch", type=int, default=None, help="Producer epoch (with --producer-id).")
@click.option("--coordinator-epoch", type=int, default=None, help="Coordinator epoch (with --producer-id).")
def abort(bootstrap: str, topic: str, partition: int, start_offset: int | None, producer_id: int | None,
          producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """Abort a hanging transaction on one partition (needs ClusterAction on the Cluster)."""
    if start_offset is None and producer_id is None:
        raise CliError("the transaction to abort must be identified either with --start-offset or with "
                       "--producer-id, --producer-epoch and --coordinator-epoch")
    with admin_client(bootstrap) as admin:
        if start_offset is None:
            assert producer_id is not None
            if producer_epoch is None:
                raise CliError("missing required option --producer-epoch")
            if coordinator_epoch is None:
                raise CliError("missing required option --coordinator-epoch")
        else:
            states = admin.describe_producers([(topic, partition)])[(topic, partition)]
            found = [s for s in states if s.current_txn_start_offset == start_offset]
            if not found:
                raise CliError(f"could not find any open transaction starting at offset {start_offset} "
                               f"on partition {topic}-{partition}")
            producer_id, producer_epoch, coordinator_epoch = (
                found[0].producer_id, found[0].producer_epoch, found[0].coordinator_epoch)
        # A producer whose transaction hung before its first marker has coordinator epoch -1: 0 is
        # at most any real coordinator epoch (Kafka's tool does the same).
        admin.abort_transaction(topic, partition, producer_id=producer_id, producer_epoch=producer_epoch,
                                coordinator_epoch=max(coordinator_epoch, 0))
    click.echo(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {topic}-{partition}.")


def find_hanging_data(admin: Any, *, broker_id: int | None, topic: str | None, partition: int | None,
                      max_timeout_ms: int, now_ms: int) -> list[dict[str, Any]]:
    from kio.schema.errors import ErrorCode

    from kavka.client.errors import KafkaError

    if topic is not None and partition is not None:
        tps = [(topic, partition)]
    else:
        names = [topic] if topic is not None else [t.name for t in admin.list_topics(include_internal=True)]
        tps = [(d.name, p.partition) for d in admin.describe_topics(names) for p in d.partitions
               if broker_id is None or broker_id in p.replicas]
    if not tps:
        return []
    producers = admin.describe_producers(tps, broker_id=broker_id)
    candidates = [(tp, s) for tp, states in sorted(producers.items()) for s in states
                  if s.current_txn_start_offset >= 0 and now_ms - s.last_timestamp > max_timeout_ms]
    hanging = []
    if candidates:
        pids = sorted({s.producer_id for _, s in candidates})
        ids = {t.producer_id: t.transactional_id for t in admin.list_transactions(producer_ids=pids)
               if t.producer_id in pids}
        described: dict[str, Any] = {}
        for txn_id in sorted(set(ids.values())):
            try:
                described[txn_id] = admin.describe_transaction(txn_id)
            except KafkaError as e:  # TRANSACTIONAL_ID_NOT_FOUND: nothing knows it, so it hangs
                if e.code != ErrorCode.transactional_id_not_found:
                    raise
        for tp, s in candidates:
            d = described.get(ids.get(s.producer_id, ""))
            if d is None or tp not in d.partitions:
                hanging.append((tp, s))
    return [{"topic": tp[0], "partition": tp[1], "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "coordinator_epoch": s.coordinator_epoch, "start_offset": s.current_txn_start_offset,
             "last_timestamp": s.last_timestamp, "duration_min": (now_ms - s.last_timestamp) // 60_000}
            for tp, s in hanging]


@transactions.command(name="find-hanging")
@bootstrap_option
@click.option("--broker-id", type=int, default=None, help="Search the partitions with a replica on this broker.")
@click.option("--topic", default=None, help="Search this topic only (required with --partition).")
@click.option("--partition", type=int, default=None, help="Search this partition only.")
@click.option("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN, show_default=True,
              metavar="MINUTES", help="Maximum transaction timeout, to limit the scope of the search.")
@json_option
def find_hanging(bootstrap: str, broker_id: int | None, topic: str | None, partition: int | None,
                 max_transaction_timeout: int, as_json: bool) -> None:
    """Find transactions left open on a partition that their coordinator does not know about."""
    if topic is None and broker_id is None:
        raise CliError("find-hanging needs --topic or --broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        raise CliError("--partition needs --topic")
    with admin_client(bootstrap) as admin:
        data = find_hanging_data(admin, broker_id=broker_id, topic=topic, partition=partition,
                                 max_timeout_ms=max_transaction_timeout * 60_000, now_ms=int(time.time() * 1000))
    emit(as_json, data, lambda con: con.print(table(None, HANGING_COLUMNS, [
        (d["topic"], d["partition"], d["producer_id"], d["producer_epoch"], d["coordinator_epoch"],
         d["start_offset"], d["last_timestamp"], d["duration_min"]) for d in data])))
