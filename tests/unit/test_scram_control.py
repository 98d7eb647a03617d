"""SCRAM credentials in the metadata log: the records through MetadataDelta and snapshots, the
bootstrap file, and AlterUserScramCredentials / DescribeUserScramCredentials decided on an image
(controller.scram_control) with Kafka's errors."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kavka.controller.scram_control import (
    ScramDeletion,
    ScramUpsertion,
    alter_credentials,
    describe_credentials,
)
from kavka.metadata import records as mr
from kavka.metadata.bootstrap import read_bootstrap, write_bootstrap
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from kavka.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramServer, credential, salted_password

SALT = b"0123456789abcdef"


def upsert(name: str, mechanism: int = 1, iterations: int = 4096, password: str = "pw", salt: bytes = SALT) -> ScramUpsertion:
    mech = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}.get(mechanism, SCRAM_SHA_256)
    return ScramUpsertion(name, mechanism, iterations, salt, salted_password(mech, password, salt or b"x", max(iterations, 1)))


def replay(image: MetadataImage, records) -> MetadataImage:
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(mr.decode(*mr.encode(r)), image.offset + 1 + i)  # through the on-disk form
    return d.apply()


def test_upsert_describe_delete_and_the_server_authenticates_from_the_image():
    records, results = alter_credentials(MetadataImage(), [], [upsert("alice", 1, 8192, "alice-pw"), upsert("bob", 2)])
    assert [(r.user, r.error) for r in results] == [("alice", ErrorCode.none), ("bob", ErrorCode.none)]
    assert all("alice-pw" not in repr(r) for r in records)
    image = replay(MetadataImage(), records)
    assert sorted(image.scram) == [(1, "alice"), (2, "bob")] and image.scram[(1, "alice")].iterations == 8192
    # The stored form is exactly what the password gives: a SCRAM exchange against it succeeds.
    c = image.scram[(1, "alice")]
    expected = credential(SCRAM_SHA_256, "alice-pw", salt=SALT, iterations=8192)
    assert (c.stored_key, c.server_key) == (expected.stored_key, expected.server_key)
    assert ScramServer(SCRAM_SHA_256, {"alice": expected}.get).evaluate(b"n,,n=alice,r=x").startswith(b"r=x")
    described = describe_credentials(image, None)
    assert [(r.user, r.credentials) for r in described] == [("alice", ((1, 8192),)), ("bob", ((2, 4096),))]
    records, results = alter_credentials(image, [ScramDeletion("alice", 1)], [])
    assert results[0].error == ErrorCode.none
    image = replay(image, records)
    assert list(image.scram) == [(2, "bob")]


def test_kafkas_validation_errors():
    image = replay(MetadataImage(), alter_credentials(MetadataImage(), [], [upsert("carol")])[0])
    _, results = alter_credentials(
        image,
        [ScramDeletion("ghost", 1), ScramDeletion("erin", 2), ScramDeletion("", 1), ScramDeletion("carol", 1)],
        [upsert("low", iterations=4095), upsert("high", iterations=16385), upsert("mech", mechanism=3),
         upsert("nosalt", salt=b""), upsert("carol"), upsert("twice"), upsert("twice")],
    )
    got = {r.user: (r.error, r.message) for r in results}
    assert got == {
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "erin": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "carol": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
        "low": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "high": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "mech": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "nosalt": (ErrorCode.unacceptable_credential, "Salt must not be empty"),
        "twice": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
    }
    described = {r.user: r for r in describe_credentials(image, ["carol", "nobody", "x", "x"])}
    assert described["carol"].credentials == ((1, 4096),)
    assert described["nobody"].error == ErrorCode.resource_not_found
    assert described["nobody"].message == "Attempt to describe a user credential that does not exist: nobody"
    assert described["x"].error == ErrorCode.duplicate_resource


def test_a_snapshot_and_the_bootstrap_file_keep_the_credentials(tmp_path):
    image = replay(MetadataImage(), alter_credentials(MetadataImage(), [], [upsert("a"), upsert("b", 2)])[0])
    again = replay(MetadataImage(), image_records(image))
    assert dict(again.scram) == dict(image.scram)
    records = [r for r in image_records(image) if isinstance(r, mr.UserScramCredentialRecord)]
    write_bootstrap(tmp_path, records)
    assert read_bootstrap(tmp_path) == records
    assert read_bootstrap(tmp_path / "missing") == []
    assert (tmp_path / "bootstrap.checkpoint").stat().st_mode & 0o077 == 0
