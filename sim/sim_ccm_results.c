/* sim/sim_ccm_results.c: results of the CCM module (sim_ccm.c): counters, the event log and
 * per-flow figures through the public API, and the files ccm_events.csv and ccm.json. */
#include <errno.h>
#include <stdio.h>

#include "sim_ccm_int.h"

/* ---- results ----------------------------------------------------------------------------- */
static const char *const ev_names[] = {
	[SIM_CCM_EV_NOTIFY_SENT] = "notify_sent", [SIM_CCM_EV_NOTIFY_RECV] = "notify_recv",
	[SIM_CCM_EV_AR_LOCAL] = "ar_local", [SIM_CCM_EV_AR_UPSTREAM] = "ar_upstream",
	[SIM_CCM_EV_AR_FAIL] = "ar_fail", [SIM_CCM_EV_RATE_CUT] = "rate_cut",
	[SIM_CCM_EV_TAG_SET] = "tag_set", [SIM_CCM_EV_TAG_CLEAR] = "tag_clear",
	[SIM_CCM_EV_HOST_AR] = "host_ar",
};

const char *sim_ccm_ev_name(int kind)
{
	return kind >= 0 && kind <= SIM_CCM_EV_HOST_AR ? ev_names[kind] : "?";
}

const char *sim_node_name(const struct sim *s, uint32_t node)
{
	if (node < s->nhosts)
		return s->hosts[node].n.name;
	if (node - s->nhosts < s->nsw)
		return s->sws[node - s->nhosts].n.name;
	return "-";
}

int sim_ccm_get_stats(const struct sim *s, struct sim_ccm_stats *st)
{
	if (!ccm_of(s))
		return -ENOENT;
	*st = ccm_of(s)->st;
	return 0;
}

size_t sim_ccm_event_count(const struct sim *s)
{
	return ccm_of(s) ? ccm_of(s)->nev : 0;
}

const struct sim_ccm_event *sim_ccm_event_get(const struct sim *s, size_t i)
{
	return ccm_of(s) && i < ccm_of(s)->nev ? &ccm_of(s)->ev[i] : NULL;
}

uint64_t sim_ccm_flow_ar_switches(const struct sim *s, uint32_t flow)
{
	return ccm_of(s) && ccm_of(s)->fl && flow < ccm_of(s)->nflows ? ccm_of(s)->fl[flow].ar_switches : 0;
}

bool sim_ccm_flow_incast(const struct sim *s, uint32_t flow)
{
	return ccm_of(s) && ccm_of(s)->fl && flow < ccm_of(s)->nflows && ccm_of(s)->fl[flow].incast;
}

int sim_ccm_write_outputs(struct sim *s, const char *dir)
{
	struct sim_ccm *m = ccm_of(s);
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/ccm_events.csv", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "time_us,event,type,node,peer,flow,src,dst,value,pkt_seq\n");
	for (size_t i = 0; i < m->nev; i++) {
		const struct sim_ccm_event *e = &m->ev[i];
		const struct sim_flow *fl = &s->flows[e->flow];
		bool ar = e->kind == SIM_CCM_EV_AR_LOCAL || e->kind == SIM_CCM_EV_AR_UPSTREAM;
		char val[40];
		if (ar) /* the new next hop */
			snprintf(val, sizeof(val), "%s", sim_node_name(s, (uint32_t)e->value));
		else
			snprintf(val, sizeof(val), "%.6g", e->value);
		fprintf(f, "%.6f,%s,%u,%s,%s,%u,%s,%s,%s,%llu\n", sim_time_to_us(e->t_ps),
			sim_ccm_ev_name(e->kind), e->ntype, sim_node_name(s, e->node),
			e->peer == CCM_NONE ? "-" : sim_node_name(s, e->peer), fl->user_id,
			sim_node_name(s, fl->src), sim_node_name(s, fl->dst), val, (unsigned long long)e->seq);
	}
	if (fclose(f))
		return -EIO;
	snprintf(path, sizeof(path), "%s/ccm.json", dir);
	if (!(f = fopen(path, "w")))
		return -errno;
	const struct sim_ccm_stats *st = &m->st;
	fprintf(f, "{\n  \"mode\": \"%s\",\n", m->mode == SIM_CCM_COORD ? "coordinated" : "ar");
	for (int t = 1; t <= 3; t++)
		fprintf(f, "  \"notify_type%d_sent\": %llu,\n  \"notify_type%d_recv\": %llu,\n", t,
			(unsigned long long)st->notify_sent[t], t, (unsigned long long)st->notify_recv[t]);
	fprintf(f, "  \"ar_local\": %llu,\n  \"ar_upstream\": %llu,\n  \"ar_fail\": %llu,\n"
		"  \"ar_switches_incast_flows\": %llu,\n  \"incast_flows\": %llu,\n  \"rate_cuts\": %llu,\n"
		"  \"ecn_suppressed\": %llu,\n  \"incast_states\": %llu,\n  \"incast_state_msgs\": %llu,\n"
		"  \"type3_held_incast\": %llu,\n  \"events\": %llu,\n  \"events_dropped\": %llu\n}\n",
		(unsigned long long)st->ar_local, (unsigned long long)st->ar_upstream,
		(unsigned long long)st->ar_fail, (unsigned long long)st->ar_incast_flows,
		(unsigned long long)st->incast_flows, (unsigned long long)st->rate_cuts,
		(unsigned long long)st->ecn_suppressed, (unsigned long long)m->state_sets,
		(unsigned long long)m->state_msgs, (unsigned long long)m->ar_held,
		(unsigned long long)st->events,
		(unsigned long long)st->events_dropped);
	return fclose(f) ? -EIO : 0;
}
