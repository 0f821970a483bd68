"""formats layer (see docs/architecture.md)."""
