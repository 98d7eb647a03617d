"""Consumer groups and committed offsets: a pure group state machine, the
`__consumer_offsets` record formats, and the manager that runs them over the log."""
