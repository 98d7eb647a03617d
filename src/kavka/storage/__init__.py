"""Kafka's on-disk log: segments, indexes, Log, LogManager, checkpoints.

Layout and file formats are Kafka's own (see each module). Nothing here opens
sockets or touches the event loop; time comes in as ``now_ms`` ints. The
broker calls in from its single event-loop thread (or a worker it owns that
serialises access to a given Log); no class here takes locks.
"""
