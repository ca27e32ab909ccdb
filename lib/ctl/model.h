/* lib/ctl model: the one in-memory form of an aggregation tree's configuration on one switch
 * (the YANG list inca-switch/trees/tree), used by inca-switch (its config-file parser and its
 * NETCONF edits fill it; the engine's agg_tree_cfg is derived from it) and by inca-am (plan ->
 * model -> NETCONF). Also the switch capabilities and statistics the AM reads. Pure C (no
 * libyang): lib/ctl/tree_yang.c converts to and from YANG data. */
#ifndef INCA_CTL_MODEL_H
#define INCA_CTL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "wire/wire.h"

#define CTL_NAME_MAX 64
#define CTL_ADDR_MAX 64 /* "a.b.c.d:port" */
#define CTL_TREE_ERR_MAX 512

/* A client attached to a switch, as a tree member. */
struct ctl_member {
	uint16_t bfr_id;
	struct sockaddr_in addr; /* data-plane address of the client */
	uint32_t qpn;            /* the client's QP: DestQP of results sent to it */
	int line;                /* config-file line it was declared on (0: not from a file) */
};

/* A child switch of a tree and the BFR-ids it covers. */
struct ctl_child {
	struct sockaddr_in addr; /* data-plane address of the child switch */
	uint32_t qpn;            /* the child's QPN for this tree */
	uint16_t *bfr_ids;       /* owned, sorted, unique */
	size_t nbfr;
	int line;
};

/* The tree fields, in config-file key order. A bit per field in ctl_tree.given says it was set
 * explicitly (the validator needs it for key, qpn and the auth rules; the file parser for
 * duplicate keys). MEMBER and CHILD repeat and have no bit. */
enum ctl_tree_field {
	CTL_TF_KEY,
	CTL_TF_QPN,
	CTL_TF_SLOTS,
	CTL_TF_SLOT_BYTES,
	CTL_TF_BSL,
	CTL_TF_SI,
	CTL_TF_ROLE,
	CTL_TF_BFR_ID,
	CTL_TF_PARENT,
	CTL_TF_DETERMINISTIC,
	CTL_TF_CHECK_SENDER,
	CTL_TF_DTYPES,
	CTL_TF_OPS,
	CTL_TF_AUTH,
	CTL_TF_AUTH_KEY,
	CTL_TF_AUTH_KEY_ID,
	CTL_TF_PKEY,
	CTL_TF_MEMBER,
	CTL_TF_CHILD,
	CTL_TF_COUNT_
};
#define CTL_TF_BIT(f) (1u << (f))

/* One aggregation tree as configured on one switch. */
struct ctl_tree {
	uint16_t id;
	uint32_t key;        /* group R_Key */
	uint32_t qpn;        /* this switch's QPN for the tree (DestQP of packets it accepts) */
	uint16_t slots;
	uint32_t slot_bytes;
	unsigned bsl_bits;
	uint8_t si;
	bool root;
	uint16_t bfr_id;     /* own BFR-id, sender of upward aggregates (leaf) */
	bool has_parent;
	struct sockaddr_in parent;
	uint32_t parent_qpn;
	bool deterministic;
	bool check_sender;   /* engine check: ingress neighbour must own the sender's bits */
	uint16_t pkey;       /* P_Key of the tree's QPs (default 0xFFFF), IBTA match rule */
	/* Data-plane authentication (docs/protocol.md §14): true when the tree has a group key;
	 * every packet then carries an authentication block keyed by auth_key. Read back from a
	 * switch, auth_key is zeros (write-only there). */
	bool auth;
	uint8_t auth_key[WIRE_AUTH_KEY_LEN];
	uint32_t auth_key_id; /* nonzero when auth */
	uint32_t dtype_mask, op_mask; /* 1u << inca_dtype / inca_op accepted; 0 = all */
	struct ctl_member *members;   /* owned */
	size_t nmembers;
	struct ctl_child *children;   /* owned */
	size_t nchildren;
	int line;       /* config-file line of the tree block (0: not from a file) */
	uint32_t given; /* CTL_TF_BIT of every field set explicitly */
};

/* The defaults of a tree with this id (slots 256, slot_bytes 4096, bsl 64, root,
 * check_sender, pkey 0xFFFF; no members). Nothing to free yet. */
void ctl_tree_init(struct ctl_tree *t, uint16_t id);
/* Frees members/children, not t itself. NULL is fine. */
void ctl_tree_free(struct ctl_tree *t);
/* Deep copy into dst (overwritten, not freed first). 0 or -ENOMEM (dst then holds nothing). */
int ctl_tree_copy(struct ctl_tree *dst, const struct ctl_tree *src);
/* Same configuration (ignores where it came from: line, given). */
bool ctl_tree_equal(const struct ctl_tree *a, const struct ctl_tree *b);
/* Does the tree (directly or through a child) cover BFR-id k? */
bool ctl_tree_covers(const struct ctl_tree *t, uint16_t k);

/* Where a validation error is: the tree itself, members[index], children[index] or the
 * parent. */
enum ctl_tree_at { CTL_AT_TREE, CTL_AT_MEMBER, CTL_AT_CHILD, CTL_AT_PARENT };
struct ctl_tree_err {
	enum ctl_tree_at at;
	size_t index;
	char msg[CTL_TREE_ERR_MAX];
};
/* Fill *e with the location and the printf-formatted message; returns -EINVAL (for
 * `return ctl_tree_fail(...)` in the parsers and rules that report into a ctl_tree_err). */
int ctl_tree_fail(struct ctl_tree_err *e, enum ctl_tree_at at, size_t index, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

/* The semantic rules of a complete tree, the same for a config file and a NETCONF edit: the
 * group key is given; auth_key and auth_key_id go together, auth off excludes them, a tree
 * without a key is refused when auth_required (else it runs unauthenticated); role and parent
 * agree; at least one member or child; every BFR-id in the si's range and used once; every
 * neighbour at its own address. Fills the defaults that depend on other fields (qpn, auth).
 * 0, or -EINVAL with the message and its location in *e. */
int ctl_tree_finish(struct ctl_tree *t, bool auth_required, struct ctl_tree_err *e);

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

#endif
