/* inca-am configuration: limits, the parsed config file and its parser (cfg.c). Free of gRPC
 * and protobuf so that the config fuzz harness builds without generated code. */
#ifndef INCA_AM_CFG_H
#define INCA_AM_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h" /* enum am_role */

#define AM_MAX_SWITCHES 64
#define AM_MAX_JOBS 64
#define AM_MAX_ATTACH 256
#define AM_STR 64
#define AM_PATH 256

struct am_cfg_switch {
	char name[AM_STR];
	char target[AM_PATH];      /* NETCONF target: unix:/path or ssh://user@host:port */
	char key_path[AM_PATH];    /* SSH private key */
	char known_hosts[AM_PATH];
	enum am_role role;         /* from the config; the switch's role_hint otherwise */
};

/* What one job may hold (docs/am.md "Quotas"). In a job line 0 means "the default". */
struct am_quota {
	uint32_t max_trees;   /* groups holding a tree, forming or waiting for a rebuild */
	uint32_t max_slots;   /* slot pools of the job's trees, each tree counted once */
	uint32_t max_forming; /* groups still forming (each costs size x ~256 B until formed) */
	uint32_t max_size;    /* members per group */
};

#define AM_MAX_GROUP_SIZE 4096 /* one BIER set */

struct am_cfg {
	char listen[AM_STR];       /* gRPC "ip:port" */
	char journal[AM_PATH];     /* "" = no journal */
	char tls_cert[AM_PATH], tls_key[AM_PATH];
	bool tls_off;              /* "tls = off": serve gRPC in clear (explicit opt-out) */
	char admin_token[AM_STR];  /* admin credential; without it admin operations are refused */
	uint32_t heartbeat_ms, heartbeat_misses, poll_ms, grace_ms;
	uint32_t switch_timeout_ms; /* bound of one NETCONF connect or request */
	uint16_t slots_default, slots_min;
	uint16_t tree_id_min, tree_id_max;
	bool allow_first_joiner;   /* a job unknown to the config gets the first joiner's secret */
	struct am_quota quota;     /* every job's, unless its job line overrides a field */
	uint32_t first_joiner_ttl_s; /* ... forgotten after this long without a group */
	size_t nswitches;
	struct am_cfg_switch sw[AM_MAX_SWITCHES];
	size_t njobs;
	struct {
		char id[AM_STR], cred[AM_STR * 2];
		struct am_quota quota; /* 0 fields: the default */
	} jobs[AM_MAX_JOBS];
	size_t nattach;
	struct {
		char host[AM_STR], sw[AM_STR]; /* host name or IP -> switch name */
	} attach[AM_MAX_ATTACH];
};

/* Parse the config file. Returns 0 or -1 with a "file:line: ..." message in err. */
int am_cfg_load(struct am_cfg *c, const char *path, char *err, size_t cap);
void am_cfg_defaults(struct am_cfg *c);
/* The effective quota of a job (its job line's overrides on top of the defaults). */
void am_cfg_quota(const struct am_cfg *c, const char *job, struct am_quota *out);

#endif
