"""SCRAM credentials: AlterUserScramCredentials decided (Kafka's ScramControlManager, KIP-554).

`alter_credentials` validates a request's deletions and upsertions against the current
MetadataImage and returns the records that carry them out -- UserScramCredentialRecord (StoredKey
and ServerKey computed here from the client's SaltedPassword, which is not kept) and
RemoveUserScramCredentialRecord -- and one result per user, with Kafka's errors and messages:

    DUPLICATE_RESOURCE          a user named twice in one request (all of that user's changes fail)
    UNACCEPTABLE_CREDENTIAL     an empty user name, an empty salt, iterations below the mechanism's
                                minimum (4096) or above 16384
    UNSUPPORTED_SASL_MECHANISM  a mechanism type other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)
    RESOURCE_NOT_FOUND          deleting a credential that does not exist

Results are in Kafka's order: successful deletions, successful upsertions, then failures. The
records of one request commit together (atomic). `describe_credentials` is DescribeUserScramCredentials
(Kafka's ScramImage.describe), answered by every broker from its own image.

Pure: image in, records and results out. Called on the active controller's event loop under the
QuorumController's lock (alter), or on any node's event loop (describe).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kavka.metadata.image import MetadataImage
from kavka.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kavka.scram import BY_TYPE, MAX_ITERATIONS, credential_from_salted

_TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    # describe only: (mechanism type, iterations) of each credential the user has
    credentials: tuple[tuple[int, int], ...] = ()


def _check_name_and_mechanism(name: str, mechanism: int) -> UserResult | None:
    if not name:
        return UserResult(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in BY_TYPE:
        return UserResult(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _check_upsertion(u: ScramUpsertion) -> UserResult | None:
    error = _check_name_and_mechanism(u.name, u.mechanism)
    if error is not None:
        return error
    if not u.salt:
        # kavka's addition: Kafka's controller takes an empty salt (its clients never send one).
        return UserResult(u.name, ErrorCode.unacceptable_credential, "Salt must not be empty")
    if u.iterations < BY_TYPE[u.mechanism].min_iterations:
        return UserResult(u.name, ErrorCode.unacceptable_credential, "Too few iterations")
    if u.iterations > MAX_ITERATIONS:
        return UserResult(u.name, ErrorCode.unacceptable_credential, "Too many iterations")
    return None


def alter_credentials(
    image: MetadataImage, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
) -> tuple[list[UserScramCredentialRecord | RemoveUserScramCredentialRecord], list[UserResult]]:
    """AlterUserScramCredentials: the records to commit and one result per user named."""
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    errors: dict[str, UserResult] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = UserResult(d.name, ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and (d.mechanism, d.name) not in image.scram:
            error = UserResult(d.name, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[d.name] = error
        else:
            to_delete[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = UserResult(u.name, ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _check_upsertion(u)
        if error is not None:
            errors[u.name] = error
        else:
            to_upsert[u.name] = u
    records: list[UserScramCredentialRecord | RemoveUserScramCredentialRecord] = []
    results: list[UserResult] = []
    for d in to_delete.values():
        records.append(RemoveUserScramCredentialRecord(d.name, d.mechanism))
        results.append(UserResult(d.name))
    for u in to_upsert.values():
        c = credential_from_salted(BY_TYPE[u.mechanism], u.salt, u.salted_password, u.iterations)
        records.append(UserScramCredentialRecord(u.name, u.mechanism, _b64(c.salt), _b64(c.stored_key), _b64(c.server_key), c.iterations))
        results.append(UserResult(u.name))
    results.extend(errors.values())
    return records, results


def describe_credentials(image: MetadataImage, users: Sequence[str] | None) -> list[UserResult]:
    """DescribeUserScramCredentials: every user with a credential (users None or empty), or the
    named ones; a name asked twice is DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (mechanism, name), c in sorted(image.scram.items()):
        by_user.setdefault(name, []).append((mechanism, c.iterations))
    if not users:
        return [UserResult(name, credentials=tuple(creds)) for name, creds in sorted(by_user.items())]
    seen: dict[str, bool] = {}
    for name in users:
        seen[name] = name in seen
    out = []
    for name, twice in seen.items():
        if twice:
            out.append(UserResult(name, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE_USER + name))
        elif name in by_user:
            out.append(UserResult(name, credentials=tuple(by_user[name])))
        else:
            out.append(UserResult(name, ErrorCode.resource_not_found, DESCRIBE_USER_THAT_DOES_NOT_EXIST + name))
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
