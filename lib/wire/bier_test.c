/* Unit tests for lib/wire's BIER helpers: RFC 8279 BFR-id <-> (SI, BP) numbering, bit placement
 * in wire order, and next/popcount/empty cross-checked against a naive model. */
#include "wire/wire.h"
#include "util/test_check.h"

#include <stdio.h>
#include <string.h>

static void test_numbering(void)
{
	/* RFC 8279 section 3: BFR-id k -> SI (k-1)/BSL, BP ((k-1) mod BSL) + 1 */
	CHECK_EQ(wire_bier_bp(1, 64, 0), 1);
	CHECK_EQ(wire_bier_bp(64, 64, 0), 64);
	CHECK_EQ(wire_bier_bp(65, 64, 0), 0); /* not in SI 0 */
	CHECK_EQ(wire_bier_bp(65, 64, 1), 1);
	CHECK_EQ(wire_bier_bp(128, 64, 1), 64);
	CHECK_EQ(wire_bier_bp(129, 64, 2), 1);
	CHECK_EQ(wire_bier_bp(300, 256, 1), 44);
	CHECK_EQ(wire_bier_bp(4096, 4096, 0), 4096);
	CHECK_EQ(wire_bier_bp(65535, 64, 255), 0);  /* 65535 is in SI 1023 */
	CHECK_EQ(wire_bier_bp(65535, 4096, 15), 4095);
	CHECK_EQ(wire_bier_bp(0, 64, 0), 0);  /* BFR-id 0 is "none" */
	CHECK_EQ(wire_bier_bp(1, 100, 0), 0); /* invalid BSL */
	CHECK_EQ(wire_bier_bp(1, 0, 0), 0);

	CHECK_EQ(wire_bier_bfr_id(1, 64, 0), 1);
	CHECK_EQ(wire_bier_bfr_id(64, 64, 0), 64);
	CHECK_EQ(wire_bier_bfr_id(1, 64, 1), 65);
	CHECK_EQ(wire_bier_bfr_id(44, 256, 1), 300);
	CHECK_EQ(wire_bier_bfr_id(0, 64, 0), 0);
	CHECK_EQ(wire_bier_bfr_id(65, 64, 0), 0);
	CHECK_EQ(wire_bier_bfr_id(1, 100, 0), 0);
	CHECK_EQ(wire_bier_bfr_id(4096, 4096, 15), 0); /* 65536 does not exist */
	CHECK_EQ(wire_bier_bfr_id(4095, 4096, 15), 65535);

	static const unsigned bsls[] = { 64, 128, 256, 512, 1024, 2048, 4096 };
	for (size_t b = 0; b < 7; b++) {
		unsigned bsl = bsls[b];
		for (unsigned k = 1; k <= 65535; k += 1 + k / 7) {
			uint8_t si = (uint8_t)((k - 1) / bsl);
			if ((k - 1) / bsl > 255)
				break;
			unsigned bp = wire_bier_bp((uint16_t)k, bsl, si);
			CHECK_EQ(bp, (k - 1) % bsl + 1);
			CHECK_EQ(wire_bier_bfr_id(bp, bsl, si), k);
			CHECK_EQ(wire_bier_bp((uint16_t)k, bsl, (uint8_t)(si + 1)), 0);
		}
	}
}

static void test_placement(void)
{
	uint8_t b[8];
	memset(b, 0, sizeof(b));
	wire_bier_set(b, 8, 1);
	CHECK_EQ(b[7], 0x01); /* BP 1 = LSB of the LAST byte */
	wire_bier_set(b, 8, 8);
	CHECK_EQ(b[7], 0x81);
	wire_bier_set(b, 8, 9);
	CHECK_EQ(b[6], 0x01);
	wire_bier_set(b, 8, 64);
	CHECK_EQ(b[0], 0x80); /* BP 64 = MSB of the first byte */
	CHECK_EQ(wire_bier_popcount(b, 8), 4);
	CHECK_EQ(wire_bier_test(b, 8, 9), 1);
	CHECK_EQ(wire_bier_test(b, 8, 10), 0);
	wire_bier_clear(b, 8, 8);
	CHECK_EQ(b[7], 0x01);
	/* out of range: ignored, reads as clear, no out-of-bounds write */
	uint8_t guard[10] = { 0 };
	wire_bier_set(guard + 1, 8, 65);
	wire_bier_set(guard + 1, 8, 0);
	CHECK_EQ(guard[0], 0);
	CHECK_EQ(guard[9], 0);
	CHECK_EQ(wire_bier_popcount(guard, 10), 0);
	CHECK_EQ(wire_bier_test(b, 8, 0), 0);
	CHECK_EQ(wire_bier_test(b, 8, 65), 0);
	wire_bier_clear(b, 8, 1000);
	CHECK_EQ(wire_bier_popcount(b, 8), 3);
	CHECK_EQ(wire_bier_empty(NULL, 8), 1);
	CHECK_EQ(wire_bier_next(NULL, 8, 1), 0);
}

static unsigned naive_next(const uint8_t *b, size_t len, unsigned from)
{
	if (from < 1)
		from = 1;
	for (unsigned bp = from; bp <= len * 8; bp++)
		if ((b[len - 1 - (bp - 1) / 8] >> ((bp - 1) % 8)) & 1)
			return bp;
	return 0;
}

static void test_scan(void)
{
	uint8_t b[512];
	uint64_t x = 0x9E3779B97F4A7C15ull;
	static const size_t lens[] = { 8, 16, 32, 64, 128, 256, 512, 3, 13 };
	for (int iter = 0; iter < 400; iter++) {
		size_t len = lens[iter % 9];
		memset(b, 0, sizeof(b));
		unsigned nset = (unsigned)(iter % 23);
		unsigned model = 0;
		for (unsigned i = 0; i < nset; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			unsigned bp = (unsigned)(x % (len * 8)) + 1;
			if (!wire_bier_test(b, len, bp))
				model++;
			wire_bier_set(b, len, bp);
		}
		CHECK_EQ(wire_bier_popcount(b, len), model);
		CHECK_EQ(wire_bier_empty(b, len), model == 0);
		/* iterate all set bits with next() and compare with the naive scan */
		unsigned seen = 0;
		for (unsigned bp = wire_bier_next(b, len, 1); bp; bp = wire_bier_next(b, len, bp + 1)) {
			CHECK_EQ(bp, naive_next(b, len, bp));
			if (++seen > len * 8)
				break;
		}
		CHECK_EQ(seen, model);
		for (unsigned from = 0; from <= len * 8 + 2; from += 5)
			CHECK_EQ(wire_bier_next(b, len, from), naive_next(b, len, from));
	}
	/* highest position in a 4096-bit string found after a long run of zero words */
	memset(b, 0, sizeof(b));
	wire_bier_set(b, 512, 4096);
	CHECK_EQ(wire_bier_next(b, 512, 1), 4096);
	CHECK_EQ(wire_bier_next(b, 512, 4097), 0);
	CHECK_EQ(wire_bier_next(b, 512, 4096), 4096);
}

int main(void)
{
	test_numbering();
	test_placement();
	test_scan();
	printf("bier_test: ok\n");
	return 0;
}
