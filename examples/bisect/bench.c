/*
 * perfline's bisection demo and end-to-end test: a benchmark that measures against itself.
 *
 * It times its work (WORK loop iterations, from work.h) and a fixed reference loop back to
 * back, pass by pass, and prints the median ratio. Shared VMs change speed by tens of percent
 * for seconds at a time (0.98 ms, then 1.37 ms for ~4 s, measured with the guest idle); both
 * loops of a pass run within 2 ms of each other, so such a spell slows both and the ratio
 * keeps about 2% noise. An absolute time caught in a spell looks like a regression.
 *
 * For tests and benches of perfline's logic (resume, ranges, kills), whose answer must
 * not depend on this machine's noise of the day, the noise can be set instead of timed:
 *   BENCH_NOISE=0.02    print WORK/REFERENCE times a lognormal per-sample noise of 2%,
 *                       without timing anything (BENCH_SEED fixes the draws; default:
 *                       the clock and the pid)
 *   BENCH_OFFSET=0.01   with it, a machine offset of 1% that changes every
 *                       BENCH_PERIOD seconds (default 5): run-to-run variation
 *   BENCH_FAIL=50       exit with status 3 once in 50 runs, as a flaky benchmark does
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

#define REFERENCE 2000000UL
#define PASSES 15

static double spin_ms(unsigned long n)
{
	struct timespec start, end;
	volatile unsigned long sink = 0;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &end);
	return (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* splitmix64: small, and the same draws from the same seed on every machine. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double uniform(uint64_t *state)
{
	return ((next_random(state) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *state)
{
	return sqrt(-2.0 * log(uniform(state))) * cos(2.0 * M_PI * uniform(state));
}

static double env_number(const char *name, double otherwise)
{
	const char *text = getenv(name);

	return text && *text ? atof(text) : otherwise;
}

static int simulated(double noise)
{
	struct timespec now;
	uint64_t state, period_state;
	double offset = env_number("BENCH_OFFSET", 0.0), period = env_number("BENCH_PERIOD", 5.0);
	double fail = env_number("BENCH_FAIL", 0.0);

	clock_gettime(CLOCK_REALTIME, &now);
	state = getenv("BENCH_SEED") ? (uint64_t)atoll(getenv("BENCH_SEED"))
				     : (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
	/* Every run within one period shares the machine's offset of that period. */
	period_state = (uint64_t)(now.tv_sec / (period > 0 ? period : 1.0));
	if (fail >= 1 && uniform(&state) * fail < 1.0) {
		fprintf(stderr, "bench: simulated failure (BENCH_FAIL=%g)\n", fail);
		return 3;
	}
	printf("%.6f\n", (double)WORK / REFERENCE * exp(noise * gauss(&state) + offset * gauss(&period_state)));
	return 0;
}

int main(void)
{
	double ratio[PASSES];
	double noise = env_number("BENCH_NOISE", 0.0);

	if (noise > 0)
		return simulated(noise);

	for (int pass = 0; pass < PASSES; pass++) {
		double reference = spin_ms(REFERENCE);

		ratio[pass] = spin_ms(WORK) / reference;
	}
	qsort(ratio, PASSES, sizeof(ratio[0]), by_value);
	printf("%.4f\n", ratio[PASSES / 2]);
	return 0;
}
