"""Helpers several analyses share (column arrays, interval sets, the result type, GPU idle time,
utilization, GPU operation names, the Ray engine); no command lives here."""
