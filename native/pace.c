/*
 * pace: how fast this CPU runs a fixed integer loop right now.
 *
 * Prints the fastest of several passes in nanoseconds of the process's own CPU time. Other
 * processes competing for the CPU do not count in CPU time, and a pass they interrupt is
 * not the fastest one; what shows is the machine itself running slower, as shared VMs do
 * for seconds at a time when the host is busy (a loop like this one measured 0.98 ms, then
 * 1.37 ms for ~4 s with the guest idle). perfline's bisection reads it before and after
 * each sample and retakes a sample the machine was slow for.
 */
#define _GNU_SOURCE
static const char progname[] = "pace";
#include "common.h"

#define LOOP 1000000UL
#define PASSES 7

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	uint64_t best = UINT64_MAX;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: %s\n", progname);
		return EXIT_USAGE;
	}
	for (int pass = 0; pass < PASSES; pass++) {
		volatile unsigned long sink = 0;
		uint64_t start = cpu_ns();

		for (unsigned long i = 0; i < LOOP; i++)
			sink += i * i;
		uint64_t took = cpu_ns() - start;
		if (took < best)
			best = took;
	}
	printf("%" PRIu64 "\n", best);
	return 0;
}
