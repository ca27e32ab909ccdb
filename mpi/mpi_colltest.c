/* mpi/mpi_colltest.c: MPI test program for the INCA interposer. Runs all nine collectives on
 * several communicators (world, reversed halves, dup, a created one of odd size) with several
 * datatypes, ops, roots, sizes and MPI_IN_PLACE, and compares every MPI_* result with the same
 * call made through PMPI_* on an identical copy of the buffers. Prints a checksum of all results.
 * Exit 0 only if every comparison matched (on every rank). Usage: mpi_colltest [--quick] */
#include <mpi.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize, nfail, nchecks;
static int quick; /* --quick: fewer types and sizes (MPICH busy-polls with 4 ranks on 2 cores) */
static uint64_t hash = 1469598103934665603ull;

static void hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		hash ^= b[i];
		hash *= 1099511628211ull;
	}
}

static void check(const char *what, const char *cname, const char *tname, int count, int root,
		  int inplace, const void *got, const void *want, size_t bytes)
{
	nchecks++;
	hash_bytes(got, bytes);
	if (bytes && memcmp(got, want, bytes) != 0) {
		size_t i = 0;
		while (((const uint8_t *)got)[i] == ((const uint8_t *)want)[i])
			i++;
		fprintf(stderr,
			"colltest: MISMATCH world rank %d: %s on %s, type %s, count %d, root %d, "
			"in-place %d: first difference at byte %zu of %zu (got 0x%02x, MPI 0x%02x)\n",
			wrank, what, cname, tname, count, root, inplace, i, bytes,
			((const uint8_t *)got)[i], ((const uint8_t *)want)[i]);
		nfail++;
	}
}

static void *xalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "colltest: out of memory\n");
		PMPI_Abort(MPI_COMM_WORLD, 2);
	}
	return p;
}

/* ---- reductions -------------------------------------------------------------------------- */

enum kind { K_SIGNED, K_UNSIGNED, K_FLOAT };

struct rtype {
	MPI_Datatype t;
	size_t size;
	enum kind kind;
	const char *name;
};

struct rop {
	MPI_Op op;
	int bitwise;
	const char *name;
};

/* Small values: every sum and product is exact in every type and in any order, so INCA's
 * reduction order cannot change a result. */
static void fill_red(void *buf, const struct rtype *t, int count, int rank, int seed, int prod)
{
	for (int i = 0; i < count; i++) {
		long v = prod ? 1 + ((rank + i + seed) % 3 == 0)
			      : (long)((rank * 131 + i * 17 + seed * 7) % 9);
		if (t->kind == K_SIGNED && !prod)
			v -= 4;
		char *p = (char *)buf + (size_t)i * t->size;
		if (t->kind == K_FLOAT) {
			if (t->size == 4) {
				float f = (float)v;
				memcpy(p, &f, 4);
			} else {
				double d = (double)v;
				memcpy(p, &d, 8);
			}
		} else {
			int64_t x = v;
			memcpy(p, &x, t->size); /* little endian: the low bytes */
		}
	}
}

static const struct rtype rtypes[] = {
	{ MPI_INT, sizeof(int), K_SIGNED, "int" },
	{ MPI_UNSIGNED, sizeof(unsigned), K_UNSIGNED, "unsigned" },
	{ MPI_FLOAT, sizeof(float), K_FLOAT, "float" },
	{ MPI_DOUBLE, sizeof(double), K_FLOAT, "double" },
	{ MPI_LONG_LONG, sizeof(long long), K_SIGNED, "long long" },
	{ MPI_SHORT, sizeof(short), K_SIGNED, "short" },
	{ MPI_UNSIGNED_CHAR, 1, K_UNSIGNED, "unsigned char" },
	{ MPI_INT8_T, 1, K_SIGNED, "int8_t" },
	{ MPI_UINT64_T, 8, K_UNSIGNED, "uint64_t" },
};

static const int red_counts[] = { 1, 7, 1000, 30000 };

static void user_max(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	int *a = in, *b = inout;
	for (int i = 0; i < *len; i++)
		if (a[i] > b[i])
			b[i] = a[i];
}

static void test_reductions(MPI_Comm comm, const char *cname)
{
	const struct rop ops[] = {
		{ MPI_SUM, 0, "sum" }, { MPI_PROD, 0, "prod" }, { MPI_MIN, 0, "min" },
		{ MPI_MAX, 0, "max" }, { MPI_BAND, 1, "band" }, { MPI_BOR, 1, "bor" },
		{ MPI_BXOR, 1, "bxor" },
	};
	int rank, size, k = 0;
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);

	for (size_t ti = 0; ti < sizeof rtypes / sizeof rtypes[0]; ti++) {
		const struct rtype *t = &rtypes[ti];
		if (quick && ti % 2)
			continue;
		for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
			if (ops[oi].bitwise && t->kind == K_FLOAT)
				continue;
			int count = red_counts[k % (quick ? 3 : 4)], inplace = (k / 4) % 2, prod = oi == 1;
			int root = k % size;
			char what[64];
			size_t bytes = (size_t)count * t->size;
			uint8_t *send = xalloc(bytes), *ref = xalloc(bytes), *got = xalloc(bytes);
			k++;

			/* Allreduce */
			fill_red(send, t, count, rank, k, prod);
			memcpy(ref, send, bytes);
			memcpy(got, send, bytes);
			PMPI_Allreduce(inplace ? MPI_IN_PLACE : send, ref, count, t->t, ops[oi].op,
				       comm);
			MPI_Allreduce(inplace ? MPI_IN_PLACE : send, got, count, t->t, ops[oi].op,
				      comm);
			snprintf(what, sizeof what, "MPI_Allreduce(%s)", ops[oi].name);
			check(what, cname, t->name, count, -1, inplace, got, ref, bytes);

			/* Reduce to a rotating root; in place at the root every other time */
			fill_red(send, t, count, rank, k + 3, prod);
			memcpy(ref, send, bytes);
			memcpy(got, send, bytes);
			int ip = inplace && rank == root;
			PMPI_Reduce(ip ? MPI_IN_PLACE : send, rank == root ? ref : NULL, count, t->t,
				    ops[oi].op, root, comm);
			MPI_Reduce(ip ? MPI_IN_PLACE : send, rank == root ? got : NULL, count, t->t,
				   ops[oi].op, root, comm);
			snprintf(what, sizeof what, "MPI_Reduce(%s)", ops[oi].name);
			if (rank == root)
				check(what, cname, t->name, count, root, ip, got, ref, bytes);
			free(send);
			free(ref);
			free(got);
		}
	}

	/* ReduceScatter (block, and the vector form with equal and unequal counts) */
	for (int v = 0; v < 6; v++) {
		const struct rtype *t = &rtypes[(size_t)v * 2 % (sizeof rtypes / sizeof rtypes[0])];
		int rc = v < 2 ? 1 : v < 4 ? 300 : 4096, inplace = v % 2;
		size_t blk = (size_t)rc * t->size, all = blk * (size_t)size;
		uint8_t *send = xalloc(all), *ref = xalloc(all), *got = xalloc(all);
		int *counts = xalloc(sizeof(int) * (size_t)size);

		fill_red(send, t, rc * size, rank, v, 0);
		memcpy(ref, send, all);
		memcpy(got, send, all);
		PMPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : send, ref, rc, t->t, MPI_SUM, comm);
		MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : send, got, rc, t->t, MPI_SUM, comm);
		check("MPI_Reduce_scatter_block(sum)", cname, t->name, rc, -1, inplace, got, ref, blk);

		for (int i = 0; i < size; i++)
			counts[i] = rc;
		memcpy(ref, send, all);
		memcpy(got, send, all);
		PMPI_Reduce_scatter(inplace ? MPI_IN_PLACE : send, ref, counts, t->t, MPI_MAX, comm);
		MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : send, got, counts, t->t, MPI_MAX, comm);
		check("MPI_Reduce_scatter(max, equal)", cname, t->name, rc, -1, inplace, got, ref,
		      blk);

		/* unequal counts: PMPI inside the interposer */
		counts[size - 1] = rc / 2;
		memcpy(ref, send, all);
		memcpy(got, send, all);
		size_t mine = (size_t)counts[rank] * t->size;
		PMPI_Reduce_scatter(send, ref, counts, t->t, MPI_MIN, comm);
		MPI_Reduce_scatter(send, got, counts, t->t, MPI_MIN, comm);
		check("MPI_Reduce_scatter(min, unequal)", cname, t->name, rc, -1, 0, got, ref, mine);
		free(send);
		free(ref);
		free(got);
		free(counts);
	}

	/* Not INCA-mappable: a user op, MPI_LAND, MPI_MINLOC on MPI_2INT (PMPI inside) */
	{
		MPI_Op uop;
		int in[64], ref[64], got[64];
		MPI_Op_create(user_max, 1, &uop);
		for (int i = 0; i < 64; i++)
			in[i] = (rank * 7 + i * 3) % 11;
		PMPI_Allreduce(in, ref, 64, MPI_INT, uop, comm);
		MPI_Allreduce(in, got, 64, MPI_INT, uop, comm);
		check("MPI_Allreduce(user op)", cname, "int", 64, -1, 0, got, ref, sizeof ref);
		PMPI_Allreduce(in, ref, 64, MPI_INT, MPI_LAND, comm);
		MPI_Allreduce(in, got, 64, MPI_INT, MPI_LAND, comm);
		check("MPI_Allreduce(land)", cname, "int", 64, -1, 0, got, ref, sizeof ref);
		PMPI_Allreduce(in, ref, 32, MPI_2INT, MPI_MINLOC, comm);
		MPI_Allreduce(in, got, 32, MPI_2INT, MPI_MINLOC, comm);
		check("MPI_Allreduce(minloc)", cname, "2int", 32, -1, 0, got, ref, sizeof ref);
		MPI_Op_free(&uop);
	}
}

/* ---- data movement ------------------------------------------------------------------------ */

struct mtype {
	MPI_Datatype t;
	const char *name;
};

static MPI_Datatype vec_type; /* 2 ints with a gap of one int: non-contiguous */

static void fill_bytes(uint8_t *p, size_t n, int rank, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rank * 37 + i * 11 + (size_t)seed * 5 + 1);
}

static size_t extent_of(MPI_Datatype t)
{
	MPI_Aint lb, ext;
	MPI_Type_get_extent(t, &lb, &ext);
	return (size_t)ext;
}

static const int mv_counts[] = { 0, 1, 7, 5000 };

static void test_movement(MPI_Comm comm, const char *cname)
{
	const struct mtype types[] = {
		{ MPI_CHAR, "char" }, { MPI_INT, "int" }, { MPI_DOUBLE, "double" },
		{ vec_type, "vector(2x int, stride 2)" },
	};
	int rank, size, k = 0;
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);

	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		MPI_Datatype t = types[ti].t;
		const char *tn = types[ti].name;
		size_t ext = extent_of(t);
		if (quick && t == MPI_DOUBLE)
			continue;
		for (int ci = 0; ci < (quick ? 3 : 4); ci++, k++) {
			int c = mv_counts[ci], root = (k * 3 + 1) % size, inplace = k % 2;
			size_t blk = (size_t)c * ext, all = blk * (size_t)size;
			uint8_t *send = xalloc(all), *ref = xalloc(all), *got = xalloc(all);

			/* Bcast */
			memset(ref, 0xee, all);
			if (rank == root)
				fill_bytes(ref, blk, rank, k);
			memcpy(got, ref, all);
			PMPI_Bcast(ref, c, t, root, comm);
			MPI_Bcast(got, c, t, root, comm);
			check("MPI_Bcast", cname, tn, c, root, 0, got, ref, blk);

			/* Allgather (in place: own block already in recvbuf) */
			fill_bytes(send, blk, rank, k);
			memset(ref, 0xee, all);
			if (inplace)
				memcpy(ref + (size_t)rank * blk, send, blk);
			memcpy(got, ref, all);
			PMPI_Allgather(inplace ? MPI_IN_PLACE : send, c, t, ref, c, t, comm);
			MPI_Allgather(inplace ? MPI_IN_PLACE : send, c, t, got, c, t, comm);
			check("MPI_Allgather", cname, tn, c, -1, inplace, got, ref, all);

			/* Alltoall */
			fill_bytes(send, all, rank, k + 1);
			memset(ref, 0xee, all);
			if (inplace)
				memcpy(ref, send, all);
			memcpy(got, ref, all);
			PMPI_Alltoall(inplace ? MPI_IN_PLACE : send, c, t, ref, c, t, comm);
			MPI_Alltoall(inplace ? MPI_IN_PLACE : send, c, t, got, c, t, comm);
			check("MPI_Alltoall", cname, tn, c, -1, inplace, got, ref, all);

			/* Gather (in place at the root) */
			int ip = inplace && rank == root;
			fill_bytes(send, blk, rank, k + 2);
			memset(ref, 0xee, all);
			if (ip)
				memcpy(ref + (size_t)rank * blk, send, blk);
			memcpy(got, ref, all);
			PMPI_Gather(ip ? MPI_IN_PLACE : send, c, t, rank == root ? ref : NULL, c, t,
				    root, comm);
			MPI_Gather(ip ? MPI_IN_PLACE : send, c, t, rank == root ? got : NULL, c, t,
				   root, comm);
			if (rank == root)
				check("MPI_Gather", cname, tn, c, root, ip, got, ref, all);

			/* Scatter (in place at the root) */
			fill_bytes(send, all, rank, k + 3);
			memset(ref, 0xee, all);
			memcpy(got, ref, all);
			PMPI_Scatter(rank == root ? send : NULL, c, t, ip ? MPI_IN_PLACE : ref, c, t,
				     root, comm);
			MPI_Scatter(rank == root ? send : NULL, c, t, ip ? MPI_IN_PLACE : got, c, t,
				    root, comm);
			check("MPI_Scatter", cname, tn, c, root, ip, got, ref, blk);
			free(send);
			free(ref);
			free(got);
		}
	}

	/* Different send and receive types with the same signature: 2c ints vs c vectors */
	{
		int c = 5;
		size_t vext = extent_of(vec_type), all = (size_t)c * vext * (size_t)size;
		int *send = xalloc(sizeof(int) * 2 * (size_t)c);
		uint8_t *ref = xalloc(all), *got = xalloc(all);
		for (int i = 0; i < 2 * c; i++)
			send[i] = rank * 1000 + i;
		memset(ref, 0xee, all);
		memset(got, 0xee, all);
		PMPI_Allgather(send, 2 * c, MPI_INT, ref, c, vec_type, comm);
		MPI_Allgather(send, 2 * c, MPI_INT, got, c, vec_type, comm);
		check("MPI_Allgather(int -> vector)", cname, "int/vector", c, -1, 0, got, ref, all);
		free(send);
		free(ref);
		free(got);
	}

	for (int i = 0; i < 3; i++)
		MPI_Barrier(comm);
}

/* Fractional floating-point data (every addition rounds): results must still be bitwise the
 * MPI library's. The interposer keeps floating-point SUM / PROD over 3+ ranks with PMPI (their
 * bits depend on the summation order) and serves MIN / MAX (exact in any order) and 2-rank
 * sums through INCA. */
static void test_fractional(MPI_Comm comm, const char *cname)
{
	const MPI_Op ops[] = { MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX };
	const char *opn[] = { "sum", "prod", "min", "max" };
	const int counts[] = { 1, 257, 5000 };
	int rank, size;
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);

	for (int dbl = 0; dbl < 2; dbl++)
		for (int oi = 0; oi < 4; oi++)
			for (int ci = 0; ci < 3; ci++) {
				int count = counts[ci], root = (oi + ci) % size;
				size_t es = dbl ? 8 : 4, bytes = (size_t)count * es;
				MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
				uint8_t *send = xalloc(bytes), *ref = xalloc(bytes), *got = xalloc(bytes);
				char what[64];
				uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1) + (uint64_t)ci;
				for (int i = 0; i < count; i++) {
					x ^= x << 13, x ^= x >> 7, x ^= x << 17;
					/* (0.5, 1.5): products stay in range, sums round */
					double v = 0.5 + (double)(x >> 11) / 9007199254740992.0;
					if (dbl) {
						memcpy(send + (size_t)i * 8, &v, 8);
					} else {
						float f = (float)v;
						memcpy(send + (size_t)i * 4, &f, 4);
					}
				}
				PMPI_Allreduce(send, ref, count, t, ops[oi], comm);
				MPI_Allreduce(send, got, count, t, ops[oi], comm);
				snprintf(what, sizeof what, "MPI_Allreduce(%s, fractional)", opn[oi]);
				check(what, cname, dbl ? "double" : "float", count, -1, 0, got, ref,
				      bytes);
				PMPI_Reduce(send, ref, count, t, ops[oi], root, comm);
				MPI_Reduce(send, got, count, t, ops[oi], root, comm);
				snprintf(what, sizeof what, "MPI_Reduce(%s, fractional)", opn[oi]);
				if (rank == root)
					check(what, cname, dbl ? "double" : "float", count, root, 0, got,
					      ref, bytes);
				free(send);
				free(ref);
				free(got);
			}
}

/* MIN / MAX on integers with the top bit set: some MPI libraries compare unsigned types as
 * signed (MPICH 4.0.2 all of them, Open MPI 4.1.4 MPI_UNSIGNED_LONG); the interposer must give
 * the library's own answer anyway. */
static void test_minmax_edges(MPI_Comm comm, const char *cname)
{
	const struct {
		MPI_Datatype t;
		int size;
		const char *name;
	} ts[] = {
		{ MPI_UNSIGNED_CHAR, 1, "unsigned char" }, { MPI_UNSIGNED_SHORT, 2, "unsigned short" },
		{ MPI_UNSIGNED, 4, "unsigned" }, { MPI_UNSIGNED_LONG, (int)sizeof(long), "unsigned long" },
		{ MPI_UNSIGNED_LONG_LONG, 8, "unsigned long long" }, { MPI_UINT64_T, 8, "uint64_t" },
		{ MPI_UINT32_T, 4, "uint32_t" }, { MPI_INT, 4, "int" }, { MPI_LONG, (int)sizeof(long), "long" },
	};
	int rank;
	MPI_Comm_rank(comm, &rank);
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		for (int mx = 0; mx < 2; mx++) {
			uint8_t send[64 * 8], ref[64 * 8], got[64 * 8];
			size_t bytes = 64 * (size_t)ts[i].size;
			for (int k = 0; k < 64; k++) {
				/* all ones, the top bit, small values, zero: spread over the ranks */
				uint64_t v = (k + rank) % 4 == 0 ? ~0ull :
					     (k + rank) % 4 == 1 ? 1ull << (8 * ts[i].size - 1) :
					     (k + rank) % 4 == 2 ? (uint64_t)(k + 1) : 0;
				memcpy(send + (size_t)k * (size_t)ts[i].size, &v, (size_t)ts[i].size);
			}
			PMPI_Allreduce(send, ref, 64, ts[i].t, mx ? MPI_MAX : MPI_MIN, comm);
			MPI_Allreduce(send, got, 64, ts[i].t, mx ? MPI_MAX : MPI_MIN, comm);
			check(mx ? "MPI_Allreduce(max, edges)" : "MPI_Allreduce(min, edges)", cname,
			      ts[i].name, 64, -1, 0, got, ref, bytes);
		}
}

static void run_all(MPI_Comm comm, const char *cname)
{
	if (comm == MPI_COMM_NULL)
		return;
	test_reductions(comm, cname);
	test_fractional(comm, cname);
	test_minmax_edges(comm, cname);
	test_movement(comm, cname);
}

int main(int argc, char **argv)
{
	MPI_Comm half, dup, odd;
	MPI_Group wgroup, ogroup;
	int excl = 0, tot_fail = 0, tot_checks = 0;

	MPI_Init(&argc, &argv);
	quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
	MPI_Comm_size(MPI_COMM_WORLD, &wsize);
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec_type);
	MPI_Type_commit(&vec_type);

	run_all(MPI_COMM_WORLD, "world");
	/* halves, ranks in reverse order (comm rank 0 is not the lowest world rank) */
	MPI_Comm_split(MPI_COMM_WORLD, wrank < wsize / 2, wsize - wrank, &half);
	run_all(half, "half");
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	run_all(dup, "dup");
	/* MPI_Comm_create without world rank 0: size wsize - 1 (odd with 4 ranks) */
	MPI_Comm_group(MPI_COMM_WORLD, &wgroup);
	MPI_Group_excl(wgroup, 1, &excl, &ogroup);
	MPI_Comm_create(MPI_COMM_WORLD, ogroup, &odd);
	run_all(odd, "created");
	/* world again after the others: the cached INCA communicator is reused */
	run_all(MPI_COMM_WORLD, "world");

	MPI_Comm_free(&half);
	MPI_Comm_free(&dup);
	if (odd != MPI_COMM_NULL)
		MPI_Comm_free(&odd);
	MPI_Group_free(&ogroup);
	MPI_Group_free(&wgroup);

	/* a communicator created and freed after others were freed */
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	run_all(dup, "dup2");
	MPI_Comm_free(&dup);

	uint64_t *hashes = xalloc(sizeof(uint64_t) * (size_t)wsize);
	PMPI_Gather(&hash, 1, MPI_UINT64_T, hashes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	PMPI_Allreduce(&nfail, &tot_fail, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	PMPI_Allreduce(&nchecks, &tot_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (wrank == 0) {
		hash = 1469598103934665603ull;
		hash_bytes(hashes, sizeof(uint64_t) * (size_t)wsize);
		printf("colltest: %d ranks, %d checks, %d mismatches, checksum %016" PRIx64 "\n",
		       wsize, tot_checks, tot_fail, hash);
		printf("colltest: %s\n", tot_fail ? "FAIL" : "PASS");
		fflush(stdout);
	}
	free(hashes);
	MPI_Type_free(&vec_type);
	MPI_Finalize();
	return tot_fail ? 1 : 0;
}
