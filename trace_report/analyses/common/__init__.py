"""Helpers several analyses share; no command lives here.

Column arrays, interval sets, the result type, GPU idle time, utilization, GPU operation names,
the Ray engine's partial sums."""
