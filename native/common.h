/*
 * Helpers shared by the native measurement programs. Header-only, so the
 * Makefile keeps building each program from its one .c file.
 *
 * The including file defines _GNU_SOURCE before its first #include (cpu_set_t
 * needs it) and, before including this header,
 *   static const char progname[] = "NAME";
 * so that messages name the program that printed them.
 */
#ifndef PERFLINE_NATIVE_COMMON_H
#define PERFLINE_NATIVE_COMMON_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* perfline tells a system that refused apart from a caller's mistake. */
#define EXIT_REFUSED 1
#define EXIT_USAGE 2

static inline _Noreturn void bad_value(const char *option, const char *value)
{
	fprintf(stderr, "%s: bad value '%s' for %s\n", progname, value, option);
	exit(EXIT_USAGE);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* strtoull alone would take a sign, leading blanks or an empty string. */
static inline bool parse_u64(const char *text, uint64_t max, uint64_t *value)
{
	char *end;
	unsigned long long parsed;

	if (*text < '0' || *text > '9')
		return false;
	errno = 0;
	parsed = strtoull(text, &end, 10);
	if (errno || *end || parsed > max)
		return false;
	*value = parsed;
	return true;
}

/* "0,2-3" into a set, rejecting CPUs this process may not run on. */
static inline bool parse_cpu_list(const char *text, const cpu_set_t *allowed, cpu_set_t *cpus)
{
	char *copy = strdup(text), *item, *save = NULL;
	bool ok = copy != NULL;

	CPU_ZERO(cpus);
	for (item = ok ? strtok_r(copy, ",", &save) : NULL; ok && item;
	     item = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(item, '-');
		uint64_t first, last, cpu;

		if (dash)
			*dash = '\0';
		ok = parse_u64(item, CPU_SETSIZE - 1, &first) &&
		     (dash ? parse_u64(dash + 1, CPU_SETSIZE - 1, &last) : (last = first, true)) &&
		     first <= last;
		if (!ok) {
			fprintf(stderr, "%s: bad CPU list item in '%s'\n", progname, text);
			break;
		}
		for (cpu = first; cpu <= last; cpu++) {
			if (!CPU_ISSET(cpu, allowed)) {
				fprintf(stderr, "%s: CPU %" PRIu64
					" is offline or outside this process's affinity\n",
					progname, cpu);
				ok = false;
				break;
			}
			CPU_SET(cpu, cpus);
		}
	}
	free(copy);
	return ok && CPU_COUNT(cpus) > 0;
}

/* --cpus: "all" or a list; exits on a bad list or when the affinity is unreadable. */
static inline void parse_cpus_option(const char *text, cpu_set_t *cpus)
{
	cpu_set_t allowed;

	/* The affinity mask, not sysconf(), so taskset and cpusets are honoured. */
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		fprintf(stderr, "%s: sched_getaffinity: %s\n", progname, strerror(errno));
		exit(EXIT_REFUSED);
	}
	if (strcmp(text, "all") == 0)
		*cpus = allowed;
	else if (!parse_cpu_list(text, &allowed, cpus))
		exit(EXIT_USAGE);
}

/* For getopt_long's 'h' (--help, asked for: stdout and success) and anything it
 * rejected (a mistake: stderr and EXIT_USAGE). */
static inline _Noreturn void usage_exit(void (*usage)(FILE *), int c)
{
	usage(c == 'h' ? stdout : stderr);
	exit(c == 'h' ? 0 : EXIT_USAGE);
}

/* None of the programs takes operands; a stray word is most likely a mistyped option. */
static inline void reject_operands(int argc, void (*usage)(FILE *))
{
	if (optind != argc) {
		usage(stderr);
		exit(EXIT_USAGE);
	}
}

#endif
