"""analyses.roofline layer (see docs/architecture.md)."""
