"""TraceLens' rule for a variable kernel, read by ``kernel-variance`` (its defaults) and ``advise``
(its kernel_variance finding): the SQL is table macro ``kernel_variance_of``
(``store/sql/views_kernel_variance.sql``)."""

from __future__ import annotations

MIN_CALLS = 10
"""TraceLens' rule: a kernel needs this many calls before its CV says anything."""
CV_THRESHOLD = 1.0
"""TraceLens' rule: a CV above this marks a variable kernel (the standard deviation exceeds the mean)."""
