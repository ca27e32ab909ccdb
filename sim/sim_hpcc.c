/* sim/sim_hpcc.c: HPCC congestion control (Li et al., SIGCOMM 2019), a module enabled by
 * host.cc = hpcc: switches append an INT record (queue length, transmitted-bytes counter,
 * timestamp, link rate) to every data packet as it leaves an egress port; the receiver copies
 * the records of the latest data packet into its ACK; the sender estimates each hop's normalised
 * inflight from two consecutive ACKs and sets its window W (and pacing rate W/T) by the paper's
 * Algorithm 1 (multiplicative step towards eta, additive W_AI, maxStage). INT bytes are not
 * added to the packets' size on the wire (host.header_bytes can account for them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* Longest path recorded: a lyu4 path crosses 7 switch egress ports, a fat tree 5. */
#define HPCC_MAX_HOPS 8

struct hpcc_hop {
	uint64_t tx_bytes;       /* bytes the port had sent before this packet */
	sim_time_ps ts;          /* when the packet left the queue */
	uint64_t rate_bps;       /* link rate */
	uint32_t qlen_bytes;     /* data queue left behind the packet (saturates) */
	uint32_t port;           /* global port id: a different id at hop i means a new path */
};

/* Packet data (sim_pkt_ext) of data packets and of the ACKs that echo them. */
struct hpcc_int {
	uint32_t nhop;
	struct hpcc_hop hop[HPCC_MAX_HOPS];
};

struct hpcc_flow {
	/* sender */
	struct hpcc_int last;    /* INT of the previous ACK */
	double t_s;              /* base RTT T, seconds (the network's, see base_rtt_s) */
	double w_init, w_min, w, wc, u; /* windows in bytes on the wire; u = normalised inflight U */
	uint32_t inc_stage, last_update_seq;
	bool have_last;
	/* receiver */
	struct hpcc_int rx;      /* INT of the latest data packet */
};

struct sim_hpcc {
	struct hpcc_flow *fl;    /* by flow index, grown as flows start */
	uint32_t nfl;
	uint32_t int_off;
	double t_s;              /* T, computed at the first flow start */
	uint64_t int_records, int_overflow, updates, mult_updates, window_updates;
};

static inline struct sim_hpcc *hpcc_of(const struct sim *s)
{
	return s->mod[SIM_MOD_hpcc];
}

static inline struct hpcc_int *int_of(const struct sim_hpcc *h, const struct sim_pkt *p)
{
	return sim_pkt_ext((struct sim_pkt *)p, h->int_off);
}

static bool hpcc_enabled(const struct sim_config *c)
{
	return c->cc == SIM_CC_HPCC;
}

static int hpcc_create(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	char *e = s->err;
	size_t el = sizeof(s->err);
	if (c->transport == SIM_TRANSPORT_IDEAL) {
		snprintf(e, el, "host.cc = hpcc needs ACKs (they carry the INT records back): "
			 "host.transport = gbn or sr, not ideal");
		return -EINVAL;
	}
	if (c->osf_mode != SIM_OSF_OFF) {
		snprintf(e, el, "host.cc = hpcc cannot be combined with osf.mode (OSF schedules the NIC "
			 "itself and reorders data in front of the transport)");
		return -EINVAL;
	}
	if (!(c->hpcc_eta > 0 && c->hpcc_eta <= 1)) {
		snprintf(e, el, "hpcc.eta must be in (0, 1]");
		return -EINVAL;
	}
	if (c->hpcc_max_stage > 1000 || c->hpcc_wai_bytes > (1ull << 32)) {
		snprintf(e, el, "hpcc.max_stage must be <= 1000 and hpcc.wai_bytes <= 2^32");
		return -EINVAL;
	}
	if (c->hpcc_base_rtt_us > 1e6) {
		snprintf(e, el, "hpcc.base_rtt_us must be <= 1e6 (0 = from the topology)");
		return -EINVAL;
	}
	if (!(c->hpcc_min_rate_mbps >= 0.001 && c->hpcc_min_rate_mbps <= 1e9)) {
		snprintf(e, el, "hpcc.min_rate_mbps must be between 0.001 and 1e9 (the pacing rate W/T "
			 "never falls below it)");
		return -EINVAL;
	}
	struct sim_hpcc *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	s->mod[SIM_MOD_hpcc] = h;
	return sim_pkt_ext_reserve(s, sizeof(struct hpcc_int), &h->int_off);
}

static void hpcc_destroy(struct sim *s)
{
	struct sim_hpcc *h = hpcc_of(s);
	free(h->fl);
	free(h);
	s->mod[SIM_MOD_hpcc] = NULL;
}

/* Idle round trip of flow f: one full data packet out and one ACK back along its path
 * (propagation and serialisation at every hop). */
static sim_time_ps flow_rtt_ps(const struct sim *s, const struct sim_flow *f)
{
	const struct sim_config *c = &s->cfg;
	const struct sim_port *path[64];
	unsigned n = sim_flow_path(s, f, path, 64);
	sim_time_ps t = 0;
	for (unsigned i = 0; i < n; i++)
		t += 2 * path[i]->latency_ps +
		     sim_time_serialize((uint64_t)c->mtu_bytes + c->header_bytes, path[i]->rate_bps) +
		     sim_time_serialize(c->ack_bytes, path[i]->rate_bps);
	return t;
}

/* T: hpcc.base_rtt_us, else the largest idle round trip of the run's flows. One T for every flow,
 * as in the paper (the network's base RTT), so the queue term qlen / (B T) and W_init mean the
 * same to every flow. Flows are all known once the run has started (sim_flow_add only works
 * before). */
static double base_rtt_s(const struct sim *s)
{
	if (s->cfg.hpcc_base_rtt_us > 0)
		return s->cfg.hpcc_base_rtt_us * 1e-6;
	sim_time_ps t = 0;
	for (uint32_t i = 0; i < s->nflows; i++) {
		sim_time_ps r = flow_rtt_ps(s, &s->flows[i]);
		if (r > t)
			t = r;
	}
	return t ? sim_time_to_s(t) : 1e-6;
}

/* The transport's window counts payload bytes; HPCC's W counts bytes on the wire. */
static void apply(const struct sim *s, struct sim_flow *f, const struct hpcc_flow *hf)
{
	const struct sim_config *c = &s->cfg;
	double payload = hf->w * c->mtu_bytes / ((double)c->mtu_bytes + c->header_bytes);
	f->cwnd_bytes = payload < 1 ? 1 : (uint64_t)(payload + 0.5);
	double rate = hf->w * 8 / hf->t_s, cap = sim_flow_rate_cap(s, f);
	f->rc = rate < cap ? rate : cap;
}

static void hpcc_flow_start(struct sim *s, struct sim_flow *f)
{
	struct sim_hpcc *h = hpcc_of(s);
	if (f->idx >= h->nfl) { /* flows may be added up to the run; grow to the largest index */
		uint32_t n = s->nflows > f->idx ? s->nflows : f->idx + 1;
		struct hpcc_flow *fl = realloc(h->fl, sizeof(*fl) * n);
		if (!fl) {
			s->finished = true;
			sim_set_err(s, "hpcc: out of memory for the per-flow state");
			return;
		}
		memset(fl + h->nfl, 0, sizeof(*fl) * (n - h->nfl));
		h->fl = fl;
		h->nfl = n;
	}
	struct hpcc_flow *hf = &h->fl[f->idx];
	memset(hf, 0, sizeof(*hf));
	if (!h->t_s)
		h->t_s = base_rtt_s(s);
	hf->t_s = h->t_s;
	hf->w_init = sim_flow_rate_cap(s, f) * hf->t_s / 8;
	hf->w_min = s->cfg.hpcc_min_rate_mbps * 1e6 * hf->t_s / 8;
	if (hf->w_min > hf->w_init)
		hf->w_min = hf->w_init;
	hf->w = hf->wc = hf->w_init;
	hf->u = 1;
	apply(s, f, hf);
}

/* ---- switches: INT ----------------------------------------------------------------------- */
/* The sender asks for an ACK of every data packet: each ACK brings fresh INT, and a window cut
 * by more than half (U well above eta) must not wait for an ACK the receiver's coalescing holds
 * back. */
static void hpcc_data_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	(void)f;
	int_of(hpcc_of(s), p)->nhop = 0;
	p->flags |= SIM_PKT_ACKREQ;
}

static void hpcc_data_dequeue(struct sim *s, struct sim_port *port, struct sim_pkt *p)
{
	struct sim_hpcc *h = hpcc_of(s);
	struct hpcc_int *in = int_of(h, p);
	if (in->nhop >= HPCC_MAX_HOPS) {
		h->int_overflow++;
		return;
	}
	struct hpcc_hop *hop = &in->hop[in->nhop++];
	hop->tx_bytes = port->tx_bytes;
	hop->ts = s->now;
	hop->rate_bps = port->rate_bps;
	hop->qlen_bytes = port->q_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)port->q_bytes;
	hop->port = port->id;
	h->int_records++;
}

/* ---- receiver: the latest data packet's INT goes into the next ACK ------------------------ */
static void int_copy(struct hpcc_int *dst, const struct hpcc_int *src)
{
	dst->nhop = src->nhop;
	memcpy(dst->hop, src->hop, sizeof(src->hop[0]) * src->nhop);
}

static void hpcc_data_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *p)
{
	struct sim_hpcc *h = hpcc_of(s);
	int_copy(&h->fl[f->idx].rx, int_of(h, p));
}

static void hpcc_ack_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *ack)
{
	struct sim_hpcc *h = hpcc_of(s);
	int_copy(int_of(h, ack), &h->fl[f->idx].rx);
}

/* ---- sender: Algorithm 1 of the paper ---------------------------------------------------- */
/* MeasureInflight: the largest normalised inflight over the hops both ACKs crossed,
 * min(qlen) / (B T) + txRate / B, folded into U with weight tau / T. Returns false when no hop
 * could be measured (new path, same instant). */
static bool measure_inflight(struct hpcc_flow *hf, const struct hpcc_int *in)
{
	double u = 0, tau = hf->t_s;
	bool any = false;
	for (uint32_t i = 0; i < in->nhop && i < hf->last.nhop; i++) {
		const struct hpcc_hop *a = &in->hop[i], *b = &hf->last.hop[i];
		if (a->port != b->port || a->ts <= b->ts || !a->rate_bps)
			continue;
		double dt = sim_time_to_s(a->ts - b->ts);
		double B = (double)a->rate_bps;
		double tx_rate = (double)(a->tx_bytes - b->tx_bytes) * 8 / dt;
		double q = a->qlen_bytes < b->qlen_bytes ? a->qlen_bytes : b->qlen_bytes;
		double up = q * 8 / (B * hf->t_s) + tx_rate / B;
		if (!any || up > u) {
			u = up;
			tau = dt;
		}
		any = true;
	}
	if (!any)
		return false;
	if (tau > hf->t_s)
		tau = hf->t_s;
	hf->u = (1 - tau / hf->t_s) * hf->u + tau / hf->t_s * u;
	return true;
}

/* ComputeWind: multiplicative towards eta when U is at or above it (or after max_stage additive
 * steps), additive otherwise; the reference window W_c moves once per RTT. */
static void compute_wind(const struct sim_config *c, struct sim_hpcc *h, struct hpcc_flow *hf,
			 bool update_wc)
{
	double w;
	bool mult = hf->u >= c->hpcc_eta || hf->inc_stage >= c->hpcc_max_stage;
	if (mult)
		w = hf->wc / (hf->u / c->hpcc_eta) + (double)c->hpcc_wai_bytes;
	else
		w = hf->wc + (double)c->hpcc_wai_bytes;
	if (w > hf->w_init)
		w = hf->w_init;
	if (w < hf->w_min)
		w = hf->w_min;
	if (update_wc) {
		hf->inc_stage = mult ? 0 : hf->inc_stage + 1;
		hf->wc = w;
		h->window_updates++;
		if (mult)
			h->mult_updates++;
	}
	hf->w = w;
}

static void hpcc_ack_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *ack)
{
	struct sim_hpcc *h = hpcc_of(s);
	struct hpcc_flow *hf = &h->fl[f->idx];
	const struct hpcc_int *in = int_of(h, ack);
	if (!in->nhop)
		return;
	if (!hf->have_last) { /* first INT: nothing to compare with yet */
		int_copy(&hf->last, in);
		hf->have_last = true;
		hf->last_update_seq = f->snd_high;
		return;
	}
	if (measure_inflight(hf, in)) {
		bool new_rtt = ack->psn > hf->last_update_seq;
		compute_wind(&s->cfg, h, hf, new_rtt);
		if (new_rtt)
			hf->last_update_seq = f->snd_high;
		h->updates++;
		apply(s, f, hf);
	}
	int_copy(&hf->last, in);
}

static int hpcc_write_outputs(struct sim *s, const char *dir)
{
	const struct sim_hpcc *h = hpcc_of(s);
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/hpcc.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n  \"int_records\": %llu,\n  \"int_overflow\": %llu,\n  \"ack_updates\": %llu,\n"
		"  \"window_updates\": %llu,\n  \"multiplicative_updates\": %llu\n}\n",
		(unsigned long long)h->int_records, (unsigned long long)h->int_overflow,
		(unsigned long long)h->updates, (unsigned long long)h->window_updates,
		(unsigned long long)h->mult_updates);
	return fclose(f) ? -errno : 0;
}

static const struct sim_param hpcc_params[] = {
	{ "hpcc", "eta", SIM_P_DBL, SIM_PARAM_FIELD(hpcc_eta), "0.95", NULL, "with host.cc = hpcc: target utilisation eta" },
	{ "hpcc", "max_stage", SIM_P_U32, SIM_PARAM_FIELD(hpcc_max_stage), "5", NULL, "additive-increase steps before a multiplicative update (maxStage)" },
	{ "hpcc", "wai_bytes", SIM_P_U64, SIM_PARAM_FIELD(hpcc_wai_bytes), "80", NULL, "additive increase W_AI per update (paper: W_init (1 - eta) / N, 80 B at 100G)" },
	{ "hpcc", "base_rtt_us", SIM_P_DBL, SIM_PARAM_FIELD(hpcc_base_rtt_us), "0", NULL, "base RTT T, one for all flows (0 = the largest idle round trip of a full packet and its ACK over the run's flows)" },
	{ "hpcc", "min_rate_mbps", SIM_P_DBL, SIM_PARAM_FIELD(hpcc_min_rate_mbps), "100", NULL, "floor of the pacing rate W/T" },
};

const struct sim_module_ops sim_hpcc_ops = {
	.name = "hpcc",
	.params = hpcc_params,
	.nparams = sizeof(hpcc_params) / sizeof(hpcc_params[0]),
	.enabled = hpcc_enabled,
	.create = hpcc_create,
	.destroy = hpcc_destroy,
	.flow_start = hpcc_flow_start,
	.data_tx = hpcc_data_tx,
	.data_dequeue = hpcc_data_dequeue,
	.data_rx = hpcc_data_rx,
	.ack_tx = hpcc_ack_tx,
	.ack_rx = hpcc_ack_rx,
	.write_outputs = hpcc_write_outputs,
};
