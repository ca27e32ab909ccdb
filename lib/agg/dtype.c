/* lib/agg/dtype.c: the dtype/op tables behind inca.h (sizes, names, parsing, valid pairs).
 * Lives in lib/agg so the switch (which does not link libinca) and libinca share one copy.
 * No state, no allocation. */
#include <errno.h>
#include <string.h>

#include "inca/inca.h"

/* Indexed by the wire values of enum inca_dtype / enum inca_op (docs/protocol.md). */
static const struct {
	const char *name;
	size_t size_bytes;
	int is_int;
} dtype_tab[INCA_DTYPE_COUNT] = {
	[INCA_INT8] = {"int8", 1, 1},     [INCA_UINT8] = {"uint8", 1, 1},
	[INCA_INT16] = {"int16", 2, 1},   [INCA_UINT16] = {"uint16", 2, 1},
	[INCA_INT32] = {"int32", 4, 1},   [INCA_UINT32] = {"uint32", 4, 1},
	[INCA_INT64] = {"int64", 8, 1},   [INCA_UINT64] = {"uint64", 8, 1},
	[INCA_FP16] = {"fp16", 2, 0},     [INCA_BF16] = {"bf16", 2, 0},
	[INCA_FP32] = {"fp32", 4, 0},     [INCA_FP64] = {"fp64", 8, 0},
};

static const char *const op_names[INCA_OP_COUNT] = {
	[INCA_SUM] = "sum", [INCA_PROD] = "prod", [INCA_MIN] = "min", [INCA_MAX] = "max",
	[INCA_BAND] = "band", [INCA_BOR] = "bor", [INCA_BXOR] = "bxor",
};

/* The enums may be signed or unsigned depending on the compiler: compare as unsigned so a
 * negative value is rejected by the same test as a too-large one. */
static int dtype_ok(enum inca_dtype dt)
{
	return (unsigned)dt < INCA_DTYPE_COUNT;
}

static int op_ok(enum inca_op op)
{
	return (unsigned)op < INCA_OP_COUNT;
}

size_t inca_dtype_size(enum inca_dtype dt)
{
	return dtype_ok(dt) ? dtype_tab[dt].size_bytes : 0;
}

const char *inca_dtype_name(enum inca_dtype dt)
{
	return dtype_ok(dt) ? dtype_tab[dt].name : "?";
}

const char *inca_op_name(enum inca_op op)
{
	return op_ok(op) ? op_names[op] : "?";
}

int inca_dtype_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < INCA_DTYPE_COUNT; i++)
		if (strcmp(name, dtype_tab[i].name) == 0)
			return i;
	return -EINVAL;
}

int inca_op_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < INCA_OP_COUNT; i++)
		if (strcmp(name, op_names[i]) == 0)
			return i;
	return -EINVAL;
}

int inca_op_valid(enum inca_dtype dt, enum inca_op op)
{
	if (!dtype_ok(dt) || !op_ok(op))
		return 0;
	/* Bitwise operators make no sense on float encodings (and no switch offers them). */
	if (op >= INCA_BAND)
		return dtype_tab[dt].is_int;
	return 1;
}
