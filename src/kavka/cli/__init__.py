"""The `kavka` command: click groups for storage, server, topics and configs.

Each sub-module owns one group and imports what it needs (the broker, the
client) inside its commands, so `kavka topics ...` never loads the broker.
"""
