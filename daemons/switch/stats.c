/* inca-switch statistics: the counter tables (one entry per counter: name, help, type, offset)
 * that the worker sums, the JSON writer below, the NETCONF state (netconf.c) and the Prometheus
 * exposition (metrics.c) all walk. JSON schema: docs/switch.md. Runs on control threads only
 * (main, NETCONF, metrics); workers never block on it. */
#include "switch.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define G(field) offsetof(struct sw_counters, field)
const struct sw_ctr sw_ctr_global[] = {
	{ "rx_pkts", "Datagrams received (before any check).", SW_CTR_COUNTER,
	  SW_CTR_YANG | SW_CTR_THREAD, G(rx_pkts) },
	{ "rx_bytes", "UDP payload bytes received.", SW_CTR_COUNTER, SW_CTR_YANG, G(rx_bytes) },
	{ "tx_pkts", "Datagrams handed to the kernel (AF_XDP: frames put in the TX ring).",
	  SW_CTR_COUNTER, SW_CTR_YANG | SW_CTR_THREAD, G(tx_pkts) },
	{ "tx_bytes", "UDP payload bytes sent.", SW_CTR_COUNTER, SW_CTR_YANG, G(tx_bytes) },
	{ "reflected", "Reflect mode: datagrams echoed.", SW_CTR_COUNTER, 0, G(reflected) },
	{ "rx_batches", "Receive calls (recvmmsg, AF_XDP RX batches) that moved data.",
	  SW_CTR_COUNTER, SW_CTR_THREAD, G(rx_batches) },
	{ "tx_batches", "Send calls (sendmmsg, AF_XDP kicks) that moved data.", SW_CTR_COUNTER,
	  SW_CTR_THREAD, G(tx_batches) },
	{ "gso_workers", "Worker threads sending with UDP GSO.", SW_CTR_GAUGE, 0, G(gso_on) },
	{ "gro_workers", "Worker threads receiving with UDP GRO.", SW_CTR_GAUGE, 0, G(gro_on) },
	{ "own_cpu_workers", "Worker threads on a CPU of their own (--cpus).", SW_CTR_GAUGE, 0,
	  G(own_cpu) },
	{ "tx_gso_sends", "UDP GSO sends (one datagram to the kernel, several on the wire).",
	  SW_CTR_COUNTER, 0, G(tx_gso_sends) },
	{ "rx_coalesced", "Datagrams that arrived in a UDP GRO buffer after its first.",
	  SW_CTR_COUNTER, 0, G(rx_coalesced) },
};
#undef G
const size_t sw_nctr_global = sizeof sw_ctr_global / sizeof sw_ctr_global[0];

#define T(field) offsetof(struct agg_tree_stats, field)
const struct sw_ctr sw_ctr_tree[] = {
	{ "rx_pkts", "Packets given to the tree's engine.", SW_CTR_COUNTER, SW_CTR_YANG,
	  T(rx_pkts) },
	{ "rx_bytes", "Data bytes of the packets given to the engine.", SW_CTR_COUNTER,
	  SW_CTR_YANG, T(rx_bytes) },
	{ "tx_pkts", "Packets the engine emitted.", SW_CTR_COUNTER, SW_CTR_YANG, T(tx_pkts) },
	{ "tx_bytes", "Data bytes of the packets the engine emitted.", SW_CTR_COUNTER,
	  SW_CTR_YANG, T(tx_bytes) },
	{ "contributions", "Contributions absorbed.", SW_CTR_COUNTER, SW_CTR_YANG,
	  T(contributions) },
	{ "aggregations", "Slot rounds completed here.", SW_CTR_COUNTER, SW_CTR_YANG,
	  T(aggregations) },
	{ "duplicates", "Duplicate contributions.", SW_CTR_COUNTER, SW_CTR_YANG, T(duplicates) },
	{ "results_resent", "Stored results or aggregates re-sent for duplicates.",
	  SW_CTR_COUNTER, SW_CTR_YANG, T(results_resent) },
	{ "forwarded", "Packets forwarded toward the root.", SW_CTR_COUNTER, SW_CTR_YANG,
	  T(forwarded) },
	{ "results_down", "Results received from the parent.", SW_CTR_COUNTER, SW_CTR_YANG,
	  T(results_down) },
	{ "notices", "Repair notices sent.", SW_CTR_COUNTER, 0, T(notices) },
	{ "notices_limited", "Repair notices not sent for lack of credit.", SW_CTR_COUNTER, 0,
	  T(notices_limited) },
	{ "resends_limited", "Duplicates of complete rounds not answered (re-send credit spent).",
	  SW_CTR_COUNTER, 0, T(resends_limited) },
	{ "epoch", "Newest job epoch seen (0: none).", SW_CTR_GAUGE, SW_CTR_MAX | SW_CTR_U32,
	  T(epoch) },
	{ "epoch_resets", "Newer job epochs that started the tree afresh.", SW_CTR_COUNTER, 0,
	  T(epoch_resets) },
};
#undef T
const size_t sw_nctr_tree = sizeof sw_ctr_tree / sizeof sw_ctr_tree[0];

#define Q(field) offsetof(struct sw_qp_stats, field)
const struct sw_ctr sw_ctr_qp[] = {
	{ "rx_pkts", "Packets from the neighbour that passed decoding, tree, QPN and sender checks.",
	  SW_CTR_COUNTER, SW_CTR_YANG, Q(rx_pkts) },
	{ "rx_bytes", "UDP payload bytes of those packets.", SW_CTR_COUNTER, SW_CTR_YANG,
	  Q(rx_bytes) },
	{ "tx_pkts", "Packets sent to the neighbour.", SW_CTR_COUNTER, SW_CTR_YANG, Q(tx_pkts) },
	{ "tx_bytes", "UDP payload bytes sent to the neighbour.", SW_CTR_COUNTER, SW_CTR_YANG,
	  Q(tx_bytes) },
	{ "psn_gaps", "Received PSNs ahead of the expected one.", SW_CTR_COUNTER, SW_CTR_YANG,
	  Q(psn_gaps) },
	{ "psn_lost", "PSNs skipped by those gaps.", SW_CTR_COUNTER, SW_CTR_YANG, Q(psn_lost) },
	{ "psn_reorder", "Received PSNs behind the expected one (late or duplicate).",
	  SW_CTR_COUNTER, SW_CTR_YANG, Q(psn_reorder) },
};
#undef Q
const size_t sw_nctr_qp = sizeof sw_ctr_qp / sizeof sw_ctr_qp[0];

uint64_t sw_ctr_get(const struct sw_ctr *c, const void *base)
{
	const char *p = (const char *)base + c->off;

	if (c->flags & SW_CTR_U32) {
		uint32_t v;
		memcpy(&v, p, sizeof v);
		return v;
	}
	{
		uint64_t v;
		memcpy(&v, p, sizeof v);
		return v;
	}
}

static void ctr_set(const struct sw_ctr *c, void *base, uint64_t v)
{
	char *p = (char *)base + c->off;

	if (c->flags & SW_CTR_U32) {
		uint32_t v32 = (uint32_t)v;
		memcpy(p, &v32, sizeof v32);
	} else {
		memcpy(p, &v, sizeof v);
	}
}

/* out += in over a table: sums, or for SW_CTR_MAX the newest in serial-number order (a
 * 32-bit epoch wraps; 0 means none). */
static void ctr_add(const struct sw_ctr *t, size_t n, void *out, const void *in)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t a = sw_ctr_get(&t[i], out), b = sw_ctr_get(&t[i], in);

		if (t[i].flags & SW_CTR_MAX) {
			if (b && (!a || (int32_t)((uint32_t)b - (uint32_t)a) > 0))
				ctr_set(&t[i], out, b);
		} else {
			ctr_set(&t[i], out, a + b);
		}
	}
}

void sw_stats_sum_counters(const struct sw_switch *sw, struct sw_counters *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned wi = 0; wi < sw->nworkers; wi++) {
		const struct sw_counters *c = &sw->w[wi].snap_cnt;
		ctr_add(sw_ctr_global, sw_nctr_global, out, c);
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
		ctr_add(sw_ctr_tree, sw_nctr_tree, out, s);
		for (int i = 0; i < AGG_VERDICT_COUNT; i++)
			out->drops[i] += s->drops[i];
	}
}

void sw_stats_sum_qp(const struct sw_tree *t, uint32_t nbr, struct sw_qp_stats *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned wi = 0; wi < t->nworkers; wi++)
		ctr_add(sw_ctr_qp, sw_nctr_qp, out, &t->w[wi].snap_qp[nbr]);
}

uint64_t sw_stats_drops(const struct sw_counters *c, struct sw_drop_count *out)
{
	uint64_t total = 0;
	size_t n = 0;
	char kb[64];

	for (int e = 1; e < WIRE_E_COUNT_MAX_; e++, n++) {
		snprintf(out[n].reason, sizeof out[n].reason, "%s", wire_err_name((enum wire_err)e));
		out[n].count = c->wire_drops[e];
	}
	for (int d = 0; d < SW_DROP_COUNT; d++, n++) {
		snprintf(out[n].reason, sizeof out[n].reason, "%s", sw_drop_name((enum sw_drop)d));
		out[n].count = c->sw_drops[d];
	}
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++, n++) {
		snprintf(out[n].reason, sizeof out[n].reason, "%s",
			 sw_stats_engine_drop_key((enum agg_verdict)v, kb, sizeof kb));
		out[n].count = c->verdicts[v];
	}
	for (size_t i = 0; i < n; i++)
		total += out[i].count;
	return total;
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
	struct sw_drop_count drops[SW_STATS_NDROPS];
	struct timespec now;
	uint64_t total;
	char a[32];

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
	/* gso_workers / gro_workers: fewer than threads when the kernel refused GSO / GRO, or
	 * with --no-gso / --no-gro. */
	for (size_t i = 0; i < sw_nctr_global; i++)
		fprintf(f, "  \"%s\": %llu,\n", sw_ctr_global[i].name,
			(unsigned long long)sw_ctr_get(&sw_ctr_global[i], &c));

	total = sw_stats_drops(&c, drops);
	fprintf(f, "  \"drops\": {");
	for (size_t i = 0; i < SW_STATS_NDROPS; i++)
		fprintf(f, "%s\n    \"%s\": %llu", i ? "," : "", drops[i].reason,
			(unsigned long long)drops[i].count);
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
		fprintf(f, "%s\n    {\"thread\": %u", wi ? "," : "", wi);
		for (size_t i = 0; i < sw_nctr_global; i++)
			if (sw_ctr_global[i].flags & SW_CTR_THREAD)
				fprintf(f, ", \"%s\": %llu", sw_ctr_global[i].name,
					(unsigned long long)sw_ctr_get(&sw_ctr_global[i], w));
		fprintf(f, "}");
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
		fprintf(f, "      \"auth\": \"%s\",\n", ct->auth ? "on" : "off");
		fprintf(f, "      \"auth_key_id\": %u,\n", ct->auth_key_id);
		fprintf(f, "      \"slots\": %u,\n", ct->slots);
		fprintf(f, "      \"slot_bytes\": %u,\n", ct->slot_bytes);
		fprintf(f, "      \"members\": %zu,\n", ct->nmembers);
		fprintf(f, "      \"children\": %zu,\n", ct->nchildren);
		for (size_t i = 0; i < sw_nctr_tree; i++)
			fprintf(f, "      \"%s\": %llu,\n", sw_ctr_tree[i].name,
				(unsigned long long)sw_ctr_get(&sw_ctr_tree[i], &s));
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
				   "\"qpn\": %u",
				n ? "," : "", sw_nbr_kind_name(nb->kind), nb->bfr_id,
				util_format_addr(&nb->addr, a, sizeof a), nb->qpn);
			for (size_t i = 0; i < sw_nctr_qp; i++)
				fprintf(f, ", \"%s\": %llu", sw_ctr_qp[i].name,
					(unsigned long long)sw_ctr_get(&sw_ctr_qp[i], &q));
			fprintf(f, "}");
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
