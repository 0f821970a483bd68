"""The analyses: each a function of a ``TraceDB`` and its options that returns a ``Result`` (frame, notes)."""
