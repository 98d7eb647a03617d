"""The controller's pure core: requests + image in, records + results out."""

import itertools

from kio.schema.errors import ErrorCode

from kavka.config import build_config
from kavka.controller import records as mr
from kavka.controller.controller import ControllerLogic, NewTopic
from kavka.controller.image import MetadataDelta, MetadataImage


def _logic(**props):
    ids = (f"id{i}" for i in itertools.count())
    return ControllerLogic(build_config({"node.id": "1", **props}), new_uuid=lambda: next(ids))


def _apply(image, records):
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(r, image.offset + 1 + i)
    return d.apply(), d


def _cluster(n=1):
    recs = [mr.RegisterBrokerRecord(i, f"inc{i}", (("PLAINTEXT", "h", 9000 + i),)) for i in range(1, n + 1)]
    return _apply(MetadataImage(), recs)[0]


def test_create_topic_records_replay_into_image():
    logic, image = _logic(**{"num.partitions": "3"}), _cluster()
    recs, res = logic.create_topics(image, [NewTopic("a", configs={"retention.ms": "10"})], validate_only=False)
    assert res[0].result.ok and res[0].num_partitions == 3 and res[0].replication_factor == 1
    image2, delta = _apply(image, recs)
    t = image2.topics_by_name["a"]
    assert sorted(t.partitions) == [0, 1, 2]
    assert all(p.leader == 1 and p.isr == (1,) for p in t.partitions.values())
    assert image2.topic_configs("a") == {"retention.ms": "10"}
    assert delta.created_topics == {t.topic_id}
    assert image.topics_by_name == {}  # the old image is untouched


def test_create_errors_follow_kafka():
    logic, image = _logic(), _cluster()
    image, _ = _apply(image, logic.create_topics(image, [NewTopic("a.b")], validate_only=False)[0])
    cases = {
        "a.b": ErrorCode.topic_already_exists,
        "a_b": ErrorCode.invalid_topic_exception,  # collides with a.b
        "bad name": ErrorCode.invalid_topic_exception,
        "x" * 250: ErrorCode.invalid_topic_exception,
    }
    for name, code in cases.items():
        _, res = logic.create_topics(image, [NewTopic(name)], validate_only=False)
        assert res[0].result.error == code, name
    _, res = logic.create_topics(image, [NewTopic("r", replication_factor=3)], validate_only=False)
    assert res[0].result.error == ErrorCode.invalid_replication_factor
    _, res = logic.create_topics(image, [NewTopic("p", num_partitions=0)], validate_only=False)
    assert res[0].result.error == ErrorCode.invalid_partitions
    _, res = logic.create_topics(image, [NewTopic("c", configs={"retention.ms": "x"})], validate_only=False)
    assert res[0].result.error == ErrorCode.invalid_config and "retention.ms" in res[0].result.message


def test_validate_only_emits_no_records():
    logic, image = _logic(), _cluster()
    recs, res = logic.create_topics(image, [NewTopic("v", num_partitions=4)], validate_only=True)
    assert recs == [] and res[0].result.ok and res[0].num_partitions == 4


def test_replication_factor_above_one_is_refused_until_brokers_replicate():
    logic, image = _logic(), _cluster(3)
    _, res = logic.create_topics(image, [NewTopic("r2", replication_factor=2)], validate_only=False)
    assert res[0].result.error == ErrorCode.invalid_replication_factor
    assert "do not replicate" in res[0].result.message


def test_create_partitions_and_delete():
    logic, image = _logic(), _cluster(3)
    logic.allow_replication = True  # the placement decisions are ready for it
    image, _ = _apply(image, logic.create_topics(image, [NewTopic("t", num_partitions=2, replication_factor=2)], validate_only=False)[0])
    recs, res = logic.create_partitions(image, "t", 5, None)
    assert res.ok
    image, _ = _apply(image, recs)
    t = image.topics_by_name["t"]
    assert sorted(t.partitions) == [0, 1, 2, 3, 4]
    assert all(len(set(p.replicas)) == 2 for p in t.partitions.values())
    assert logic.create_partitions(image, "t", 5, None)[1].error == ErrorCode.invalid_partitions
    assert logic.create_partitions(image, "nope", 5, None)[1].error == ErrorCode.unknown_topic_or_partition
    image, delta = _apply(image, logic.delete_topics(image, [t]))
    assert "t" not in image.topics_by_name and t.topic_id in delta.deleted_topics


def test_incremental_and_legacy_alter_configs():
    logic, image = _logic(), _cluster()
    image, _ = _apply(image, logic.create_topics(image, [NewTopic("t", configs={"retention.ms": "5"})], validate_only=False)[0])
    recs, res = logic.alter_configs(image, 2, "t", [("cleanup.policy", 2, "compact"), ("segment.ms", 0, "100")], incremental=True)
    assert res.ok
    image, _ = _apply(image, recs)
    assert image.topic_configs("t") == {"retention.ms": "5", "cleanup.policy": "compact", "segment.ms": "100"}
    # legacy AlterConfigs replaces the whole set
    image, _ = _apply(image, logic.alter_configs(image, 2, "t", [("segment.ms", 0, "7")], incremental=False)[0])
    assert image.topic_configs("t") == {"segment.ms": "7"}
    assert logic.alter_configs(image, 2, "t", [("nope", 0, "1")], incremental=True)[1].error == ErrorCode.invalid_config
    assert logic.alter_configs(image, 4, "1", [("node.id", 0, "2")], incremental=True)[1].error == ErrorCode.invalid_request
    recs, res = logic.alter_configs(image, 4, "", [("log.retention.ms", 0, "1000")], incremental=True)
    assert res.ok
    image, _ = _apply(image, recs)
    assert image.broker_configs(None) == {"log.retention.ms": "1000"}


def test_record_encoding_roundtrip():
    for r in [
        mr.TopicRecord("t", "abc"),
        mr.PartitionRecord("abc", 0, (1, 2), (1,), 1, 3, 4, ("d",)),
        mr.ConfigRecord(2, "t", "retention.ms", None),
        mr.RegisterBrokerRecord(1, "i", (("PLAINTEXT", "h", 1),), "/dc/r", ("x",)),
        mr.RemoveTopicRecord("abc"),
    ]:
        assert mr.decode(*mr.encode(r)) == r
