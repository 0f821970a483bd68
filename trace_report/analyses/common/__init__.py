"""Helpers several analyses share; no command lives here.

Column arrays, interval sets, the result type, GPU idle time, utilization, GPU operation names,
the Ray engine's partial sums; and the results several commands read (the step breakdown by
region, the kernel-class summary, the communication overlap, the launch queue, the CPU self
time), which their commands declare and advise and compare read."""
