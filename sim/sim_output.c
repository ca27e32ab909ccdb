/* sim/sim_output.c: what a run leaves behind: per-flow FCT CSV, a JSON summary (percentiles,
 * counters, every effective parameter), params.ini (the effective configuration, re-loadable)
 * and the streamed per-port time series. Nothing here depends on the wall clock, so outputs
 * are byte-identical for a given seed. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim_int.h"

void sim_config_dump_json(const struct sim_config *c, FILE *f, const char *indent);

int sim_mkdir_p(const char *dir)
{
	char buf[SIM_PATH_MAX];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] == '/' || buf[i] == 0) {
			char c = buf[i];
			buf[i] = 0;
			if (mkdir(buf, 0755) && errno != EEXIST)
				return -errno;
			buf[i] = c;
		}
	}
	return 0;
}

/* The ports from f's source to its destination, first equal-cost choice at every switch. */
unsigned sim_flow_path(const struct sim *s, const struct sim_flow *f, const struct sim_port **path,
		       unsigned max)
{
	unsigned hops = 0;
	const struct sim_port *p = &s->hosts[f->src].port;
	while (hops < max) {
		path[hops++] = p;
		const struct sim_node *n = p->peer->node;
		if (n->kind == SIM_NODE_HOST)
			break;
		const struct sim_switch *sw = SIM_CONTAINER_OF(n, struct sim_switch, n);
		const struct sim_rgroup *g = sim_route_group(sw, f->dst);
		if (!g)
			return 0;
		p = &n->ports[sw->gports[g->off]];
	}
	return hops;
}

/* Ideal FCT: the flow alone on an idle fabric along its first equal-cost path, computed
 * exactly by store-and-forward recursion: packet j leaves hop i when it has fully arrived and
 * hop i has finished packet j-1. (A closed form that forgets that a short last packet
 * catches up with the full one before it is off by (hops-1) full-packet times.) */
sim_time_ps sim_flow_ideal_ps(const struct sim *s, const struct sim_flow *f)
{
	const struct sim_config *c = &s->cfg;
	const struct sim_port *path[64];
	unsigned hops = sim_flow_path(s, f, path, 64);
	if (!hops)
		return 0;
	/* The n = npkts-1 full packets in closed form: for identical jobs, all present at time 0,
	 * in a tandem of servers with pure delays between them, job n leaves server i at
	 * sum(ser[0..i]) + sum(lat[0..i-1]) + (n-1) * max(ser[0..i]) (exactly what the
	 * recursion gives, in O(hops) instead of O(hops * packets)). Then the last packet. */
	sim_time_ps busy[64] = { 0 }, t = 0;
	uint64_t nfull = f->npkts - 1;
	if (nfull) {
		sim_time_ps sum = 0, mx = 0;
		uint64_t w = (uint64_t)c->mtu_bytes + c->header_bytes;
		for (unsigned i = 0; i < hops; i++) {
			sim_time_ps ser = sim_time_serialize(w, path[i]->rate_bps);
			if (ser > mx)
				mx = ser;
			sum += ser;
			busy[i] = sum + (nfull - 1) * mx;
			sum += path[i]->latency_ps;
		}
	}
	uint64_t w = f->size_bytes - nfull * c->mtu_bytes + c->header_bytes;
	for (unsigned i = 0; i < hops; i++) { /* the sender has it at time 0; its NIC is hop 0 */
		sim_time_ps start = t > busy[i] ? t : busy[i];
		busy[i] = start + sim_time_serialize(w, path[i]->rate_bps);
		t = busy[i] + path[i]->latency_ps;
	}
	return t;
}

void sim_ts_sample(struct sim *s, struct sim_event *ev)
{
	double iv = (double)s->ts_interval_ps;
	for (uint32_t i = 0; i < s->nports; i++) {
		struct sim_port *p = s->ports[i];
		uint64_t d = p->tx_bytes - p->ts_last_tx_bytes;
		p->ts_last_tx_bytes = p->tx_bytes;
		if (!d && !p->q_bytes && !p->paused)
			continue;
		double util = (double)d * 8e12 / ((double)p->rate_bps * iv);
		fprintf(s->ts, "%.3f,%u,%s,%s,%u,%.4f,%llu,%d\n", sim_time_to_us(s->now), p->id,
			p->node->name, p->peer->node->name, p->link_tier, util,
			(unsigned long long)p->q_bytes, p->paused ? 1 : 0);
	}
	sim_modules_ts_sample(s);
	/* Keep sampling only while something else is going on. */
	if (s->evq.n > 0 && !(s->nflows && s->flows_done == s->nflows))
		sim_schedule(s, ev, s->now + s->ts_interval_ps);
}

void sim_write_fct_csv(const struct sim *s, FILE *f)
{
	fprintf(f, "flow_id,src,dst,size_bytes,start_us,finish_us,fct_us,ideal_us,slowdown,"
		   "sender_done_us,retx_pkts,ecn_pkts,cnps,timeouts\n");
	for (uint32_t i = 0; i < s->nflows; i++) {
		const struct sim_flow *fl = &s->flows[i];
		double ideal = sim_time_to_us(fl->ideal_ps);
		fprintf(f, "%u,%u,%u,%llu,", fl->user_id, fl->src, fl->dst,
			(unsigned long long)(fl->endless ? 0 : fl->size_bytes));
		if (fl->state == SIM_FLOW_WAIT)
			fprintf(f, ",,,%.6f,,", ideal);
		else if (!fl->recv_done)
			fprintf(f, "%.6f,,,%.6f,,", sim_time_to_us(fl->start_ps), ideal);
		else {
			double fct = sim_time_to_us(fl->finish_ps - fl->start_ps);
			fprintf(f, "%.6f,%.6f,%.6f,%.6f,%.4f,", sim_time_to_us(fl->start_ps),
				sim_time_to_us(fl->finish_ps), fct, ideal, ideal > 0 ? fct / ideal : 0);
		}
		if (fl->send_done)
			fprintf(f, "%.6f", sim_time_to_us(fl->sender_done_ps));
		fprintf(f, ",%llu,%llu,%llu,%llu\n", (unsigned long long)fl->retx_pkts,
			(unsigned long long)fl->ecn_pkts, (unsigned long long)fl->cnps,
			(unsigned long long)fl->timeouts);
	}
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, uint32_t n, double p)
{
	if (!n)
		return 0;
	double r = ceil(p * n);
	uint32_t i = r < 1 ? 0 : (uint32_t)r - 1;
	return v[i < n ? i : n - 1];
}

void sim_json_dist(FILE *f, double *v, uint32_t n)
{
	double sum = 0;
	qsort(v, n, sizeof(*v), cmp_dbl);
	for (uint32_t i = 0; i < n; i++)
		sum += v[i];
	fprintf(f, "{\"n\": %u, \"mean\": %.6f, \"min\": %.6f, \"p50\": %.6f, \"p90\": %.6f, "
		   "\"p99\": %.6f, \"p999\": %.6f, \"max\": %.6f}", n, n ? sum / n : 0,
		n ? v[0] : 0, pct(v, n, 0.5), pct(v, n, 0.9), pct(v, n, 0.99), pct(v, n, 0.999),
		n ? v[n - 1] : 0);
}

static void write_dist(FILE *f, const char *name, double *v, uint32_t n, bool comma)
{
	fprintf(f, "  \"%s\": ", name);
	sim_json_dist(f, v, n);
	fprintf(f, "%s\n", comma ? "," : "");
}

void sim_write_summary(const struct sim *s, FILE *f)
{
	struct sim_stats st;
	sim_get_stats(s, &st);
	double *fct = malloc(sizeof(double) * (s->nflows + 1));
	double *slow = malloc(sizeof(double) * (s->nflows + 1));
	uint32_t n = 0;
	sim_time_ps last_finish = 0;
	for (uint32_t i = 0; fct && slow && i < s->nflows; i++) {
		const struct sim_flow *fl = &s->flows[i];
		if (!fl->recv_done)
			continue;
		double ideal = sim_time_to_us(fl->ideal_ps);
		fct[n] = sim_time_to_us(fl->finish_ps - fl->start_ps);
		slow[n] = ideal > 0 ? fct[n] / ideal : 0;
		n++;
		if (fl->finish_ps > last_finish)
			last_finish = fl->finish_ps;
	}
	fprintf(f, "{\n  \"simulator\": \"inca-sim\",\n");
	fprintf(f, "  \"sim_time_us\": %.6f,\n  \"events\": %llu,\n", sim_time_to_us(st.now_ps),
		(unsigned long long)st.events);
	fprintf(f, "  \"topology\": {\"hosts\": %u, \"switches\": %u, \"links\": %u, "
		   "\"oversubscription\": %.4f},\n", st.hosts, st.switches, st.links, st.oversubscription);
	fprintf(f, "  \"flows\": {\"total\": %u, \"completed\": %u, \"last_finish_us\": %.6f},\n",
		st.flows, st.flows_done, sim_time_to_us(last_finish));
	if (fct && slow) {
		write_dist(f, "fct_us", fct, n, true);
		write_dist(f, "slowdown", slow, n, true);
	}
	fprintf(f, "  \"counters\": {\"data_pkts_sent\": %llu, \"retx_pkts\": %llu, \"timeouts\": %llu, "
		   "\"acks\": %llu, \"nacks\": %llu, \"ecn_marks\": %llu, \"cnps\": %llu, "
		   "\"pfc_pauses\": %llu, \"max_queue_bytes\": %llu, \"link_failures\": %u},\n",
		(unsigned long long)st.data_pkts_sent, (unsigned long long)st.retx_pkts,
		(unsigned long long)st.timeouts, (unsigned long long)st.acks, (unsigned long long)st.nacks,
		(unsigned long long)st.ecn_marks, (unsigned long long)st.cnps,
		(unsigned long long)st.pfc_pauses, (unsigned long long)st.max_queue_bytes, s->cm_failures);
	fprintf(f, "  \"drops\": {\"total\": %llu, \"queue_full\": %llu, \"shared_buffer_full\": %llu, "
		   "\"pfc_headroom_overflow\": %llu},\n", (unsigned long long)st.drops_total,
		(unsigned long long)st.drops_queue, (unsigned long long)st.drops_shared,
		(unsigned long long)st.drops_headroom);
	sim_modules_summary_json(s, f);
	fprintf(f, "  \"parameters\": ");
	sim_config_dump_json(&s->cfg, f, "  ");
	fprintf(f, "\n}\n");
	free(fct);
	free(slow);
}

static int write_file(const struct sim *s, const char *dir, const char *name,
		      void (*fn)(const struct sim *, FILE *))
{
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fn(s, f);
	return fclose(f) ? -errno : 0;
}

static void write_params(const struct sim *s, FILE *f)
{
	fprintf(f, "; effective parameters of this run (inca-sim); load with inca-sim params.ini\n");
	sim_config_dump(&s->cfg, f);
}

int sim_write_outputs(struct sim *s, const char *dir)
{
	int rc = sim_mkdir_p(dir);
	if (rc)
		return rc;
	if (s->ts)
		fflush(s->ts);
	if ((rc = write_file(s, dir, "fct.csv", sim_write_fct_csv)) ||
	    (rc = write_file(s, dir, "summary.json", sim_write_summary)) ||
	    (rc = write_file(s, dir, "params.ini", write_params)))
		return rc;
	return sim_modules_write_outputs(s, dir);
}
