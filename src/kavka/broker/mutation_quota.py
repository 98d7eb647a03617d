"""The controller mutation quota of one CreateTopics, CreatePartitions or DeleteTopics request
(KIP-599, `controller_mutation_rate`): Kafka's StrictControllerMutationQuota and
PermissiveControllerMutationQuota over kavka.quota.ControllerMutationQuotaManager.

Where it is counted: on the broker that receives the request, before it forwards the topics to
the controller (Kafka counts on the controller, which sees the forwarded request's principal and
client id; kavka's broker-to-controller calls carry neither, and the receiving broker is the one
place that knows both). What a mutation counts: a new topic's partitions (`num_partitions`, the
broker's `num.partitions` for -1, or its explicit assignments), the partitions CreatePartitions
adds, a deleted topic's partitions -- Kafka's numbers. A topic the controller then refuses for
another reason gives its partitions back (Kafka never records those: it validates first), and
`validate_only` requests are not counted.

Strict from CreateTopics v6, CreatePartitions v3, DeleteTopics v5 (the versions whose clients
understand THROTTLING_QUOTA_EXCEEDED per topic): a topic taken while the bucket is below zero fails
THROTTLING_QUOTA_EXCEEDED, the topics before it go ahead; older versions are permissive: every
topic goes ahead and the client is throttled. Either way the response carries the throttle time
(Kafka's AbstractControllerMutationQuota.throttleTime: the time recorded, less what has passed
since) and broker.server mutes the connection that long. Event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from kio.schema.errors import ErrorCode

from kavka.broker.client_quotas import quota_user
from kavka.controller.results import ApiResult, CreatedTopic, NewTopic
from kavka.protocol.api import ApiKey

if TYPE_CHECKING:
    from kavka.broker.client_quotas import ClientQuotas
    from kavka.broker.server import RequestContext

T = TypeVar("T")

# API -> the first version that is strict (Kafka's newQuotaFor(request, strictSinceVersion)).
STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
THROTTLED = ApiResult(ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")  # Kafka's Errors message


class MutationQuota:
    """The quota of one request: `admit` the topics, `refund` the ones that did not happen, then
    `throttle_time` for the response."""

    def __init__(self, quotas: ClientQuotas, ctx: RequestContext, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._quotas = quotas
        self._user = quota_user(ctx.principal)
        self._client_id = ctx.client_id or ""
        self.strict = ctx.api_version >= STRICT_SINCE[ApiKey(ctx.api_key)]
        self._clock = clock
        self._throttle_ms = 0
        self._at = 0.0

    def admit(self, items: Iterable[T], partitions: Callable[[T], int]) -> tuple[list[T], list[T]]:
        """(the items admitted, in order; the items refused THROTTLING_QUOTA_EXCEEDED)."""
        admitted: list[T] = []
        refused: list[T] = []
        for item in items:
            n = partitions(item)
            if n <= 0:  # mutates nothing (an unknown topic, a count that does not grow): the controller answers
                admitted.append(item)
                continue
            ok, ms = self._quotas.record_mutation(self._user, self._client_id, n, strict=self.strict)
            if ms > 0:
                self._throttle_ms, self._at = ms, self._clock()
            (admitted if ok else refused).append(item)
        return admitted, refused

    def refund(self, partitions: int) -> None:
        if partitions > 0:
            self._quotas.unrecord_mutation(self._user, self._client_id, partitions)

    def throttle_time(self) -> timedelta:
        ms = max(0, self._throttle_ms - round((self._clock() - self._at) * 1000)) if self._throttle_ms else 0
        return timedelta(milliseconds=ms)


def new_topic_partitions(spec: NewTopic, default_partitions: int) -> int:
    """The partitions a CreateTopics topic creates: its assignments, its count, or the default."""
    if spec.assignments:
        return len(spec.assignments)
    return spec.num_partitions if spec.num_partitions > 0 else default_partitions


async def create_topics_within_quota(
    quota: MutationQuota,
    specs: list[NewTopic],
    default_partitions: int,
    create: Callable[[list[NewTopic]], Awaitable[list[CreatedTopic]]],
) -> list[CreatedTopic]:
    """`create` the topics the quota admits; one result per spec, in order (refused ones
    THROTTLING_QUOTA_EXCEEDED); a topic the controller refused gives its partitions back."""
    admitted, _ = quota.admit(specs, lambda s: new_topic_partitions(s, default_partitions))
    taken = {id(s) for s in admitted}
    done = iter(await create(admitted))
    out = []
    for s in specs:
        if id(s) not in taken:
            out.append(CreatedTopic(s.name, THROTTLED))
            continue
        r = next(done)
        if not r.result.ok:
            quota.refund(new_topic_partitions(s, default_partitions))
        out.append(r)
    return out
