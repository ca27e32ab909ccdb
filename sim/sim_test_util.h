/* sim/sim_test_util.h: the checks of util/test_check.h for the simulator's tests, and a
 * helper to build a configuration from "key=value" strings. */
#ifndef INCA_SIM_TEST_UTIL_H
#define INCA_SIM_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "sim.h"
#include "util/test_check.h"

/* Defaults plus overrides, NULL-terminated. Exits on an unknown key (a broken test). */
static inline void test_config(struct sim_config *c, const char *const *kv)
{
	sim_config_defaults(c);
	c->progress_s = 0;
	for (; kv && *kv; kv++)
		if (sim_config_set_arg(c, *kv)) {
			fprintf(stderr, "bad test parameter %s\n", *kv);
			exit(1);
		}
}

static inline struct sim *test_sim(const struct sim_config *c)
{
	struct sim *s;
	char err[512];
	if (sim_create(c, &s, err, sizeof(err))) {
		fprintf(stderr, "sim_create: %s\n", err);
		exit(1);
	}
	return s;
}

#endif
