/* inca-switch data plane internals shared by dataplane.c (the worker loop and the per-packet
 * step), dataplane_tree.c (the runtime trees built from the tree model, tree-set updates) and
 * dataplane_setup.c (I/O buffers, sockets, steering, create / destroy). Daemon-private. */
#ifndef INCA_SW_DATAPLANE_INT_H
#define INCA_SW_DATAPLANE_INT_H

#include "switch.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define SW_SOCKBUF_BYTES (32 << 20)
#define SW_RX_TIMEOUT_MS 50 /* how often an idle worker looks at stop / snapshot requests */
#define SW_RX_BUF_BYTES 8192 /* > WIRE_MAX_UDP_PAYLOAD: anything bigger is MSG_TRUNC */
/* Byte offset of the INCA slot field in the UDP payload: BTH + RETH + ImmDt + 6. The BPF
 * steering program and wire.h must agree on it. */
#define SW_SLOT_OFFSET (WIRE_ROCE_HDR_LEN + 6)

/* Receive buffers per recvmmsg: with GRO each holds up to 64 KiB of datagrams. */
#define SW_RX_GRO_BATCH 16

/* Slot numbers a worker's send queue can reference (the INCA slot field is 16 bits). */
#define SW_SLOTS 65536

struct sw_io {
	struct util_udprx *rx;
	/* flushed when the next packet's sends might not fit, and before the engine gets a
	 * packet of a slot whose memory queued sends reference (ref_bits) */
	struct util_udptx *tx;
	size_t tx_cap;
	struct agg_send *sends;
	struct util_udptx_stats tx_seen; /* tx stats already added to the worker's counters */
	/* Sends queued with their data by reference into engine memory (dataplane.c,
	 * sock_tx_send): the slots of that memory, as a bitmap over SW_SLOTS and as a list of
	 * the nref bits set (at most tx_cap), both cleared when the queue is flushed. */
	uint64_t *ref_bits;
	uint16_t *ref_list;
	size_t nref;
	/* Set by sw_handle_inca while it emits the sends of one input: whether their data may
	 * be referenced (the engine's verdict says where it lives) and the input's slot. */
	bool ref_ok;
	uint16_t ref_slot;
};

/* Neighbour hash (open addressing over ip:port), shared by the table builder and the
 * per-packet lookup; inline because it is on the hot path. */
static inline uint32_t sw_nbr_hash(uint32_t ip_be, uint16_t port_be, uint32_t mask)
{
	uint64_t k = ((uint64_t)ip_be << 16) | port_be;
	return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

/* Source address -> neighbour index, or UINT32_MAX. Read-only, any thread. */
static inline uint32_t sw_nbr_lookup(const struct sw_tree *t, const struct sockaddr_in *a)
{
	uint32_t h = sw_nbr_hash(a->sin_addr.s_addr, a->sin_port, t->hmask);

	for (;;) {
		uint32_t e = t->hash[h];
		if (!e)
			return UINT32_MAX;
		if (t->nbr[e - 1].addr.sin_addr.s_addr == a->sin_addr.s_addr &&
		    t->nbr[e - 1].addr.sin_port == a->sin_port)
			return e - 1;
		h = (h + 1) & t->hmask;
	}
}

/* dataplane_setup.c: a worker's I/O buffers (NULL on allocation failure). */
struct sw_io *sw_io_new(const struct sw_switch *sw, size_t max_sends, bool gso, bool gro);
void sw_io_free(struct sw_io *io);

/* dataplane_tree.c: a complete runtime tree (tables, engine shards, counters) from its
 * configuration; tree sets. */
int sw_tree_new(const struct ctl_tree *ct, unsigned nworkers, struct sw_tree **out, char *err,
		size_t cap);
struct sw_treeset *sw_treeset_alloc(size_t n);
void sw_treeset_add(struct sw_treeset *s, struct sw_tree *t);
void sw_treeset_free(struct sw_treeset *s, bool free_trees);

/* dataplane_tree.c: wake every worker blocked in its receive call (it passes its quiescent
 * point at once). */
void sw_wake_workers(struct sw_switch *sw);

#endif
