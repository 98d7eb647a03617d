"""The metadata quorum: a KRaft-style replicated log of metadata records."""
