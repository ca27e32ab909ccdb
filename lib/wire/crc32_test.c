/* crc32_test: the accelerated CRC-32 in crc32.c must equal zlib's crc32 for every length,
 * alignment and starting value, including chained calls; the combine helpers (multiplication
 * mod P, carry-less and bit by bit, and the shift operators) must equal zlib's
 * crc32_combine_op / crc32_combine_gen / crc32_combine; the register step over a word's bytes
 * must equal zlib's CRC of those bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/util.h"
#include "wire/wire_internal.h"

static struct util_rng rng;

static uint64_t rnd(void)
{
	return util_rng_next(&rng);
}

/* Combining: random operands for the product, every length up to 70000 and random larger
 * ones for the operators, and real CRCs of random data split at random points. */
static int test_combine(const uint8_t *buf, size_t cap)
{
	int fails = 0;

	for (int i = 0; i < 200000; i++) {
		uint64_t r = rnd();
		/* b | 1: zlib never ends a product with the operator 0 */
		uint32_t a = (uint32_t)r, b = (uint32_t)(r >> 32) | 1, c = (uint32_t)rnd();
		uint32_t want = (uint32_t)crc32_combine_op(a, c, b);
		if ((wire__crc32_combine_op(a, c, b) != want ||
		     (wire__crc32_mulmod_bits(b, a) ^ c) != want) && fails++ < 10)
			fprintf(stderr, "combine_op %08x %08x %08x: want %08x\n", a, c, b, want);
		if (wire__crc32_mulmod(a, b) != wire__crc32_mulmod(b, a) && fails++ < 10)
			fprintf(stderr, "mulmod not symmetric: %08x %08x\n", a, b);
	}
	/* Edge operands: 0, the polynomial 1, x^31, all terms (zlib's product never ends for the
	 * operator 0: the product is 0 there). */
	uint32_t edge[] = { 0, 0x80000000u, 1, 0xFFFFFFFFu };
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			uint32_t want = edge[j] ? (uint32_t)crc32_combine_op(edge[i], 0, edge[j]) : 0;
			if ((wire__crc32_mulmod(edge[j], edge[i]) != want ||
			     wire__crc32_mulmod_bits(edge[j], edge[i]) != want) && fails++ < 10)
				fprintf(stderr, "mulmod edge %08x %08x\n", edge[j], edge[i]);
		}
	for (uint32_t len = 0; len <= 70000; len++)
		if (wire__crc32_shift_op(len) != (uint32_t)crc32_combine_gen((z_off_t)len) &&
		    fails++ < 10)
			fprintf(stderr, "shift_op %u\n", len);
	for (int i = 0; i < 1000; i++) {
		uint32_t len = (uint32_t)rnd() >> 1;
		if (wire__crc32_shift_op(len) != (uint32_t)crc32_combine_gen((z_off_t)len) &&
		    fails++ < 10)
			fprintf(stderr, "shift_op %u\n", len);
	}
	for (int i = 0; i < 20000; i++) {
		size_t la = rnd() % 5000, lb = rnd() % 5000, off = rnd() % 64;
		if (off + la + lb > cap)
			continue;
		uint32_t ca = (uint32_t)crc32(0, buf + off, (uInt)la);
		uint32_t cb = (uint32_t)crc32(0, buf + off + la, (uInt)lb);
		uint32_t want = (uint32_t)crc32(0, buf + off, (uInt)(la + lb));
		uint32_t got = wire__crc32_combine_op(ca, cb, wire__crc32_shift_op((uint32_t)lb));
		if ((got != want || (uint32_t)crc32_combine(ca, cb, (z_off_t)lb) != want) &&
		    fails++ < 10)
			fprintf(stderr, "combine %zu + %zu: want %08x got %08x\n", la, lb, want, got);
	}
	return fails;
}

/* wire__crc32_raw_u64: the register after 1 .. 8 bytes held in a word equals zlib's CRC of
 * the same bytes from the same (inverted) register. */
static int test_raw_u64(void)
{
	int fails = 0;

	for (int i = 0; i < 100000; i++) {
		uint64_t v = rnd();
		uint32_t reg = (uint32_t)rnd();
		unsigned n = 1 + (unsigned)(i % 8);
		uint8_t b[8];
		for (unsigned k = 0; k < 8; k++)
			b[k] = (uint8_t)(v >> (8 * k));
		if (n < 8)
			v &= (1ull << (8 * n)) - 1;
		uint32_t want = ~(uint32_t)crc32(~reg, b, n);
		uint32_t got = n == 8 ? wire__crc32_raw_u64(reg, v, 8)
			     : n == 6 ? wire__crc32_raw_u64(reg, v, 6)
			     : n == 4 ? wire__crc32_raw_u64(reg, v, 4)
				      : wire__crc32_raw_u64(reg, v, n);
		if (got != want && fails++ < 10)
			fprintf(stderr, "raw_u64 n %u reg %08x: want %08x got %08x\n", n, reg, want,
				got);
	}
	return fails;
}

int main(void)
{
	util_rng_seed(&rng, 0x9e3779b97f4a7c15ull);
	enum { MAX = 9000 };
	static uint8_t buf[MAX + 64];
	uint64_t x = 0x1234567887654321ull;
	int fails = 0;
	for (size_t i = 0; i < sizeof buf; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t len = 0; len <= MAX; len += (len < 300 ? 1 : 37)) {
		for (size_t off = 0; off < 16; off += 5) {
			uint32_t seeds[3] = {0, 0xFFFFFFFFu, (uint32_t)(len * 2654435761u)};
			for (int s = 0; s < 3; s++) {
				uint32_t want = (uint32_t)crc32(seeds[s], buf + off, (uInt)len);
				uint32_t got = wire__crc32(seeds[s], buf + off, len);
				if (want != got && fails++ < 10)
					fprintf(stderr, "len %zu off %zu seed %08x: want %08x got %08x\n",
						len, off, seeds[s], want, got);
			}
		}
		/* chained: crc(a||b) == crc(crc(a), b) */
		size_t cut = len / 3;
		uint32_t a = wire__crc32(0, buf, cut);
		uint32_t ab = wire__crc32(a, buf + cut, len - cut);
		if (ab != (uint32_t)crc32(0, buf, (uInt)len) && fails++ < 10)
			fprintf(stderr, "chained len %zu cut %zu mismatch\n", len, cut);
	}
	fails += test_combine(buf, sizeof buf);
	fails += test_raw_u64();
	/* All-zero and all-one buffers exercise the folding with degenerate data. */
	memset(buf, 0, sizeof buf);
	if (wire__crc32(0, buf, 4096) != (uint32_t)crc32(0, buf, 4096))
		fails++;
	memset(buf, 0xFF, sizeof buf);
	if (wire__crc32(0, buf, 4096) != (uint32_t)crc32(0, buf, 4096))
		fails++;
	printf("crc32_test: %s (%d failures)\n", fails ? "FAIL" : "ok", fails);
	return fails ? 1 : 0;
}
