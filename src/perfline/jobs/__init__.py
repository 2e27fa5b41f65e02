"""Jobs: job-file parsing with line-numbered errors, and matrix expansion into cases."""

from perfline.jobs.matrix import MAX_CASES, case_count, expand
from perfline.jobs.parse import job_from_benchmark, load_job, parse_param_args
from perfline.records.job import (
    SINGLE_VALUED_KINDS,
    TARGETS,
    TUNABLE_KINDS,
    Case,
    JobError,
    JobSpec,
)

__all__ = [
    "MAX_CASES",
    "SINGLE_VALUED_KINDS",
    "TARGETS",
    "TUNABLE_KINDS",
    "Case",
    "JobError",
    "JobSpec",
    "case_count",
    "expand",
    "job_from_benchmark",
    "load_job",
    "parse_param_args",
]
