/* sim/sim_time.h: the simulator's clock type. Time is an integer count of picoseconds so that
 * event order never depends on floating-point rounding; the converters below are the only
 * places where other units appear. Header-only, no state. */
#ifndef INCA_SIM_TIME_H
#define INCA_SIM_TIME_H

#include <stdint.h>

typedef uint64_t sim_time_ps;

/* "Never": an event time that is never reached. 2^64 ps is about 213 days of simulated time. */
#define SIM_TIME_NEVER UINT64_MAX

static inline sim_time_ps sim_time_from_ns(uint64_t ns) { return ns * 1000u; }
static inline sim_time_ps sim_time_from_us(uint64_t us) { return us * 1000000u; }
static inline sim_time_ps sim_time_from_ms(uint64_t ms) { return ms * 1000000000u; }
/* Fractional microseconds (scenario files, htsim connection matrices), rounded to nearest. */
static inline sim_time_ps sim_time_from_us_f(double us)
{
	return us <= 0 ? 0 : (sim_time_ps)(us * 1e6 + 0.5);
}
static inline double sim_time_to_us(sim_time_ps t) { return (double)t / 1e6; }
static inline double sim_time_to_ns(sim_time_ps t) { return (double)t / 1e3; }
static inline double sim_time_to_s(sim_time_ps t) { return (double)t / 1e12; }

/* Time to serialise `bytes` at `rate_bps`, rounded up so a link is never faster than its rate.
 * Exact for every standard Ethernet rate (10G = 800 ps/byte ... 800G = 10 ps/byte). */
static inline sim_time_ps sim_time_serialize(uint64_t bytes, uint64_t rate_bps)
{
	return (bytes * 8000000000000ull + rate_bps - 1) / rate_bps;
}

#endif
