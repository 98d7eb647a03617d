"""Sans-I/O Kafka protocol: framing, the API registry, record batches, control records, compression.

Nothing in this package touches sockets, threads or the event loop: it is fed
bytes and returns values (see python-hyper/h11 for the model).
"""
