/* lib/agg/dtype.c: the public dtype/op calls of inca.h (sizes, names, parsing, valid pairs),
 * answered from the one table in lib/wire/dtype.h. Lives in lib/agg so the switch (which does
 * not link libinca) and libinca share one copy. No state, no allocation. */
#include <errno.h>

#include "inca/inca.h"
#include "wire/dtype.h"

/* inca.h spells the enums out for its readers; they must be the table's wire codes. */
#define SAME_DT(NAME, name, code, size, kind) \
	_Static_assert(INCA_##NAME == (code), "inca_dtype differs from lib/wire/dtype.h");
#define SAME_OP(NAME, name, code, applies) \
	_Static_assert(INCA_##NAME == (code), "inca_op differs from lib/wire/dtype.h");
WIRE_DTYPES(SAME_DT)
WIRE_OPS(SAME_OP)
_Static_assert((int)INCA_DTYPE_COUNT == (int)WIRE_DTYPE_COUNT, "inca_dtype count differs");
_Static_assert((int)INCA_OP_COUNT == (int)WIRE_OP_COUNT, "inca_op count differs");

/* The enums may be signed or unsigned depending on the compiler: the casts to unsigned make a
 * negative value fail the same range check as a too-large one. */
size_t inca_dtype_size(enum inca_dtype dt)
{
	return wire_dtype_size((unsigned)dt);
}

const char *inca_dtype_name(enum inca_dtype dt)
{
	const char *s = wire_dtype_name((unsigned)dt);
	return s ? s : "?";
}

const char *inca_op_name(enum inca_op op)
{
	const char *s = wire_op_name((unsigned)op);
	return s ? s : "?";
}

int inca_dtype_parse(const char *name)
{
	return wire_dtype_parse(name);
}

int inca_op_parse(const char *name)
{
	return wire_op_parse(name);
}

int inca_op_valid(enum inca_dtype dt, enum inca_op op)
{
	return wire_op_valid((unsigned)dt, (unsigned)op);
}
