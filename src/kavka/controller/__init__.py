"""Cluster metadata: records, the immutable MetadataImage, placement, and the controller."""
