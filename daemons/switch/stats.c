/* inca-switch statistics: sums the per-worker snapshots and writes them as JSON (global drops
 * by reason, per tree engine counters, per neighbour QP counters). Schema: docs/switch.md.
 * Runs on the main thread only; workers never block on it. */
#include "switch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sw_stats_sum_counters(const struct sw_switch *sw, struct sw_counters *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned wi = 0; wi < sw->nworkers; wi++) {
		const struct sw_counters *c = &sw->w[wi].snap_cnt;
		out->rx_pkts += c->rx_pkts;
		out->rx_bytes += c->rx_bytes;
		out->tx_pkts += c->tx_pkts;
		out->tx_bytes += c->tx_bytes;
		out->reflected += c->reflected;
		out->rx_batches += c->rx_batches;
		out->tx_batches += c->tx_batches;
		out->rx_coalesced += c->rx_coalesced;
		out->tx_gso_sends += c->tx_gso_sends;
		out->gso_on += c->gso_on;
		out->gro_on += c->gro_on;
		for (int i = 0; i < WIRE_E_COUNT_MAX_; i++)
			out->wire_drops[i] += c->wire_drops[i];
		for (int i = 0; i < SW_DROP_COUNT; i++)
			out->sw_drops[i] += c->sw_drops[i];
		for (int i = 0; i < AGG_VERDICT_COUNT; i++)
			out->verdicts[i] += c->verdicts[i];
	}
}

void sw_stats_sum_tree(const struct sw_tree *t, struct agg_tree_stats *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned wi = 0; wi < t->nworkers; wi++) {
		const struct agg_tree_stats *s = &t->w[wi].snap;
		out->rx_pkts += s->rx_pkts;
		out->rx_bytes += s->rx_bytes;
		out->tx_pkts += s->tx_pkts;
		out->tx_bytes += s->tx_bytes;
		out->contributions += s->contributions;
		out->aggregations += s->aggregations;
		out->duplicates += s->duplicates;
		out->results_resent += s->results_resent;
		out->forwarded += s->forwarded;
		out->results_down += s->results_down;
		out->notices += s->notices;
		out->notices_limited += s->notices_limited;
		out->resends_limited += s->resends_limited;
		out->epoch_resets += s->epoch_resets;
		if (s->epoch && (!out->epoch || (int32_t)(s->epoch - out->epoch) > 0))
			out->epoch = s->epoch; /* the newest any shard has seen */
		for (int i = 0; i < AGG_VERDICT_COUNT; i++)
			out->drops[i] += s->drops[i];
	}
}

void sw_stats_sum_qp(const struct sw_tree *t, uint32_t nbr, struct sw_qp_stats *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned wi = 0; wi < t->nworkers; wi++) {
		const struct sw_qp_stats *s = &t->w[wi].snap_qp[nbr];
		out->rx_pkts += s->rx_pkts;
		out->rx_bytes += s->rx_bytes;
		out->tx_pkts += s->tx_pkts;
		out->tx_bytes += s->tx_bytes;
		out->psn_gaps += s->psn_gaps;
		out->psn_lost += s->psn_lost;
		out->psn_reorder += s->psn_reorder;
	}
}

/* Engine verdict names may collide with decoder reason names ("too_big"): in the flat global
 * drops map an engine name that a decoder reason already uses gets an "agg_" prefix. */
const char *sw_stats_engine_drop_key(enum agg_verdict v, char *buf, size_t cap)
{
	const char *n = agg_verdict_name(v);

	for (int e = 1; e < WIRE_E_COUNT_MAX_; e++)
		if (!strcmp(n, wire_err_name((enum wire_err)e))) {
			snprintf(buf, cap, "agg_%s", n);
			return buf;
		}
	for (int d = 0; d < SW_DROP_COUNT; d++)
		if (!strcmp(n, sw_drop_name((enum sw_drop)d))) {
			snprintf(buf, cap, "agg_%s", n);
			return buf;
		}
	return n;
}

const char *sw_nbr_kind_name(enum sw_nbr_kind k)
{
	return k == SW_NBR_MEMBER ? "member" : k == SW_NBR_CHILD ? "child" : "parent";
}

/* A JSON string literal (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

void sw_stats_write_json(const struct sw_switch *sw, FILE *f)
{
	const struct sw_treeset *set = atomic_load(&((struct sw_switch *)sw)->set);
	struct sw_counters c;
	struct timespec now;
	uint64_t total = 0;
	char a[32], kb[64];
	const char *sep = "";

	sw_stats_sum_counters(sw, &c);
	clock_gettime(CLOCK_REALTIME, &now);
	fprintf(f, "{\n");
	fprintf(f, "  \"version\": 1,\n");
	fprintf(f, "  \"time_unix_ms\": %llu,\n",
		(unsigned long long)now.tv_sec * 1000ull + (unsigned long long)now.tv_nsec / 1000000ull);
	fprintf(f, "  \"uptime_ms\": %llu,\n",
		(unsigned long long)((util_now_ns() - sw->start_ns) / 1000000ull));
	fprintf(f, "  \"pid\": %d,\n", (int)getpid());
	fprintf(f, "  \"mode\": \"%s\",\n", sw->opts.reflect ? "reflect" : "aggregate");
	fprintf(f, "  \"io\": \"%s\",\n", sw->xdp ? "xdp" : "sockets");
	if (sw->xdp_fallback[0]) {
		fprintf(f, "  \"xdp_fallback\": ");
		json_str(f, sw->xdp_fallback);
		fprintf(f, ",\n");
	}
	sw_xdp_stats_json(sw, f);
	fprintf(f, "  \"listen\": \"%s\",\n", util_format_addr(&sw->cfg->listen, a, sizeof a));
	fprintf(f, "  \"threads\": %u,\n", sw->nworkers);
	fprintf(f, "  \"check_icrc\": %s,\n", sw->cfg->check_icrc ? "true" : "false");
	fprintf(f, "  \"rx_pkts\": %llu,\n", (unsigned long long)c.rx_pkts);
	fprintf(f, "  \"rx_bytes\": %llu,\n", (unsigned long long)c.rx_bytes);
	fprintf(f, "  \"tx_pkts\": %llu,\n", (unsigned long long)c.tx_pkts);
	fprintf(f, "  \"tx_bytes\": %llu,\n", (unsigned long long)c.tx_bytes);
	fprintf(f, "  \"reflected\": %llu,\n", (unsigned long long)c.reflected);
	fprintf(f, "  \"rx_batches\": %llu,\n", (unsigned long long)c.rx_batches);
	fprintf(f, "  \"tx_batches\": %llu,\n", (unsigned long long)c.tx_batches);
	/* Kernel batching: how many workers send with UDP GSO / receive with UDP GRO (fewer than
	 * threads: the kernel refused it, or --no-gso / --no-gro), and what it did. */
	fprintf(f, "  \"gso_workers\": %llu,\n", (unsigned long long)c.gso_on);
	fprintf(f, "  \"gro_workers\": %llu,\n", (unsigned long long)c.gro_on);
	fprintf(f, "  \"tx_gso_sends\": %llu,\n", (unsigned long long)c.tx_gso_sends);
	fprintf(f, "  \"rx_coalesced\": %llu,\n", (unsigned long long)c.rx_coalesced);

	fprintf(f, "  \"drops\": {");
	for (int e = 1; e < WIRE_E_COUNT_MAX_; e++) {
		fprintf(f, "%s\n    \"%s\": %llu", sep, wire_err_name((enum wire_err)e),
			(unsigned long long)c.wire_drops[e]);
		total += c.wire_drops[e];
		sep = ",";
	}
	for (int d = 0; d < SW_DROP_COUNT; d++) {
		fprintf(f, ",\n    \"%s\": %llu", sw_drop_name((enum sw_drop)d),
			(unsigned long long)c.sw_drops[d]);
		total += c.sw_drops[d];
	}
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++) {
		fprintf(f, ",\n    \"%s\": %llu", sw_stats_engine_drop_key((enum agg_verdict)v, kb, sizeof kb),
			(unsigned long long)c.verdicts[v]);
		total += c.verdicts[v];
	}
	fprintf(f, "\n  },\n");
	fprintf(f, "  \"drops_total\": %llu,\n", (unsigned long long)total);

	fprintf(f, "  \"verdicts\": {");
	for (int v = 0; v < AGG_VERDICT_COUNT; v++)
		fprintf(f, "%s\n    \"%s\": %llu", v ? "," : "", agg_verdict_name((enum agg_verdict)v),
			(unsigned long long)c.verdicts[v]);
	fprintf(f, "\n  },\n");

	fprintf(f, "  \"per_thread\": [");
	for (unsigned wi = 0; wi < sw->nworkers; wi++) {
		const struct sw_counters *w = &sw->w[wi].snap_cnt;
		fprintf(f, "%s\n    {\"thread\": %u, \"rx_pkts\": %llu, \"tx_pkts\": %llu, "
			   "\"rx_batches\": %llu, \"tx_batches\": %llu}",
			wi ? "," : "", wi, (unsigned long long)w->rx_pkts,
			(unsigned long long)w->tx_pkts, (unsigned long long)w->rx_batches,
			(unsigned long long)w->tx_batches);
	}
	fprintf(f, "\n  ],\n");

	fprintf(f, "  \"trees\": [");
	for (size_t ti = 0; ti < set->ntrees; ti++) {
		const struct sw_tree *t = set->trees[ti];
		const struct ctl_tree *ct = &t->conf;
		struct agg_tree_stats s;

		sw_stats_sum_tree(t, &s);
		fprintf(f, "%s\n    {\n", ti ? "," : "");
		fprintf(f, "      \"id\": %u,\n", ct->id);
		fprintf(f, "      \"qpn\": %u,\n", ct->qpn);
		fprintf(f, "      \"role\": \"%s\",\n", ct->root ? "root" : "leaf");
		fprintf(f, "      \"auth\": %s,\n", ct->auth ? "true" : "false");
		fprintf(f, "      \"auth_key_id\": %u,\n", ct->auth_key_id);
		fprintf(f, "      \"slots\": %u,\n", ct->slots);
		fprintf(f, "      \"slot_bytes\": %u,\n", ct->slot_bytes);
		fprintf(f, "      \"members\": %zu,\n", ct->nmembers);
		fprintf(f, "      \"children\": %zu,\n", ct->nchildren);
		fprintf(f, "      \"rx_pkts\": %llu,\n", (unsigned long long)s.rx_pkts);
		fprintf(f, "      \"rx_bytes\": %llu,\n", (unsigned long long)s.rx_bytes);
		fprintf(f, "      \"tx_pkts\": %llu,\n", (unsigned long long)s.tx_pkts);
		fprintf(f, "      \"tx_bytes\": %llu,\n", (unsigned long long)s.tx_bytes);
		fprintf(f, "      \"contributions\": %llu,\n", (unsigned long long)s.contributions);
		fprintf(f, "      \"aggregations\": %llu,\n", (unsigned long long)s.aggregations);
		fprintf(f, "      \"duplicates\": %llu,\n", (unsigned long long)s.duplicates);
		fprintf(f, "      \"results_resent\": %llu,\n", (unsigned long long)s.results_resent);
		fprintf(f, "      \"forwarded\": %llu,\n", (unsigned long long)s.forwarded);
		fprintf(f, "      \"results_down\": %llu,\n", (unsigned long long)s.results_down);
		fprintf(f, "      \"notices\": %llu,\n", (unsigned long long)s.notices);
		fprintf(f, "      \"notices_limited\": %llu,\n", (unsigned long long)s.notices_limited);
		fprintf(f, "      \"resends_limited\": %llu,\n", (unsigned long long)s.resends_limited);
		fprintf(f, "      \"epoch\": %u,\n", (unsigned)s.epoch);
		fprintf(f, "      \"epoch_resets\": %llu,\n", (unsigned long long)s.epoch_resets);
		fprintf(f, "      \"pkey\": %u,\n", (unsigned)ct->pkey);
		fprintf(f, "      \"drops\": {");
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
			fprintf(f, "%s\"%s\": %llu", v == AGG_DROP_FIRST ? "" : ", ",
				agg_verdict_name((enum agg_verdict)v), (unsigned long long)s.drops[v]);
		fprintf(f, "},\n");
		fprintf(f, "      \"qps\": [");
		for (uint32_t n = 0; n < t->nnbr; n++) {
			const struct sw_nbr *nb = &t->nbr[n];
			struct sw_qp_stats q;

			sw_stats_sum_qp(t, n, &q);
			fprintf(f, "%s\n        {\"kind\": \"%s\", \"bfr_id\": %u, \"addr\": \"%s\", "
				   "\"qpn\": %u, \"rx_pkts\": %llu, \"rx_bytes\": %llu, "
				   "\"tx_pkts\": %llu, \"tx_bytes\": %llu, \"psn_gaps\": %llu, "
				   "\"psn_lost\": %llu, \"psn_reorder\": %llu}",
				n ? "," : "", sw_nbr_kind_name(nb->kind), nb->bfr_id,
				util_format_addr(&nb->addr, a, sizeof a), nb->qpn,
				(unsigned long long)q.rx_pkts, (unsigned long long)q.rx_bytes,
				(unsigned long long)q.tx_pkts, (unsigned long long)q.tx_bytes,
				(unsigned long long)q.psn_gaps, (unsigned long long)q.psn_lost,
				(unsigned long long)q.psn_reorder);
		}
		fprintf(f, "\n      ]\n    }");
	}
	fprintf(f, "\n  ]\n}\n");
}

int sw_stats_write_file(const struct sw_switch *sw, const char *path)
{
	char tmp[SW_CONF_PATH_MAX + 32];
	FILE *f;
	int rc = 0;

	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	sw_stats_write_json(sw, f);
	if (fflush(f) != 0 || ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && !rc)
		rc = -EIO;
	/* rename() is atomic: a reader sees the old or the new file, never half of one. */
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}
