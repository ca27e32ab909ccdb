/* lib/agg: the pure aggregation engine shared by inca-switch and the simulator.
 * Decoded packets in, actions (packets to send) out: no I/O, no clock, no threads, no globals.
 * Also the reduce kernels (agg_reduce), used by the engine and by libinca's host algorithms. */
#ifndef INCA_AGG_H
#define INCA_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inca/inca.h"
#include "wire/wire.h"

/* ---------------------------------------------------------------- reduce kernels */

/* dst[i] = dst[i] OP src[i] for i < count. dst and src may be equal but must not otherwise
 * overlap. fp16/bf16: each step computes in fp32 and rounds back to nearest-even.
 * Returns 0, or -EINVAL for an invalid type/op pair (see inca_op_valid). Vectorised where the
 * compiler can; no allocation. */
int agg_reduce(void *dst, const void *src, size_t count, enum inca_dtype dt, enum inca_op op);

/* fp16 / bf16 conversions used by the kernels (round to nearest even, NaN preserved). */
float agg_fp16_to_fp32(uint16_t h);
uint16_t agg_fp32_to_fp16(float f);
float agg_bf16_to_fp32(uint16_t h);
uint16_t agg_fp32_to_bf16(float f);

/* ---------------------------------------------------------------- engine */

/* Neighbour ids are opaque to the engine: the caller maps them to addresses / QPs. */
#define AGG_NBR_NONE UINT32_MAX

/* One BIER BIFT entry: the BFR-id at bit position bp is reached through nbr; fbm is the
 * forwarding bit mask (all bit positions reached through the same neighbour), bsl/8 bytes,
 * wire order. Members attached directly have fbm = just their own bit. */
struct agg_bift_entry {
	unsigned bp;
	uint32_t nbr;
	const uint8_t *fbm; /* borrowed during agg_tree_create, copied */
};

struct agg_tree_cfg {
	uint16_t tree_id;
	uint32_t rkey;       /* packets with another R_Key are dropped (AGG_DROP_KEY) */
	uint16_t nslots;     /* slot pool size, 1..65535 (the draft's example: 256) */
	uint32_t slot_bytes; /* largest data per packet, 1..4096 */
	unsigned bsl_bits;   /* 64..4096 */
	uint8_t si;
	const uint8_t *abm;  /* A-BM, bsl/8 bytes, wire order; copied */
	bool root;           /* root: disseminate results; else send aggregates to parent_nbr */
	uint32_t parent_nbr; /* toward the root (ignored at the root) */
	uint16_t own_bfr_id; /* sender BFR-id this switch puts in upward aggregates (may be 0) */
	size_t nbift;
	const struct agg_bift_entry *bift; /* copied */
	bool deterministic; /* reduce in bit-position (rank) order: bitwise reproducible */
	uint32_t dtype_mask; /* 1u << dtype allowed; 0 = all */
	uint32_t op_mask;    /* 1u << op allowed; 0 = all */
	bool check_sender;   /* drop a packet whose ingress nbr is not the sender's BIFT nbr */
	/* Slot sharding for run-to-completion threads: this instance owns the slots of the
	 * blocks (slot / WIRE_SLOT_BLOCK) with block % nshards == shard and allocates only those
	 * (others: AGG_DROP_SLOT). nshards 0 or 1: all slots. */
	uint16_t shard, nshards;
	/* P_Key of the tree's QPs: packets whose P_Key does not match it by the IBTA rule
	 * (wire_pkey_match) are dropped (AGG_DROP_PKEY); sends carry it. 0 = 0xFFFF. */
	uint16_t pkey;
	/* Sub-trees of child switches whose aggregates reach this switch although its BIFT does
	 * not route their results through them (results go to the members directly). A child
	 * switch's aggregate must carry exactly its sub-tree: the BIFT F-BM of its lowest bit's
	 * entry, or one of these sets (bsl/8 bytes each, wire order; copied). */
	size_t nupsets;
	const uint8_t *const *upsets;
};

/* Verdicts of agg_tree_input. Values >= AGG_DROP_FIRST are drops, one counter each. */
enum agg_verdict {
	AGG_ABSORBED = 0,  /* contribution added, slot not complete yet */
	AGG_COMPLETED,     /* slot completed: result (root) or aggregate (non-root) emitted */
	AGG_DUP_RESENT,    /* duplicate of a completed round: stored result re-sent */
	AGG_DUP_UP_RESENT, /* duplicate at a non-root whose aggregate went up: aggregate re-sent */
	AGG_DUP_IGNORED,   /* duplicate of a round still collecting: nothing to do */
	AGG_FORWARDED,     /* P-BM AND A-BM empty: forwarded unchanged toward the root */
	AGG_RESULT_DOWN,   /* result from the parent stored and replicated down */
	AGG_NACK_DOWN,     /* repair notice from the parent: aggregate re-sent up, or the
			    * members still missing noticed, or nothing left to repair */
	AGG_DROP_FIRST,
	AGG_DROP_KEY = AGG_DROP_FIRST, /* wrong R_Key */
	AGG_DROP_TREE,        /* tree id does not match */
	AGG_DROP_SLOT,        /* slot >= nslots */
	AGG_DROP_STALE,       /* round before the slot's round window */
	AGG_DROP_FUTURE,      /* round after the slot's round window */
	AGG_DROP_MISMATCH,    /* dtype/op/count/va/coll differs from the round's first packet */
	AGG_DROP_UNSUPPORTED, /* dtype/op not enabled on this tree */
	AGG_DROP_TOO_BIG,     /* data longer than slot_bytes */
	AGG_DROP_BITMAP,      /* P-BM not exactly the set its sender speaks for, bad BSL/SI */
	AGG_DROP_SENDER,      /* ingress neighbour is not where the sender's bit lives */
	AGG_DROP_NO_ROUTE,    /* forward/result needed a route the tree does not have */
	AGG_DROP_EPOCH,       /* job epoch older than the tree's current one */
	AGG_DROP_PKEY,        /* BTH P_Key does not match the tree's P_Key */
	AGG_VERDICT_COUNT
};
const char *agg_verdict_name(enum agg_verdict v);

/* One packet to send. Header fields are ready for wire_encode_udp except the per-QP BTH
 * fields (dest_qp, psn), which the caller fills from nbr. `inca.bits` and `data` point into
 * engine-owned memory valid until the next agg_tree_input / agg_tree_destroy on this tree. */
struct agg_send {
	uint32_t nbr;
	struct wire_pkt pkt;
};

struct agg_tree_stats {
	uint64_t rx_pkts, rx_bytes;   /* packets given to agg_tree_input (data bytes) */
	uint64_t tx_pkts, tx_bytes;   /* agg_send emitted */
	uint64_t contributions;       /* contributions absorbed */
	uint64_t aggregations;        /* slot rounds completed here */
	uint64_t duplicates;          /* all duplicate contributions */
	uint64_t results_resent;      /* stored results / aggregates re-sent for duplicates */
	uint64_t forwarded;           /* packets forwarded toward the root */
	uint64_t results_down;        /* results received from the parent */
	uint64_t notices;             /* repair notices (WIRE_F_NACK packets) sent */
	uint64_t notices_limited;     /* repair notices not sent for lack of credit */
	uint64_t resends_limited;     /* duplicates of complete rounds not answered: the
				       * sender's re-send credit was spent */
	uint64_t epoch_resets;        /* newer job epochs that started the tree afresh */
	uint32_t epoch;               /* the tree's current job epoch (0: none seen) */
	uint64_t drops[AGG_VERDICT_COUNT]; /* indexed by drop verdict */
};

struct agg_tree;

/* Create a tree from cfg (copied). Allocates nslots * 2 versions of slot_bytes (and, in
 * deterministic mode, one buffer per A-BM member). Returns 0 or -EINVAL / -ENOMEM. */
int agg_tree_create(const struct agg_tree_cfg *cfg, struct agg_tree **out);
void agg_tree_destroy(struct agg_tree *t);

/* Upper bound on the sends one agg_tree_input can emit (distinct BIFT neighbours + 1). */
size_t agg_tree_max_sends(const struct agg_tree *t);

/* Feed one decoded packet that arrived from neighbour ingress_nbr (AGG_NBR_NONE if unknown).
 * Writes up to cap sends into out[] and their number into *nsent (cap must be at least
 * agg_tree_max_sends). Returns the verdict. The packet's pointers are only read during the
 * call. Single-threaded per tree; different trees may run on different threads. */
enum agg_verdict agg_tree_input(struct agg_tree *t, const struct wire_pkt *pkt, uint32_t ingress_nbr,
				struct agg_send *out, size_t cap, size_t *nsent);

/* The caller's clock (ns, any origin, never going back) for the packets fed from now on: it
 * paces result re-sends to a sender that has no re-send credit (docs/protocol.md "Result
 * re-send credit"). A tree never given a clock paces by counting duplicates alone. */
void agg_tree_clock(struct agg_tree *t, uint64_t now_ns);

void agg_tree_get_stats(const struct agg_tree *t, struct agg_tree_stats *out);
/* Rounds in progress here: slot versions collecting contributions, or (non-root) whose
 * aggregate went up and whose result has not come down yet. 0 when every round this tree saw
 * is complete: no packet is due soon (the switch's busy poll stops). A round abandoned by its
 * members (a dead rank) stays counted until its slot version is reused. O(1). */
size_t agg_tree_pending(const struct agg_tree *t);
const struct agg_tree_cfg *agg_tree_cfg(const struct agg_tree *t);

#endif
