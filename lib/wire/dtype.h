/* lib/wire/dtype.h: the one definition of the element types and reduction operators INCA
 * carries on the wire (names, wire codes, sizes, which op applies to which type), and of the
 * default QP numbers. Everything else derives from these tables: inca.h's enums are checked
 * against them at compile time, the C name tables and masks are generated from them, and the
 * Python, Lua, YANG and docs mirrors are regenerated and checked by tools/gen_facts.py.
 * Pure tables and lookups: no state, no allocation, safe from any thread. */
#ifndef INCA_WIRE_DTYPE_H
#define INCA_WIRE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(NAME, name, wire code, size in bytes, kind). Codes are dense from 0 in this order and are
 * never renumbered; kind is INT (two's complement or unsigned) or FLOAT. Sizes are the bytes of
 * one element in the packet's data. */
#define WIRE_DTYPES(X)                        \
	X(INT8, int8, 0, 1, INT)              \
	X(UINT8, uint8, 1, 1, INT)            \
	X(INT16, int16, 2, 2, INT)            \
	X(UINT16, uint16, 3, 2, INT)          \
	X(INT32, int32, 4, 4, INT)            \
	X(UINT32, uint32, 5, 4, INT)          \
	X(INT64, int64, 6, 8, INT)            \
	X(UINT64, uint64, 7, 8, INT)          \
	X(FP16, fp16, 8, 2, FLOAT)            \
	X(BF16, bf16, 9, 2, FLOAT)            \
	X(FP32, fp32, 10, 4, FLOAT)           \
	X(FP64, fp64, 11, 8, FLOAT)

/* X(NAME, name, wire code, types it applies to). Codes dense from 0, never renumbered.
 * ALL: every type; INT: integer types only (bitwise ops make no sense on float encodings). */
#define WIRE_OPS(X)                 \
	X(SUM, sum, 0, ALL)         \
	X(PROD, prod, 1, ALL)       \
	X(MIN, min, 2, ALL)         \
	X(MAX, max, 3, ALL)         \
	X(BAND, band, 4, INT)       \
	X(BOR, bor, 5, INT)         \
	X(BXOR, bxor, 6, INT)

#define WIRE__DT_ENUM(NAME, name, code, size, kind) WIRE_DT_##NAME = code,
#define WIRE__OP_ENUM(NAME, name, code, applies) WIRE_OP_##NAME = code,
enum wire_dtype { WIRE_DTYPES(WIRE__DT_ENUM) };
enum wire_op { WIRE_OPS(WIRE__OP_ENUM) };

#define WIRE__COUNT1(...) +1
#define WIRE_DTYPE_COUNT (0 WIRE_DTYPES(WIRE__COUNT1))
#define WIRE_OP_COUNT (0 WIRE_OPS(WIRE__COUNT1))

/* Bit i set for every dtype / op code i: the "all allowed" value of the switch's per-tree
 * dtype and op masks. */
#define WIRE_DTYPE_MASK_ALL ((1u << WIRE_DTYPE_COUNT) - 1)
#define WIRE_OP_MASK_ALL ((1u << WIRE_OP_COUNT) - 1)

/* Element size in bytes of a dtype code, 0 if the code is unknown. */
size_t wire_dtype_size(unsigned dt);
/* 1 for the integer types, 0 for floats and unknown codes. */
bool wire_dtype_is_int(unsigned dt);
/* Short names ("fp32", "sum"); NULL for unknown codes. Static strings. */
const char *wire_dtype_name(unsigned dt);
const char *wire_op_name(unsigned op);
/* Name back to its code; -EINVAL for NULL or an unknown name (exact, case-sensitive). */
int wire_dtype_parse(const char *name);
int wire_op_parse(const char *name);
/* True if op applies to dt (both codes known). */
bool wire_op_valid(unsigned dt, unsigned op);

/* QP numbers are 24 bits (BTH DestQP). */
#define WIRE_QPN_MAX 0xFFFFFFu

/* Whose default QP number wire_qpn_default gives. */
enum wire_qpn_role {
	WIRE_QPN_SWITCH, /* a switch's QPN for tree t: the DestQP of packets sent up to it */
	WIRE_QPN_MEMBER, /* the QPN of the client with BFR-id k: DestQP of results sent down */
};

/* The default QP numbering that clients, switches, the AM and the tools share when no QPN is
 * configured: 0x100 + tree id for a switch, 0x1000 + BFR-id for a member. id is the tree id
 * (WIRE_QPN_SWITCH) or the BFR-id (WIRE_QPN_MEMBER). */
uint32_t wire_qpn_default(enum wire_qpn_role role, uint32_t id);

#endif
