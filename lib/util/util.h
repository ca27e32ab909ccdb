/* lib/util: small dependency-free helpers shared by every module: monotonic time, a seeded
 * RNG (one stream per component), a median, address parsing. No globals, no allocation. */
#ifndef INCA_UTIL_H
#define INCA_UTIL_H

#include <stdint.h>
#include <netinet/in.h>

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t util_now_ns(void);

/* Median of v[0..n) (sorts v in place, for the few dozen values of a benchmark's repeats; the
 * mean of the middle two for even n); 0 if n is 0. */
double util_median(double *v, int n);

/* splitmix64 (Steele, Lea and Flood): a counter advanced by the golden ratio and a bijective
 * finalizer. The only copy of its constants; it seeds util_rng and serves as a stateless hash. */
#define UTIL_GOLDEN64 0x9e3779b97f4a7c15ull

/* The finalizer alone: a bijective 64-bit mix. */
static inline uint64_t util_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One step of the generator: advances *state and returns the next output. */
static inline uint64_t util_splitmix64(uint64_t *state)
{
	return util_mix64(*state += UTIL_GOLDEN64);
}

/* The generator's output for state x, without keeping state: a 64-bit hash of x. */
static inline uint64_t util_hash64(uint64_t x)
{
	return util_mix64(x + UTIL_GOLDEN64);
}

/* xoshiro256** generator: deterministic for a seed, cheap, not cryptographic. */
struct util_rng {
	uint64_t s[4];
};
void util_rng_seed(struct util_rng *r, uint64_t seed);
uint64_t util_rng_next(struct util_rng *r);
/* Uniform double in [0, 1). */
double util_rng_double(struct util_rng *r);
/* Uniform integer in [0, n), n > 0. */
uint64_t util_rng_below(struct util_rng *r, uint64_t n);

/* Parse "a.b.c.d:port" (port required unless default_port >= 0 is given for a bare address).
 * Returns 0 or -EINVAL. */
int util_parse_addr(const char *s, int default_port, struct sockaddr_in *out);
/* Format as "a.b.c.d:port" into buf (at least 22 bytes). Returns buf. */
char *util_format_addr(const struct sockaddr_in *a, char *buf, unsigned long cap);

#endif
