"""bench.failover.resent_after_an_epoch_bump: which second copies of a record a broker can be
blamed for (the failover bench's and the suite's read-back checks use it)."""

from bench.failover import resent_after_an_epoch_bump


def test_copies_in_later_epochs_are_the_clients_and_copies_in_one_epoch_are_the_brokers() -> None:
    epochs = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 1}
    copies = {
        "once": [0],
        "bumped": [1, 3],  # epoch 0, then 1: re-sent after the bump
        "bumped twice": [2, 4, 5],  # 0, 1, 2
        "same epoch": [3, 4],  # both epoch 1: the leader failed to deduplicate
        "older later": [5, 6],  # epoch 2, then 1: impossible for a client, so the broker's
        "unknown": [0, 9],  # an offset the segments do not hold
    }
    resent, duplicated = resent_after_an_epoch_bump(copies, epochs)
    assert resent == ["bumped", "bumped twice"]
    assert duplicated == ["same epoch", "older later", "unknown"]
