/* mpi/impi.h: what the interposer's two files share (internal, hidden from the libraries'
 * exported symbols, which are the MPI_* functions only). inca_mpi.c: the collectives,
 * communicators, init/finalize; impi_types.c: datatypes, ops and layouts. */
#ifndef INCA_IMPI_H
#define INCA_IMPI_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <inca/inca.h>

#define IMPI_HIDDEN __attribute__((visibility("hidden")))

/* Which (datatype, op) pairs go to INCA; the same on every rank (set at MPI_Init). */
struct impi_policy {
	int float_inca;       /* INCA_MPI_FLOAT=inca: floating-point SUM/PROD through INCA too */
	uint32_t minmax_pmpi; /* bit i: MIN/MAX on the i-th probed integer type stay with PMPI */
};

/* ---- inca_mpi.c ---- */
IMPI_HIDDEN __attribute__((format(printf, 1, 2))) void impi_say(const char *fmt, ...);
/* An INCA failure that other ranks may not have seen: falling back would risk a hang or a
 * wrong result, so stop the job with a clear message. */
IMPI_HIDDEN __attribute__((noreturn)) void impi_fatal(MPI_Comm comm, const char *what, int rc);

/* ---- impi_types.c ---- */
/* The probed integer types on which this MPI library's MIN/MAX differs from the arithmetic
 * answer (bit i: type i of the probe list). Local: the caller ORs it over all ranks. */
IMPI_HIDDEN uint32_t impi_probe_minmax(void);
/* 1 if INCA can do this reduction (and sets *dt, *iop); depends only on (t, op), the
 * communicator's size and pol, so every rank decides alike. */
IMPI_HIDDEN int impi_reducible(const struct impi_policy *pol, MPI_Comm comm, MPI_Datatype t,
			       MPI_Op op, enum inca_dtype *dt, enum inca_op *iop);

/* Layout of count elements of t: total signature bytes, and whether they sit contiguously
 * starting at buf + off. Non-contiguous data is packed into a temporary buffer (so the
 * decision to use INCA never depends on the local datatype). */
struct impi_span {
	size_t bytes;
	int contig;
	MPI_Aint off;
};
IMPI_HIDDEN void impi_layout(MPI_Datatype t, int count, struct impi_span *s);
/* malloc that aborts the job (impi_fatal) on failure. */
IMPI_HIDDEN void *impi_malloc(MPI_Comm comm, size_t n);
/* Pack count x t at buf into out (exactly bytes long); unpack the reverse. Abort on error. */
IMPI_HIDDEN void impi_pack(MPI_Comm comm, const void *buf, int count, MPI_Datatype t, void *out,
			   size_t bytes);
IMPI_HIDDEN void impi_unpack(MPI_Comm comm, const void *in, size_t bytes, void *buf, int count,
			     MPI_Datatype t);

#endif
