/*
 * migration_cost: what a task with a cache-hot working set pays when it is
 * moved to another CPU, measured in user space. After Ingo Molnar's 2005
 * cache-hot autodetection patch (measure_migration_cost / measure_one /
 * touch_cache), which printed a "migration cost matrix" at boot; Linus asked
 * for that measurement to live in user space instead.
 *
 * For every ordered pair (SRC, DST) of the chosen CPUs, each repetition:
 *   pin to SRC, dirty every cache line of a buffer sized to the last-level
 *   cache, pin to DST, touch it there (timed: the migrated task's first pass
 *   over its data), touch it again (timed: the cache-hot baseline, now that
 *   DST has dirtied it).
 * The cost of one repetition is the first touch minus the second. Both run on
 * DST, so CPUs of different speeds (big.LITTLE, vCPUs on busier host cores)
 * do not pass for a migration cost; Ingo's patch subtracted each CPU's own
 * non-migrating time for the same reason. Medians and MADs over the
 * repetitions are reported. SRC == DST pairs are the seed's diagonal: a no-op
 * migration, so their cost is the noise floor.
 *
 * Ingo's later versions swept the buffer size to find where the cost peaks;
 * here one size is measured per run and a job matrix over --size sweeps it.
 *
 * Usage: migration_cost [--size BYTES] [--repeat N] [--cpus all|LIST]
 *
 * Output: a header, then one line per ordered pair, SRC-major:
 *   cache_size=33554432 cache_level=3 line_size=64 cpu_mhz=2596.128
 *   src=0 dst=1 repeat=20 hot_median_ns=N hot_min_ns=N median_ns=N min_ns=N
 *       mad_ns=N cost_ns=N cost_mad_ns=N            (one line in the output)
 * median/min/mad describe the touch after migrating, hot_* the one after it;
 * cost_ns may be negative when migrating is free. cache_level is absent when
 * --size is given, cpu_mhz when /proc/cpuinfo has no "cpu MHz" (arm64, some VMs).
 *
 * Exit status: 0 measured, 1 the system refused (affinity, memory, no cache
 * size in sysfs), 2 bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const char progname[] = "migration_cost";
#include "common.h"

/* Fewer lines than this would time the clock more than the cache. */
#define MIN_SIZE 4096
#define MAX_SIZE (1ull << 40)
#define MAX_REPEAT 1000000
#define DEFAULT_REPEAT 20
#define FALLBACK_LINE_SIZE 64

struct options {
	uint64_t size; /* 0: the last-level cache's */
	int repeat;
	cpu_set_t cpus;
};

struct buffer {
	unsigned char *base;
	size_t line_size;
	size_t lines;
	size_t step;
};

struct summary {
	int64_t median;
	int64_t min;
	int64_t mad;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: migration_cost [--size BYTES] [--repeat N] [--cpus all|LIST]\n"
		"  --size BYTES   working set (default: the last-level cache of the first CPU)\n"
		"  --repeat N     migrations per ordered CPU pair (default %d)\n"
		"  --cpus LIST    e.g. 0,2-3; 'all' is every CPU this process may use\n",
		DEFAULT_REPEAT);
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cpu_list = "all";
	uint64_t value;
	int c;

	o->size = 0;
	o->repeat = DEFAULT_REPEAT;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!parse_u64(optarg, MAX_SIZE, &o->size) || o->size < MIN_SIZE) {
				fprintf(stderr, "migration_cost: --size must be %d to %llu bytes, got '%s'\n",
					MIN_SIZE, MAX_SIZE, optarg);
				exit(EXIT_USAGE);
			}
			break;
		case 'r':
			if (!parse_u64(optarg, MAX_REPEAT, &value) || value == 0)
				bad_value("--repeat", optarg);
			o->repeat = (int)value;
			break;
		case 'c':
			cpu_list = optarg;
			break;
		case 'h':
		default:
			usage_exit(usage, c);
		}
	}
	reject_operands(argc, usage);
	parse_cpus_option(cpu_list, &o->cpus);
}

static bool read_line(const char *path, char *line, int size)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, size, f) != NULL;
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return ok;
}

/* sysfs cache sizes read "32768K"; older kernels and other architectures use M too. */
static bool parse_cache_size(const char *text, uint64_t *size)
{
	char *end;
	unsigned long long value;

	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno || end == text)
		return false;
	if (*end == 'K')
		value <<= 10;
	else if (*end == 'M')
		value <<= 20;
	else if (*end != '\0')
		return false;
	*size = value;
	return true;
}

/* The highest-level data or unified cache of `cpu`; false when sysfs lists none
 * (some VMs and containers), so the caller must ask for --size. */
static bool read_llc(int cpu, uint64_t *size, int *level)
{
	char path[128], text[64];
	uint64_t bytes;
	int index, this_level;
	bool found = false;

	for (index = 0;; index++) {
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu, index);
		if (!read_line(path, text, sizeof(text)))
			break;
		this_level = atoi(text);
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cache/index%d/type", cpu, index);
		if (!read_line(path, text, sizeof(text)) || strcmp(text, "Instruction") == 0)
			continue;
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cache/index%d/size", cpu, index);
		if (!read_line(path, text, sizeof(text)) || !parse_cache_size(text, &bytes))
			continue;
		if (!found || this_level > *level) {
			*size = bytes;
			*level = this_level;
			found = true;
		}
	}
	return found && *size >= MIN_SIZE;
}

/* The first CPU's clock as /proc/cpuinfo reports it; false where it reports none. */
static bool read_cpu_mhz(double *mhz)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		found = strncmp(line, "cpu MHz", 7) == 0 && colon && sscanf(colon + 1, "%lf", mhz) == 1;
	}
	fclose(f);
	return found;
}

static size_t gcd(size_t a, size_t b)
{
	while (b) {
		size_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

static bool buffer_init(struct buffer *b, uint64_t size)
{
	long line_size = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);

	b->line_size = line_size > 0 ? (size_t)line_size : FALLBACK_LINE_SIZE;
	b->lines = size / b->line_size;
	b->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->base == MAP_FAILED) {
		perror("migration_cost: mmap");
		return false;
	}
	/* Huge pages keep TLB misses, which a scattered walk over small pages would
	 * take on every line, out of the timing; best effort, THP may be off. */
	madvise(b->base, size, MADV_HUGEPAGE);
	/* A stride near the golden ratio of the buffer, coprime to it, visits every
	 * line once per pass. */
	b->step = (size_t)((double)b->lines * 0.6180339887) | 1;
	while (gcd(b->step, b->lines) != 1)
		b->step += 2;
	return true;
}

/* Write every cache line once, jumping across pages: a sequential walk would let
 * the hardware prefetchers hide the misses that a migrated task pays for. */
static void touch(const struct buffer *b)
{
	size_t i, line = 0;

	for (i = 0; i < b->lines; i++) {
		(*(volatile uint64_t *)(b->base + line * b->line_size))++;
		line += b->step;
		if (line >= b->lines)
			line -= b->lines;
	}
}

static int64_t timed_touch(const struct buffer *b)
{
	uint64_t start = now_ns();

	touch(b);
	return (int64_t)(now_ns() - start);
}

static bool migrate(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		fprintf(stderr, "migration_cost: pinning to CPU %d: %s\n", cpu, strerror(errno));
		return false;
	}
	/* The kernel moves a running task before sched_setaffinity returns; a
	 * measurement taken on the wrong CPU would be silently meaningless. */
	if (sched_getcpu() != cpu) {
		fprintf(stderr, "migration_cost: still on CPU %d after pinning to CPU %d\n",
			sched_getcpu(), cpu);
		return false;
	}
	return true;
}

static int compare_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts `values` in place. */
static int64_t median(int64_t *values, int n)
{
	qsort(values, (size_t)n, sizeof(*values), compare_i64);
	return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static struct summary summarize(const int64_t *values, int n, int64_t *scratch)
{
	struct summary s;
	int i;

	memcpy(scratch, values, (size_t)n * sizeof(*values));
	s.median = median(scratch, n);
	s.min = scratch[0];
	for (i = 0; i < n; i++)
		scratch[i] = llabs(values[i] - s.median);
	s.mad = median(scratch, n);
	return s;
}

int main(int argc, char **argv)
{
	static struct options o;
	struct buffer buf;
	struct summary hot, cross, cost;
	int64_t *hot_ns, *cross_ns, *cost_ns, *scratch;
	int *cpus, count, pairs, pair, rep, cpu, i, level = 0;
	uint64_t size;
	double mhz;

	parse_options(argc, argv, &o);
	count = CPU_COUNT(&o.cpus);
	cpus = calloc((size_t)count, sizeof(*cpus));
	if (!cpus) {
		fprintf(stderr, "migration_cost: out of memory\n");
		return EXIT_REFUSED;
	}
	for (cpu = 0, i = 0; i < count; cpu++) {
		if (CPU_ISSET(cpu, &o.cpus))
			cpus[i++] = cpu;
	}
	size = o.size;
	if (!size && !read_llc(cpus[0], &size, &level)) {
		fprintf(stderr, "migration_cost: no cache size for CPU %d in sysfs: pass --size\n",
			cpus[0]);
		return EXIT_REFUSED;
	}
	pairs = count * count;
	hot_ns = calloc((size_t)pairs * (size_t)o.repeat, sizeof(*hot_ns));
	cross_ns = calloc((size_t)pairs * (size_t)o.repeat, sizeof(*cross_ns));
	cost_ns = calloc((size_t)o.repeat, sizeof(*cost_ns));
	scratch = calloc((size_t)o.repeat, sizeof(*scratch));
	if (!hot_ns || !cross_ns || !cost_ns || !scratch) {
		fprintf(stderr, "migration_cost: out of memory\n");
		return EXIT_REFUSED;
	}
	if (!buffer_init(&buf, size))
		return EXIT_REFUSED;
	/* Page faults belong to no migration. */
	touch(&buf);
	/* Repetitions go round all pairs in turn, so slow drift (clock frequency,
	 * other load) spreads over every pair instead of biasing the last ones. */
	for (rep = 0; rep < o.repeat; rep++) {
		for (pair = 0; pair < pairs; pair++) {
			int src = cpus[pair / count], dst = cpus[pair % count];
			size_t at = (size_t)pair * (size_t)o.repeat + (size_t)rep;

			if (!migrate(src))
				return EXIT_REFUSED;
			touch(&buf);
			if (!migrate(dst))
				return EXIT_REFUSED;
			cross_ns[at] = timed_touch(&buf);
			hot_ns[at] = timed_touch(&buf);
		}
	}
	printf("cache_size=%" PRIu64, size);
	if (level)
		printf(" cache_level=%d", level);
	printf(" line_size=%zu", buf.line_size);
	if (read_cpu_mhz(&mhz))
		printf(" cpu_mhz=%.3f", mhz);
	printf("\n");
	for (pair = 0; pair < pairs; pair++) {
		const int64_t *h = hot_ns + (size_t)pair * (size_t)o.repeat;
		const int64_t *x = cross_ns + (size_t)pair * (size_t)o.repeat;

		for (rep = 0; rep < o.repeat; rep++)
			cost_ns[rep] = x[rep] - h[rep];
		hot = summarize(h, o.repeat, scratch);
		cross = summarize(x, o.repeat, scratch);
		cost = summarize(cost_ns, o.repeat, scratch);
		printf("src=%d dst=%d repeat=%d hot_median_ns=%" PRId64 " hot_min_ns=%" PRId64
		       " median_ns=%" PRId64 " min_ns=%" PRId64 " mad_ns=%" PRId64
		       " cost_ns=%" PRId64 " cost_mad_ns=%" PRId64 "\n",
		       cpus[pair / count], cpus[pair % count], o.repeat, hot.median, hot.min,
		       cross.median, cross.min, cross.mad, cost.median, cost.mad);
	}
	return 0;
}
