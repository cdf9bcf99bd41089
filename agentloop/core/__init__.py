"""Core data model: ids, items, parts, deltas, usage, cancellation, errors."""
