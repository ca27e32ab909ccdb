/* crc32_test: the accelerated CRC-32 in crc32.c must equal zlib's crc32 for every length,
 * alignment and starting value, including chained calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "wire/wire_internal.h"

int main(void)
{
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
