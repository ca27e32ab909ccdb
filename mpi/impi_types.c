/* mpi/impi_types.c: what the interposer can hand to INCA: MPI datatypes and ops mapped to
 * INCA's, the MIN/MAX probe of the MPI library, the reducibility rule, and a datatype's layout
 * with packing for non-contiguous data. The collectives themselves: inca_mpi.c. */
#include "impi.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* INCA element type for a predefined MPI type used in a reduction, or -1. */
static int impi_dtype(MPI_Datatype t)
{
	if (t == MPI_INT || t == MPI_INT32_T)
		return INCA_INT32;
	if (t == MPI_UNSIGNED || t == MPI_UINT32_T)
		return INCA_UINT32;
	if (t == MPI_FLOAT)
		return INCA_FP32;
	if (t == MPI_DOUBLE)
		return INCA_FP64;
	if (t == MPI_LONG)
		return sizeof(long) == 8 ? INCA_INT64 : INCA_INT32;
	if (t == MPI_UNSIGNED_LONG)
		return sizeof(long) == 8 ? INCA_UINT64 : INCA_UINT32;
	if (t == MPI_LONG_LONG_INT || t == MPI_LONG_LONG || t == MPI_INT64_T)
		return INCA_INT64;
	if (t == MPI_UNSIGNED_LONG_LONG || t == MPI_UINT64_T)
		return INCA_UINT64;
	if (t == MPI_SHORT || t == MPI_INT16_T)
		return INCA_INT16;
	if (t == MPI_UNSIGNED_SHORT || t == MPI_UINT16_T)
		return INCA_UINT16;
	if (t == MPI_SIGNED_CHAR || t == MPI_INT8_T)
		return INCA_INT8;
	if (t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T || t == MPI_BYTE)
		return INCA_UINT8;
	return -1;
}

static int impi_op(MPI_Op op)
{
	if (op == MPI_SUM)
		return INCA_SUM;
	if (op == MPI_PROD)
		return INCA_PROD;
	if (op == MPI_MIN)
		return INCA_MIN;
	if (op == MPI_MAX)
		return INCA_MAX;
	if (op == MPI_BAND)
		return INCA_BAND;
	if (op == MPI_BOR)
		return INCA_BOR;
	if (op == MPI_BXOR)
		return INCA_BXOR;
	return -1;
}

/* Integer types whose MIN / MAX the MPI library is probed for at MPI_Init (impi_probe_minmax).
 * Seen here: MPICH 4.0.2 compares every unsigned type as signed, Open MPI 4.1.4 does so for
 * MPI_UNSIGNED_LONG. INCA computes the arithmetic answer; the interposer's promise is the MPI
 * library's own result, so a (type, MIN/MAX) pair the library gets wrong stays with PMPI. */
static MPI_Datatype impi_int_types(int i)
{
	const MPI_Datatype t[] = { MPI_INT, MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG,
				   MPI_LONG_LONG_INT, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG,
				   MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,
				   MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T,
				   MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T };
	return i >= 0 && i < (int)(sizeof t / sizeof t[0]) ? t[i] : MPI_DATATYPE_NULL;
}

/* Value v (sign- or zero-extended from sz bytes) of element i of a little-endian buffer. */
static int64_t impi_elem(const uint8_t *b, int i, int sz, int is_signed)
{
	uint64_t u = 0;
	memcpy(&u, b + (size_t)i * (size_t)sz, (size_t)sz);
	if (is_signed && sz < 8 && (u >> (8 * sz - 1)) & 1)
		u |= ~0ull << (8 * sz);
	return (int64_t)u;
}

/* MIN and MAX of edge values (all ones, the top bit alone, its neighbour, 1, 0) through
 * PMPI_Reduce_local, which uses the library's reduction kernels. */
uint32_t impi_probe_minmax(void)
{
	uint32_t pmpi = 0;

	for (int i = 0; impi_int_types(i) != MPI_DATATYPE_NULL; i++) {
		MPI_Datatype t = impi_int_types(i);
		int d = impi_dtype(t), sz = 0;
		if (d < 0 || PMPI_Type_size(t, &sz) != MPI_SUCCESS ||
		    sz < 1 || sz > 8)
			continue;
		int sgn = d == INCA_INT8 || d == INCA_INT16 || d == INCA_INT32 || d == INCA_INT64;
		uint64_t top = 1ull << (8 * sz - 1);
		const uint64_t a[5] = { ~0ull, top, top - 1, 1, 0 }, b[5] = { 1, top - 1, top, ~0ull, top };
		uint8_t in[40], io[40];
		for (int k = 0; k < 5; k++) {
			memcpy(in + k * sz, &a[k], (size_t)sz);
			memcpy(io + k * sz, &b[k], (size_t)sz);
		}
		for (int mx = 0; mx < 2; mx++) {
			uint8_t r[40];
			int ok = 1;
			memcpy(r, io, sizeof r);
			if (PMPI_Reduce_local(in, r, 5, t, mx ? MPI_MAX : MPI_MIN) != MPI_SUCCESS)
				ok = 0;
			for (int k = 0; ok && k < 5; k++) {
				int64_t x = impi_elem(in, k, sz, sgn), y = impi_elem(io, k, sz, sgn);
				int64_t got = impi_elem(r, k, sz, sgn);
				int xgt = sgn ? x > y : (uint64_t)x > (uint64_t)y;
				int64_t want = mx ? (xgt ? x : y) : (xgt ? y : x);
				ok = got == want;
			}
			if (!ok)
				pmpi |= 1u << i;
		}
	}
	return pmpi;
}

static int impi_minmax_pmpi(uint32_t mask, MPI_Datatype t)
{
	for (int i = 0; impi_int_types(i) != MPI_DATATYPE_NULL; i++)
		if (impi_int_types(i) == t)
			return (mask >> i) & 1;
	return 0;
}

/* A reduction INCA can do. Depends only on (datatype, op) and the communicator's size, which
 * MPI requires to be the same on every rank, so every rank takes the same decision. MPI_BYTE
 * only with bitwise ops (as MPI defines it). Floating-point SUM / PROD over 3 or more ranks
 * round differently in every summation order (the MPI library's algorithm, INCA's switch or
 * host algorithm), so by default they stay with PMPI and give its exact bits; with 2 ranks
 * every order is the same (IEEE addition and multiplication commute exactly). */
int impi_reducible(const struct impi_policy *pol, MPI_Comm comm, MPI_Datatype t, MPI_Op op,
		   enum inca_dtype *dt, enum inca_op *iop)
{
	int d = impi_dtype(t), o = impi_op(op), size = 0;
	if (d < 0 || o < 0 || !inca_op_valid((enum inca_dtype)d, (enum inca_op)o))
		return 0;
	if (t == MPI_BYTE && o != INCA_BAND && o != INCA_BOR && o != INCA_BXOR)
		return 0;
	if ((o == INCA_MIN || o == INCA_MAX) && impi_minmax_pmpi(pol->minmax_pmpi, t))
		return 0;
	if (!pol->float_inca && (d == INCA_FP32 || d == INCA_FP64) &&
	    (o == INCA_SUM || o == INCA_PROD) &&
	    (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || size > 2))
		return 0;
	*dt = (enum inca_dtype)d;
	*iop = (enum inca_op)o;
	return 1;
}

void impi_layout(MPI_Datatype t, int count, struct impi_span *s)
{
	MPI_Count size = 0;
	MPI_Aint lb, ext, tlb, text;

	PMPI_Type_size_x(t, &size);
	PMPI_Type_get_extent(t, &lb, &ext);
	PMPI_Type_get_true_extent(t, &tlb, &text);
	s->bytes = (size_t)size * (size_t)(count > 0 ? count : 0);
	/* extent == size too: consecutive elements (and blocks) follow each other */
	s->contig = (MPI_Aint)size == text && ext == (MPI_Aint)size;
	s->off = tlb;
}

void *impi_malloc(MPI_Comm comm, size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		impi_fatal(comm, "temporary buffer allocation", -ENOMEM);
	return p;
}

void impi_pack(MPI_Comm comm, const void *buf, int count, MPI_Datatype t, void *out,
		      size_t bytes)
{
	int pos = 0;
	if (PMPI_Pack(buf, count, t, out, (int)bytes, &pos, comm) != MPI_SUCCESS ||
	    (size_t)pos != bytes)
		impi_fatal(comm, "MPI_Pack (heterogeneous packing is not supported)", -EPROTO);
}

void impi_unpack(MPI_Comm comm, const void *in, size_t bytes, void *buf, int count,
			MPI_Datatype t)
{
	int pos = 0;
	if (PMPI_Unpack(in, (int)bytes, &pos, buf, count, t, comm) != MPI_SUCCESS ||
	    (size_t)pos != bytes)
		impi_fatal(comm, "MPI_Unpack", -EPROTO);
}
