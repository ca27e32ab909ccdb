/* lib/util/rtt.h: the round-trip estimator of RFC 6298 (SRTT, RTTVAR) and the retransmission
 * timeout derived from it, one definition shared by libinca's INC members (lib/client, in ns)
 * and inca-sim's simulated members (sim/sim_ina.c, in ps). Header-only, unit-free, no state
 * beyond the caller's struct; which samples to feed (Karn's rule) is the caller's choice. */
#ifndef INCA_UTIL_RTT_H
#define INCA_UTIL_RTT_H

#include <stdbool.h>
#include <stdint.h>

/* The INC member's RTO limits (libinca's inca_comm_opts.rto_us / rto_max_us; inca-sim's
 * ina.rto_us follows the same rule): without a configured RTO, 20 ms until the first sample,
 * then SRTT + 4 RTTVAR but at least 2 ms; a configured one is both the initial RTO and the
 * floor. Backoff doubles up to 200 ms (or the configured RTO if larger). */
#define UTIL_RTT_INC_INITIAL_US 20000u
#define UTIL_RTT_INC_FLOOR_US 2000u
#define UTIL_RTT_INC_MAX_US 200000u

struct util_rtt {
	uint64_t srtt, rttvar;   /* in the caller's unit; valid once `have` */
	bool have;               /* at least one sample */
};

/* RFC 6298 §2: the first sample R sets SRTT = R, RTTVAR = R/2; later ones
 * RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R (integer arithmetic). */
static inline void util_rtt_sample(struct util_rtt *r, uint64_t sample)
{
	if (!r->have) {
		r->srtt = sample;
		r->rttvar = sample / 2;
		r->have = true;
		return;
	}
	uint64_t d = r->srtt > sample ? r->srtt - sample : sample - r->srtt;
	r->rttvar = (3 * r->rttvar + d) / 4;
	r->srtt = (7 * r->srtt + sample) / 8;
}

/* The base RTO: `initial` before the first sample, then SRTT + 4 RTTVAR but at least `floor`;
 * never above `max`. Backoff (doubling per timeout) is applied by the caller. */
static inline uint64_t util_rtt_rto(const struct util_rtt *r, uint64_t initial, uint64_t floor,
				    uint64_t max)
{
	uint64_t rto = initial;
	if (r->have) {
		rto = r->srtt + 4 * r->rttvar;
		if (rto < floor)
			rto = floor;
	}
	return rto < max ? rto : max;
}

#endif
