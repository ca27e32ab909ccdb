/* mpi/inca_mpi.c: the PMPI interposer (built twice: libinca-mpi-ompi.so, libinca-mpi-mpich.so).
 * Defines the nine MPI collectives and serves them through libinca where the datatype and op
 * map to INCA, else calls PMPI_*. One INCA communicator per MPI communicator, created lazily on
 * first use and cached in an MPI attribute whose delete callback destroys it. docs/mpi.md. */
#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <inca/inca.h>

#include "impi.h"

/* Largest message (bytes per call, the same on every rank) served through INCA: MPI_Pack
 * takes int sizes, and the decision must not depend on anything local. */
#define IMPI_MAX_BYTES ((size_t)INT_MAX / 2)

/* What the interposer caches per MPI communicator (the attribute value). ic == NULL: this
 * communicator uses PMPI only (size 1, intercommunicator, or INCA setup failed on a rank). */
struct impi_ent {
	struct inca_comm *ic;
	struct impi_ent *prev, *next;
};

static struct {
	int inited;   /* MPI_Init went through us and INCA is on */
	int keyval;
	int stats;    /* INCA_MPI_STATS=1 */
	int verbose;  /* INCA_MPI_VERBOSE=1: setup messages on stderr */
	int world_rank;
	unsigned group_seq;
	char host_ip[64];
	char am_addr[128];
	char switch_addr[128];
	char job_id[128];
	char cred[128];
	unsigned tree_id, tree_key;
	int data_port_base;
	uint32_t timeout_ms;
	struct impi_policy pol; /* which (type, op) pairs go to INCA */
	pthread_mutex_t mu;
	struct impi_ent *list;
	/* counters: calls served by INCA per collective (split into INC / host with the
	 * library's counts), and calls given to PMPI */
	uint64_t inca_ok[INCA_COLL_COUNT];
	uint64_t pmpi[INCA_COLL_COUNT];
	uint64_t inc[INCA_COLL_COUNT]; /* harvested from destroyed INCA communicators */
	uint64_t failovers;
	uint64_t comms_inca, comms_pmpi;
} g = { .keyval = MPI_KEYVAL_INVALID, .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- messages ---------------------------------------------------------------------------- */

__attribute__((format(printf, 1, 2))) void impi_say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof buf, "inca-mpi[%d]: ", g.world_rank);
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", buf);
}

__attribute__((noreturn)) void impi_fatal(MPI_Comm comm, const char *what, int rc)
{
	impi_say("FATAL: %s failed inside INCA: %s (%d). Other ranks may not have seen the "
		 "error, so the call cannot fall back to MPI safely; aborting. Rerun with "
		 "INCA_MPI_DISABLE=1 to run without INCA.", what, inca_strerror(rc), rc);
	PMPI_Abort(comm, 70);
	_exit(70);
}

static const char *env_str(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int env_flag(const char *name)
{
	const char *v = env_str(name);
	return v && strcmp(v, "0") != 0 && strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0;
}

/* ---- INCA communicators ------------------------------------------------------------------- */

static void impi_harvest(struct impi_ent *e)
{
	struct inca_coll_counts cc;
	if (!e->ic || inca_comm_get_coll_counts(e->ic, &cc, sizeof cc) < 0)
		return;
	for (int c = 0; c < INCA_COLL_COUNT; c++)
		g.inc[c] += cc.calls[c][INCA_ALGO_INC];
	g.failovers += cc.failovers;
}

static void impi_release(struct impi_ent *e)
{
	if (!e->ic)
		return;
	impi_harvest(e);
	inca_comm_destroy(e->ic);
	e->ic = NULL;
}

static int impi_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
	struct impi_ent *e = attr;
	/* MPI_Comm_free is collective: meet the other ranks on INCA first, so nobody closes its
	 * sockets or leaves the AM group (which dismantles the tree) while a peer may still need
	 * a resend of the last call's result. ic is set on every rank or on none (agreed). */
	pthread_mutex_lock(&g.mu);
	impi_harvest(e); /* before the barrier, which the user did not call */
	pthread_mutex_unlock(&g.mu);
	if (e->ic)
		(void)inca_barrier(e->ic);
	pthread_mutex_lock(&g.mu);
	inca_comm_destroy(e->ic);
	e->ic = NULL;
	if (e->prev)
		e->prev->next = e->next;
	else if (g.list == e)
		g.list = e->next;
	if (e->next)
		e->next->prev = e->prev;
	pthread_mutex_unlock(&g.mu);
	free(e);
	return MPI_SUCCESS;
}

static void impi_log(void *ctx, int level, const char *msg)
{
	impi_say("libinca: %s", msg);
}

/* Collective over comm (every rank of it calls the same MPI collective, so every rank gets
 * here together). Every rank ends with an INCA communicator or none: the outcome is agreed. */
static struct inca_comm *impi_create(MPI_Comm comm, int rank, int size, int is_world)
{
	char group[64] = "", data[96];
	uint8_t handle[INCA_PEER_HANDLE_BYTES] = { 0 };
	uint8_t *peers = impi_malloc(comm, (size_t)size * INCA_PEER_HANDLE_BYTES);
	struct inca_peer_listener *l = NULL;
	struct inca_comm_opts o;
	struct inca_comm *ic = NULL;
	int rc, ok, all = 0;

	if (rank == 0) {
		pthread_mutex_lock(&g.mu);
		snprintf(group, sizeof group, "mpi-%d-%u", g.world_rank, ++g.group_seq);
		pthread_mutex_unlock(&g.mu);
	}
	PMPI_Bcast(group, (int)sizeof group, MPI_CHAR, 0, comm);
	/* libinca's external bootstrap: every rank's listener handle, gathered by MPI. A rank
	 * without a listener contributes zeros, which every rank's create then refuses. */
	rc = inca_peer_listen(g.host_ip, &l, handle);
	PMPI_Allgather(handle, INCA_PEER_HANDLE_BYTES, MPI_BYTE, peers, INCA_PEER_HANDLE_BYTES,
		       MPI_BYTE, comm);

	inca_comm_opts_init(&o);
	o.rank = rank;
	o.size = size;
	o.peer_table = peers;
	o.peer_listener = l;
	o.host_ip = g.host_ip;
	o.timeout_ms = g.timeout_ms;
	/* floating-point sums through INCA: at least the same bits on every run */
	o.deterministic = g.pol.float_inca;
	if (g.verbose) {
		o.log_fn = impi_log;
		o.log_level = 1;
	}
	snprintf(data, sizeof data, "%s:0", g.host_ip);
	if (g.am_addr[0]) {
		o.am_addr = g.am_addr;
		o.job_id = g.job_id;
		o.job_credential = g.cred;
		o.group_name = group;
		o.am_timeout_ms = g.timeout_ms < 10000 ? g.timeout_ms : 10000;
	} else if (g.switch_addr[0] && is_world) {
		/* Standalone switch: one tree, configured for MPI_COMM_WORLD (docs/mpi.md). */
		o.switch_addr = g.switch_addr;
		o.tree_id = (uint16_t)g.tree_id;
		o.key = g.tree_key;
		if (g.data_port_base > 0)
			snprintf(data, sizeof data, "%s:%d", g.host_ip, g.data_port_base + rank);
	}
	o.data_addr = data;
	if (rc == 0)
		rc = inca_comm_create(&o, &ic);
	free(peers);
	ok = rc == 0;
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all) {
		if (g.verbose || (g.stats && rank == 0))
			impi_say("INCA setup of a communicator (size %d) failed%s%s; it uses MPI",
				 size, rc < 0 ? ": " : " on another rank",
				 rc < 0 ? inca_strerror(rc) : "");
		inca_comm_destroy(ic);
		return NULL;
	}
	if (g.verbose && rank == 0) {
		struct inca_am_info ai;
		if (inca_comm_am_info(ic, &ai, sizeof ai) == 0 && ai.inc_enabled)
			impi_say("communicator %s (size %d): AM group %" PRIu64 ", INC on tree %u",
				 group, size, ai.group_id, (unsigned)ai.tree_id);
		else if (inca_comm_am_info(ic, &ai, sizeof ai) == 0)
			impi_say("communicator %s (size %d): AM group %" PRIu64 ", host only: %s",
				 group, size, ai.group_id, ai.reason);
		else
			impi_say("communicator %s (size %d): no AM, %s", group, size,
				 g.switch_addr[0] && is_world ? "standalone switch" : "host only");
	}
	return ic;
}

/* The INCA communicator of comm, creating it on first use; NULL: use PMPI. */
static struct inca_comm *impi_get(MPI_Comm comm)
{
	struct impi_ent *e;
	void *v;
	int flag = 0, inter = 0, size = 0, rank = 0;

	if (!g.inited || comm == MPI_COMM_NULL)
		return NULL;
	if (PMPI_Comm_get_attr(comm, g.keyval, &v, &flag) != MPI_SUCCESS)
		return NULL;
	if (flag)
		return ((struct impi_ent *)v)->ic;
	e = calloc(1, sizeof *e);
	if (!e) /* a local failure must not send this rank to PMPI alone */
		impi_fatal(comm, "communicator setup", -ENOMEM);
	PMPI_Comm_test_inter(comm, &inter);
	PMPI_Comm_size(comm, &size);
	PMPI_Comm_rank(comm, &rank);
	if (!inter && size > 1)
		e->ic = impi_create(comm, rank, size, comm == MPI_COMM_WORLD);
	pthread_mutex_lock(&g.mu);
	if (e->ic)
		g.comms_inca++;
	else
		g.comms_pmpi++;
	e->next = g.list;
	if (g.list)
		g.list->prev = e;
	g.list = e;
	pthread_mutex_unlock(&g.mu);
	PMPI_Comm_set_attr(comm, g.keyval, e);
	return e->ic;
}

/* libinca rejects overlapping send and receive buffers (-EINVAL) except its exact in-place
 * forms. A program may alias them on some ranks only (e.g. Allgather with sendbuf = own block
 * of recvbuf, which is in place on rank 0 only): a local -EINVAL would then send those ranks
 * to PMPI and the others to INCA. So overlaps are resolved here: sendbuf == recvbuf stays
 * libinca's in-place form where it has one, the own block in place becomes that form, anything
 * else is copied aside. Returns the copy to free. */
static void *impi_unalias(MPI_Comm comm, struct inca_comm *ic, struct inca_coll_args *a)
{
	size_t send_b = 0, recv_b = 0;
	void *tmp;

	if (inca_coll_extent(ic, a, &send_b, &recv_b) < 0)
		return NULL; /* libinca rejects the call itself */
	if (!send_b || !recv_b || !a->sendbuf || !a->recvbuf)
		return NULL; /* one buffer (or none) on this rank: nothing can alias */
	uintptr_t s = (uintptr_t)a->sendbuf, r = (uintptr_t)a->recvbuf;
	if (s >= r + recv_b || r >= s + send_b)
		return NULL; /* disjoint */
	if (s == r && a->coll != INCA_COLL_REDUCE_SCATTER && a->coll != INCA_COLL_ALLTOALL &&
	    a->coll != INCA_COLL_SCATTER)
		return NULL; /* libinca's in-place form (what MPI_IN_PLACE was turned into) */
	if ((a->coll == INCA_COLL_ALLGATHER || a->coll == INCA_COLL_GATHER) &&
	    s == r + (size_t)inca_comm_rank(ic) * send_b) {
		a->sendbuf = a->recvbuf; /* own block in place */
		return NULL;
	}
	tmp = impi_malloc(comm, send_b);
	memcpy(tmp, a->sendbuf, send_b);
	a->sendbuf = tmp;
	return tmp;
}

/* Run one collective on INCA. 1: served; 0: not served, call PMPI (the error is one that every
 * rank sees alike: argument validation before any data moved, or a collective without a host
 * algorithm in this libinca); anything else aborts (see impi_fatal). */
static int impi_run(MPI_Comm comm, struct inca_comm *ic, const struct inca_coll_args *a0)
{
	struct inca_coll_args a = *a0;
	void *tmp = impi_unalias(comm, ic, &a);
	int rc = inca_coll(ic, &a);
	free(tmp);
	if (rc == 0) {
		g.inca_ok[a.coll]++;
		return 1;
	}
	if (rc == -EINVAL || rc == -ENOTSUP)
		return 0;
	impi_fatal(comm, inca_coll_name(a.coll), rc);
}

static struct inca_coll_args impi_args(enum inca_coll coll, const void *s, void *r, size_t count,
				       enum inca_dtype dt, enum inca_op op, int root)
{
	struct inca_coll_args a = { .coll = coll, .sendbuf = s, .recvbuf = r, .count = count,
				    .dt = dt, .op = op, .root = root, .algo = INCA_ALGO_AUTO };
	return a;
}

#define PMPI_COUNT(c) (g.pmpi[(c)]++)

/* ---- init / finalize ---------------------------------------------------------------------- */

static void impi_rand_hex(char *out, size_t n)
{
	uint8_t r[16] = { 0 };
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		memcpy(r, &x, sizeof x);
	}
	for (size_t i = 0; i < sizeof r && 2 * i + 2 < n; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static void impi_setup(void)
{
	const char *v;
	int world_size = 0;

	PMPI_Comm_rank(MPI_COMM_WORLD, &g.world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
	/* INCA_MPI_DISABLE is read on every rank; launchers pass the same environment, and the
	 * decision is agreed below anyway. */
	int on = !env_flag("INCA_MPI_DISABLE"), all_on = 0;
	PMPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	g.stats = env_flag("INCA_MPI_STATS");
	g.verbose = env_flag("INCA_MPI_VERBOSE");
	if (!all_on)
		return;
	{ /* INCA_MPI_FLOAT=exact (default) | inca; agreed: inca only if every rank asks */
		int want = 0, all = 0;
		if ((v = env_str("INCA_MPI_FLOAT"))) {
			want = strcmp(v, "inca") == 0;
			if (!want && strcmp(v, "exact") != 0 && g.world_rank == 0)
				impi_say("INCA_MPI_FLOAT=%s: expected 'exact' or 'inca'; using exact", v);
		}
		PMPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		g.pol.float_inca = all;
	}
	{ /* same library everywhere, but agree anyway: a divergent decision would hang */
		uint32_t mine, any = 0;
		mine = impi_probe_minmax();
		PMPI_Allreduce(&mine, &any, 1, MPI_UINT32_T, MPI_BOR, MPI_COMM_WORLD);
		g.pol.minmax_pmpi = any;
		if (g.verbose && g.world_rank == 0 && any)
			impi_say("the MPI library's MIN/MAX differs from the arithmetic one on %u "
				 "integer type(s) (mask %#x): those stay with PMPI",
				 (unsigned)__builtin_popcount(any), any);
	}
	snprintf(g.host_ip, sizeof g.host_ip, "%s",
		 (v = env_str("INCA_MPI_HOST_IP")) ? v : "127.0.0.1");
	if ((v = env_str("INCA_AM_ADDR")))
		snprintf(g.am_addr, sizeof g.am_addr, "%s", v);
	if ((v = env_str("INCA_SWITCH_ADDR")))
		snprintf(g.switch_addr, sizeof g.switch_addr, "%s", v);
	g.tree_id = (v = env_str("INCA_TREE_ID")) ? (unsigned)strtoul(v, NULL, 0) : 1;
	g.tree_key = (v = env_str("INCA_TREE_KEY")) ? (unsigned)strtoul(v, NULL, 0) : 0;
	g.data_port_base = (v = env_str("INCA_MPI_DATA_PORT_BASE")) ? atoi(v) : 0;
	g.timeout_ms = (v = env_str("INCA_MPI_TIMEOUT_MS")) ? (uint32_t)strtoul(v, NULL, 0) : 20000;
	if (g.am_addr[0]) {
		/* Job id and credential: from the environment, else world rank 0 makes them up
		 * (the AM must then accept the first joiner's credential: allow_first_joiner). */
		struct {
			char job[128], cred[128];
		} id;
		memset(&id, 0, sizeof id);
		if (g.world_rank == 0) {
			if ((v = env_str("INCA_JOB_ID"))) {
				snprintf(id.job, sizeof id.job, "%s", v);
			} else {
				const char *l = env_str("OMPI_MCA_ess_base_jobid");
				if (!l)
					l = env_str("PMI_KVSNAME");
				char host[64] = "host";
				gethostname(host, sizeof host - 1);
				if (l)
					snprintf(id.job, sizeof id.job, "mpi-%s-%s", host, l);
				else
					snprintf(id.job, sizeof id.job, "mpi-%s-%d-%lld", host,
						 (int)getpid(), (long long)time(NULL));
			}
			if ((v = env_str("INCA_JOB_CREDENTIAL")))
				snprintf(id.cred, sizeof id.cred, "%s", v);
			else
				impi_rand_hex(id.cred, sizeof id.cred);
		}
		PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
		memcpy(g.job_id, id.job, sizeof g.job_id);
		memcpy(g.cred, id.cred, sizeof g.cred);
	}
	if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, impi_delete_fn, &g.keyval, NULL) !=
	    MPI_SUCCESS)
		return;
	g.inited = 1;
	if (g.verbose && g.world_rank == 0)
		impi_say("on: %s%s, %d ranks", g.am_addr[0] ? "AM " : g.switch_addr[0] ?
			 "switch " : "host algorithms only", g.am_addr[0] ? g.am_addr :
			 g.switch_addr, world_size);
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);
	if (rc == MPI_SUCCESS)
		impi_setup();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);
	if (rc == MPI_SUCCESS)
		impi_setup();
	return rc;
}

static void impi_print_stats(void)
{
	static const enum inca_coll order[] = {
		INCA_COLL_ALLREDUCE, INCA_COLL_REDUCE, INCA_COLL_BCAST, INCA_COLL_ALLGATHER,
		INCA_COLL_REDUCE_SCATTER, INCA_COLL_ALLTOALL, INCA_COLL_GATHER, INCA_COLL_SCATTER,
		INCA_COLL_BARRIER,
	};
	char buf[4096];
	size_t n = 0;
	uint64_t t_inc = 0, t_host = 0, t_pmpi = 0;

	n += (size_t)snprintf(buf + n, sizeof buf - n,
			      "inca-mpi[%d] stats (calls): %-13s %8s %8s %8s\n", g.world_rank,
			      "collective", "inc", "host", "pmpi");
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		enum inca_coll c = order[i];
		uint64_t inc = g.inc[c], host = g.inca_ok[c] >= inc ? g.inca_ok[c] - inc : 0;
		t_inc += inc;
		t_host += host;
		t_pmpi += g.pmpi[c];
		n += (size_t)snprintf(buf + n, sizeof buf - n,
				      "inca-mpi[%d] stats (calls): %-13s %8" PRIu64 " %8" PRIu64
				      " %8" PRIu64 "\n", g.world_rank, inca_coll_name(c), inc, host,
				      g.pmpi[c]);
	}
	n += (size_t)snprintf(buf + n, sizeof buf - n,
			      "inca-mpi[%d] stats (calls): %-13s %8" PRIu64 " %8" PRIu64 " %8" PRIu64
			      "  (failovers %" PRIu64 ", communicators: %" PRIu64 " INCA, %" PRIu64
			      " MPI-only)\n", g.world_rank, "total", t_inc, t_host, t_pmpi,
			      g.failovers, g.comms_inca, g.comms_pmpi);
	if (n >= sizeof buf)
		n = sizeof buf - 1;
	fwrite(buf, 1, n, stderr);
	fflush(stderr);
}

int MPI_Finalize(void)
{
	if (g.inited) {
		/* Every rank is done with every collective before anyone closes its sockets or
		 * leaves its AM groups. */
		PMPI_Barrier(MPI_COMM_WORLD);
		pthread_mutex_lock(&g.mu);
		for (struct impi_ent *e = g.list; e; e = e->next)
			impi_release(e);
		pthread_mutex_unlock(&g.mu);
		if (g.stats)
			impi_print_stats();
		PMPI_Comm_free_keyval(&g.keyval);
		g.inited = 0;
	} else if (g.stats && !g.inited) {
		impi_print_stats();
	}
	return PMPI_Finalize();
}

/* ---- reductions --------------------------------------------------------------------------- */

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
		  MPI_Comm comm)
{
	enum inca_dtype dt;
	enum inca_op iop;
	struct inca_comm *ic;

	if (count >= 0 && impi_reducible(&g.pol, comm, datatype, op, &dt, &iop) &&
	    (size_t)count * inca_dtype_size(dt) <= IMPI_MAX_BYTES && (ic = impi_get(comm))) {
		const void *s = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
		struct inca_coll_args a = impi_args(INCA_COLL_ALLREDUCE, s, recvbuf,
						    (size_t)count, dt, iop, 0);
		if (impi_run(comm, ic, &a))
			return MPI_SUCCESS;
	}
	PMPI_COUNT(INCA_COLL_ALLREDUCE);
	return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
	       int root, MPI_Comm comm)
{
	enum inca_dtype dt;
	enum inca_op iop;
	struct inca_comm *ic;

	if (count >= 0 && impi_reducible(&g.pol, comm, datatype, op, &dt, &iop) &&
	    (size_t)count * inca_dtype_size(dt) <= IMPI_MAX_BYTES && (ic = impi_get(comm))) {
		int rank = inca_comm_rank(ic);
		const void *s = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
		void *r = rank == root ? recvbuf : NULL;
		struct inca_coll_args a = impi_args(INCA_COLL_REDUCE, s, r, (size_t)count, dt,
						    iop, root);
		if (impi_run(comm, ic, &a))
			return MPI_SUCCESS;
	}
	PMPI_COUNT(INCA_COLL_REDUCE);
	return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

/* ReduceScatter with rcount elements per rank; in place: the input is recvbuf. */
static int impi_reduce_scatter(const void *sendbuf, void *recvbuf, int rcount,
			       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	enum inca_dtype dt;
	enum inca_op iop;
	struct inca_comm *ic;

	if (rcount < 0 || !impi_reducible(&g.pol, comm, datatype, op, &dt, &iop) || !(ic = impi_get(comm)))
		return 0;
	size_t n = (size_t)inca_comm_size(ic), b = (size_t)rcount * inca_dtype_size(dt);
	if (b * n > IMPI_MAX_BYTES)
		return 0;
	void *tmp = NULL;
	const void *s = sendbuf;
	if (sendbuf == MPI_IN_PLACE) {
		/* libinca has no in-place ReduceScatter: copy the input aside. */
		tmp = impi_malloc(comm, b * n);
		memcpy(tmp, recvbuf, b * n);
		s = tmp;
	}
	struct inca_coll_args a = impi_args(INCA_COLL_REDUCE_SCATTER, s, recvbuf, (size_t)rcount,
					    dt, iop, 0);
	int served = impi_run(comm, ic, &a);
	free(tmp);
	return served;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
			     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	if (impi_reduce_scatter(sendbuf, recvbuf, recvcount, datatype, op, comm))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_REDUCE_SCATTER);
	return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
		       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	int size = 0, equal = 1, inter = 0;

	/* recvcounts is the same array on every rank (MPI), so "all equal" is a common
	 * decision. */
	PMPI_Comm_test_inter(comm, &inter);
	PMPI_Comm_size(comm, &size);
	for (int i = 1; i < size && !inter; i++)
		equal &= recvcounts[i] == recvcounts[0];
	if (!inter && size > 0 && equal &&
	    impi_reduce_scatter(sendbuf, recvbuf, recvcounts[0], datatype, op, comm))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_REDUCE_SCATTER);
	return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

/* ---- data movement (any datatype, moved as bytes) ---------------------------------------- */

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
	struct impi_span sp;
	struct inca_comm *ic;

	impi_layout(datatype, count, &sp);
	if (count >= 0 && sp.bytes <= IMPI_MAX_BYTES && (ic = impi_get(comm))) {
		int rank = inca_comm_rank(ic);
		void *tmp = NULL, *p = (char *)buffer + sp.off;
		if (!sp.contig) {
			tmp = p = impi_malloc(comm, sp.bytes);
			if (rank == root)
				impi_pack(comm, buffer, count, datatype, tmp, sp.bytes);
		}
		struct inca_coll_args a = impi_args(INCA_COLL_BCAST, NULL, p, sp.bytes,
						    INCA_UINT8, INCA_SUM, root);
		int served = impi_run(comm, ic, &a);
		if (served && tmp && rank != root)
			impi_unpack(comm, tmp, sp.bytes, buffer, count, datatype);
		free(tmp);
		if (served)
			return MPI_SUCCESS;
	}
	PMPI_COUNT(INCA_COLL_BCAST);
	return PMPI_Bcast(buffer, count, datatype, root, comm);
}

/* How a data-movement collective uses its two buffers (MPI's rules): whether each side holds
 * one block or one per rank, and whether it is significant at the root only. impi_move derives
 * the block size, MPI_IN_PLACE, packing and unpacking from this. */
struct impi_move {
	enum inca_coll coll;
	const char *name;
	bool send_per_rank, recv_per_rank;
	bool send_at_root, recv_at_root; /* significant at the root only */
};

static const struct impi_move IMPI_ALLGATHER = { INCA_COLL_ALLGATHER, "MPI_Allgather", false,
						 true, false, false };
static const struct impi_move IMPI_GATHER = { INCA_COLL_GATHER, "MPI_Gather", false, true,
					      false, true };
static const struct impi_move IMPI_SCATTER = { INCA_COLL_SCATTER, "MPI_Scatter", true, false,
					       true, false };
static const struct impi_move IMPI_ALLTOALL = { INCA_COLL_ALLTOALL, "MPI_Alltoall", true, true,
						false, false };

/* Serve a data-movement collective through INCA (1) or leave it to PMPI (0). Buffers that are
 * not contiguous are packed into (and unpacked from) temporary buffers; the block size comes
 * from a side significant on every rank, so every rank takes the same decision. */
static int impi_move(MPI_Comm comm, const struct impi_move *mv, const void *sendbuf, int scount,
		     MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root)
{
	struct impi_span bs, ss, rs;
	struct inca_comm *ic;
	int rank = 0;

	PMPI_Comm_rank(comm, &rank);
	bool s_in_place = sendbuf == MPI_IN_PLACE, r_in_place = recvbuf == MPI_IN_PLACE;
	bool s_sig = !mv->send_at_root || rank == root, r_sig = !mv->recv_at_root || rank == root;
	/* The side every rank has: the receive side unless it is the root's in-place one. */
	bool from_recv = mv->recv_at_root ? s_in_place : !r_in_place;
	int cnt = from_recv ? rcount : scount;

	impi_layout(from_recv ? rtype : stype, cnt, &bs);
	if (cnt < 0 || !(ic = impi_get(comm)))
		return 0;
	size_t n = (size_t)inca_comm_size(ic), b = bs.bytes;
	size_t sn = mv->send_per_rank ? n : 1, rn = mv->recv_per_rank ? n : 1;
	char *r = NULL, *rtmp = NULL, *stmp = NULL;
	const void *s = NULL;
	MPI_Aint lb, ext;
	if (b * n > IMPI_MAX_BYTES)
		return 0;
	if (r_sig && r_in_place) {
		r = rtmp = impi_malloc(comm, b * rn); /* the root keeps its block in sendbuf */
	} else if (r_sig) {
		impi_layout(rtype, rcount, &rs);
		r = rs.contig ? (char *)recvbuf + rs.off : (rtmp = impi_malloc(comm, b * rn));
	}
	if (s_sig && s_in_place && !mv->send_per_rank) {
		/* The own block is already in recvbuf: the input of libinca's in-place form. */
		PMPI_Type_get_extent(rtype, &lb, &ext);
		if (rtmp)
			impi_pack(comm, (char *)recvbuf + (MPI_Aint)rank * rcount * ext, rcount,
				  rtype, rtmp + (size_t)rank * b, b);
		s = r;
	} else if (s_sig && s_in_place) {
		/* The input is recvbuf: copy it aside (libinca moves per-rank blocks out of
		 * place). */
		s = stmp = impi_malloc(comm, b * sn);
		if (rtmp)
			impi_pack(comm, recvbuf, rcount * (int)rn, rtype, stmp, b * sn);
		else
			memcpy(stmp, r, b * sn);
	} else if (s_sig) {
		impi_layout(stype, scount, &ss);
		if (ss.bytes != b) {
			char what[64];
			snprintf(what, sizeof what, "%s (send and receive sizes differ)", mv->name);
			impi_fatal(comm, what, -EINVAL);
		}
		if (ss.contig) {
			s = (const char *)sendbuf + ss.off;
		} else {
			s = stmp = impi_malloc(comm, b * sn);
			impi_pack(comm, sendbuf, scount * (int)sn, stype, stmp, b * sn);
		}
	}
	struct inca_coll_args a = impi_args(mv->coll, s, r, b, INCA_UINT8, INCA_SUM, root);
	int served = impi_run(comm, ic, &a);
	if (served && rtmp && !r_in_place)
		impi_unpack(comm, rtmp, b * rn, recvbuf, rcount * (int)rn, rtype);
	free(rtmp);
	free(stmp);
	return served;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	if (impi_move(comm, &IMPI_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
		      recvtype, 0))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_ALLGATHER);
	return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
	       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	if (impi_move(comm, &IMPI_GATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
		      recvtype, root))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_GATHER);
	return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
		int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	if (impi_move(comm, &IMPI_SCATTER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
		      recvtype, root))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_SCATTER);
	return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	if (impi_move(comm, &IMPI_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount,
		      recvtype, 0))
		return MPI_SUCCESS;
	PMPI_COUNT(INCA_COLL_ALLTOALL);
	return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
	struct inca_comm *ic = impi_get(comm);
	if (ic) {
		struct inca_coll_args a = impi_args(INCA_COLL_BARRIER, NULL, NULL, 0, INCA_UINT8,
						    INCA_SUM, 0);
		if (impi_run(comm, ic, &a))
			return MPI_SUCCESS;
	}
	PMPI_COUNT(INCA_COLL_BARRIER);
	return PMPI_Barrier(comm);
}
