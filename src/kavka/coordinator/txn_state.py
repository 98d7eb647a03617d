"""Kafka's TransactionState and its legal transitions, as a table (KIP-98).

    Empty | CompleteCommit | CompleteAbort --AddPartitions--> Ongoing
    Ongoing --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort) / timeout / fence--> PrepareAbort --markers written--> CompleteAbort
    Empty | CompleteCommit | CompleteAbort --EndTxn(abort), transactions v2--> PrepareAbort
    Ongoing --InitProducerId of a new instance, timeout--> PrepareEpochFence --> PrepareAbort
    Empty | CompleteCommit | CompleteAbort --InitProducerId--> Empty
    Empty | CompleteCommit | CompleteAbort --transactional.id.expiration.ms--> Dead (tombstone)

The ids are Kafka's (they are the `transaction_status` byte of TransactionLogValue).
PrepareEpochFence is never written to the log: it is a pending state in memory only.
`VALID_PREVIOUS` is Kafka's `validPreviousStates`; `check_transition` refuses anything else
(an IllegalStateException in Kafka: a coordinator bug, never a client error).

Pure; any thread.
"""

from __future__ import annotations

import enum


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty/Complete* -> PrepareAbort: transactions v2 (KIP-890 part 2) aborts with no partition added
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

# The names Kafka's DescribeTransactions / ListTransactions answer with (TransactionState.name).
STATE_NAMES: dict[TxnState, str] = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME: dict[str, TxnState] = {n: s for s, n in STATE_NAMES.items()}

# Kafka's isExpirationAllowed: only an id with no transaction in flight may expire.
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
# States written to the log; PrepareEpochFence and Dead (a tombstone) are not.
LOGGED = frozenset(set(S) - {S.PREPARE_EPOCH_FENCE, S.DEAD})


class IllegalTransition(RuntimeError):
    """A transition outside VALID_PREVIOUS: a bug in the coordinator."""


def check_transition(old: TxnState, new: TxnState) -> None:
    if old not in VALID_PREVIOUS[new]:
        raise IllegalTransition(f"{old.name} -> {new.name} is not a legal transition")
