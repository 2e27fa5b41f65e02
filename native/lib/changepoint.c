/*
 * changepoint: the inner loops of perfline's change-point detector
 * (src/perfline/stats/changepoint.py, loaded with ctypes by stats/changepoint_kernels.py,
 * which holds the interpreter's lock through every call).
 *
 * In numpy a segment's rank scan was eight passes over its samples, the Hodges-Lehmann
 * shift three partitions of all n1 x n2 differences and a tail sum a dozen array
 * operations on a few hundred values; with reading the points and ordering them they
 * were most of a detection of 10,000 points (docs/statistics.md, Complexity). Each
 * function here gives what the numpy code gave: integer rank sums, the same float
 * operations in the same order, order statistics that are elements of the differences
 * whatever the algorithm; only the tail sums differ in their last bits (another erfc,
 * another order of summation).
 */
/* The stable ABI of Python 3.11: any later interpreter loads it. */
#define Py_LIMITED_API 0x030b0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * The values of a list of n points, each a list of r floats, into out (n * r values,
 * point after point). Returns 0, or -1 (with nothing raised) if `points` is not that:
 * the caller then reads it the general way. Reading 10,000 one-value lists one by one
 * in Python (their lengths, then their values) took a fifth of a detection.
 */
int cp_read_points(PyObject *points, Py_ssize_t n, Py_ssize_t r, double *out)
{
	if (!PyList_Check(points) || PyList_Size(points) != n)
		return -1;
	/* The values' type, once checked: numpy's float64 is a subclass of float, whose
	 * check walks its bases (a tenth of a detection when done for every value). */
	PyTypeObject *checked = &PyFloat_Type;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *point = PyList_GetItem(points, i);
		if ((Py_TYPE(point) != &PyList_Type && !PyList_Check(point)) || PyList_Size(point) != r)
			return -1;
		for (Py_ssize_t j = 0; j < r; j++) {
			PyObject *value = PyList_GetItem(point, j);
			if (Py_TYPE(value) != checked) {
				if (!PyFloat_Check(value))
					return -1;
				checked = Py_TYPE(value);
			}
			*out++ = PyFloat_AsDouble(value);
		}
	}
	return 0;
}

/*
 * The rank scan of a segment of m points with r samples each (size samples in all).
 *
 * order: the segment's samples (offsets from its first) in ascending order of their
 * values. Where it is not `outer` itself, it is picked out of `outer`, the order of an
 * enclosing segment's samples, whose first is `shift` samples before this one's: O(n)
 * where sorting each segment again was O(n log n). order has room for size + 1.
 *
 * in_place[s]: twice sample s's mid-rank less size + 1, ties sharing
 * their mid-rank (`values`, the segment's samples, is NULL when no two samples of the
 * series are equal: then the ranks are the places in order). With r = 0 (points with
 * unequal counts) that is all. Otherwise scores[p] (unless r = 1: then the scores are
 * in_place): the sum of point p's r values of in_place, and result[] gets
 * { max over splits k = 3..m-3 of |scores[0] + ... + scores[k-1]| / spread[k - 3],
 *   the first k at the maximum, the sum of squares of the scores }. Returns how many
 * samples were picked (size, unless `outer` did not hold the segment's).
 */
long cp_rank_scan(const int64_t *outer, long n_outer, long shift, long size, const double *values, long r, long m,
		  const double *spread, int64_t *order, int64_t *in_place, int64_t *scores, double *result)
{
	const int64_t centre = size + 1;
	long picked = size;
	if (outer != order) {
		/* Without a branch (whether an offset is in the segment is as random as the
		 * values): each offset is written, then kept or not. The ranks are scattered
		 * in a pass of their own, over the picked offsets only: done while picking,
		 * every offset of the enclosing segment was a store to a random place. */
		picked = 0;
		for (long i = 0; i < n_outer; i++) {
			int64_t o = outer[i] - shift;
			order[picked] = o;
			picked += (uint64_t)o < (uint64_t)size;
		}
		if (picked != size)
			return picked;
	}
	if (!values) {
		for (long i = 0; i < size; i++)
			in_place[order[i]] = 2 * (int64_t)i + 2 - centre;
	}
	if (values) {
		long start = 0;
		while (start < size) {
			long end = start + 1;
			double v = values[order[start]];
			while (end < size && values[order[end]] == v)
				end++;
			/* Doubled mid-rank of places start+1 .. end (1-based): start + end + 1. */
			int64_t rank = (int64_t)start + end + 1 - centre;
			for (long i = start; i < end; i++)
				in_place[order[i]] = rank;
			start = end;
		}
	}
	if (r == 0)
		return picked;
	const int64_t *points = in_place;
	if (r > 1) {
		for (long p = 0; p < m; p++) {
			int64_t sum = 0;
			for (long s = p * r; s < (p + 1) * r; s++)
				sum += in_place[s];
			scores[p] = sum;
		}
		points = scores;
	}
	/* The split before point k: the partial sum of the first k scores. A product
	 * screens the splits (a division costs several); only those
	 * within rounding of the largest so far are divided, as numpy did, so the largest
	 * is the same number at the same split. */
	const long min_segment = 3;
	const double screen = 1.0 - 1e-9;
	int64_t partial = 0;
	double top = -1.0, top_screen = -1.0;
	long best = 0;
	for (long k = 1; k <= m - min_segment; k++) {
		partial += points[k - 1];
		if (k < min_segment)
			continue;
		double magnitude = (double)(partial < 0 ? -partial : partial);
		if (magnitude >= top_screen * spread[k - min_segment]) {
			double z = magnitude / spread[k - min_segment];
			if (z > top) {
				top = z;
				best = k;
				top_screen = z * screen;
			}
		}
	}
	/* Exact, then rounded once (numpy's float sum was exact wherever it fit in 53 bits). */
	__int128 energy = 0;
	for (long p = 0; p < m; p++)
		energy += (__int128)points[p] * points[p];
	result[0] = top;
	result[1] = (double)best;
	result[2] = (double)energy;
	return picked;
}

/*
 * Sort keys for the order of n values: each value's bits as an integer in the values'
 * order (a negative double's other bits count down: they are flipped), with the lowest
 * `shift` bits replaced by the value's index, so that integers (which numpy sorts
 * several times faster than it argsorts doubles) sort into the values' order wherever
 * what is left of the values tells every two apart.
 */
void cp_order_keys(const double *values, long n, int shift, int64_t *keys)
{
	const uint64_t low = ((uint64_t)1 << shift) - 1;
	for (long i = 0; i < n; i++) {
		uint64_t bits = 0; /* -0.0 as 0.0: they are equal */
		if (values[i] != 0.0)
			memcpy(&bits, &values[i], sizeof bits);
		if (bits >> 63)
			bits ^= ~((uint64_t)1 << 63);
		keys[i] = (int64_t)((bits & ~low) | (uint64_t)i);
	}
}

/*
 * The sorted keys of cp_order_keys into the values' order (their indexes), in place.
 * Returns 0, or 1 (keys left as they were) if two keys share what is left of their
 * values: those two may be tied, or in either order.
 */
int cp_keys_to_order(int64_t *keys, long n, int shift)
{
	const uint64_t low = ((uint64_t)1 << shift) - 1;
	for (long i = 1; i < n; i++)
		if (((uint64_t)keys[i] & ~low) == ((uint64_t)keys[i - 1] & ~low))
			return 1;
	for (long i = 0; i < n; i++)
		keys[i] = (int64_t)((uint64_t)keys[i] & low);
	return 0;
}

/* Whether two of the n values are equal, given their ascending order. */
int cp_any_ties(const double *values, const int64_t *order, long n)
{
	for (long i = 1; i < n; i++)
		if (values[order[i]] == values[order[i - 1]])
			return 1;
	return 0;
}

/*
 * Sums of the squared lag-1 and lag-2 differences of x (n values), into sums[0] and
 * sums[1]: what the first pass's bound of the noise's autocorrelation is made of.
 */
void cp_difference_sums(const double *x, long n, double *sums)
{
	double lag1 = 0.0, lag2 = 0.0;
	for (long i = 1; i < n; i++) {
		double d = x[i] - x[i - 1];
		lag1 += d * d;
	}
	for (long i = 2; i < n; i++) {
		double d = x[i] - x[i - 2];
		lag2 += d * d;
	}
	sums[0] = lag1;
	sums[1] = lag2;
}

/*
 * The residuals of x (n values) around the means of its segments, which end at
 * ends[0..count-1] (the last at n): their sum of squares into sums[0] and the sum of
 * the products of neighbouring residuals (across the segments' ends too) into sums[1].
 */
void cp_residual_sums(const double *x, long n, const int64_t *ends, long count, double *sums)
{
	double energy = 0.0, lagged = 0.0, previous = 0.0;
	long start = 0;
	for (long s = 0; s < count; s++) {
		long end = ends[s] < n ? ends[s] : n;
		if (end <= start)
			continue;
		double total = 0.0;
		for (long i = start; i < end; i++)
			total += x[i];
		double mean = total / (double)(end - start);
		for (long i = start; i < end; i++) {
			double residual = x[i] - mean;
			energy += residual * residual;
			if (i)
				lagged += residual * previous;
			previous = residual;
		}
		start = end;
	}
	sums[0] = energy;
	sums[1] = lagged;
}

/* Hoare's partition of x[i..j] around a pivot that is one of them: returns the last
 * place of the lower part, which holds no value above the pivot (the upper none below). */
static long partition(double *x, long i, long j, double pivot)
{
	for (;;) {
		while (x[i] < pivot)
			i++;
		while (x[j] > pivot)
			j--;
		if (i >= j)
			return j;
		double t = x[i];
		x[i++] = x[j];
		x[j--] = t;
	}
}

/* Ascending order of a few hundred doubles: quicksort, insertion sort below 16. */
static void sort_doubles(double *x, long n)
{
	while (n > 16) {
		double a = x[0], b = x[n / 2], c = x[n - 1];
		double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
		long j = partition(x, 0, n - 1, pivot);
		/* x[0..j] <= pivot <= x[j+1..n-1]: recurse into the smaller part. */
		if (j + 1 < n - j - 1) {
			sort_doubles(x, j + 1);
			x += j + 1;
			n -= j + 1;
		} else {
			sort_doubles(x + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	for (long i = 1; i < n; i++) {
		double v = x[i];
		long j = i;
		while (j > 0 && x[j - 1] > v) {
			x[j] = x[j - 1];
			j--;
		}
		x[j] = v;
	}
}

/* The k-th smallest (from 0) of x[0..n-1], which it reorders (Hoare's selection). */
static double select_nth(double *x, long n, long k)
{
	long left = 0, right = n - 1;
	while (right - left > 16) {
		long j = partition(x, left, right, x[left + (right - left) / 2]);
		if (k <= j)
			right = j;
		else
			left = j + 1;
	}
	sort_doubles(x + left, right - left + 1);
	return x[k];
}

/*
 * The differences a[i] - b[j] of ascending a (n_a) and descending b (n_b) form a matrix
 * whose rows and columns ascend (rounding is monotone, so the computed differences do
 * too). Count, for every row, the differences below `pivot` (strictly when `strict`):
 * as i grows the count can only fall, so one walk over the columns serves all rows.
 */
static void row_counts(const double *a, long n_a, const double *b, long n_b, double pivot, int strict,
		       long *counts)
{
	long j = n_b;
	for (long i = 0; i < n_a; i++) {
		if (strict)
			while (j > 0 && !(a[i] - b[j - 1] < pivot))
				j--;
		else
			while (j > 0 && !(a[i] - b[j - 1] <= pivot))
				j--;
		counts[i] = j;
	}
}

static long clamp(long v, long lo, long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

#define SAMPLE 64
/* Sample places either side of the wanted rank's own: the band keeps it unless the
 * sample was off by more than that. */
#define SAMPLE_MARGIN 4
#define NARROW_ROUNDS 8
/* Narrowing stops at a band of this many walks' size (n_a + n_b each): a round more
 * (two walks and a sample) cost more than selecting from the larger band. */
#define BAND_WALKS 2

struct matrix {
	const double *a, *b; /* ascending after, descending before */
	long n_a, n_b;
	long *lo, *hi, *below, *at_most; /* n_a each */
};

/* SAMPLE differences of the band (`active` of them) at evenly spaced places in the
 * order of its rows. The result does not depend on the sample, only the time: a
 * systematic one costs one walk over the rows. */
static void sample_band(const struct matrix *m, long active, double *sample)
{
	double step = (double)active / SAMPLE, next = step / 2;
	long before = 0, s = 0;
	for (long i = 0; i < m->n_a && s < SAMPLE; i++) {
		long width = m->hi[i] - m->lo[i];
		while (s < SAMPLE && (long)next < before + width) {
			sample[s++] = m->a[i] - m->b[m->lo[i] + (long)next - before];
			next += step;
		}
		before += width;
	}
	for (; s < SAMPLE; s++) /* rounding left the last place out */
		sample[s] = sample[s - 1];
}

/*
 * Narrows the band of candidates [lo[i], hi[i]) of each row to one that holds the
 * difference of rank k (from 0) and about as many as a walk over the rows costs, and
 * returns how many differences are below it. Each round samples the band, takes as
 * pivots the sample's elements a few places below and above the wanted rank's own
 * place, and drops the differences below the lower pivot and above the upper one where
 * their counts show that the wanted rank is not among them.
 */
static long narrow(struct matrix *m, long k)
{
	const double *a = m->a, *b = m->b;
	long n_a = m->n_a, n_b = m->n_b;
	long excluded = 0, active = n_a * n_b;
	for (long i = 0; i < n_a; i++) {
		m->lo[i] = 0;
		m->hi[i] = n_b;
	}
	for (int round = 0; round < NARROW_ROUNDS && active > BAND_WALKS * (n_a + n_b); round++) {
		double sample[SAMPLE];
		sample_band(m, active, sample);
		long place = (long)((double)(k - excluded) / (double)active * SAMPLE);
		long low_place = place - SAMPLE_MARGIN, high_place = place + SAMPLE_MARGIN;
		long n_below = excluded, n_at_most = excluded + active;
		/* The pivots: the sample's elements at those places in its order. */
		double low = low_place >= 0 ? select_nth(sample, SAMPLE, low_place) : 0.0;
		double high = high_place < SAMPLE ? select_nth(sample, SAMPLE, high_place) : 0.0;
		if (low_place >= 0) {
			row_counts(a, n_a, b, n_b, low, 1, m->below);
			n_below = excluded;
			for (long i = 0; i < n_a; i++) {
				m->below[i] = clamp(m->below[i], m->lo[i], m->hi[i]);
				n_below += m->below[i] - m->lo[i];
			}
		}
		if (high_place < SAMPLE) {
			row_counts(a, n_a, b, n_b, high, 0, m->at_most);
			n_at_most = excluded;
			for (long i = 0; i < n_a; i++) {
				m->at_most[i] = clamp(m->at_most[i], m->lo[i], m->hi[i]);
				n_at_most += m->at_most[i] - m->lo[i];
			}
		}
		/* Each side is dropped only if the wanted rank is not in it. */
		if (high_place < SAMPLE && k < n_at_most) {
			memcpy(m->hi, m->at_most, sizeof(long) * (size_t)n_a);
			active = n_at_most - excluded;
		}
		if (low_place >= 0 && k >= n_below) {
			memcpy(m->lo, m->below, sizeof(long) * (size_t)n_a);
			active -= n_below - excluded;
			excluded = n_below;
		}
	}
	return excluded;
}

/*
 * The order statistics of all after - before differences (n_after x n_before) at the
 * ascending ranks `ranks[0..count-1]` (from 0), into `out`. The differences form a
 * matrix with ascending rows and columns (after ascending, before descending; rounding
 * is monotone, so the computed differences are ordered too): a band of it that holds a
 * wanted rank is found from the counts of differences below pivots, each a walk over
 * the rows, and only it is formed and selected from. Returns 0, or -1 if out of memory.
 */
int cp_difference_quantiles(const double *before, long n_before, const double *after, long n_after, const long *ranks,
			    long count, double *out)
{
	long n_a = n_after, n_b = n_before;
	/* The band left is at most BAND_WALKS (n_a + n_b) (a pool of all n_a x n_b
	 * differences took longer to map than the selection): more after NARROW_ROUNDS, a
	 * pool of its own. */
	double *a = malloc(sizeof(double) * (size_t)((1 + BAND_WALKS) * (n_a + n_b)));
	long *rows = malloc(sizeof(long) * (size_t)(4 * n_a));
	if (!a || !rows) {
		free(a);
		free(rows);
		return -1;
	}
	double *b = a + n_a, *pool = b + n_b;
	memcpy(a, after, sizeof(double) * (size_t)n_a);
	sort_doubles(a, n_a);
	for (long j = 0; j < n_b; j++)
		b[j] = -before[j];
	sort_doubles(b, n_b);
	for (long j = 0; j < n_b; j++) /* descending, exactly: negation is exact */
		b[j] = -b[j];
	struct matrix m = { a, b, n_a, n_b, rows, rows + n_a, rows + 2 * n_a, rows + 3 * n_a };
	for (long q = 0; q < count; q++) {
		if (q && ranks[q] == ranks[q - 1]) {
			out[q] = out[q - 1];
		} else if (q && ranks[q] == ranks[q - 1] + 1) {
			/* The next one up: the previous one again if it repeats, else the smallest
			 * difference above it, the first past those at most it in some row. */
			double previous = out[q - 1], next = previous;
			row_counts(a, n_a, b, n_b, previous, 0, m.at_most);
			long n_at_most = 0;
			int found = 0;
			for (long i = 0; i < n_a; i++) {
				n_at_most += m.at_most[i];
				if (m.at_most[i] < n_b && (!found || a[i] - b[m.at_most[i]] < next)) {
					next = a[i] - b[m.at_most[i]];
					found = 1;
				}
			}
			out[q] = n_at_most > ranks[q] ? previous : next;
		} else {
			long excluded = narrow(&m, ranks[q]), n = 0;
			for (long i = 0; i < n_a; i++)
				n += m.hi[i] - m.lo[i];
			double *band = n <= BAND_WALKS * (n_a + n_b) ? pool : malloc(sizeof(double) * (size_t)n);
			if (!band) {
				free(a);
				free(rows);
				return -1;
			}
			n = 0;
			for (long i = 0; i < n_a; i++)
				for (long j = m.lo[i]; j < m.hi[i]; j++)
					band[n++] = a[i] - b[j];
			out[q] = select_nth(band, n, ranks[q] - excluded);
			if (band != pool)
				free(band);
		}
	}
	free(a);
	free(rows);
	return 0;
}

/*
 * A tester's constants (stats/changepoint.py, _Tester), in one array: the log of the
 * level, the square root of the long-run variance factor, the smallest inflation, the
 * number of nodes of rho's error, then the nodes' inflations, weights and log weights.
 * A segment length's layout (_SplitLayout.constants): the interior's length in u (0:
 * every split a term of its own), its largest scale, and the weights' total.
 */
enum { T_LOG_ALPHA, T_ROOT_FACTOR, T_MIN_INFLATION, T_NODES, T_INFLATIONS };
enum { L_INTERIOR, L_INTERIOR_SCALE, L_TOTAL_WEIGHT };

/* The standard normal's distribution function, arranged as scipy's ndtr (Cephes) is. */
static double normal_cdf(double a)
{
	double x = a * M_SQRT1_2, z = fabs(x);
	if (z < M_SQRT1_2)
		return 0.5 + 0.5 * erf(x);
	double y = 0.5 * erfc(z);
	return x > 0 ? 1.0 - y : y;
}

/*
 * Whether a lower bound of the tail approximation's p-value of |z| (after the factor) is
 * at the level. Every term of the sum is positive and nu decreases, so the interior's
 * terms alone, each at the interior's largest scale, bound the sum from below: a few
 * scalar operations where the sum takes hundreds.
 */
static int above_level(double z, const double *tester, const double *layout)
{
	if (!layout[L_INTERIOR])
		return 0;
	const double sqrt2 = sqrt(2.0), sqrt_2pi = sqrt(2.0 * M_PI);
	const long nodes = (long)tester[T_NODES];
	const double *inflations = tester + T_INFLATIONS, *weights = inflations + nodes;
	double bound = 0.0;
	for (long n = 0; n < nodes; n++) {
		double b = z * inflations[n], p = 1.0;
		if (!(b < 1.0)) { /* nu as tail_total has it (erfc directly), on one value */
			double half = 0.5 * b * layout[L_INTERIOR_SCALE];
			double below = 0.5 * erfc(-half / sqrt2);
			double density = exp(-0.5 * half * half) / sqrt_2pi;
			double nu = (below - 0.5) / (half * (half * below + density));
			double q = b * exp(-0.5 * b * b) / sqrt_2pi * nu * layout[L_INTERIOR];
			p = q < 1.0 ? q : 1.0;
		}
		bound += weights[n] * p;
		/* (A margin for the rounding of the sum it is compared with.) The terms are
		 * positive: once part of the sum is at the level, all of it is. */
		if (bound > 0.0 && log(bound) > tester[T_LOG_ALPHA] + 1e-9)
			return 1;
	}
	return 0;
}

/*
 * A |z| (after the factor) beyond which the tail approximation's p-value is below the
 * level (HUGE_VAL if none is known). nu is at most 1, so the sum is at most the weights'
 * total W, and p at most sum_n w_n b_n phi(b_n) W with b_n = z c_n, where b phi(b) falls
 * for b > 1: below the level once b phi(b) W = alpha at the smallest c_n. That b is found
 * by Newton's method, which on this concave function stays above the root after its
 * first step.
 */
double cp_tail_bound(const double *tester, const double *layout)
{
	if (!layout[L_INTERIOR])
		return HUGE_VAL;
	double gap = log(layout[L_TOTAL_WEIGHT]) - tester[T_LOG_ALPHA] - 0.5 * log(2.0 * M_PI);
	if (gap < 2.0)
		return HUGE_VAL;
	double b = sqrt(2.0 * gap); /* the root without log b: below it */
	for (int i = 0; i < 4; i++)
		b -= (log(b) - 0.5 * b * b + gap) / (1.0 / b - b);
	b *= 1.0 + 1e-9; /* past the rounding of a converged step */
	if (log(b) - 0.5 * b * b + gap > 0.0) /* not yet above the root */
		return HUGE_VAL;
	return b / tester[T_MIN_INFLATION];
}

/*
 * A segment's test where a bound decides it: -1 if a lower bound of its p-value is at
 * the level (not significant), 1 if its |z| (after the factor) is past the bound beyond
 * which p is below the level, 0 if only the sum can tell. Most segments without a
 * change are far above the level (|z| of 1 to 3), most with a large one far below it.
 */
int cp_decide(double z, const double *tester, const double *layout)
{
	if (above_level(z, tester, layout))
		return -1;
	return z > cp_tail_bound(tester, layout) * (1.0 + 1e-9) ? 1 : 0;
}

/*
 * Siegmund's sum for the statistic b: over the terms j whose reach is at least
 * `threshold`, weights[j] * nu(b * scales[j]), where nu is his correction for sampling
 * on a grid, nu(x) = (Phi(x/2) - 1/2) / (x/2 (x/2 Phi(x/2) + phi(x/2))).
 */
static double tail_total(double b, const double *scales, const double *weights, const double *reach,
			 double threshold, long n_terms)
{
	const double inverse_root_2pi = 1.0 / sqrt(2.0 * M_PI);
	double total = 0.0;
	for (long j = 0; j < n_terms; j++) {
		if (!(reach[j] >= threshold))
			continue;
		double half = b * scales[j] * 0.5;
		double below = normal_cdf(half);
		double density = exp(half * half * -0.5) * inverse_root_2pi;
		total += (below - 0.5) / ((half * below + density) * half) * weights[j];
	}
	return total;
}

/*
 * log P(max_k |Z_k| >= z) under no change, after Siegmund (1988), averaged over the
 * nodes of rho's error; z is after the long-run variance factor, and positive. For a
 * standardized bridge sampled at k = 1..m-1,
 *   P(max |Z_k| > b) ~ b phi(b) sum_k m/(k(m-k)) nu(b sqrt(m/(k(m-k)))),
 * here the sum over a segment's terms (scales, weights: _TailTerms). At a node with
 * inflation c the statistic is b = z c; the terms of splits that no order of the
 * scores could make reach it (reach below z times the root of the factor) are left out.
 * Below b = 1 the approximation, made for the tail, does not hold and the p-value is
 * about 1; where no split can reach z there is nothing to sum, and 1 is the cautious
 * answer. tails[n] gets log(weight * p) at node n; returns the log of their sum. (In
 * numpy and Python this was a dozen array operations and a few lists a call.)
 */
double cp_log_tail(double z, const double *tester, const double *scales, const double *weights,
		   const double *reach, long n_terms, double *tails)
{
	const double log_sqrt_2pi = 0.5 * log(2.0 * M_PI);
	const long nodes = (long)tester[T_NODES];
	const double *inflations = tester + T_INFLATIONS, *log_weights = inflations + 2 * nodes;
	const double threshold = z * tester[T_ROOT_FACTOR] * (1.0 - 1e-12);
	double top = 0.0;
	for (long n = 0; n < nodes; n++) {
		double b = z * inflations[n], tail = 0.0;
		if (!(b < 1.0)) {
			double total = tail_total(b, scales, weights, reach, threshold, n_terms);
			if (!(total <= 0.0)) {
				tail = log(b * total) - 0.5 * b * b - log_sqrt_2pi;
				if (0.0 < tail)
					tail = 0.0;
			}
		}
		tails[n] = log_weights[n] + tail;
		if (!n || tails[n] > top)
			top = tails[n];
	}
	double sum = 0.0;
	for (long n = 0; n < nodes; n++)
		sum += exp(tails[n] - top);
	return top + log(sum);
}

/*
 * The reach of a segment's splits near its ends: the largest |z| any order of its
 * scores could give there. ends: the scores in ascending order (all n_ends of them), or
 * only the `edge` smallest then the `edge` largest (n_ends = 2 edge). A split with j + 1
 * points on one side reaches at most the larger of the sums of the j + 1 largest and of
 * the j + 1 smallest (negated) scores over spread * bound_spread[j]. reach (n_terms) is
 * infinite but for the terms near[i] and far[i], which get the bounds of near_j[i] and
 * far_j[i] (far last: a split near both ends takes the far end's).
 */
void cp_reach(const double *ends, long n_ends, long edge, double spread, const double *bound_spread,
	      const int64_t *near, const int64_t *near_j, long n_near, const int64_t *far, const int64_t *far_j,
	      long n_far, double *bounds, double *reach, long n_terms)
{
	double top = 0.0, bottom = 0.0;
	for (long j = 0; j < edge; j++) {
		top += ends[n_ends - 1 - j];
		bottom += ends[j];
		double largest = top > -bottom ? top : -bottom;
		bounds[j] = largest / (spread * bound_spread[j]);
	}
	for (long t = 0; t < n_terms; t++)
		reach[t] = HUGE_VAL;
	for (long i = 0; i < n_near; i++)
		reach[near[i]] = bounds[near_j[i]];
	for (long i = 0; i < n_far; i++)
		reach[far[i]] = bounds[far_j[i]];
}
