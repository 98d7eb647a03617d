"""Partitions (leader/follower, ISR, high watermark) and the ReplicaManager that owns them."""
