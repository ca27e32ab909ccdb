/* bench/bench_kernels.c: single-core throughput of the agg_reduce kernels next to memcpy of the
 * same size, in cache (4 KiB, one switch slot) and in memory (64 MiB). Prints a table and one
 * JSON object per row. A benchmark, not a test: it asserts nothing. Runtime < 15 s. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cli.h"
#include "agg/agg.h"
#include "agg/reduce_int.h"
#include "util/util.h"

#define SMALL_BYTES (4u << 10)
#define LARGE_BYTES (64u << 20)

/* Keeps the compiler from dropping or merging the timed stores. */
#define BARRIER() __asm__ volatile("" ::: "memory")

struct bench_cfg {
	uint64_t budget_small_ns, budget_large_ns;
	int isa;
	unsigned src_offset; /* bytes, < 64 */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct rates {
	double kernel_gbps, memcpy_gbps;
};

/* Alternates timed batches of agg_reduce and of memcpy on the same buffers until budget_ns has
 * passed (at least 3 pairs), and returns the median rate of each in GB/s (bytes per ns).
 * Interleaving keeps the ratio honest on a shared, noisy machine: both see the same clock
 * and neighbours. The median rather than the best, which would overstate what a busy switch
 * sees. Each batch is at least ~64 KiB of work so the timer costs < 1%. */
static struct rates measure(uint8_t *dst, const uint8_t *src, size_t nbytes, int dt, int op,
			    uint64_t budget_ns)
{
	enum { MAX_BATCHES = 2048 };
	static double kr[MAX_BATCHES], mr[MAX_BATCHES];
	size_t count = nbytes / inca_dtype_size(dt);
	unsigned calls = nbytes >= (64u << 10) ? 1 : (unsigned)((64u << 10) / nbytes);
	int n = 0;

	/* Warm-up: caches, TLB, page faults, the kernel dispatch. */
	memcpy(dst, src, nbytes);
	agg_reduce(dst, src, count, dt, op);
	BARRIER();

	uint64_t start = util_now_ns();
	while (n < MAX_BATCHES && (n < 3 || util_now_ns() - start < budget_ns)) {
		uint64_t t0 = util_now_ns();
		for (unsigned c = 0; c < calls; c++) {
			memcpy(dst, src, nbytes);
			BARRIER();
		}
		uint64_t t1 = util_now_ns();
		for (unsigned c = 0; c < calls; c++) {
			agg_reduce(dst, src, count, dt, op);
			BARRIER();
		}
		uint64_t t2 = util_now_ns();
		mr[n] = (double)nbytes * calls / (double)(t1 - t0 ? t1 - t0 : 1);
		kr[n] = (double)nbytes * calls / (double)(t2 - t1 ? t2 - t1 : 1);
		n++;
	}
	qsort(kr, (size_t)n, sizeof kr[0], cmp_double);
	qsort(mr, (size_t)n, sizeof mr[0], cmp_double);
	return (struct rates){.kernel_gbps = kr[n / 2], .memcpy_gbps = mr[n / 2]};
}

/* Values in [-1, 1] keep floats away from subnormals (slow paths on some CPUs) while summing.
 * Random data for the first 256 KiB, repeated after that: generating 64 MiB element by
 * element would take most of the time budget. */
static void fill(uint8_t *p, size_t nbytes, int dt, struct util_rng *rng)
{
	size_t esz = inca_dtype_size(dt), gen = nbytes < (256u << 10) ? nbytes : (256u << 10);
	for (size_t off = 0; off + esz <= gen; off += esz) {
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
	for (size_t off = gen; off < nbytes; off += gen)
		memcpy(p + off, p, nbytes - off < gen ? nbytes - off : gen);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--isa auto|baseline|avx2|avx512] [--src-offset 0..63] [--quick]\n"
		"       [--help] [--version]\n"
		"  agg_reduce throughput per core vs memcpy; GB/s = dst bytes / second (1e9)\n",
		argv0);
}

int main(int argc, char **argv)
{
	static const char *const isa_names[] = {"baseline", "avx2", "avx512"};
	struct bench_cfg cfg = {.budget_small_ns = 80000000, .budget_large_ns = 300000000, .isa = -1};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
			const char *v = argv[++i];
			cfg.isa = -1;
			for (int k = 0; k < 3; k++)
				if (strcmp(v, isa_names[k]) == 0)
					cfg.isa = k;
			if (cfg.isa < 0 && strcmp(v, "auto") != 0) {
				util_cli_error("bench-kernels", "--isa '%s': expected auto, baseline, "
					       "avx2 or avx512", v);
				return 2;
			}
		} else if (strcmp(argv[i], "--src-offset") == 0 && i + 1 < argc) {
			long long v;
			if (util_cli_int("bench-kernels", "--src-offset", argv[++i], 0, 63, &v))
				return 2;
			cfg.src_offset = (unsigned)v;
		} else if (strcmp(argv[i], "--version") == 0) {
			util_cli_print_version("bench-kernels");
			return 0;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(argv[0]);
			return 0;
		} else if (strcmp(argv[i], "--quick") == 0) {
			cfg.budget_small_ns = 10000000;
			cfg.budget_large_ns = 40000000;
		} else {
			util_cli_error("bench-kernels", "unknown argument '%s'", argv[i]);
			return 2;
		}
	}
	int isa = agg__reduce_set_isa(cfg.isa);
	if (isa < 0) {
		fprintf(stderr, "kernel set not supported on this CPU\n");
		return 1;
	}

	/* Both buffers 64-byte aligned by default. A real payload sits at +60 in a packet buffer
	 * (BTH, RETH, ImmDt, INCA header with a 64-bit bit-string): --src-offset 60 shows it.
	 * memcpy gets the same pointers; beware that glibc's memcpy on this machine slows down
	 * about 7x at 4 KiB when src and dst differ in alignment, which flatters the ratio. */
	uint8_t *dbuf = aligned_alloc(64, LARGE_BYTES + 64), *sbuf = aligned_alloc(64, LARGE_BYTES + 64);
	if (!dbuf || !sbuf) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	uint8_t *dst = dbuf, *src = sbuf + cfg.src_offset;
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
	printf("# agg_reduce, one core, kernel set %s, src offset %u; GB/s of dst bytes (1e9/s),\n"
	       "# median of interleaved timed batches; ratio = kernel / memcpy of the same size\n",
	       isa_names[isa], cfg.src_offset);
	printf("# %-7s %-5s %10s %10s %12s %7s\n", "dtype", "op", "bytes", "GB/s", "memcpy GB/s",
	       "ratio");
	fflush(stdout);
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		size_t nb = sizes[si];
		uint64_t budget = nb <= SMALL_BYTES ? cfg.budget_small_ns : cfg.budget_large_ns;
		for (int r = 0; r < nrows; r++) {
			int dt = rows[r].dt, op = rows[r].op;
			fill(src, nb, dt, &rng);
			struct rates rt = measure(dst, src, nb, dt, op, budget);
			double k = rt.kernel_gbps, mc = rt.memcpy_gbps;
			double ratio = mc > 0 ? k / mc : 0;
			printf("  %-7s %-5s %10zu %10.2f %12.2f %7.3f\n", inca_dtype_name(dt),
			       inca_op_name(op), nb, k, mc, ratio);
			printf("{\"bench\":\"kernel\",\"isa\":\"%s\",\"src_offset\":%u,\"dtype\":\"%s\",\"op\":\"%s\","
			       "\"bytes\":%zu,\"gbps\":%.3f,\"memcpy_gbps\":%.3f,\"ratio\":%.4f}\n",
			       isa_names[isa], cfg.src_offset, inca_dtype_name(dt), inca_op_name(op), nb, k, mc, ratio);
			fflush(stdout);
		}
	}
	free(dbuf);
	free(sbuf);
	return 0;
}
