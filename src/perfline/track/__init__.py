"""`perfline track`: follow a branch, test the commits it selects, judge each against the
one tested before it, and narrow every confirmed regression to its commit."""
