/* sim/sim_dctcp.c: DCTCP congestion control (Alizadeh et al., SIGCOMM 2010) for the simulator's
 * transport, a module enabled by host.cc = dctcp: step ECN marking at the switches (mark when
 * the egress data queue exceeds K on arrival), CE bytes echoed in ACKs, and the sender's window
 * (alpha estimate, cut by alpha/2 at most once per window, additive increase of one MTU per
 * window). The transport it steers (ACKs, retransmission, the NIC) stays in sim_host.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* What an ACK or NACK echoes (packet data behind the ACK, sim_pkt_ext): payload bytes the
 * receiver took in since its previous ACK of the flow, and how many of them were CE-marked. Our
 * receivers ACK every host.ack_every packets, so a per-packet ECE bit would lose marks; the
 * byte counts carry exactly what DCTCP's per-packet echo (or its delayed-ACK state machine)
 * conveys. */
struct dctcp_echo {
	uint64_t rx_bytes, ce_bytes;
};

struct dctcp_flow {
	/* sender */
	double cwnd_bytes;       /* congestion window, payload bytes */
	double alpha;            /* estimate of the fraction of marked bytes */
	uint64_t win_acked, win_marked; /* bytes echoed in the current observation window */
	uint32_t win_end;        /* the window closes when snd_una reaches this PSN */
	uint32_t cwr_end;        /* no new cut (and no increase) before snd_una reaches this PSN */
	/* receiver */
	uint64_t rx_bytes, ce_bytes; /* since the last ACK */
};

struct sim_dctcp {
	struct dctcp_flow *fl;   /* by flow index, grown as flows start */
	uint32_t nfl;
	uint32_t echo_off;       /* struct dctcp_echo in every packet */
	uint64_t cuts, alpha_updates, marks, echoed_ce_bytes;
};

static inline struct sim_dctcp *dctcp_of(const struct sim *s)
{
	return s->mod[SIM_MOD_dctcp];
}

static bool dctcp_enabled(const struct sim_config *c)
{
	return c->cc == SIM_CC_DCTCP;
}

static int dctcp_create(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	char *e = s->err;
	size_t el = sizeof(s->err);
	if (!c->ecn) {
		snprintf(e, el, "host.cc = dctcp needs switch.ecn = true (DCTCP reacts to ECN marks, "
			 "which the switches set above dctcp.k_bytes)");
		return -EINVAL;
	}
	if (c->transport == SIM_TRANSPORT_IDEAL) {
		snprintf(e, el, "host.cc = dctcp needs ACKs: host.transport = gbn or sr, not ideal");
		return -EINVAL;
	}
	if (c->osf_mode != SIM_OSF_OFF) {
		snprintf(e, el, "host.cc = dctcp cannot be combined with osf.mode (OSF schedules the "
			 "NIC itself and would ignore the window)");
		return -EINVAL;
	}
	if (!(c->dctcp_g > 0 && c->dctcp_g <= 1) || c->dctcp_initial_alpha > 1) {
		snprintf(e, el, "dctcp.g must be in (0, 1] and dctcp.initial_alpha in [0, 1]");
		return -EINVAL;
	}
	if (c->dctcp_init_cwnd_bytes == 0 || c->dctcp_init_cwnd_bytes > (1ull << 40)) {
		snprintf(e, el, "dctcp.init_cwnd_bytes must be between 1 and 2^40");
		return -EINVAL;
	}
	if (!c->pfc && c->dctcp_k_bytes >= c->buffer_bytes) {
		snprintf(e, el, "dctcp.k_bytes = %llu must be below switch.buffer_bytes = %llu (the "
			 "queue would overflow before any packet is marked)",
			 (unsigned long long)c->dctcp_k_bytes, (unsigned long long)c->buffer_bytes);
		return -EINVAL;
	}
	struct sim_dctcp *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	s->mod[SIM_MOD_dctcp] = d;
	return sim_pkt_ext_reserve(s, sizeof(struct dctcp_echo), &d->echo_off);
}

static void dctcp_destroy(struct sim *s)
{
	struct sim_dctcp *d = dctcp_of(s);
	free(d->fl);
	free(d);
	s->mod[SIM_MOD_dctcp] = NULL;
}

static void set_window(struct sim_flow *f, const struct dctcp_flow *df)
{
	f->cwnd_bytes = df->cwnd_bytes < 1 ? 1 : (uint64_t)(df->cwnd_bytes + 0.5);
}

static void dctcp_flow_start(struct sim *s, struct sim_flow *f)
{
	struct sim_dctcp *d = dctcp_of(s);
	if (f->idx >= d->nfl) { /* flows may be added up to the run; grow to the largest index */
		uint32_t n = s->nflows > f->idx ? s->nflows : f->idx + 1;
		struct dctcp_flow *fl = realloc(d->fl, sizeof(*fl) * n);
		if (!fl) {
			s->finished = true;
			sim_set_err(s, "dctcp: out of memory for the per-flow state");
			return;
		}
		memset(fl + d->nfl, 0, sizeof(*fl) * (n - d->nfl));
		d->fl = fl;
		d->nfl = n;
	}
	struct dctcp_flow *df = &d->fl[f->idx];
	memset(df, 0, sizeof(*df));
	df->cwnd_bytes = (double)s->cfg.dctcp_init_cwnd_bytes;
	df->alpha = s->cfg.dctcp_initial_alpha;
	set_window(f, df);
}

/* Sender: ask for an ACK at once when this packet closes the window, and on every packet while
 * the window is below 2 * host.ack_every packets. Otherwise a closed window could wait for an ACK
 * the receiver's coalescing holds back: after the last coalesced ACK up to ack_every - 1
 * packets stay unacknowledged, and a cut (at most by half, alpha <= 1) of a window of at least
 * 2 * ack_every packets still leaves room for them. */
static void dctcp_data_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	uint64_t mtu = s->cfg.mtu_bytes, w = sim_flow_window_bytes(s, f);
	if (w < 2ull * s->cfg.ack_every * mtu || (uint64_t)(f->snd_nxt - f->snd_una) * mtu >= w)
		p->flags |= SIM_PKT_ACKREQ;
}

/* Switch: one threshold on the instantaneous queue, as DCTCP asks of the switch. */
static bool dctcp_ecn_mark(struct sim *s, const struct sim_port *out, const struct sim_pkt *p,
			   uint64_t qbytes)
{
	(void)out;
	(void)p;
	if (qbytes <= s->cfg.dctcp_k_bytes)
		return false;
	dctcp_of(s)->marks++;
	return true;
}

/* Receiver: count what arrives, echo it in the next ACK. */
static void dctcp_data_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *p)
{
	struct dctcp_flow *df = &dctcp_of(s)->fl[f->idx];
	uint32_t payload = p->size_bytes - s->cfg.header_bytes;
	df->rx_bytes += payload;
	if (p->flags & SIM_PKT_CE)
		df->ce_bytes += payload;
}

static void dctcp_ack_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *ack)
{
	struct sim_dctcp *d = dctcp_of(s);
	struct dctcp_flow *df = &d->fl[f->idx];
	struct dctcp_echo *e = sim_pkt_ext(ack, d->echo_off);
	e->rx_bytes = df->rx_bytes;
	e->ce_bytes = df->ce_bytes;
	df->rx_bytes = df->ce_bytes = 0;
}

/* Sender. Windows are counted in PSNs: an observation window (and a reduction's CWR period)
 * ends when everything sent at its start is acknowledged, i.e. after about one RTT. */
static void dctcp_ack_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *ack)
{
	const struct sim_config *c = &s->cfg;
	struct sim_dctcp *d = dctcp_of(s);
	struct dctcp_flow *df = &d->fl[f->idx];
	const struct dctcp_echo *e = sim_pkt_ext((struct sim_pkt *)ack, d->echo_off);
	df->win_acked += e->rx_bytes;
	df->win_marked += e->ce_bytes;
	d->echoed_ce_bytes += e->ce_bytes;
	if (f->snd_una >= df->win_end) { /* once per window: alpha <- (1-g) alpha + g F */
		double F = df->win_acked ? (double)df->win_marked / (double)df->win_acked : 0;
		df->alpha = (1 - c->dctcp_g) * df->alpha + c->dctcp_g * F;
		df->win_acked = df->win_marked = 0;
		df->win_end = f->snd_high;
		d->alpha_updates++;
	}
	bool cwr = f->snd_una < df->cwr_end;
	if (e->ce_bytes) {
		if (!cwr) { /* at most one cut per window */
			df->cwnd_bytes *= 1 - df->alpha / 2;
			if (df->cwnd_bytes < c->mtu_bytes)
				df->cwnd_bytes = c->mtu_bytes;
			df->cwr_end = f->snd_high;
			d->cuts++;
		}
	} else if (!cwr && e->rx_bytes) { /* additive increase: one MTU per window of ACKs */
		df->cwnd_bytes += (double)c->mtu_bytes * e->rx_bytes / df->cwnd_bytes;
	}
	set_window(f, df);
}

static int dctcp_write_outputs(struct sim *s, const char *dir)
{
	const struct sim_dctcp *d = dctcp_of(s);
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/dctcp.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	double asum = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < d->nfl && i < s->nflows; i++)
		if (s->flows[i].state != SIM_FLOW_WAIT) {
			asum += d->fl[i].alpha;
			n++;
		}
	fprintf(f, "{\n  \"marks\": %llu,\n  \"echoed_ce_bytes\": %llu,\n  \"cwnd_cuts\": %llu,\n"
		"  \"alpha_updates\": %llu,\n  \"mean_final_alpha\": %.6f\n}\n",
		(unsigned long long)d->marks, (unsigned long long)d->echoed_ce_bytes,
		(unsigned long long)d->cuts, (unsigned long long)d->alpha_updates, n ? asum / n : 0);
	return fclose(f) ? -errno : 0;
}

static const struct sim_param dctcp_params[] = {
	{ "dctcp", "k_bytes", SIM_P_U64, SIM_PARAM_FIELD(dctcp_k_bytes), "100000", NULL, "with host.cc = dctcp: switches mark CE when the egress data queue exceeds K on arrival (one threshold; replaces switch.ecn_kmin/kmax RED marking)" },
	{ "dctcp", "g", SIM_P_DBL, SIM_PARAM_FIELD(dctcp_g), "0.0625", NULL, "alpha gain g (1/16)" },
	{ "dctcp", "init_cwnd_bytes", SIM_P_U64, SIM_PARAM_FIELD(dctcp_init_cwnd_bytes), "65536", NULL, "initial congestion window (payload bytes in flight)" },
	{ "dctcp", "initial_alpha", SIM_P_DBL, SIM_PARAM_FIELD(dctcp_initial_alpha), "1", NULL, "alpha at flow start" },
};

const struct sim_module_ops sim_dctcp_ops = {
	.name = "dctcp",
	.params = dctcp_params,
	.nparams = sizeof(dctcp_params) / sizeof(dctcp_params[0]),
	.enabled = dctcp_enabled,
	.create = dctcp_create,
	.destroy = dctcp_destroy,
	.flow_start = dctcp_flow_start,
	.data_tx = dctcp_data_tx,
	.data_rx = dctcp_data_rx,
	.ack_tx = dctcp_ack_tx,
	.ack_rx = dctcp_ack_rx,
	.ecn_mark = dctcp_ecn_mark,
	.write_outputs = dctcp_write_outputs,
};
