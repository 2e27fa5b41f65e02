/*
 * perfline's bisection demo and end-to-end test: a benchmark that measures against itself.
 *
 * It times its work (WORK loop iterations, from work.h) and a fixed reference loop back to
 * back, pass by pass, and prints the median ratio. Shared VMs change speed by tens of percent
 * for seconds at a time (0.98 ms, then 1.37 ms for ~4 s, measured with the guest idle); both
 * loops of a pass run within 2 ms of each other, so such a spell slows both and the ratio
 * keeps about 2% noise. An absolute time caught in a spell looks like a regression.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
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

int main(void)
{
	double ratio[PASSES];

	for (int pass = 0; pass < PASSES; pass++) {
		double reference = spin_ms(REFERENCE);

		ratio[pass] = spin_ms(WORK) / reference;
	}
	qsort(ratio, PASSES, sizeof(ratio[0]), by_value);
	printf("%.4f\n", ratio[PASSES / 2]);
	return 0;
}
