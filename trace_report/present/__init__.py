"""present layer (see docs/architecture.md)."""
