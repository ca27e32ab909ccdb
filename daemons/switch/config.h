/* inca-switch configuration: the standalone config file format, the flags-only --tree form, and
 * the validated in-memory result. Pure parsing (no sockets, no engine): shared by the daemon,
 * its unit tests and the libFuzzer harness. The format is documented in docs/switch.md. */
#ifndef INCA_SW_CONFIG_H
#define INCA_SW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>

#include "ctl/model.h"
#include "wire/wire.h"

#define SW_CONF_PATH_MAX 1024
#define SW_CONF_ERR_MAX 512
#define SW_THREADS_MAX 64
#define SW_PORT_DEFAULT 4791      /* RoCEv2 UDP port, used when an address has no :port */

/* Trees are the lib/ctl model (struct ctl_tree, ctl/model.h): the file parser fills it, so
 * do NETCONF edits; its validation (ctl_tree_finish) is the same for both. */

#define SW_NAME_MAX 64
#define SW_MGMT_MAX 8
#define SW_DEFAULT_MAX_TREES 256
#define SW_DEFAULT_MAX_SLOTS 65536

/* A link to a neighbour, as described in the config (reported as NETCONF state so the
 * Aggregation Manager can learn the topology). */
struct sw_conf_link {
	char port[SW_NAME_MAX];
	char peer[SW_NAME_MAX];
	bool has_peer_addr;
	struct sockaddr_in peer_addr;
	uint64_t speed_bps; /* 0: unknown */
	bool up;
};

struct sw_config {
	struct sockaddr_in listen;
	unsigned threads;
	bool check_icrc;
	char stats_file[SW_CONF_PATH_MAX]; /* "" = none */
	unsigned stats_interval_ms;        /* 0 = only on SIGUSR1 and at exit */
	struct ctl_tree *trees;        /* owned */
	size_t ntrees;
	/* Identity, resources and topology for the control plane (docs/netconf.md). */
	char name[SW_NAME_MAX];  /* "" = none */
	char role_hint[16];      /* "leaf" | "spine" | "" */
	uint32_t max_trees;      /* admission limits, also enforced on NETCONF edits */
	uint32_t max_slots;      /* sum of the trees' slots */
	struct sw_conf_link *links; /* owned */
	size_t nlinks;
	char mgmt_addr[SW_MGMT_MAX][128]; /* management addresses (informational) */
	size_t nmgmt;
	bool allow_no_trees; /* set by the daemon when trees may come later (NETCONF) */
};

/* Defaults: listen 0.0.0.0:4791, 1 thread, ICRC checked, interval 1000 ms, no trees. */
void sw_config_init(struct sw_config *c);
void sw_config_free(struct sw_config *c);

/* Parse config text (need not be NUL-terminated) named `name` (used in messages) into c, which
 * must come from sw_config_init; global keys overwrite, trees are added. On error returns
 * -EINVAL and writes "name:line: message" into err (cap bytes). Trees are validated when their
 * block closes; call sw_config_validate after all sources were applied. */
int sw_config_parse_text(struct sw_config *c, const char *text, size_t len, const char *name,
			 char *err, size_t cap);
/* Read and parse a file. -errno if it cannot be read (message in err). */
int sw_config_parse_file(struct sw_config *c, const char *path, char *err, size_t cap);
/* Add a tree from the flags-only form, e.g.
 * "id=1,key=0x5eed0001,slots=256,members=1@127.0.0.10:4791+2@127.0.0.11:4791". */
int sw_config_add_tree_spec(struct sw_config *c, const char *spec, char *err, size_t cap);
/* Set a global key ("listen", "threads", ...) as the file would; used by flags too. */
int sw_config_set_global(struct sw_config *c, const char *key, const char *value, char *err,
			 size_t cap);
/* Whole-config checks (at least one tree, ...). */
int sw_config_validate(const struct sw_config *c, char *err, size_t cap);

/* Must every tree have a data-plane key or say auth = off? True: a tree with neither is a
 * configuration error (file, --tree flag and NETCONF edits alike). */
bool sw_config_auth_required(void);

/* Find a tree by id, NULL if absent. */
const struct ctl_tree *sw_config_find_tree(const struct sw_config *c, uint16_t id);
/* Print the effective configuration in the file format (round-trips through the parser; group
 * keys included, as in the file). */
void sw_config_dump(const struct sw_config *c, FILE *f);
/* One tree block of the dump. */
void sw_config_dump_tree(const struct ctl_tree *t, FILE *f);

/* Admission: tree count and slot budget of a set of trees against the limits of c. */
int sw_config_check_limits(const struct sw_config *c, const struct ctl_tree *trees, size_t n,
			   char *err, size_t cap);
/* Names of element types / operators (lib/wire/dtype.h), for masks; NULL if out of range. */
const char *sw_dtype_name(unsigned dt);
const char *sw_op_name(unsigned op);
#define SW_DTYPE_COUNT WIRE_DTYPE_COUNT
#define SW_OP_COUNT WIRE_OP_COUNT

#endif
