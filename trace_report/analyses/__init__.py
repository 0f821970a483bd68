"""analyses layer (see docs/architecture.md)."""
