/*
 * rcu_gp: how long one RCU grace period takes, as seen from user space.
 *
 * membarrier(MEMBARRIER_CMD_GLOBAL) (called MEMBARRIER_CMD_SHARED before Linux
 * 4.16) is implemented in the kernel as synchronize_rcu(): each call returns
 * after one full grace period. Timing N calls measures the grace-period
 * latency that ftrace's tracer and event switching wait on, without ftrace.
 *
 * Usage: rcu_gp [--iterations N]
 *
 * Output, one line, nanoseconds per call:
 *   calls=50 mean_ns=12345678 median_ns=12001234 min_ns=8000123 max_ns=20001234
 *
 * Exit status: 0 measured, 1 the kernel cannot do it (no membarrier, no
 * MEMBARRIER_CMD_GLOBAL, one online CPU), 2 bad usage.
 *
 * The kernel refuses MEMBARRIER_CMD_GLOBAL under nohz_full (QUERY then omits
 * it), and returns at once without a grace period when only one CPU is
 * online; both are reported rather than measured as zero.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/membarrier.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char progname[] = "rcu_gp";
#include "common.h"

/* glibc has no membarrier() wrapper. */
static int membarrier(int cmd, unsigned int flags)
{
	return (int)syscall(SYS_membarrier, cmd, flags, 0);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rcu_gp [--iterations N]\n"
		"  --iterations N   membarrier(MEMBARRIER_CMD_GLOBAL) calls to time (default 50)\n");
}

static uint64_t parse_iterations(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "iterations", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t iterations = 50;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			/* A million grace periods is hours; beyond that is a typo. */
			if (!parse_u64(optarg, 1000000, &iterations) || iterations == 0)
				bad_value("--iterations", optarg);
			break;
		case 'h':
		default:
			usage_exit(usage, c);
		}
	}
	reject_operands(argc, usage);
	return iterations;
}

/* Exits with a message when a call would not wait for a grace period. */
static void check_support(void)
{
	int supported = membarrier(MEMBARRIER_CMD_QUERY, 0);

	if (supported < 0) {
		fprintf(stderr, "rcu_gp: membarrier(MEMBARRIER_CMD_QUERY): %s%s\n",
			strerror(errno),
			errno == ENOSYS ? " (kernel built without CONFIG_MEMBARRIER)" : "");
		exit(EXIT_REFUSED);
	}
	if (!(supported & MEMBARRIER_CMD_GLOBAL)) {
		fprintf(stderr, "rcu_gp: the kernel does not offer MEMBARRIER_CMD_GLOBAL "
			"(supported mask 0x%x; nohz_full disables it)\n", supported);
		exit(EXIT_REFUSED);
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "rcu_gp: one online CPU: MEMBARRIER_CMD_GLOBAL returns "
			"without a grace period\n");
		exit(EXIT_REFUSED);
	}
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t iterations = parse_iterations(argc, argv), i, sum = 0, start, median;
	uint64_t *durations;

	check_support();
	durations = calloc(iterations, sizeof(*durations));
	if (!durations) {
		fprintf(stderr, "rcu_gp: out of memory\n");
		return EXIT_REFUSED;
	}
	for (i = 0; i < iterations; i++) {
		start = now_ns();
		if (membarrier(MEMBARRIER_CMD_GLOBAL, 0)) {
			fprintf(stderr, "rcu_gp: membarrier(MEMBARRIER_CMD_GLOBAL): %s\n",
				strerror(errno));
			free(durations);
			return EXIT_REFUSED;
		}
		durations[i] = now_ns() - start;
		sum += durations[i];
	}
	qsort(durations, iterations, sizeof(*durations), compare_u64);
	median = iterations % 2 ? durations[iterations / 2]
				: (durations[iterations / 2 - 1] + durations[iterations / 2]) / 2;
	printf("calls=%" PRIu64 " mean_ns=%" PRIu64 " median_ns=%" PRIu64 " min_ns=%" PRIu64
	       " max_ns=%" PRIu64 "\n",
	       iterations, sum / iterations, median, durations[0], durations[iterations - 1]);
	free(durations);
	return 0;
}
