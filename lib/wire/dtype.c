/* lib/wire dtype/op/QPN facts: lookups over the tables of dtype.h. The tables themselves
 * live only in dtype.h; this file turns them into arrays indexed by wire code. */
#include "wire/dtype.h"

#include <errno.h>
#include <string.h>

/* The arrays below are indexed by wire code, so codes must be dense and in table order:
 * number the entries by position and require position == code. */
#define POS_DT(NAME, name, code, size, kind) POS_DT_##NAME,
#define POS_OP(NAME, name, code, applies) POS_OP_##NAME,
enum { WIRE_DTYPES(POS_DT) };
enum { WIRE_OPS(POS_OP) };
#define DENSE_DT(NAME, name, code, size, kind) \
	_Static_assert(POS_DT_##NAME == (code), "dtype codes must be dense, in table order");
#define DENSE_OP(NAME, name, code, applies) \
	_Static_assert(POS_OP_##NAME == (code), "op codes must be dense, in table order");
WIRE_DTYPES(DENSE_DT)
WIRE_OPS(DENSE_OP)
/* The masks are 32-bit. */
_Static_assert(WIRE_DTYPE_COUNT <= 32 && WIRE_OP_COUNT <= 32, "masks hold 32 codes");

#define KIND_INT 1
#define KIND_FLOAT 0
#define DT_ROW(NAME, name, code, size, kind) [code] = {#name, size, KIND_##kind},
static const struct {
	const char *name;
	uint8_t size_bytes;
	uint8_t is_int;
} dt_tab[WIRE_DTYPE_COUNT] = { WIRE_DTYPES(DT_ROW) };

#define APPLIES_ALL 0
#define APPLIES_INT 1
#define OP_ROW(NAME, name, code, applies) [code] = {#name, APPLIES_##applies},
static const struct {
	const char *name;
	uint8_t int_only;
} op_tab[WIRE_OP_COUNT] = { WIRE_OPS(OP_ROW) };

size_t wire_dtype_size(unsigned dt)
{
	return dt < WIRE_DTYPE_COUNT ? dt_tab[dt].size_bytes : 0;
}

bool wire_dtype_is_int(unsigned dt)
{
	return dt < WIRE_DTYPE_COUNT && dt_tab[dt].is_int;
}

const char *wire_dtype_name(unsigned dt)
{
	return dt < WIRE_DTYPE_COUNT ? dt_tab[dt].name : NULL;
}

const char *wire_op_name(unsigned op)
{
	return op < WIRE_OP_COUNT ? op_tab[op].name : NULL;
}

int wire_dtype_parse(const char *name)
{
	for (unsigned i = 0; name && i < WIRE_DTYPE_COUNT; i++)
		if (!strcmp(name, dt_tab[i].name))
			return (int)i;
	return -EINVAL;
}

int wire_op_parse(const char *name)
{
	for (unsigned i = 0; name && i < WIRE_OP_COUNT; i++)
		if (!strcmp(name, op_tab[i].name))
			return (int)i;
	return -EINVAL;
}

bool wire_op_valid(unsigned dt, unsigned op)
{
	if (dt >= WIRE_DTYPE_COUNT || op >= WIRE_OP_COUNT)
		return false;
	return !op_tab[op].int_only || dt_tab[dt].is_int;
}

uint32_t wire_qpn_default(enum wire_qpn_role role, uint32_t id)
{
	return (role == WIRE_QPN_SWITCH ? 0x100u : 0x1000u) + id;
}
