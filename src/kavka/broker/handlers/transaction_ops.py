"""Transaction operations (KIP-664): DescribeProducers (API 61, v0), DescribeTransactions
(API 65, v0) and ListTransactions (API 66, v0-v2), the APIs behind `kavka transactions` and
Kafka's kafka-transactions.sh.

- DescribeProducers: the active producers of a partition this broker hosts (leader or follower,
  as Kafka's ReplicaManager.activeProducerState: `kafka-transactions.sh describe-producers
  --broker-id` reads a given replica), from the partition log's producer state
  (storage.producer_state). Read on the Topic, else TOPIC_AUTHORIZATION_FAILED on each of its
  partitions; UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata,
  NOT_LEADER_OR_FOLLOWER for one not hosted here, KAFKA_STORAGE_ERROR for an offline one.
- DescribeTransactions: the transaction coordinator's committed metadata of each id
  (TransactionCoordinator.describe); the start time is -1 when none is running, as Kafka
  (protocol.widened_schema: kio's own type refuses it), 0 in an error entry. Describe on the TransactionalId, else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id.
- ListTransactions: every id this coordinator holds (TransactionCoordinator.list_transactions),
  filtered by state names, producer ids, v1's DurationFilter and v2's TransactionalIdPattern
  (a Java regex in Kafka, Python's `re.fullmatch` here: the common subset agrees). Ids the
  principal may not Describe are left out silently, as Kafka's handleListTransactionsRequest;
  the request itself is never refused.

Read-only: nothing here changes state. Runs on the event loop.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.broker.authorization import checker
from kavka.common import AclOperation, ResourceType
from kavka.coordinator.txn_state import STATE_BY_NAME, STATE_NAMES
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_describe_producers(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "TopicResponse")
    part_cls = nested(resp_cls, "PartitionResponse")
    state_cls = nested(resp_cls, "ProducerState")
    check = checker(node, ctx)
    rm = node.replica_manager
    topics = []
    for t in req.topics:
        name = str(t.name)
        allowed = check is None or check(AclOperation.READ, ResourceType.TOPIC, name)
        known = node.image.topics_by_name.get(name)
        parts = []
        for p in t.partition_indexes:
            p = int(p)
            producers: tuple[Any, ...] = ()
            if not allowed:
                error = ErrorCode.topic_authorization_failed
            elif known is None or p not in known.partitions:
                error = ErrorCode.unknown_topic_or_partition
            else:
                part = rm.get_partition(name, p)
                if part is None:  # in the metadata, not hosted here
                    error = ErrorCode.not_leader_or_follower
                elif part.offline:
                    error = ErrorCode.kafka_storage_error
                else:  # leader or follower: a follower's state comes from the batches it replicated
                    error = ErrorCode.none
                    state = part.log.producer_state
                    producers = tuple(
                        make(state_cls, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                             last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                             coordinator_epoch=e.coordinator_epoch,
                             current_txn_start_offset=-1 if e.current_txn_first_offset is None
                             else e.current_txn_first_offset)
                        for _, e in sorted(state.producers.items()))
            parts.append(make(part_cls, partition_index=p, error_code=error, error_message=None,
                              active_producers=producers))
        topics.append(make(topic_cls, name=name, partitions=tuple(parts)))
    return make(resp_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_describe_transactions(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    state_cls = nested(resp_cls, "TransactionState")
    topic_cls = nested(resp_cls, "TopicData")
    check = checker(node, ctx)
    txns = node.transactions
    out = []
    for raw in req.transactional_ids:
        txn_id = str(raw)

        def failed(error: ErrorCode, txn_id: str = txn_id) -> Any:
            return make(state_cls, error_code=error, transactional_id=txn_id, transaction_state="",
                        transaction_timeout=timedelta(0), transaction_start_time=0, producer_id=-1,
                        producer_epoch=-1, topics=())

        if check is not None and not check(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            out.append(failed(ErrorCode.transactional_id_authorization_failed))
            continue
        meta = ErrorCode.coordinator_not_available if txns is None else txns.core.describe(txn_id)
        if isinstance(meta, ErrorCode):
            out.append(failed(meta))
            continue
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out.append(make(
            state_cls, error_code=ErrorCode.none, transactional_id=txn_id,
            transaction_state=STATE_NAMES[meta.state], transaction_timeout=timedelta(milliseconds=meta.timeout_ms),
            transaction_start_time=meta.start_ms, producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=tuple(make(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return make(resp_cls, throttle_time=NO_THROTTLE, transaction_states=tuple(out))


def handle_list_transactions(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    state_cls = nested(resp_cls, "TransactionState")

    def answer(error: ErrorCode, unknown: tuple[str, ...] = (), states: tuple[Any, ...] = ()) -> Any:
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=error, unknown_state_filters=unknown,
                    transaction_states=states)

    txns = node.transactions
    if txns is None:
        return answer(ErrorCode.coordinator_not_available)
    names = [str(s) for s in req.state_filters]
    unknown = tuple(n for n in names if n not in STATE_BY_NAME)
    pattern = None
    raw_pattern = getattr(req, "transactional_id_pattern", None)  # v2 (Kafka 4.0)
    if raw_pattern:
        try:
            pattern = re.compile(str(raw_pattern))
        except re.error:
            return answer(ErrorCode.invalid_regular_expression)
    listed = txns.core.list_transactions(
        txns.now_ms(),
        states=frozenset(STATE_BY_NAME[n] for n in names if n in STATE_BY_NAME),
        producer_ids=frozenset(int(p) for p in req.producer_id_filters),
        min_duration_ms=int(getattr(req, "duration_filter", -1)),  # v1
    )
    check = checker(node, ctx, log_denials=False)
    states = tuple(
        make(state_cls, transactional_id=m.transactional_id, producer_id=m.producer_id,
             transaction_state=STATE_NAMES[m.state])
        for m in listed
        if (pattern is None or pattern.fullmatch(m.transactional_id))
        and (check is None or check(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id))
    )
    return answer(ErrorCode.none, unknown, states)
