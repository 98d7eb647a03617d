"""Kafka's on-disk log, in Kafka's layers: index -> segment -> local_log (LocalLog, the segments
of one partition dir) -> unified_log (Log, Kafka's UnifiedLog: log start offset, leader epochs,
producer state, retention) -> log_manager (LogManager, every log on the broker); log_loader
(LogLoader) opens and recovers a partition dir; plus checkpoints, the cleaner, producer state
(open transactions included), the aborted-transaction index (txn_index), the leader epoch cache
and the log validator.

Layout and file formats are Kafka's own (see each module). Nothing here opens
sockets or touches the event loop; time comes in as ``now_ms`` ints. The
broker calls in from its single event-loop thread (or a worker it owns that
serialises access to a given Log); no class here takes locks.
"""
