"""KIP-405 "follower fetch": a replica rebuilds only the local tail of a tiered partition.

When a follower fetches an offset below the leader's local log start offset of a tiered topic
(a wiped disk, a new replica, a follower far behind), the leader answers
OFFSET_MOVED_TO_TIERED_STORAGE instead of reading remote storage for it. The follower then
(replication.fetcher asks the leader ListOffsets ``-4`` for the earliest local offset ``L``;
this module does the rest, as Kafka's ``ReplicaFetcherTierStateMachine.buildRemoteLogAuxState``):

1. finds the remote segment holding ``L - 1`` in its own copy of the remote metadata (every broker
   tails ``__remote_log_metadata``); the next fetch offset is that segment's end + 1, which is at
   or above ``L``, so the leader has it on local disk;
2. fetches only that segment's leader-epoch checkpoint and producer snapshot from remote storage
   (two small index objects, never segment data), on a storage worker;
3. starts its local log at the next fetch offset with those epochs (kept below it) and that
   producer state, the log start offset staying the leader's (below it: remote storage).

A replica that is sent to tiered storage again before it fetched anything (the leader's local
retention deleted its oldest local segment in the meantime: a producer faster than one fetch
round trip per segment) starts at the end of the newest remote segment instead (``chasing``): the
leader deletes no segment locally before it is copied, so the offset after the highest copied
one stays on its disk for at least one more copy.

Leader-epoch checkpoint bytes are Kafka's checkpoint text (``0``, the count, then ``epoch
start-offset`` lines), as ``tiered.remote_log_manager`` ships them with each segment. A segment missing from the
metadata (this broker has not applied the leader's last events yet) raises
``RemoteAuxStateNotReady``; the fetcher backs off and asks again.

Called on the event loop by tiered.remote_log_manager.RemoteLogManager.build_remote_log_aux_state.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kavka.tiered.api import IndexType, RemoteResourceNotFoundError, RemoteStorageManager
from kavka.tiered.metadata import RemoteLogMetadataCache

log = logging.getLogger("kavka.tiered")


class RemoteAuxStateNotReady(Exception):
    """The remote segment before the leader's local log start is not known here yet."""


def parse_leader_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a leader-epoch checkpoint (version 0); ValueError if the
    text is not one."""
    lines = data.decode("utf-8").split()
    if len(lines) < 2 or lines[0] != "0":
        raise ValueError("not a version-0 leader-epoch checkpoint")
    n = int(lines[1])
    if n < 0 or len(lines) != 2 + 2 * n:
        raise ValueError(f"leader-epoch checkpoint lists {n} entries in {len(lines) - 2} fields")
    return [(int(lines[2 + 2 * i]), int(lines[3 + 2 * i])) for i in range(n)]


async def build_remote_log_aux_state(
    part: Any,
    *,
    cache: RemoteLogMetadataCache,
    rsm: RemoteStorageManager,
    run_io: Callable[[Callable[[], Any]], Awaitable[Any]],
    leader_local_log_start_offset: int,
    leader_log_start_offset: int,
    now_ms: int,
    chasing: bool = False,
) -> int:
    """Start ``part``'s local log at the end of the remote segment holding the offset before the
    leader's local log start (``chasing``: the newest remote segment); returns that next fetch
    offset."""
    previous = leader_local_log_start_offset - 1
    md = cache.segment_for_offset(previous)
    if chasing and md is not None:
        newest = max(cache.readable(), key=lambda m: m.end_offset)
        log.info("%s: sent to tiered storage again before fetching: starting after the newest remote "
                 "segment [%d, %d]", part.tp, newest.start_offset, newest.end_offset)
        md = newest
    if md is None or md.start_offset > previous and not chasing:
        raise RemoteAuxStateNotReady(
            f"{part.tp}: no remote segment holds offset {previous} (highest copied here: "
            f"{cache.highest_offset_in_remote_storage})")
    next_offset = md.end_offset + 1
    epoch_bytes = await run_io(functools.partial(rsm.fetch_index, md, IndexType.LEADER_EPOCH))
    epochs = parse_leader_epoch_checkpoint(bytes(epoch_bytes))
    try:
        snapshot = bytes(await run_io(functools.partial(rsm.fetch_index, md, IndexType.PRODUCER_SNAPSHOT)))
    except RemoteResourceNotFoundError:
        snapshot = b""  # the leader had no producer state to ship
    part.restart_at_remote_boundary(
        next_offset,
        log_start_offset=min(leader_log_start_offset, next_offset),
        epoch_entries=epochs,
        producer_snapshot=snapshot,
        now_ms=now_ms,
    )
    log.info("%s: rebuilt from remote storage: local log starts at %d (remote segment [%d, %d]), "
             "log start offset %d, %d leader epochs, producer snapshot of %d bytes",
             part.tp, next_offset, md.start_offset, md.end_offset, part.log.log_start_offset,
             len(epochs), len(snapshot))
    return next_offset
