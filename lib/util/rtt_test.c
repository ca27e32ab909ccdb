/* lib/util/rtt_test: the RFC 6298 estimator of util/rtt.h (first sample, smoothing, integer
 * rounding) and the RTO rule libinca and inca-sim share (initial value, SRTT + 4 RTTVAR,
 * floor, cap). */
#include "util/rtt.h"

#include "util/test_check.h"

int main(void)
{
	struct util_rtt r = { 0 };

	/* before a sample: the initial RTO, capped */
	CHECK_EQ(util_rtt_rto(&r, 20000, 2000, 200000), 20000);
	CHECK_EQ(util_rtt_rto(&r, 300000, 2000, 200000), 200000);
	/* first sample: SRTT = R, RTTVAR = R/2 */
	util_rtt_sample(&r, 1000);
	CHECK(r.have);
	CHECK_EQ(r.srtt, 1000);
	CHECK_EQ(r.rttvar, 500);
	CHECK_EQ(util_rtt_rto(&r, 20000, 0, 200000), 3000);   /* 1000 + 4 * 500 */
	CHECK_EQ(util_rtt_rto(&r, 20000, 2000, 200000), 3000);
	CHECK_EQ(util_rtt_rto(&r, 20000, 5000, 200000), 5000); /* the floor */
	/* second: RTTVAR = (3 * 500 + |1000 - 2000|) / 4 = 625, SRTT = (7000 + 2000) / 8 = 1125 */
	util_rtt_sample(&r, 2000);
	CHECK_EQ(r.rttvar, 625);
	CHECK_EQ(r.srtt, 1125);
	CHECK_EQ(util_rtt_rto(&r, 20000, 0, 3000), 3000);      /* the cap: 1125 + 2500 > 3000 */
	/* a steady path: RTTVAR decays, SRTT converges, the RTO falls to the floor */
	for (int i = 0; i < 200; i++)
		util_rtt_sample(&r, 1000);
	CHECK(r.srtt >= 1000 && r.srtt <= 1007);
	CHECK(r.rttvar <= 3);
	CHECK_EQ(util_rtt_rto(&r, 20000, UTIL_RTT_INC_FLOOR_US, UTIL_RTT_INC_MAX_US), UTIL_RTT_INC_FLOOR_US);
	puts("rtt_test: ok");
	return 0;
}
