/* tests/integration/itest: shared helpers of the integration tests (see itest.h). */
#include "itest.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

void itest_args(int argc, char **argv, struct launch_cfg *cfg)
{
	static const struct option lo[] = {
		{ "switch", required_argument, 0, 's' },
		{ "addr-index", required_argument, 0, 'a' },
		{ "ranks", required_argument, 0, 'r' },
		{ 0, 0, 0, 0 },
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': cfg->switch_path = optarg; break;
		case 'a': cfg->addr_index = (unsigned)atoi(optarg); break;
		case 'r': cfg->nranks = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [--switch PATH] [--addr-index K] [--ranks N]\n",
				argv[0]);
			exit(2);
		}
	}
}

uint64_t itest_chunks(size_t count, enum inca_dtype dt, const struct launch_cfg *cfg)
{
	size_t es = inca_dtype_size(dt);
	size_t per = wire_max_data_auth(cfg->mtu ? cfg->mtu : 4096, es,
					wire_bsl_code(cfg->bsl_bits ? cfg->bsl_bits : 64),
					!cfg->no_auth && !cfg->plan);
	if (!count || !per)
		return 0;
	return (count * es + per - 1) / per;
}

int itest_call(struct inca_comm *comm, struct itest_shared *sh, const struct launch_cfg *cfg,
	       const struct check_spec *spec, size_t count, enum inca_algo algo, bool in_place,
	       void *sbuf, void *rbuf)
{
	int rank = inca_comm_rank(comm);
	size_t es = inca_dtype_size(spec->dt);
	void *in = in_place ? rbuf : sbuf;
	check_fill(spec, rank, in, 0, count);
	if (!in_place)
		memset(rbuf, 0x5A, count * es);
	int rc = inca_allreduce_algo(comm, in, rbuf, count, spec->dt, spec->op, algo);
	sh->calls[rank]++;
	if (rank == 0 && algo != INCA_ALGO_RING)
		sh->inc_chunks += itest_chunks(count, spec->dt, cfg);
	const char *an = algo == INCA_ALGO_RING ? "ring" : algo == INCA_ALGO_INC ? "INC" : "auto";
	if (rc) {
		if (sh->errors[rank]++ < 3)
			fprintf(stderr, "[rank %d] %s %s:%s count %zu: %s (%d)\n", rank, an,
				inca_dtype_name(spec->dt), inca_op_name(spec->op), count,
				inca_strerror(rc), rc);
		return -1;
	}
	size_t first;
	size_t w = check_verify(spec, rbuf, 0, count, &first);
	if (w) {
		char got[64], exp[64];
		uint8_t e[8];
		check_expected(spec, first, e);
		check_format(spec->dt, rbuf, first, got, sizeof(got));
		check_format(spec->dt, e, 0, exp, sizeof(exp));
		if (sh->wrong[rank] == 0)
			fprintf(stderr, "[rank %d] %s %s:%s count %zu%s: %zu wrong, first [%zu] got %s "
					"expected %s\n", rank, an, inca_dtype_name(spec->dt),
				inca_op_name(spec->op), count, in_place ? " in-place" : "", w, first,
				got, exp);
		sh->wrong[rank] += w;
	}
	if (!in_place && count) {
		/* The send buffer is input only. */
		struct check_spec again = *spec;
		uint8_t *tmp = malloc(count * es);
		if (tmp) {
			check_fill(&again, rank, tmp, 0, count);
			if (memcmp(tmp, sbuf, count * es) != 0) {
				fprintf(stderr, "[rank %d] %s %s:%s count %zu modified sendbuf\n", rank,
					an, inca_dtype_name(spec->dt), inca_op_name(spec->op), count);
				sh->wrong[rank]++;
				w++;
			}
			free(tmp);
		}
	}
	return w ? -1 : 0;
}

void itest_save_stats(struct inca_comm *comm, struct itest_shared *sh)
{
	inca_comm_get_stats(comm, &sh->cstats[inca_comm_rank(comm)], sizeof sh->cstats[0]);
}

void itest_sum(const struct itest_shared *sh, int nranks, struct inca_comm_stats *cs,
	       uint64_t *wrong, uint64_t *errors)
{
	memset(cs, 0, sizeof(*cs));
	*wrong = *errors = 0;
	for (int r = 0; r < nranks; r++) {
		const struct inca_comm_stats *c = &sh->cstats[r];
		cs->tx_pkts += c->tx_pkts;
		cs->rx_pkts += c->rx_pkts;
		cs->tx_bytes += c->tx_bytes;
		cs->rx_bytes += c->rx_bytes;
		cs->retransmits += c->retransmits;
		cs->timeouts += c->timeouts;
		cs->rx_dup_results += c->rx_dup_results;
		cs->rx_bad += c->rx_bad;
		cs->injected_drops += c->injected_drops;
		cs->inc_calls += c->inc_calls;
		cs->ring_calls += c->ring_calls;
		cs->rx_nacks += c->rx_nacks;
		*wrong += sh->wrong[r];
		*errors += sh->errors[r];
	}
}
