/*
 * cpu_latency: per-CPU scheduling latency, after Rusty Russell's stop_machine
 * measurement (2008). One SCHED_FIFO thread per CPU spins reading
 * CLOCK_MONOTONIC; any large gap between two consecutive reads is time the CPU
 * spent on something else (interrupts, softirqs, stop_machine, RT throttling).
 *
 * Usage: cpu_latency [--duration-ms N] [--cpus all|LIST] [--priority P]
 *                    [--threshold-ns N] [--allow-other-policy]
 *
 * Output, one line per CPU in CPU order:
 *   cpu=0 policy=fifo max_gap_ns=1234 samples=56789 gaps_over_threshold=3
 *
 * Exit status: 0 measured, 1 the system refused (affinity, policy, threads),
 * 2 bad usage.
 *
 * Danger: a SCHED_FIFO spinner on every CPU starves everything else on the
 * machine, including the shell that started it. RT throttling
 * (/proc/sys/kernel/sched_rt_runtime_us, default 950000 of every 1000000 us)
 * keeps the system alive, and also shows up as a ~50 ms gap when the spinners
 * exhaust a period's budget: keep runs well below 950 ms, and pause at least
 * the unbudgeted 50 ms between runs repeated back to back. With throttling
 * disabled (-1) a long run freezes the machine until it ends.
 *
 * If SCHED_FIFO is refused (EPERM: not root, no CAP_SYS_NICE, RLIMIT_RTPRIO 0,
 * or a cgroup without RT runtime) the program fails: numbers measured under
 * SCHED_OTHER mostly show the scheduler's time slices, so they must not be
 * mistaken for FIFO results. --allow-other-policy measures anyway and says
 * policy=other on every line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char progname[] = "cpu_latency";
#include "common.h"

struct options {
	uint64_t duration_ns;
	uint64_t threshold_ns;
	int priority;
	bool allow_other_policy;
	cpu_set_t cpus;
};

struct spinner {
	int cpu;
	pthread_t thread;
	bool fifo;
	uint64_t max_gap_ns;
	uint64_t samples;
	uint64_t gaps_over_threshold;
};

/* Spinners wait until every one is pinned and has its policy, so that none
 * spins while its siblings are still being moved (Rusty's finding). */
static enum { WAITING, RUNNING, ABORTED } state = WAITING;
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_changed = PTHREAD_COND_INITIALIZER;
static const struct options *opts;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cpu_latency [--duration-ms N] [--cpus all|LIST] [--priority P]\n"
		"                   [--threshold-ns N] [--allow-other-policy]\n"
		"  --duration-ms N        spin this long on each CPU (default 500)\n"
		"  --cpus LIST            e.g. 0,2-3; 'all' is every CPU this process may use\n"
		"  --priority P           SCHED_FIFO priority (default 1)\n"
		"  --threshold-ns N       count gaps longer than this (default 10000)\n"
		"  --allow-other-policy   measure under SCHED_OTHER if SCHED_FIFO is refused\n");
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "priority", required_argument, NULL, 'p' },
		{ "threshold-ns", required_argument, NULL, 't' },
		{ "allow-other-policy", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cpu_list = "all";
	uint64_t value;
	int c;

	o->duration_ns = 500 * 1000000ull;
	o->threshold_ns = 10000;
	o->priority = 1;
	o->allow_other_policy = false;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			/* A day is far beyond sane; the cap keeps the ns product in range. */
			if (!parse_u64(optarg, 86400000, &value) || value == 0)
				bad_value("--duration-ms", optarg);
			o->duration_ns = value * 1000000;
			break;
		case 'c':
			cpu_list = optarg;
			break;
		case 'p':
			if (!parse_u64(optarg, (uint64_t)sched_get_priority_max(SCHED_FIFO), &value) ||
			    (int)value < sched_get_priority_min(SCHED_FIFO))
				bad_value("--priority", optarg);
			o->priority = (int)value;
			break;
		case 't':
			if (!parse_u64(optarg, UINT64_MAX, &o->threshold_ns))
				bad_value("--threshold-ns", optarg);
			break;
		case 'o':
			o->allow_other_policy = true;
			break;
		case 'h':
		default:
			usage_exit(usage, c);
		}
	}
	reject_operands(argc, usage);
	parse_cpus_option(cpu_list, &o->cpus);
}

static void *spin(void *arg)
{
	struct spinner *s = arg;
	uint64_t prev, now, end, gap;
	bool run;

	pthread_mutex_lock(&state_lock);
	while (state == WAITING)
		pthread_cond_wait(&state_changed, &state_lock);
	run = state == RUNNING;
	pthread_mutex_unlock(&state_lock);
	if (!run)
		return NULL;
	prev = now_ns();
	end = prev + opts->duration_ns;
	do {
		now = now_ns();
		gap = now - prev;
		if (gap > s->max_gap_ns)
			s->max_gap_ns = gap;
		if (gap > opts->threshold_ns)
			s->gaps_over_threshold++;
		s->samples++;
		prev = now;
	} while (now < end);
	return NULL;
}

/* Pin and raise one waiting spinner; false if the run must not go ahead. */
static bool place(struct spinner *s)
{
	struct sched_param param = { .sched_priority = opts->priority };
	cpu_set_t one;
	int err;

	CPU_ZERO(&one);
	CPU_SET(s->cpu, &one);
	err = pthread_setaffinity_np(s->thread, sizeof(one), &one);
	if (err) {
		fprintf(stderr, "cpu_latency: pinning to CPU %d: %s\n", s->cpu, strerror(err));
		return false;
	}
	err = pthread_setschedparam(s->thread, SCHED_FIFO, &param);
	s->fifo = err == 0;
	if (err == EPERM && opts->allow_other_policy)
		return true;
	if (err == EPERM)
		fprintf(stderr,
			"cpu_latency: SCHED_FIFO priority %d refused (EPERM): run as root, grant\n"
			"CAP_SYS_NICE or raise RLIMIT_RTPRIO (and give the cgroup RT runtime);\n"
			"--allow-other-policy measures under SCHED_OTHER instead\n",
			opts->priority);
	else if (err)
		fprintf(stderr, "cpu_latency: SCHED_FIFO on CPU %d: %s\n", s->cpu, strerror(err));
	return err == 0;
}

int main(int argc, char **argv)
{
	static struct options options;
	struct spinner *spinners;
	int count, i, cpu, started, err;
	bool ok = true;

	parse_options(argc, argv, &options);
	opts = &options;
	count = CPU_COUNT(&options.cpus);
	spinners = calloc((size_t)count, sizeof(*spinners));
	if (!spinners) {
		fprintf(stderr, "cpu_latency: out of memory\n");
		return EXIT_REFUSED;
	}
	for (cpu = 0, i = 0; i < count; cpu++) {
		if (CPU_ISSET(cpu, &options.cpus))
			spinners[i++].cpu = cpu;
	}
	for (started = 0; started < count && ok; started++) {
		err = pthread_create(&spinners[started].thread, NULL, spin, &spinners[started]);
		if (err) {
			fprintf(stderr, "cpu_latency: creating thread: %s\n", strerror(err));
			ok = false;
			break;
		}
		ok = place(&spinners[started]);
	}
	pthread_mutex_lock(&state_lock);
	state = ok ? RUNNING : ABORTED;
	pthread_cond_broadcast(&state_changed);
	pthread_mutex_unlock(&state_lock);
	for (i = 0; i < started; i++)
		pthread_join(spinners[i].thread, NULL);
	if (!ok)
		return EXIT_REFUSED;
	for (i = 0; i < count; i++)
		printf("cpu=%d policy=%s max_gap_ns=%" PRIu64 " samples=%" PRIu64
		       " gaps_over_threshold=%" PRIu64 "\n",
		       spinners[i].cpu, spinners[i].fifo ? "fifo" : "other",
		       spinners[i].max_gap_ns, spinners[i].samples,
		       spinners[i].gaps_over_threshold);
	free(spinners);
	return 0;
}
