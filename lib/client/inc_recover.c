/* libinca INC data path, loss recovery and the window: the RTT estimator (RFC 6298, Karn's
 * rule), the adaptive window (slow start, AIMD on delay and loss), loss detection (RACK, RFC
 * 8985, per slot block), resending what repair notices asked for, the stall probe and the RTO
 * with its liveness probe (draft-liu §7). No socket I/O: resends go through inc_enqueue. */
#include "client/inc_int.h"

#include <errno.h>
#include <string.h>

void inc_rtt_sample(struct client_inc *ic, uint64_t r_ns, uint64_t now_ns)
{
	if (!ic->rtt.have || r_ns < ic->min_rtt_ns || now_ns - ic->min_rtt_stamp_ns > INC_MINRTT_WIN_NS) {
		ic->min_rtt_ns = r_ns;
		ic->min_rtt_stamp_ns = now_ns;
	}
	util_rtt_sample(&ic->rtt, r_ns);
}
/* Multiplicative decrease, at most once per round trip (seq: the signalling chunk's send). */
void inc_wnd_cut(struct client_inc *ic, uint64_t seq, double factor)
{
	if (seq <= ic->cut_seq)
		return;
	ic->slow_start = false;
	ic->cwnd *= factor;
	if (ic->cwnd < INC_WND_MIN)
		ic->cwnd = INC_WND_MIN;
	if (ic->cwnd > ic->wnd_cap)
		ic->cwnd = ic->wnd_cap;
	ic->cut_seq = ic->tx_seq;
}

/* A chunk answered without retransmission after r_ns: grow while the RTT is below the delay
 * target, shrink in proportion to the excess above it (TIMELY/Swift-like). Slow start ends at
 * the first sample above the target (it doubles per round trip, so waiting for the smoothed
 * RTT would overshoot badly); after that the smoothed RTT decides the decrease, so that one
 * descheduled process does not halve the window. */
void inc_wnd_on_result(struct client_inc *ic, uint64_t r_ns, uint64_t seq)
{
	uint64_t target = delay_target_ns(ic), sig = ic->slow_start ? r_ns : ic->rtt.srtt;

	if (sig > target) {
		double f = 1.0 - INC_DELAY_BETA * (double)(sig - target) / (double)sig;
		inc_wnd_cut(ic, seq, f > 1.0 - INC_MAX_MDF ? f : 1.0 - INC_MAX_MDF);
		return;
	}
	if (r_ns > target)
		return; /* no growth on a late sample */
	ic->cwnd += ic->slow_start ? 1.0 : 1.0 / ic->cwnd;
	if (ic->cwnd > ic->wnd_cap)
		ic->cwnd = ic->wnd_cap;
}

/* RACK: resend every chunk sent before the latest-sent answered one that is overdue (its
 * send + that chunk's RTT + the reordering window); arm rack_timer_ns for the others. *done is
 * false if the transmit queue filled up before the scan finished. 0 or -errno. */
int inc_detect_losses(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns, bool *done)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	uint64_t reo = reo_wnd_ns(ic);
	uint64_t tail_wnd = reo > ic->tail_allow_ns ? reo : ic->tail_allow_ns;
	const bool tail_phase = j->next_i >= j->nchunks && ic->inflight <= INC_TAIL_INFLIGHT;
	int rc;

	*done = false;
	ic->rack_timer_ns = 0;
	for (unsigned s = 0; s < cfg->nslots; s++) {
		struct inc_chunk *ch = &ic->chunks[s];
		const struct inc_rack *rk = &ic->rack[s / WIRE_SLOT_BLOCK];

		uint64_t wait = 0; /* 0: no rule applies */
		bool tail = false, by_rep = false;
		if (!ch->active)
			continue;
		/* A later chunk of the block was answered and this one not: our result was lost,
		 * or another member's contribution, which the switch's repair notice to that member
		 * mends within about one round trip (our resend would only cost a duplicate up and
		 * a duplicate result down). So a chunk never resent waits one round trip more
		 * before its first resend, except in the call's tail (every chunk started and few
		 * left in flight, INC_TAIL_INFLIGHT), where nothing else is left to overlap the
		 * wait with; every later detection as before.
		 * Sent before includes sent in the same pass (one timestamp, one GSO send): the
		 * answers of such chunks come back together, and a call's last chunks have no
		 * later send to vouch for them (5 % loss, 1 MiB: 3.16-3.35 against 3.37-3.54 ms
		 * waiting for the stall probe). */
		if (ch->tx_seq < rk->seq || ch->xmit_ns <= rk->sent_ns)
			wait = rk->rtt_ns + reo + (ch->retx || tail_phase ? 0 : rk->rtt_ns);
		else if (ch->retx && ch->tx_seq < rk->rseq)
			wait = rk->rrtt_ns + reo;
		else if (ch->first_seq < ic->rack_all.seq)
			wait = ic->rack_all.rtt_ns + tail_wnd, tail = true;
		/* A resend unanswered for repair_wait_ns goes again, vouched for or not: a call's
		 * last repairs have no later resend to vouch for them, and a lost resend or answer
		 * there waited for the stall probe or the RTO. */
		uint64_t rep = ch->retx ? repair_wait_ns(ic, ch) : 0;
		if (rep && (!wait || rep <= wait))
			wait = rep, tail = false, by_rep = true;
		if (!wait)
			continue;
		/* No backoff in the rules above for a chunk still unanswered after a resend (as
		 * RACK, RFC 8985): its wait is that of another member's repair or a lost resend or
		 * answer, and each resend of ours makes the switch notice the members it misses
		 * again. With a doubling wait (up to 32x) the last chunks of a call sat out
		 * several round trips after their answer was due (1 MiB at 20 % loss: 19-21 ms
		 * against 17-19; 16 MiB 205-220 ms against 171-183) for 6 % fewer packets. The
		 * repair-wait rule, which nothing vouches for, doubles (repair_wait_ns). */
		uint64_t due = ch->xmit_ns + wait;
		if (due > now_ns) {
			if (!ic->rack_timer_ns || due < ic->rack_timer_ns)
				ic->rack_timer_ns = due;
			continue;
		}
		if (tx_full(ic))
			return 0;
		/* Random loss (fault injection, a flaky link) leaves the RTT alone and is no
		 * reason to slow down; loss together with a grown queue is congestion. */
		if (ic->rtt.srtt > delay_target_ns(ic))
			inc_wnd_cut(ic, ch->tx_seq, 1.0 - INC_LOSS_MDF);
		ch->retx_fast = true;
		ch->retx_tail = tail;
		if (by_rep && ch->nrep < INC_REP_BACKOFF_MAX)
			ch->nrep++;
		rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
	}
	*done = true;
	return 0;
}

/* Resend the chunks repair notices marked, as far as the transmit queue allows (the rest on
 * the next pass). 0 or -errno. */
int inc_resend_nacked(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	struct client_inc *ic = c->inc;

	for (unsigned s = 0; s < c->cfg.nslots && ic->nacked; s++) {
		struct inc_chunk *ch = &ic->chunks[s];

		if (!ch->nacked)
			continue;
		if (tx_full(ic))
			return 0;
		ch->nacked = false;
		ic->nacked--;
		if (!ch->active)
			continue;
		ch->retx_fast = false; /* certain loss: says nothing about reordering */
		int rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}
/* Stall probe, once per silence: resend the INC_PROBE_MAX oldest chunks in flight. Nothing
 * answered for two round trips means every chunk in flight waits for some repair, and loss
 * detection has nothing left to go on: our contribution or our result may be lost (the resend
 * repairs it), or another member's (our duplicate makes the switch notice that member). One
 * round of resends instead of one RTO per stuck chunk; the switch deduplicates. */
int inc_probe(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	uint64_t lo = UINT64_MAX, end = j->base_g + j->next_i;
	unsigned sent = 0;

	ic->tlp_done = true;
	for (unsigned s = 0; s < cfg->nslots; s++) {
		const struct inc_chunk *ch = &ic->chunks[s];
		if (ch->active && ch->g < lo)
			lo = ch->g;
	}
	for (uint64_t g = lo; g < end && sent < INC_PROBE_MAX && !tx_full(ic); g++) {
		struct inc_chunk *ch = &ic->chunks[g % cfg->nslots];
		if (!ch->active || ch->g != g)
			continue;
		ch->retx_fast = false; /* an early answer means a stall, not reordering */
		int rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
		sent++;
	}
	return 0;
}

/* RTO expiry: nothing was answered for a whole RTO. Resend the INC_PROBE_MAX oldest chunks
 * in flight (below) and the liveness probe. The oldest chunk (lowest g) counts the timeouts:
 * it stays the oldest, so a dead switch reaches retx_limit after retx_limit RTOs. */
int inc_on_rto(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	struct inc_chunk *old = NULL;

	for (unsigned s = 0; s < cfg->nslots; s++) {
		struct inc_chunk *ch = &ic->chunks[s];
		if (ch->active && (!old || ch->g < old->g))
			old = ch;
	}
	if (!old)
		return 0;
	c->stats.timeouts++;
	/* The AM dismantled or rebuilt the tree under this call: no use waiting for the
	 * retransmission limit, the caller fails over to the host path now. */
	if (c->am && !client_am_tree_current(c)) {
		client_log(cfg, 1, "inc: tree changed by the AM mid-call");
		return -ETIMEDOUT;
	}
	++old->ntimeouts;
	/* Without an answered chunk on this communicator (its first call) there is no probe: a
	 * silent switch and peers that have not entered the call yet look the same, and start
	 * skew of seconds is common (one rank still loading data or filling a buffer). Then only
	 * the late-peer rule below applies: timeout_ms without progress. */
	if (++ic->silent_rtos >= cfg->retx_limit && ic->probe_ok) {
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts, "
			   "switch silent", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts);
		return -ETIMEDOUT;
	}
	/* The switch answers (the probe, duplicates), but nothing completes: a peer is late
	 * or gone. Wait for it as long as the host path would (timeout_ms without progress),
	 * never less than before (retx_limit RTOs of this chunk). */
	if (old->ntimeouts >= cfg->retx_limit &&
	    now_ns - ic->progress_ns >= (uint64_t)cfg->timeout_ms * 1000000ull && !ic->probe_ok &&
	    !c->am) {
		/* Standalone, and the switch has answered nothing of this communicator: the
		 * commonest cause is a tree whose parameters differ from the switch's config,
		 * which the switch drops silently (counted per reason in its statistics). */
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts and "
			   "none of this communicator's chunks ever answered: check that "
			   "the switch's config has tree %u with key 0x%x, qpn 0x%x, slots %u, "
			   "bsl %u and member %u (qpn 0x%x) at this host's address (switch drop "
			   "counters: unknown_tree, bad_qpn, unknown_sender, drop_key, drop_slot, "
			   "drop_bitmap)", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts, cfg->tree_id, cfg->key,
			   cfg->switch_qpn, cfg->nslots, cfg->bsl_bits, cfg->bfr_id, cfg->qpn);
		return -ETIMEDOUT;
	}
	if (old->ntimeouts >= cfg->retx_limit &&
	    now_ns - ic->progress_ns >= (uint64_t)cfg->timeout_ms * 1000000ull) {
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts; the "
			   "switch answers, peers made no progress for %u ms",
			   (unsigned long long)old->g, (unsigned)(old->g % cfg->nslots),
			   old->ntimeouts, cfg->timeout_ms);
		return -ETIMEDOUT;
	}
	if (old->ntimeouts == cfg->retx_limit)
		client_log(cfg, 1, "inc: chunk g=%llu (slot %u): %u timeouts but the switch answers; "
			   "waiting for late peers", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts);
	/* The RTO doubles (RFC 6298 §5.5) while the switch stays silent: a path that drops
	 * everything may be congested. An RTO after which the switch answered something (the
	 * liveness probe's duplicate result, a notice) saw a working path that lost a few packets
	 * at random, and doubling then only stretched high loss into long stalls (a 4-byte call
	 * at 20 % loss averaged 2.4–4.2 ms instead of 1.4–1.7). From the INC_RTO_FLAT-th
	 * timeout of one chunk it doubles anyway: a peer late by seconds is waited for with a
	 * few probes, not one every 2 ms. */
	if (ic->silent_rtos > 1 || old->ntimeouts > INC_RTO_FLAT)
		ic->backoff++;
	ic->rto_start_ns = now_ns;
	ic->tlp_done = true; /* after an RTO, the backoff rules until something is answered */
	/* Random loss leaves the RTT alone and is no reason to slow down (as in loss
	 * detection); only a timeout with a grown queue is congestion. A small window would
	 * also starve loss detection and the switch's notices of the later answers they need. */
	if (ic->rtt.srtt > delay_target_ns(ic))
		inc_wnd_cut(ic, old->tx_seq, 0.5);
	/* The oldest chunks in flight, as the stall probe does: a whole RTO without any answer
	 * means every one of them is lost or waits for a repair (a descheduled switch aside,
	 * whose queue answers them all at once anyway), and resending only the oldest left the
	 * others to one backed-off RTO each at high loss. */
	int rc = inc_probe(c, j, now_ns);
	if (rc < 0 || !ic->probe_ok || tx_full(ic))
		return rc;
	return inc_enqueue(c, ic->probe_j, &ic->probe_ch, true, now_ns);
}
