/* lib/wire BIER helpers: BFR-id <-> (SI, bit position) mapping and bit-string operations in wire
 * order (RFC 8279: bit position 1 is the least significant bit of the LAST byte).
 * Out-of-range bit positions are ignored (set/clear) or read as clear (test); never an OOB access. */
#include "wire/wire.h"

#include "wire/wire_internal.h"

static int bsl_ok(unsigned bsl_bits)
{
	return wire_bsl_code(bsl_bits) != 0;
}

unsigned wire_bier_bp(uint16_t bfr_id, unsigned bsl_bits, uint8_t si)
{
	if (bfr_id == 0 || !bsl_ok(bsl_bits))
		return 0;
	unsigned k = (unsigned)bfr_id - 1;
	if (k / bsl_bits != si)
		return 0;
	return k % bsl_bits + 1;
}

uint16_t wire_bier_bfr_id(unsigned bp, unsigned bsl_bits, uint8_t si)
{
	if (!bsl_ok(bsl_bits) || bp < 1 || bp > bsl_bits)
		return 0;
	unsigned long id = (unsigned long)si * bsl_bits + bp;
	return id > UINT16_MAX ? 0 : (uint16_t)id;
}

void wire_bier_set(uint8_t *bits, size_t len, unsigned bp)
{
	if (!bits || bp < 1 || (size_t)(bp - 1) / 8 >= len)
		return;
	bits[len - 1 - (bp - 1) / 8] |= (uint8_t)(1u << ((bp - 1) % 8));
}

void wire_bier_clear(uint8_t *bits, size_t len, unsigned bp)
{
	if (!bits || bp < 1 || (size_t)(bp - 1) / 8 >= len)
		return;
	bits[len - 1 - (bp - 1) / 8] &= (uint8_t)~(1u << ((bp - 1) % 8));
}

bool wire_bier_test(const uint8_t *bits, size_t len, unsigned bp)
{
	if (!bits || bp < 1 || (size_t)(bp - 1) / 8 >= len)
		return false;
	return (bits[len - 1 - (bp - 1) / 8] >> ((bp - 1) % 8)) & 1;
}

unsigned wire_bier_next(const uint8_t *bits, size_t len, unsigned from)
{
	if (!bits)
		return 0;
	if (from < 1)
		from = 1;
	size_t byte = (size_t)(from - 1) / 8; /* counted from the end */
	if (byte >= len)
		return 0;
	/* First (partial) byte: mask off positions below `from`. */
	unsigned v = bits[len - 1 - byte] & (0xFFu << ((from - 1) % 8));
	for (;;) {
		if (v)
			return (unsigned)(byte * 8) + (unsigned)__builtin_ctz(v) + 1;
		if (++byte >= len)
			return 0;
		/* Skip whole 8-byte words of zeros: bit-strings are mostly sparse. */
		while (len - byte >= 8 && wire__ld64(bits + len - byte - 8) == 0)
			byte += 8;
		if (byte >= len)
			return 0;
		v = bits[len - 1 - byte];
	}
}

unsigned wire_bier_popcount(const uint8_t *bits, size_t len)
{
	unsigned n = 0;
	size_t i = 0;
	if (!bits)
		return 0;
	for (; i + 8 <= len; i += 8)
		n += (unsigned)__builtin_popcountll(wire__ld64(bits + i));
	for (; i < len; i++)
		n += (unsigned)__builtin_popcount(bits[i]);
	return n;
}

bool wire_bier_empty(const uint8_t *bits, size_t len)
{
	if (!bits)
		return true;
	for (size_t i = 0; i < len; i++)
		if (bits[i])
			return false;
	return true;
}
