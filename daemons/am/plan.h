/* inca-am planner: the pure part of group establishment (draft-liu §3.1, §4; draft-song §2).
 * From a view of the switches (capabilities, free resources, links) and the members of a group
 * it picks the root, the single- or multi-level shape, slots, BSL and MTU, and produces the
 * per-switch tree configuration (A-BM = members + child entries, BIFT) in push order.
 * No I/O, no clock, no allocation beyond the plan itself: unit-tested in plan_test.c. */
#ifndef INCA_AM_PLAN_H
#define INCA_AM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl/ctl.h"

enum am_role { AM_ROLE_UNKNOWN = 0, AM_ROLE_LEAF, AM_ROLE_SPINE };

/* One switch as the planner sees it (all borrowed). */
struct am_sw_view {
	const char *name;
	const char *data_addr;  /* "ip:port" of its data plane */
	enum am_role role;
	bool up;
	uint32_t free_slots, free_trees; /* what this AM may still allocate there */
	uint32_t max_slot_bytes;         /* 0: 4096 */
	unsigned max_bsl_bits;           /* 0: 4096 */
	uint32_t dtype_mask, op_mask;    /* 0: everything */
	const struct ctl_link *links;
	size_t nlinks;
};

/* One member (client) of the group. */
struct am_mem_view {
	uint16_t bfr_id;       /* rank + 1 */
	const char *data_addr; /* client data-plane "ip:port" */
	uint32_t qpn;          /* client QPN (already defaulted by the caller) */
	int attach;            /* index of its leaf switch in the view, -1 unknown */
};

struct am_plan_req {
	uint16_t tree_id;
	uint32_t key;
	uint8_t auth_key[WIRE_AUTH_KEY_LEN]; /* data-plane group key, the same on every switch */
	uint32_t auth_key_id;                /* nonzero */
	uint16_t slots_wanted, slots_min;
	uint32_t dtype_need, op_need; /* capability bits every tree switch must have (0: none) */
	uint16_t mtu_max;             /* 0: 4096 */
	bool deterministic;           /* switches add in BFR-id order (a member asked) */
};

struct am_plan_sw {
	int sw;              /* index in the switch view */
	int parent;          /* index in the switch view, -1 for the root */
	struct ctl_tree tree; /* owned member/child arrays */
};

struct am_plan {
	bool ok;
	char reason[256];    /* why not, when !ok */
	bool multi_level;
	int root;            /* switch view index */
	size_t nsw;
	struct am_plan_sw *sws; /* push order: children first, the root last */
	int *send_sw;        /* per member: the switch it sends to (view index) */
	uint16_t slots;
	unsigned bsl_bits;
	uint16_t mtu;
	uint32_t slot_bytes;
};

/* Switch that shows the client among its link peers (peer == host name, or the peer address's
 * IP == the client's data IP); leaves preferred. -1 if none. */
int am_attach_find(const struct am_sw_view *sw, size_t nsw, const char *host,
		   const char *data_addr);
/* a and b have a usable link: at least one side lists the other as a peer, and every listed
 * link between them on a side that lists one is not all down. */
bool am_connected(const struct am_sw_view *a, const struct am_sw_view *b);

/* Plan a group. Returns 0 (out->ok says whether a tree was found; out->reason when not) or
 * -ENOMEM/-EINVAL. *out is owned by the caller: am_plan_free. */
int am_plan_build(const struct am_sw_view *sw, size_t nsw, const struct am_mem_view *mem,
		  size_t nmem, const struct am_plan_req *req, struct am_plan *out);
void am_plan_free(struct am_plan *p);

/* Index of a switch in the plan's sws, -1 if not in the tree. */
int am_plan_find(const struct am_plan *p, int sw);

#endif
