"""Issue 10 item 6: the group coordinator never answers success for what it could not write, and a
transactional producer is served (it was refused before transactions were wired)."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import make, nested
from tests.integration.helpers import ck_admin, ck_create_topic
from tests.raw_client import raw_call
from tests.wait import wait_until


def _commit(broker, group: str, topic: str, offset: int):
    version = 8
    req_cls = api.request_schema(8, version)
    t_cls = nested(req_cls, "OffsetCommitRequestTopic")
    p_cls = nested(req_cls, "OffsetCommitRequestPartition")
    req = make(
        req_cls,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                t_cls,
                name=topic,
                partitions=(
                    make(
                        p_cls,
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    return raw_call(broker, 8, version, req).topics[0].partitions[0].error_code


def _first_error(call, timeout: float = 10.0) -> ErrorCode:  # noqa: ANN001
    """The first error code other than NONE that `call` returns (NONE is 0, so falsy)."""
    return wait_until(call, timeout=timeout, interval=0, message="an error code other than NONE")


def _offsets_dir(b) -> Path:
    hits = [d for d in b.log_dirs if (d / "__consumer_offsets-0").is_dir()]
    assert len(hits) == 1, hits
    return hits[0]


def test_failed_offset_write_is_not_answered_as_success(broker_factory, topic_name, tmp_path):
    control = tmp_path / "failing-dirs"
    control.write_text("")
    b = broker_factory(
        log_dirs=2,
        overrides={
            "offsets.topic.num.partitions": "1",
            "metadata.log.dir": str(tmp_path / "meta"),
            "kavka.test.fault.injection.enable": "true",
        },
    ).start(env={"KAVKA_FAULT_INJECTION_FILE": str(control)})
    ck_create_topic(ck_admin(b.bootstrap), topic_name)
    assert _commit(b, "g1", topic_name, 5) == ErrorCode.none
    control.write_text(f"{_offsets_dir(b)}\n")
    # The dir holding __consumer_offsets fails: Kafka's mapping of a storage error is NOT_COORDINATOR.
    # (The broker re-reads the control file at most every 20 ms, so the first tries may still land.)
    assert _first_error(lambda: _commit(b, "g1", topic_name, 9)) == ErrorCode.not_coordinator
    control.write_text("")


def test_transactional_producer_initializes(broker):
    """Transactions are served (handlers.transactions): init_transactions gets a producer id
    from the transaction coordinator instead of the refusal kavka answered before."""
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{time.time_ns()}"}
    )
    p.init_transactions(60)
    p.begin_transaction()
    p.abort_transaction(30)


def test_transactional_kafka_python_commits(broker):
    from kafka import KafkaProducer

    topic = f"kp-tx-{time.time_ns()}"
    ck_create_topic(ck_admin(broker.bootstrap), topic)
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{time.time_ns()}")
    try:
        kp.init_transactions()
        kp.begin_transaction()
        kp.send(topic, b"v", partition=0)
        kp.commit_transaction()
    finally:
        kp.close(timeout=5)


def _join(broker, group: str):
    version = 5
    req_cls = api.request_schema(11, version)
    proto_cls = nested(req_cls, "JoinGroupRequestProtocol")
    member_id = ""
    for _ in range(2):  # KIP-394: the first join only hands out a member id
        req = make(
            req_cls,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(make(proto_cls, name="range", metadata=b""),),
        )
        resp = raw_call(broker, 11, version, req)
        if resp.error_code != ErrorCode.member_id_required:
            break
        member_id = resp.member_id
    if resp.error_code != ErrorCode.none:
        return resp.error_code
    # The leader's SyncGroup stores the generation's metadata in __consumer_offsets (Kafka's
    # storeGroup); its answer must carry the write's failure.
    sync_cls = api.request_schema(14, 5)
    assignment_cls = nested(sync_cls, "SyncGroupRequestAssignment")
    sync = make(
        sync_cls,
        group_id=group,
        generation_id=resp.generation_id,
        member_id=resp.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(make(assignment_cls, member_id=resp.member_id, assignment=b""),),
    )
    return raw_call(broker, 14, 5, sync).error_code


def test_failed_group_metadata_write_fails_the_sync(broker_factory, topic_name, tmp_path):
    control = tmp_path / "failing-dirs"
    control.write_text("")
    b = broker_factory(
        log_dirs=2,
        overrides={
            "offsets.topic.num.partitions": "1",
            "metadata.log.dir": str(tmp_path / "meta"),
            "group.initial.rebalance.delay.ms": "0",
            "kavka.test.fault.injection.enable": "true",
        },
    ).start(env={"KAVKA_FAULT_INJECTION_FILE": str(control)})
    assert _join(b, "healthy") == ErrorCode.none
    control.write_text(f"{_offsets_dir(b)}\n")
    assert _first_error(lambda: _join(b, f"doomed-{time.time_ns()}")) == ErrorCode.not_coordinator
