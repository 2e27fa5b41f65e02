"""Stored runs assembled for judging: comparisons of sides, series of a metric, regression records."""
