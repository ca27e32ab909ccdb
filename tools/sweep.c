/* tools/sweep: AllReduce size sweep run inside each rank process. Per row and algorithm:
 * fill (data depends on rank, element and iteration) -> barrier -> timed call -> barrier
 * (results of SWEEP_SYNC_CHECK_BYTES and more) -> verify.
 * Rank 0 decides when warmup and timed phases end (iteration caps and a wall-time budget) and
 * publishes the decision through shared memory before the barrier, so all ranks agree. */
#include "sweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "launch.h"
#include "util/util.h"
#include "wire/wire.h"

enum { DEC_WARM = 1, DEC_TIMED = 2, DEC_STOP = 3 };

struct sweep_algo_res {
	double time_us; /* mean over ranks of each rank's mean call time */
	uint64_t wrong;
	uint64_t errors;
	int iters;
	bool ran;
};

struct sweep_shared {
	volatile int decide[4];
	double time_sum_s[LAUNCH_MAX_RANKS];
	uint64_t wrong[LAUNCH_MAX_RANKS];
	uint64_t errors[LAUNCH_MAX_RANKS];
	int iters;
	struct sweep_totals totals;
	struct inca_comm_stats cstats[LAUNCH_MAX_RANKS];
	struct inca_io_stats iostats[LAUNCH_MAX_RANKS];
	int cstats_valid[LAUNCH_MAX_RANKS];
};

int sweep_job_init(struct sweep_job *j)
{
	j->sh = launch_shm_alloc(sizeof(*j->sh));
	return j->sh ? 0 : -ENOMEM;
}

void sweep_job_fini(struct sweep_job *j)
{
	launch_shm_free(j->sh, sizeof(*j->sh));
	j->sh = NULL;
}

const struct sweep_totals *sweep_job_totals(const struct sweep_job *j)
{
	return &j->sh->totals;
}

int sweep_job_client_stats(const struct sweep_job *j, struct inca_comm_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	int got = 0;
	for (int r = 0; r < LAUNCH_MAX_RANKS; r++) {
		if (!j->sh->cstats_valid[r])
			continue;
		const struct inca_comm_stats *c = &j->sh->cstats[r];
		sum->tx_pkts += c->tx_pkts;
		sum->tx_bytes += c->tx_bytes;
		sum->rx_pkts += c->rx_pkts;
		sum->rx_bytes += c->rx_bytes;
		sum->retransmits += c->retransmits;
		sum->timeouts += c->timeouts;
		sum->rx_dup_results += c->rx_dup_results;
		sum->rx_bad += c->rx_bad;
		sum->injected_drops += c->injected_drops;
		sum->inc_calls += c->inc_calls;
		sum->ring_calls += c->ring_calls;
		sum->rx_nacks += c->rx_nacks;
		got++;
	}
	return got;
}

int sweep_job_io_stats(const struct sweep_job *j, struct inca_io_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	int got = 0;
	for (int r = 0; r < LAUNCH_MAX_RANKS; r++) {
		if (!j->sh->cstats_valid[r])
			continue;
		const struct inca_io_stats *c = &j->sh->iostats[r];
		sum->gso += c->gso; /* ranks with GSO on */
		sum->gro += c->gro;
		sum->tx_syscalls += c->tx_syscalls;
		sum->tx_msgs += c->tx_msgs;
		sum->gso_sends += c->gso_sends;
		sum->gso_failed += c->gso_failed;
		sum->rx_syscalls += c->rx_syscalls;
		sum->rx_bufs += c->rx_bufs;
		sum->rx_gro_bufs += c->rx_gro_bufs;
		got++;
	}
	return got;
}

static const char *const algo_name[] = { "INC", "ring" };

/* Chunks of one INC call of `bytes`: packets with an authentication block carry fewer data
 * bytes. A fabric job's key comes from the AM or the plan, so the communicator says. */
static uint64_t chunks_for(struct inca_comm *comm, const struct sweep_job *j, size_t bytes,
			   size_t es)
{
	struct inca_auth_stats as;
	bool auth = j->auth ||
		    (inca_comm_get_auth_stats(comm, &as, sizeof as) == 0 && as.enabled);
	size_t per = wire_max_data_auth(j->mtu ? j->mtu : 4096, es,
					wire_bsl_code(j->bsl_bits ? j->bsl_bits : 64), auth);
	if (!per || !bytes)
		return 0;
	return (bytes + per - 1) / per;
}

#define SWEEP_SYNC_CHECK_BYTES (64 * 1024)

/* One row for one algorithm. Returns 0, or -1 if the barrier failed or the rank could not take
 * its CPUs (the job is broken). */
static int run_algo(struct inca_comm *comm, struct sweep_job *j, int algo, size_t count,
		    enum inca_dtype dt, enum inca_op op, uint8_t *sbuf, uint8_t *rbuf,
		    uint64_t *iter_id, struct sweep_algo_res *res)
{
	const struct sweep_opts *o = &j->o;
	struct sweep_shared *sh = j->sh;
	int rank = inca_comm_rank(comm), n = inca_comm_size(comm);
	size_t es = inca_dtype_size(dt);
	size_t bytes = count * es;
	enum inca_algo ia = algo == 0 ? INCA_ALGO_INC : INCA_ALGO_RING;
	struct check_spec spec = {
		.dt = dt, .op = op, .nranks = n, .seed = o->seed,
		.mode = (algo == 0 && o->deterministic) ? CHECK_RANK_ORDER : CHECK_EXACT,
	};
	uint8_t *in = o->in_place ? rbuf : sbuf;
	int phase = DEC_WARM, warm_done = 0, timed_done = 0;
	uint64_t phase_start = util_now_ns();
	double tsum = 0;
	uint64_t wrong = 0, errors = 0, reported = 0;
	uint64_t budget_ns = (uint64_t)(o->budget_s * 1e9);
	/* --switch-cpu: INC rows from SWEEP_SWITCH_ALONE_BYTES on leave the switch's CPU to it;
	 * shorter calls are latency, which four ranks squeezed onto fewer CPUs lose. */
	bool leave = algo == 0 && bytes >= SWEEP_SWITCH_ALONE_BYTES;
	int crc = o->switch_alone ? launch_rank_cpus(rank, leave ? o->switch_cpu : -1) : 0;
	if (crc) {
		fprintf(stderr, "[rank %d] CPU placement (--switch-cpu): %s\n", rank, strerror(-crc));
		return -1;
	}

	for (unsigned step = 0;; step++) {
		if (rank == 0) {
			uint64_t el = util_now_ns() - phase_start;
			int d = phase;
			if (phase == DEC_WARM &&
			    (warm_done >= o->warmup || (budget_ns && warm_done && el > budget_ns / 4))) {
				d = DEC_TIMED;
				phase_start = util_now_ns();
			}
			if (d == DEC_TIMED && timed_done >= 1 &&
			    (timed_done >= o->iters ||
			     (budget_ns && util_now_ns() - phase_start > budget_ns)))
				d = DEC_STOP;
			if (d == DEC_TIMED && o->iters <= 0)
				d = DEC_STOP;
			sh->decide[step & 3] = d;
		}
		spec.iter = ++*iter_id;
		check_fill(&spec, rank, in, 0, count);
		if (!o->in_place)
			memset(rbuf, 0xA5, bytes); /* a buffer left untouched cannot pass */
		int rc = inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_RING });
		if (rc) {
			fprintf(stderr, "[rank %d] barrier failed: %s\n", rank, inca_strerror(rc));
			return -1;
		}
		__sync_synchronize();
		int d = sh->decide[step & 3];
		if (d == DEC_STOP)
			break;
		phase = d;

		uint64_t t0 = util_now_ns();
		rc = inca_allreduce_algo(comm, in, rbuf, count, dt, op, ia);
		uint64_t t1 = util_now_ns();
		/* Verify only once every rank returned: a rank that finished first must not take
		 * CPU from the ranks (and the switch) still in the call with its checks. Results
		 * below SWEEP_SYNC_CHECK_BYTES are checked in microseconds; there the barrier would
		 * only add to the next call's start skew (4-byte INC calls measured 5-8 us
		 * slower with it). */
		int brc = bytes < SWEEP_SYNC_CHECK_BYTES
				  ? 0
				  : inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER,
									     .algo = INCA_ALGO_RING });
		if (brc) {
			fprintf(stderr, "[rank %d] barrier failed: %s\n", rank, inca_strerror(brc));
			return -1;
		}
		if (algo == 0) {
			sh->totals.inc_calls += rank == 0;
			if (rank == 0)
				sh->totals.inc_chunks += chunks_for(comm, j, bytes, es);
		} else {
			sh->totals.ring_calls += rank == 0;
		}
		if (rc) {
			if (!errors)
				fprintf(stderr, "[rank %d] %s allreduce %zu x %s %s: %s (%d)\n", rank,
					algo_name[algo], count, inca_dtype_name(dt), inca_op_name(op),
					inca_strerror(rc), rc);
			errors++;
		} else {
			size_t first_bad;
			size_t w = check_verify(&spec, rbuf, 0, count, &first_bad);
			if (w && reported < 2) {
				char gs[64], es_[64];
				uint8_t exp[8];
				check_expected(&spec, first_bad, exp);
				check_format(dt, rbuf, first_bad, gs, sizeof(gs));
				check_format(dt, exp, 0, es_, sizeof(es_));
				fprintf(stderr,
					"[rank %d] %s %s %s count %zu iter %llu: %zu wrong, first at "
					"[%zu]: got %s expected %s\n",
					rank, algo_name[algo], inca_dtype_name(dt), inca_op_name(op),
					count, (unsigned long long)spec.iter, w, first_bad, gs, es_);
				reported++;
			}
			wrong += w;
		}
		if (phase == DEC_WARM) {
			warm_done++;
		} else {
			timed_done++;
			tsum += (double)(t1 - t0) * 1e-9;
		}
	}

	sh->time_sum_s[rank] = tsum;
	sh->wrong[rank] = wrong;
	sh->errors[rank] = errors;
	if (rank == 0)
		sh->iters = timed_done;
	__sync_synchronize();
	int rc = inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_RING });
	if (rc) {
		fprintf(stderr, "[rank %d] barrier failed: %s\n", rank, inca_strerror(rc));
		return -1;
	}
	if (rank == 0) {
		memset(res, 0, sizeof(*res));
		res->ran = true;
		res->iters = sh->iters;
		double mean = 0;
		for (int r = 0; r < n; r++) {
			res->wrong += sh->wrong[r];
			res->errors += sh->errors[r];
			if (sh->iters)
				mean += sh->time_sum_s[r] / sh->iters;
		}
		res->time_us = mean / n * 1e6;
	}
	/* Ranks other than 0 only need to know whether they themselves saw a problem. */
	if (rank != 0) {
		memset(res, 0, sizeof(*res));
		res->wrong = wrong;
		res->errors = errors;
	}
	return 0;
}

static void print_header(const struct sweep_opts *o, int n)
{
	printf("#\n");
	printf("# %-46s %-38s %s\n", "", o->inc ? "in-network (INC)" : "",
	       o->ring ? "host ring (TCP)" : "");
	printf("# %10s %12s %6s %6s  %9s %7s %7s %6s  %9s %7s %7s %6s%s\n", "size", "count", "type",
	       "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
	       o->ratio ? (o->link_bps > 0 ? "  INC/ring  INC/link" : "  INC/ring") : "");
	printf("# %10s %12s %6s %6s  %9s %7s %7s %6s  %9s %7s %7s %6s%s\n", "(B)", "(elements)", "",
	       "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
	       o->ratio ? (o->link_bps > 0 ? "   (algbw)   (algbw)" : "   (algbw)") : "");
	(void)n;
	fflush(stdout);
}

static void fmt_algo(char *out, size_t cap, const struct sweep_algo_res *r, size_t bytes, int n)
{
	if (!r->ran) {
		snprintf(out, cap, "%9s %7s %7s %6s", "-", "-", "-", "-");
		return;
	}
	if (r->errors || !r->iters) {
		snprintf(out, cap, "%9s %7s %7s %6s", "ERR", "-", "-",
			 r->wrong ? "?" : "-");
		if (r->wrong)
			snprintf(out, cap, "%9s %7s %7s %6llu", "ERR", "-", "-",
				 (unsigned long long)r->wrong);
		return;
	}
	double algbw = r->time_us > 0 ? (double)bytes / (r->time_us * 1e-6) / 1e9 : 0;
	double busbw = algbw * 2.0 * (n - 1) / n;
	snprintf(out, cap, "%9.1f %7.3f %7.3f %6llu", r->time_us, algbw, busbw,
		 (unsigned long long)r->wrong);
}

static void json_algo(FILE *f, const char *pfx, const struct sweep_algo_res *r, size_t bytes,
		      int n)
{
	if (!r->ran)
		return;
	double algbw = r->time_us > 0 ? (double)bytes / (r->time_us * 1e-6) / 1e9 : 0;
	fprintf(f, ",\"%s_time_us\":%.3f,\"%s_algbw_gbps\":%.6f,\"%s_busbw_gbps\":%.6f,"
		   "\"%s_wrong\":%llu,\"%s_errors\":%llu,\"%s_iters\":%d",
		pfx, r->time_us, pfx, algbw, pfx, algbw * 2.0 * (n - 1) / n, pfx,
		(unsigned long long)r->wrong, pfx, (unsigned long long)r->errors, pfx, r->iters);
}

static void print_row(struct sweep_job *j, int n, size_t count, enum inca_dtype dt,
		      enum inca_op op, const struct sweep_algo_res *res)
{
	const struct sweep_opts *o = &j->o;
	size_t bytes = count * inca_dtype_size(dt);
	char a[64], b[64], ratio[48] = "";
	fmt_algo(a, sizeof(a), &res[0], bytes, n);
	fmt_algo(b, sizeof(b), &res[1], bytes, n);
	bool both_ok = res[0].ran && res[1].ran && !res[0].errors && !res[1].errors &&
		       res[0].iters && res[1].iters && res[0].time_us > 0;
	double rt = both_ok ? res[1].time_us / res[0].time_us : 0;
	if (o->ratio && both_ok)
		snprintf(ratio, sizeof(ratio), "  %8.2fx", rt);
	else if (o->ratio)
		snprintf(ratio, sizeof(ratio), "  %9s", "-");
	/* Payload bits per second over the link rate: what the "x link rate" means. */
	if (o->ratio && o->link_bps > 0) {
		size_t l = strlen(ratio);
		bool inc_ok = res[0].ran && !res[0].errors && res[0].iters && res[0].time_us > 0;
		if (inc_ok)
			snprintf(ratio + l, sizeof(ratio) - l, "  %8.2fx",
				 (double)bytes * 8.0 / (res[0].time_us * 1e-6) / o->link_bps);
		else
			snprintf(ratio + l, sizeof(ratio) - l, "  %9s", "-");
	}
	printf("  %10zu %12zu %6s %6s  %s  %s%s\n", bytes, count, inca_dtype_name(dt),
	       inca_op_name(op), a, b, ratio);
	fflush(stdout);
	if (o->json_path) {
		FILE *f = fopen(o->json_path, "a");
		if (f) {
			fprintf(f, "{\"tool\":\"%s\",\"ranks\":%d,\"size_bytes\":%zu,\"count\":%zu,"
				   "\"type\":\"%s\",\"op\":\"%s\",\"in_place\":%s,"
				   "\"deterministic\":%s",
				o->label ? o->label : "sweep", n, bytes, count, inca_dtype_name(dt),
				inca_op_name(op), o->in_place ? "true" : "false",
				o->deterministic ? "true" : "false");
			json_algo(f, "inc", &res[0], bytes, n);
			json_algo(f, "ring", &res[1], bytes, n);
			if (both_ok)
				fprintf(f, ",\"ratio_algbw\":%.4f", rt);
			fprintf(f, "}\n");
			fclose(f);
		}
	}
}

int sweep_rank_main(struct inca_comm *comm, void *arg)
{
	struct sweep_job *j = arg;
	const struct sweep_opts *o = &j->o;
	int rank = inca_comm_rank(comm), n = inca_comm_size(comm);
	uint64_t maxb = 0;
	for (int p = 0; p < o->npairs; p++)
		if (o->pairs[p].max_bytes > maxb)
			maxb = o->pairs[p].max_bytes;
	maxb = (maxb + 63) & ~63ull;
	uint8_t *sbuf = NULL, *rbuf = NULL;
	if (posix_memalign((void **)&sbuf, 64, maxb ? maxb : 64) ||
	    posix_memalign((void **)&rbuf, 64, maxb ? maxb : 64)) {
		fprintf(stderr, "[rank %d] out of memory (%llu bytes)\n", rank,
			(unsigned long long)maxb);
		free(sbuf);
		return 4;
	}
	bool tty = o->progress && isatty(2);
	if (rank == 0)
		print_header(o, n);
	uint64_t iter_id = 0, bad = 0;
	int rc = 0;
	for (int p = 0; p < o->npairs && !rc; p++) {
		const struct sweep_pair *pr = &o->pairs[p];
		size_t es = inca_dtype_size(pr->dt);
		for (uint64_t b = pr->min_bytes; b <= pr->max_bytes && !rc; b *= pr->factor) {
			size_t count = (size_t)(b / es);
			if (b && !count)
				continue; /* smaller than one element */
			struct sweep_algo_res res[2] = { 0 };
			for (int algo = 0; algo < 2 && !rc; algo++) {
				if (!(algo == 0 ? o->inc : o->ring))
					continue;
				if (tty && rank == 0 && b >= (4u << 20)) {
					char sz[32];
					fprintf(stderr, "\r# running %s %s %s %s ...\033[K",
						launch_fmt_bytes(b, sz, sizeof(sz)),
						inca_dtype_name(pr->dt), inca_op_name(pr->op),
						algo_name[algo]);
				}
				if (run_algo(comm, j, algo, count, pr->dt, pr->op, sbuf, rbuf, &iter_id,
					     &res[algo]))
					rc = 3;
				bad += res[algo].wrong + res[algo].errors;
				if (tty && rank == 0 && b >= (4u << 20))
					fprintf(stderr, "\r\033[K");
			}
			if (rc)
				break;
			if (rank == 0) {
				struct sweep_totals *t = &j->sh->totals;
				t->rows++;
				t->inc_wrong += res[0].wrong;
				t->inc_errors += res[0].errors;
				t->ring_wrong += res[1].wrong;
				t->ring_errors += res[1].errors;
				print_row(j, n, count, pr->dt, pr->op, res);
			}
			if (b == 0)
				break;
		}
	}
	free(sbuf);
	free(rbuf);
	if (inca_comm_get_stats(comm, &j->sh->cstats[rank], sizeof j->sh->cstats[rank]) == 0 &&
	    inca_comm_get_io_stats(comm, &j->sh->iostats[rank], sizeof j->sh->iostats[rank]) == 0)
		j->sh->cstats_valid[rank] = 1;
	if (rc)
		return rc;
	return bad ? 1 : 0;
}

int sweep_parse_pairs(const char *list, uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
		      struct sweep_pair *out, int cap)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", list);
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n >= cap) {
			fprintf(stderr, "too many type:op pairs (max %d)\n", cap);
			return -EINVAL;
		}
		struct sweep_pair *p = &out[n];
		p->min_bytes = min_bytes;
		p->max_bytes = max_bytes;
		p->factor = factor;
		char *range = strchr(tok, '@');
		if (range) {
			*range++ = '\0';
			/* "@MIN-MAX" or "@MIN-MAX/F" */
			char *slash = strchr(range, '/');
			if (slash) {
				*slash++ = '\0';
				char *end;
				p->factor = strtoull(slash, &end, 10);
				if (*end || p->factor < 2) {
					fprintf(stderr, "bad factor in '%s'\n", tok);
					return -EINVAL;
				}
			}
			char *dash = strchr(range, '-');
			if (!dash) {
				fprintf(stderr, "bad range in '%s' (want @MIN-MAX[/F])\n", tok);
				return -EINVAL;
			}
			*dash++ = '\0';
			if (launch_parse_bytes(range, &p->min_bytes) ||
			    launch_parse_bytes(dash, &p->max_bytes)) {
				fprintf(stderr, "bad size in '%s'\n", tok);
				return -EINVAL;
			}
		}
		char *colon = strchr(tok, ':');
		const char *opname = colon ? colon + 1 : "sum";
		if (colon)
			*colon = '\0';
		int dt = inca_dtype_parse(tok);
		int op = inca_op_parse(opname);
		if (dt < 0 || op < 0) {
			fprintf(stderr, "unknown type or op '%s:%s' (types: int8 uint8 int16 uint16 "
					"int32 uint32 int64 uint64 fp16 bf16 fp32 fp64; ops: sum prod "
					"min max band bor bxor)\n", tok, opname);
			return -EINVAL;
		}
		if (!inca_op_valid((enum inca_dtype)dt, (enum inca_op)op)) {
			fprintf(stderr, "%s is not defined for %s\n", opname, tok);
			return -EINVAL;
		}
		p->dt = (enum inca_dtype)dt;
		p->op = (enum inca_op)op;
		if (p->factor < 2 || p->min_bytes > p->max_bytes) {
			fprintf(stderr, "bad size range for '%s'\n", tok);
			return -EINVAL;
		}
		n++;
	}
	return n;
}
