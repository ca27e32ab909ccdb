/* lib/ctl: the control-plane view of an INC switch, shared by inca-am (NETCONF client side) and
 * inca-switch (NETCONF server side): tree configuration, capabilities, links, statistics, and a
 * small NETCONF client (libnetconf2) that speaks the inca-switch YANG module (yang/).
 * Blocking calls, each bounded by the connection's timeout; one struct ctl_conn per thread at a
 * time (connections of different threads are independent). Returns 0 or -errno; the message of
 * the last failure (including NETCONF rpc-error text) is available from ctl_conn_error(). */
#ifndef INCA_CTL_H
#define INCA_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define CTL_NAME_MAX 64
#define CTL_ADDR_MAX 64 /* "a.b.c.d:port" */

/* A client attached to a switch, as a tree member. */
struct ctl_member {
	uint16_t bfr_id;
	char addr[CTL_ADDR_MAX]; /* data-plane address of the client */
	uint32_t qpn;
};

/* A child switch of a tree and the BFR-ids it covers. */
struct ctl_child {
	char addr[CTL_ADDR_MAX]; /* data-plane address of the child switch */
	uint32_t qpn;
	uint16_t *bfr_ids; /* owned */
	size_t nbfr;
};

/* One aggregation tree as configured on one switch (YANG list inca-switch/trees/tree). */
struct ctl_tree {
	uint16_t id;
	uint32_t key;
	uint32_t qpn;
	uint16_t slots;
	uint32_t slot_bytes;
	unsigned bsl_bits;
	uint8_t si;
	bool root;
	uint16_t bfr_id;
	bool has_parent;
	char parent_addr[CTL_ADDR_MAX];
	uint32_t parent_qpn;
	bool deterministic;
	/* Data-plane authentication (YANG auth, auth-key, auth-key-id). auth_key is write-only
	 * on the switch: ctl_get_trees returns auth and auth_key_id, never the key (zeros). */
	bool auth;
	uint8_t auth_key[WIRE_AUTH_KEY_LEN];
	uint32_t auth_key_id;
	uint32_t dtype_mask, op_mask; /* 0 = all */
	struct ctl_member *members;   /* owned */
	size_t nmembers;
	struct ctl_child *children; /* owned */
	size_t nchildren;
};
void ctl_tree_free(struct ctl_tree *t); /* frees members/children, not t itself */

/* A link of the switch to a neighbour (learned from config or LLDP-like discovery). */
struct ctl_link {
	char port[CTL_NAME_MAX];        /* local port / interface name */
	char peer[CTL_NAME_MAX];        /* neighbour's name: a switch name or a host name */
	char peer_addr[CTL_ADDR_MAX];   /* neighbour's data-plane address if known */
	uint64_t speed_bps;
	bool up;
};

/* Capabilities and resources (YANG container inca-switch/capabilities, config false). */
struct ctl_caps {
	char name[CTL_NAME_MAX];         /* switch name, unique in the fabric */
	char data_addr[CTL_ADDR_MAX];    /* UDP 4791 data-plane address */
	char role_hint[16];              /* "leaf" | "spine" | "" */
	uint32_t max_trees, used_trees;
	uint32_t max_slots, used_slots;  /* total slot budget across trees */
	uint32_t max_slot_bytes;
	unsigned max_bsl_bits;
	uint32_t dtype_mask, op_mask;
	struct ctl_link *links; /* owned */
	size_t nlinks;
};
void ctl_caps_free(struct ctl_caps *c);

/* Per-tree statistics (draft §3.2), from the switch's operational state. */
struct ctl_tree_stats {
	uint16_t id;
	uint64_t rx_pkts, tx_pkts, rx_bytes, tx_bytes;
	uint64_t aggregations, duplicates, results_resent, drops;
};

struct ctl_conn;
/* target: "unix:/path/to/socket" or "ssh://user@host:port" (SSH public-key authentication with
 * the private key at key_path; the host key is checked against known_hosts when non-NULL,
 * otherwise accepted and logged). */
int ctl_connect(const char *target, const char *key_path, const char *known_hosts,
		struct ctl_conn **out);
/* The same with every wait bounded by timeout_ms (0: 5 s to send, 15 s for a reply): the
 * connect (UNIX: until the switch's hello; SSH: each libssh step, whole seconds) and each
 * request. A switch that stops answering costs at most that per call. */
int ctl_connect_timeout(const char *target, const char *key_path, const char *known_hosts,
			unsigned timeout_ms, struct ctl_conn **out);
void ctl_disconnect(struct ctl_conn *c);
const char *ctl_conn_error(const struct ctl_conn *c);
/* true once a request failed in transport (timeout, reset, garbled reply): every later
 * request fails with -ENOTCONN; disconnect and connect again. An rpc-error reply (a refused
 * edit) does not break the connection. */
bool ctl_conn_broken(const struct ctl_conn *c);

int ctl_get_caps(struct ctl_conn *c, struct ctl_caps *out);
/* All trees in the running datastore; *out owned by the caller (free each, then the array). */
int ctl_get_trees(struct ctl_conn *c, struct ctl_tree **out, size_t *n);
/* Create or replace tree t->id (edit-config merge/replace on running). The switch validates
 * before applying: on -EINVAL nothing changed and ctl_conn_error() says why. */
int ctl_put_tree(struct ctl_conn *c, const struct ctl_tree *t);
int ctl_delete_tree(struct ctl_conn *c, uint16_t tree_id);
int ctl_get_tree_stats(struct ctl_conn *c, struct ctl_tree_stats **out, size_t *n);

#endif
