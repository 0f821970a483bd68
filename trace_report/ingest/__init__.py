"""ingest layer (see docs/architecture.md)."""
