/* lib/util implementation: clock, RNG, median, IPv4 address parsing. */
#include "util/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t util_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void util_rng_seed(struct util_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = util_splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t util_rng_next(struct util_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double util_rng_double(struct util_rng *r)
{
	return (double)(util_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t util_rng_below(struct util_rng *r, uint64_t n)
{
	/* Lemire's multiply-shift; the tiny bias is irrelevant for tests and fault injection. */
	return (uint64_t)(((unsigned __int128)util_rng_next(r) * n) >> 64);
}

int util_parse_addr(const char *s, int default_port, struct sockaddr_in *out)
{
	char host[64];
	const char *colon;
	long port;

	if (!s || !out)
		return -EINVAL;
	colon = strrchr(s, ':');
	if (colon) {
		size_t n = (size_t)(colon - s);
		char *end;
		if (n == 0 || n >= sizeof host)
			return -EINVAL;
		memcpy(host, s, n);
		host[n] = 0;
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || port < 0 || port > 65535)
			return -EINVAL;
	} else {
		if (default_port < 0 || strlen(s) >= sizeof host)
			return -EINVAL;
		strcpy(host, s);
		port = default_port;
	}
	memset(out, 0, sizeof *out);
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

double util_median(double *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: the callers' n is a few dozen at most */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n > 0 ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

char *util_format_addr(const struct sockaddr_in *a, char *buf, unsigned long cap)
{
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
	snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
	return buf;
}
