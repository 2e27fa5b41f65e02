"""The fleet: test machines that take benchmark jobs from a queue in the team's
PostgreSQL store (procrastinate), one job at a time, each counted done exactly once."""
