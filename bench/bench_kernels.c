/* bench/bench_kernels.c: single-core throughput of the agg_reduce kernels next to memcpy of the
 * same size, in cache (4 KiB, one switch slot) and in memory (64 MiB). Prints a table and one
 * JSON object per row. A benchmark, not a test: it asserts nothing. Runtime < 15 s. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "util/util.h"

/* Internal hook of lib/agg/reduce.c (not in agg.h): -1 auto, 0 baseline, 1 AVX2+F16C. */
int agg__reduce_set_isa(int isa);

#define SMALL_BYTES (4u << 10)
#define LARGE_BYTES (64u << 20)

/* Keeps the compiler from dropping or merging the timed stores. */
#define BARRIER() __asm__ volatile("" ::: "memory")

struct bench_cfg {
	uint64_t budget_small_ns, budget_large_ns;
	int isa;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median GB/s (bytes per ns) over timed batches of `calls` calls each, until budget_ns has
 * passed (at least 3 batches, at most 4096). kernel < 0 times memcpy. The median rather than
 * the best: a 2-core VM is noisy and the best batch overstates what a busy switch sees. */
static double measure(uint8_t *dst, const uint8_t *src, size_t nbytes, int dt, int op,
		      int is_memcpy, uint64_t budget_ns)
{
	enum { MAX_BATCHES = 4096 };
	static double rate[MAX_BATCHES];
	size_t esz = inca_dtype_size(dt), count = nbytes / esz;
	/* ~64 KiB of work per batch keeps timer overhead < 1% for small buffers. */
	unsigned calls = nbytes >= (64u << 10) ? 1 : (unsigned)((64u << 10) / nbytes);
	int n = 0;

	/* Warm-up: caches, TLB, page faults, the kernel dispatch. */
	if (is_memcpy)
		memcpy(dst, src, nbytes);
	else
		agg_reduce(dst, src, count, dt, op);
	BARRIER();

	uint64_t start = util_now_ns();
	while (n < MAX_BATCHES && (n < 3 || util_now_ns() - start < budget_ns)) {
		uint64_t t0 = util_now_ns();
		for (unsigned c = 0; c < calls; c++) {
			if (is_memcpy)
				memcpy(dst, src, nbytes);
			else
				agg_reduce(dst, src, count, dt, op);
			BARRIER();
		}
		uint64_t t1 = util_now_ns();
		rate[n++] = (double)nbytes * calls / (double)(t1 - t0 ? t1 - t0 : 1);
	}
	qsort(rate, (size_t)n, sizeof rate[0], cmp_double);
	return rate[n / 2];
}

/* Values that keep floats away from subnormals (slow paths on some CPUs) while summing. */
static void fill(uint8_t *p, size_t nbytes, int dt, struct util_rng *rng)
{
	size_t esz = inca_dtype_size(dt);
	for (size_t off = 0; off + esz <= nbytes; off += esz) {
		float f = (float)(util_rng_double(rng) * 2.0 - 1.0);
		double d = f;
		uint64_t v = util_rng_next(rng);
		uint16_t h;
		switch (dt) {
		case INCA_FP16:
			h = agg_fp32_to_fp16(f);
			memcpy(p + off, &h, 2);
			break;
		case INCA_BF16:
			h = agg_fp32_to_bf16(f);
			memcpy(p + off, &h, 2);
			break;
		case INCA_FP32:
			memcpy(p + off, &f, 4);
			break;
		case INCA_FP64:
			memcpy(p + off, &d, 8);
			break;
		default:
			memcpy(p + off, &v, esz);
			break;
		}
	}
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--isa auto|baseline|avx2] [--quick]\n"
		"  agg_reduce throughput per core vs memcpy; GB/s = dst bytes / second (1e9)\n",
		argv0);
}

int main(int argc, char **argv)
{
	static const char *const isa_names[] = {"baseline", "avx2"};
	struct bench_cfg cfg = {.budget_small_ns = 60000000, .budget_large_ns = 200000000, .isa = -1};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
			const char *v = argv[++i];
			cfg.isa = strcmp(v, "baseline") == 0 ? 0 : strcmp(v, "avx2") == 0 ? 1 : -1;
			if (cfg.isa < 0 && strcmp(v, "auto") != 0) {
				usage(argv[0]);
				return 2;
			}
		} else if (strcmp(argv[i], "--quick") == 0) {
			cfg.budget_small_ns = 10000000;
			cfg.budget_large_ns = 30000000;
		} else {
			usage(argv[0]);
			return 2;
		}
	}
	int isa = agg__reduce_set_isa(cfg.isa);
	if (isa < 0) {
		fprintf(stderr, "kernel set not supported on this CPU\n");
		return 1;
	}

	/* Offsets of 1 byte: payloads after a variable-length INCA header are unaligned, and
	 * memcpy gets the same handicap so the ratio stays fair. */
	uint8_t *dbuf = malloc(LARGE_BYTES + 64), *sbuf = malloc(LARGE_BYTES + 64);
	if (!dbuf || !sbuf) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	uint8_t *dst = dbuf + 1, *src = sbuf + 1;
	struct util_rng rng;
	util_rng_seed(&rng, 42);

	struct {
		int dt, op;
	} rows[INCA_DTYPE_COUNT + 2];
	int nrows = 0;
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++) {
		rows[nrows].dt = dt;
		rows[nrows++].op = INCA_SUM;
	}
	rows[nrows].dt = INCA_FP32;
	rows[nrows++].op = INCA_MIN;
	rows[nrows].dt = INCA_FP32;
	rows[nrows++].op = INCA_MAX;

	static const size_t sizes[] = {SMALL_BYTES, LARGE_BYTES};
	printf("# agg_reduce, one core, kernel set %s, unaligned buffers; GB/s of dst bytes (1e9/s),\n"
	       "# median of timed batches; ratio = kernel / memcpy of the same size\n",
	       isa_names[isa]);
	printf("# %-7s %-5s %10s %10s %12s %7s\n", "dtype", "op", "bytes", "GB/s", "memcpy GB/s",
	       "ratio");
	fflush(stdout);
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		size_t nb = sizes[si];
		uint64_t budget = nb <= SMALL_BYTES ? cfg.budget_small_ns : cfg.budget_large_ns;
		for (int r = 0; r < nrows; r++) {
			int dt = rows[r].dt, op = rows[r].op;
			fill(src, nb, dt, &rng);
			fill(dst, nb, dt, &rng);
			/* memcpy measured in the same row, right before, so both see the same clock
			 * and cache state; the kernel run then starts again from fresh data. */
			double mc = measure(dst, src, nb, dt, op, 1, budget / 2);
			fill(dst, nb, dt, &rng);
			double k = measure(dst, src, nb, dt, op, 0, budget);
			double ratio = mc > 0 ? k / mc : 0;
			printf("  %-7s %-5s %10zu %10.2f %12.2f %7.3f\n", inca_dtype_name(dt),
			       inca_op_name(op), nb, k, mc, ratio);
			printf("{\"bench\":\"kernel\",\"isa\":\"%s\",\"dtype\":\"%s\",\"op\":\"%s\","
			       "\"bytes\":%zu,\"gbps\":%.3f,\"memcpy_gbps\":%.3f,\"ratio\":%.4f}\n",
			       isa_names[isa], inca_dtype_name(dt), inca_op_name(op), nb, k, mc, ratio);
			fflush(stdout);
		}
	}
	free(dbuf);
	free(sbuf);
	return 0;
}
