/* inca-switch data plane: builds the per-tree runtime (neighbours, A-BM, BIFT, engine shards),
 * the SO_REUSEPORT sockets with their classic-BPF slot steering, and runs the run-to-completion
 * worker loop (recvmmsg -> decode -> authorise -> agg_tree_input -> encode -> sendmmsg).
 * The reflect mode shares this exact loop; only the per-packet step differs. */
#include "switch.h"

#include "wire/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/ip.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define SW_SOCKBUF_BYTES (32 << 20)
#define SW_RX_TIMEOUT_MS 50 /* how often an idle worker looks at stop / snapshot requests */
#define SW_RX_BUF_BYTES 8192 /* > WIRE_MAX_UDP_PAYLOAD: anything bigger is MSG_TRUNC */
/* Byte offset of the INCA slot field in the UDP payload: BTH + RETH + ImmDt + 6. The BPF
 * steering program and wire.h must agree on it. */
#define SW_SLOT_OFFSET (WIRE_ROCE_HDR_LEN + 6)

static const char *const sw_drop_names[SW_DROP_COUNT] = {
	[SW_DROP_UNKNOWN_TREE] = "unknown_tree",
	[SW_DROP_BAD_QPN] = "bad_qpn",
	[SW_DROP_UNKNOWN_SENDER] = "unknown_sender",
	[SW_DROP_NOT_INCA] = "not_inca",
	[SW_DROP_INJECTED_RX] = "injected_rx",
	[SW_DROP_INJECTED_TX] = "injected_tx",
	[SW_DROP_TX_ENCODE] = "tx_encode",
	[SW_DROP_TX_ERROR] = "tx_error",
	[SW_DROP_AUTH_MISSING] = "auth_missing",
	[SW_DROP_AUTH_KEY_ID] = "auth_key_id",
	[SW_DROP_AUTH_CTX] = "auth_ctx",
	[SW_DROP_AUTH] = "auth",
};

const char *sw_drop_name(enum sw_drop d)
{
	return (unsigned)d < SW_DROP_COUNT ? sw_drop_names[d] : "?";
}

/* ---------------------------------------------------------------- per-worker I/O buffers */

/* Receive buffers per recvmmsg: with GRO each holds up to 64 KiB of datagrams. */
#define SW_RX_GRO_BATCH 16

struct sw_io {
	struct util_udprx *rx;
	struct util_udptx *tx; /* flushed when the next packet's sends might not fit */
	size_t tx_cap;
	struct agg_send *sends;
	struct util_udptx_stats tx_seen; /* tx stats already added to the worker's counters */
};

static void io_free(struct sw_io *io)
{
	if (!io)
		return;
	util_udprx_destroy(io->rx);
	util_udptx_destroy(io->tx);
	free(io->sends);
	free(io);
}

/* A datagram of a GSO send the kernel refused goes out alone, with IPv4 ID 0: recompute its
 * ICRC for that ID so it stays a valid RoCEv2 packet on the wire. */
static void restamp_id0(void *arg, uint8_t *pkt, size_t len, const struct sockaddr_in *to,
			uint32_t src_ip_be)
{
	const struct sw_switch *sw = arg;
	struct wire_ipinfo ip = {
		.src_ip = ntohl(src_ip_be ? src_ip_be : sw->cfg->listen.sin_addr.s_addr),
		.dst_ip = ntohl(to->sin_addr.s_addr),
		.src_port = ntohs(sw->cfg->listen.sin_port),
		.dst_port = ntohs(to->sin_port),
	};
	wire_set_icrc(pkt, len, &ip);
}

static struct sw_io *io_new(const struct sw_switch *sw, size_t max_sends, bool gso, bool gro)
{
	struct sw_io *io = calloc(1, sizeof *io);

	if (!io)
		return NULL;
	io->tx_cap = 4 * SW_BATCH + max_sends;
	struct util_udptx_opts to = { .max_pkts = io->tx_cap, .pkt_cap = WIRE_MAX_UDP_PAYLOAD,
				      .gso = gso, .pktinfo = sw->listen_any,
				      .reid = restamp_id0, .reid_arg = (void *)sw };
	struct util_udprx_opts ro = { .batch = gro ? SW_RX_GRO_BATCH : SW_BATCH,
				      .pkt_cap = SW_RX_BUF_BYTES, .gro = gro, .pktinfo = true };
	io->sends = calloc(max_sends ? max_sends : 1, sizeof *io->sends);
	if (!io->sends || util_udptx_create(&to, &io->tx) < 0 ||
	    util_udprx_create(&ro, &io->rx) < 0) {
		io_free(io);
		return NULL;
	}
	return io;
}

/* ---------------------------------------------------------------- tree runtime */

static uint32_t nbr_hash(uint32_t ip_be, uint16_t port_be, uint32_t mask)
{
	uint64_t k = ((uint64_t)ip_be << 16) | port_be;
	return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

/* Source address -> neighbour index, or UINT32_MAX. Read-only, any thread. */
static uint32_t nbr_lookup(const struct sw_tree *t, const struct sockaddr_in *a)
{
	uint32_t h = nbr_hash(a->sin_addr.s_addr, a->sin_port, t->hmask);

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

/* Neighbours, hash, A-BM and BIFT of one tree (no engine yet). t->conf must be set. */
static int tree_build_tables(struct sw_tree *t, char *err, size_t cap)
{
	const struct sw_conf_tree *ct = &t->conf;
	size_t bsl_bytes = ct->bsl_bits / 8, nbift = 0, nbits = 0, k = 0;
	uint32_t hsize = 4;

	t->nnbr = (uint32_t)(ct->nmembers + ct->nchildren + (ct->has_parent ? 1 : 0));
	for (size_t i = 0; i < ct->nchildren; i++)
		nbits += ct->children[i].nbfr;
	nbits += ct->nmembers;
	while (hsize < 2 * t->nnbr)
		hsize <<= 1;
	t->hmask = hsize - 1;
	t->nbr = calloc(t->nnbr, sizeof *t->nbr);
	t->psn = aligned_alloc(64, t->nnbr * sizeof *t->psn);
	t->hash = calloc(hsize, sizeof *t->hash);
	t->abm = calloc(1, bsl_bytes);
	/* one F-BM per member, one per child */
	t->fbm = calloc(ct->nmembers + ct->nchildren + 1, bsl_bytes);
	t->bift = calloc(nbits + 1, sizeof *t->bift);
	if (!t->nbr || !t->psn || !t->hash || !t->abm || !t->fbm || !t->bift) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->nnbr; i++) {
		atomic_init(&t->psn[i].tx_next, 0);
		atomic_init(&t->psn[i].rx_next, UINT32_MAX);
	}
	for (size_t i = 0; i < ct->nmembers; i++, k++) {
		const struct sw_conf_member *m = &ct->members[i];
		unsigned bp = wire_bier_bp(m->bfr_id, ct->bsl_bits, ct->si);
		uint8_t *fbm = t->fbm + k * bsl_bytes;

		t->nbr[k] = (struct sw_nbr){ SW_NBR_MEMBER, m->bfr_id, m->addr, m->qpn };
		if (!bp) {
			snprintf(err, cap, "tree %u: BFR-id %u not in si %u", ct->id, m->bfr_id, ct->si);
			return -EINVAL;
		}
		wire_bier_set(t->abm, bsl_bytes, bp);
		wire_bier_set(fbm, bsl_bytes, bp);
		t->bift[nbift++] = (struct agg_bift_entry){ .bp = bp, .nbr = (uint32_t)k, .fbm = fbm };
	}
	for (size_t i = 0; i < ct->nchildren; i++, k++) {
		const struct sw_conf_child *c = &ct->children[i];
		uint8_t *fbm = t->fbm + k * bsl_bytes;

		t->nbr[k] = (struct sw_nbr){ SW_NBR_CHILD, 0, c->addr, c->qpn };
		for (size_t j = 0; j < c->nbfr; j++) {
			unsigned bp = wire_bier_bp(c->bfr_ids[j], ct->bsl_bits, ct->si);
			if (!bp) {
				snprintf(err, cap, "tree %u: BFR-id %u not in si %u", ct->id,
					 c->bfr_ids[j], ct->si);
				return -EINVAL;
			}
			wire_bier_set(t->abm, bsl_bytes, bp);
			wire_bier_set(fbm, bsl_bytes, bp);
		}
		for (size_t j = 0; j < c->nbfr; j++)
			t->bift[nbift++] = (struct agg_bift_entry){
				.bp = wire_bier_bp(c->bfr_ids[j], ct->bsl_bits, ct->si),
				.nbr = (uint32_t)k,
				.fbm = fbm,
			};
	}
	if (ct->has_parent) {
		t->nbr[k] = (struct sw_nbr){ SW_NBR_PARENT, 0, ct->parent, ct->parent_qpn };
		k++;
	}
	for (uint32_t i = 0; i < t->nnbr; i++) {
		uint32_t h = nbr_hash(t->nbr[i].addr.sin_addr.s_addr, t->nbr[i].addr.sin_port,
				      t->hmask);
		while (t->hash[h])
			h = (h + 1) & t->hmask;
		t->hash[h] = i + 1;
	}
	t->acfg = (struct agg_tree_cfg){
		.tree_id = ct->id,
		.rkey = ct->key,
		.nslots = ct->slots,
		.slot_bytes = ct->slot_bytes,
		.bsl_bits = ct->bsl_bits,
		.si = ct->si,
		.abm = t->abm,
		.root = ct->root,
		.parent_nbr = ct->has_parent ? t->nnbr - 1 : AGG_NBR_NONE,
		.own_bfr_id = ct->bfr_id,
		.nbift = nbift,
		.bift = t->bift,
		.deterministic = ct->deterministic,
		.check_sender = ct->check_sender,
		.pkey = ct->pkey,
		.dtype_mask = ct->dtype_mask,
		.op_mask = ct->op_mask,
	};
	t->nbift = nbift;
	return 0;
}

static void tree_free(struct sw_tree *t)
{
	if (!t)
		return;
	for (unsigned i = 0; t->w && i < t->nworkers; i++) {
		agg_tree_destroy(t->w[i].agg);
		wire_mac_free(t->w[i].mac);
		free(t->w[i].qp);
		free(t->w[i].snap_qp);
	}
	free(t->w);
	sw_conf_tree_free(&t->conf);
	free(t->nbr);
	free(t->psn);
	free(t->hash);
	free(t->abm);
	free(t->fbm);
	free(t->bift);
	free(t);
}

/* A complete runtime tree: tables plus one engine shard and QP counters per worker. */
static int tree_new(const struct sw_conf_tree *ct, unsigned nworkers, struct sw_tree **out,
		    char *err, size_t cap)
{
	struct sw_tree *t = calloc(1, sizeof *t);
	int rc;

	if (!t) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	if (sw_conf_tree_copy(&t->conf, ct) < 0) {
		free(t);
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	rc = tree_build_tables(t, err, cap);
	if (rc < 0)
		goto fail;
	t->nworkers = nworkers;
	t->max_sends = 1;
	t->w = calloc(nworkers, sizeof *t->w);
	if (!t->w) {
		rc = -ENOMEM;
		snprintf(err, cap, "out of memory");
		goto fail;
	}
	for (unsigned wi = 0; wi < nworkers; wi++) {
		struct agg_tree_cfg tc = t->acfg;

		tc.shard = (uint16_t)wi;
		tc.nshards = (uint16_t)nworkers;
		t->w[wi].qp = calloc(t->nnbr ? t->nnbr : 1, sizeof *t->w[wi].qp);
		t->w[wi].snap_qp = calloc(t->nnbr ? t->nnbr : 1, sizeof *t->w[wi].snap_qp);
		if (!t->w[wi].qp || !t->w[wi].snap_qp) {
			rc = -ENOMEM;
			snprintf(err, cap, "out of memory");
			goto fail;
		}
		if (t->conf.auth && (rc = wire_mac_new(&t->w[wi].mac, t->conf.auth_key)) < 0) {
			snprintf(err, cap, "tree %u: MAC key setup failed: %s", tc.tree_id,
				 strerror(-rc));
			goto fail;
		}
		rc = agg_tree_create(&tc, &t->w[wi].agg);
		if (rc < 0) {
			snprintf(err, cap, "tree %u: engine refused the configuration: %s",
				 tc.tree_id, strerror(-rc));
			goto fail;
		}
		if (agg_tree_max_sends(t->w[wi].agg) > t->max_sends)
			t->max_sends = agg_tree_max_sends(t->w[wi].agg);
	}
	atomic_init(&t->auth_ctr, wire_auth_ctr_start());
	*out = t;
	return 0;
fail:
	tree_free(t);
	return rc < 0 ? rc : -EINVAL;
}

static void treeset_free(struct sw_treeset *s, bool free_trees)
{
	if (!s)
		return;
	for (size_t i = 0; free_trees && i < s->ntrees; i++)
		tree_free(s->trees[i]);
	free(s->trees);
	free(s->index);
	free(s);
}

static struct sw_treeset *treeset_alloc(size_t n)
{
	struct sw_treeset *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->trees = calloc(n ? n : 1, sizeof *s->trees);
	s->index = malloc(65536 * sizeof *s->index);
	if (!s->trees || !s->index) {
		treeset_free(s, false);
		return NULL;
	}
	memset(s->index, 0xff, 65536 * sizeof *s->index);
	s->max_sends = 1;
	return s;
}

static void treeset_add(struct sw_treeset *s, struct sw_tree *t)
{
	s->index[t->conf.id] = (uint16_t)s->ntrees;
	s->trees[s->ntrees++] = t;
	if (t->max_sends > s->max_sends)
		s->max_sends = t->max_sends;
}

/* ---------------------------------------------------------------- sockets */

static void set_buf(int fd, int force_opt, int opt, int bytes)
{
	/* SO_*BUFFORCE ignores net.core.[rw]mem_max but needs CAP_NET_ADMIN; fall back. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) < 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

static int open_socket(const struct sw_config *cfg, bool reuseport, char *err, size_t cap)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int one = 1, pmtu = IP_PMTUDISC_DO;
	char a[32];

	if (fd < 0) {
		snprintf(err, cap, "socket: %s", strerror(errno));
		return -errno;
	}
	if ((reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
	    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) < 0 ||
	    /* DF set and IPv4 ID 0 on every datagram: the ICRC covers the ID (FACTS.md). */
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) < 0) {
		int e = errno;
		snprintf(err, cap, "setsockopt: %s", strerror(e));
		close(fd);
		return -e;
	}
	set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, SW_SOCKBUF_BYTES);
	set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, SW_SOCKBUF_BYTES);
	if (bind(fd, (const struct sockaddr *)&cfg->listen, sizeof cfg->listen) < 0) {
		int e = errno;
		snprintf(err, cap, "bind %s: %s", util_format_addr(&cfg->listen, a, sizeof a),
			 strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/* Steer each datagram to the socket (= worker) owning its slot's block:
 * index = (slot / WIRE_SLOT_BLOCK) % n, the engine's shard rule. A GRO buffer is steered by its
 * first datagram; senders keep a GSO send inside one block. The kernel runs this with the UDP
 * payload at offset 0; a load past the end ends the program with 0. */
static int attach_steering(int fd, unsigned nthreads, char *err, size_t cap)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, SW_SLOT_OFFSET),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, WIRE_SLOT_BLOCK),
		BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, nthreads),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) < 0) {
		snprintf(err, cap, "SO_ATTACH_REUSEPORT_CBPF: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* ---------------------------------------------------------------- create / destroy */

int sw_switch_create(const struct sw_config *cfg, const struct sw_opts *o, struct sw_switch **out,
		     char *err, size_t cap)
{
	struct sw_switch *sw = calloc(1, sizeof *sw);
	struct sw_treeset *set;
	int rc = -ENOMEM;

	if (!sw) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	sw->cfg = cfg;
	sw->opts = *o;
	sw->listen_any = cfg->listen.sin_addr.s_addr == htonl(INADDR_ANY);
	sw->nworkers = cfg->threads;
	sw->start_ns = util_now_ns();
	pthread_mutex_init(&sw->ctl_lock, NULL);
	atomic_init(&sw->stop, false);
	atomic_init(&sw->snap_req, 0);
	atomic_init(&sw->epoch, 1);
	set = treeset_alloc(cfg->ntrees);
	atomic_init(&sw->set, set);
	sw->w = calloc(sw->nworkers, sizeof *sw->w);
	if (!set || !sw->w) {
		snprintf(err, cap, "out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < sw->nworkers; i++)
		sw->w[i].fd = sw->w[i].wake_fd = -1;
	for (size_t i = 0; i < cfg->ntrees; i++) {
		struct sw_tree *t;
		rc = tree_new(&cfg->trees[i], sw->nworkers, &t, err, cap);
		if (rc < 0)
			goto fail;
		treeset_add(set, t);
	}

	for (unsigned wi = 0; wi < sw->nworkers; wi++) {
		struct sw_worker *w = &sw->w[wi];

		w->sw = sw;
		w->idx = wi;
		atomic_init(&w->snap_ack, 0);
		atomic_init(&w->exited, false);
		atomic_init(&w->qs_epoch, 0);
		util_rng_seed(&w->rng, o->seed * 0x100000001b3ull + wi + 1);
		w->max_sends = set->max_sends;
		w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->wake_fd < 0) {
			rc = -errno;
			snprintf(err, cap, "eventfd: %s", strerror(errno));
			goto fail;
		}
	}
	/* AF_XDP (xdp.c) when asked and possible; otherwise the sockets. */
	if (o->xdp_ifname) {
		for (unsigned wi = 0; wi < sw->nworkers; wi++) {
			sw->w[wi].io = io_new(sw, sw->w[wi].max_sends, false, false);
			if (!sw->w[wi].io) {
				snprintf(err, cap, "out of memory");
				rc = -ENOMEM;
				goto fail;
			}
		}
		rc = sw_xdp_create(sw, err, cap);
		if (rc == 0) {
			*out = sw;
			return 0;
		}
		if (o->xdp_required)
			goto fail;
		snprintf(sw->xdp_fallback, sizeof sw->xdp_fallback, "%s", err);
		sw_log(0, "--xdp %s unavailable (%s): using UDP sockets", o->xdp_ifname, err);
		err[0] = 0;
		for (unsigned wi = 0; wi < sw->nworkers; wi++) {
			io_free(sw->w[wi].io);
			sw->w[wi].io = NULL;
		}
	}
	for (unsigned wi = 0; wi < sw->nworkers; wi++) {
		struct sw_worker *w = &sw->w[wi];

		/* Bind order = index in the reuseport group = what the BPF program returns. */
		rc = open_socket(cfg, sw->nworkers > 1, err, cap);
		if (rc < 0)
			goto fail;
		w->fd = rc;
		util_udp_offloads(w->fd, !o->no_gso, !o->no_gro, &w->gso, &w->gro);
		w->cnt.gso_on = w->gso;
		w->cnt.gro_on = w->gro;
		w->io = io_new(sw, w->max_sends, w->gso, w->gro);
		if (!w->io) {
			snprintf(err, cap, "out of memory");
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (sw->nworkers > 1) {
		rc = attach_steering(sw->w[0].fd, sw->nworkers, err, cap);
		if (rc < 0)
			goto fail;
	}
	*out = sw;
	return 0;
fail:
	sw_switch_destroy(sw);
	return rc < 0 ? rc : -EINVAL;
}

void sw_switch_destroy(struct sw_switch *sw)
{
	if (!sw)
		return;
	sw_xdp_destroy(sw);
	for (unsigned wi = 0; sw->w && wi < sw->nworkers; wi++) {
		struct sw_worker *w = &sw->w[wi];
		if (w->fd >= 0)
			close(w->fd);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		io_free(w->io);
	}
	treeset_free(atomic_load(&sw->set), true);
	pthread_mutex_destroy(&sw->ctl_lock);
	free(sw->w);
	free(sw);
}

/* ---------------------------------------------------------------- tree set updates */

void sw_switch_lock(struct sw_switch *sw)
{
	pthread_mutex_lock(&sw->ctl_lock);
}

void sw_switch_unlock(struct sw_switch *sw)
{
	pthread_mutex_unlock(&sw->ctl_lock);
}

const struct sw_treeset *sw_switch_trees(struct sw_switch *sw)
{
	return atomic_load_explicit(&sw->set, memory_order_acquire);
}

/* Make every running worker pass the top of its loop soon: one blocked waiting for traffic
 * would otherwise wait out SW_RX_TIMEOUT_MS (a tree push or a stats read through NETCONF
 * then took up to 50 ms). A worker that is busy just loops once more. */
static void wake_workers(struct sw_switch *sw)
{
	const uint64_t one = 1;

	for (unsigned i = 0; i < sw->nworkers; i++)
		if (sw->w[i].started && sw->w[i].wake_fd >= 0)
			(void)!write(sw->w[i].wake_fd, &one, sizeof one);
}

/* Grace period: every running worker must pass the top of its loop after the publication
 * (epoch e) before anything only the old set referenced may be freed. A worker passes it
 * within one batch once woken (and at least every SW_RX_TIMEOUT_MS anyway). */
static void wait_quiescent(struct sw_switch *sw, uint64_t e)
{
	wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct sw_worker *w = &sw->w[i];

		if (!w->started)
			continue;
		while (atomic_load(&w->qs_epoch) < e && !atomic_load(&w->exited)) {
			struct timespec ts = { 0, 200 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

int sw_switch_set_trees(struct sw_switch *sw, const struct sw_conf_tree *trees, size_t n,
			char *err, size_t cap)
{
	struct sw_treeset *old, *nset;
	bool *kept = NULL;
	int rc = 0;
	uint64_t e;

	sw_switch_lock(sw);
	old = atomic_load(&sw->set);
	nset = treeset_alloc(n);
	kept = calloc(old->ntrees ? old->ntrees : 1, sizeof *kept);
	if (!nset || !kept) {
		snprintf(err, cap, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		uint16_t oi = old->index[trees[i].id];
		struct sw_tree *t;

		if (nset->index[trees[i].id] != UINT16_MAX) {
			snprintf(err, cap, "tree %u given twice", trees[i].id);
			rc = -EINVAL;
			goto fail;
		}
		if (oi != UINT16_MAX && sw_conf_tree_equal(&old->trees[oi]->conf, &trees[i])) {
			kept[oi] = true; /* unchanged: keep engine state, PSNs, counters */
			treeset_add(nset, old->trees[oi]);
			continue;
		}
		rc = tree_new(&trees[i], sw->nworkers, &t, err, cap);
		if (rc < 0)
			goto fail;
		treeset_add(nset, t);
	}
	/* Publish; workers pick the new set up at their next batch. */
	atomic_store(&sw->set, nset);
	e = atomic_fetch_add(&sw->epoch, 1) + 1;
	wait_quiescent(sw, e);
	for (size_t i = 0; i < old->ntrees; i++)
		if (!kept[i])
			tree_free(old->trees[i]);
	treeset_free(old, false);
	free(kept);
	sw_switch_unlock(sw);
	return 0;
fail:
	/* Free only the trees built here (the kept ones belong to the old set). */
	for (size_t i = 0; nset && i < nset->ntrees; i++) {
		uint16_t oi = old->index[nset->trees[i]->conf.id];
		if (oi == UINT16_MAX || old->trees[oi] != nset->trees[i])
			tree_free(nset->trees[i]);
	}
	treeset_free(nset, false);
	free(kept);
	sw_switch_unlock(sw);
	return rc;
}

/* ---------------------------------------------------------------- hot path */

static bool inject_drop(struct sw_worker *w)
{
	return w->sw->opts.drop_rate > 0 && util_rng_double(&w->rng) < w->sw->opts.drop_rate;
}

static void flush_tx(struct sw_worker *w)
{
	struct sw_io *io = w->io;
	const struct util_udptx_stats *st = util_udptx_stats(io->tx);

	if (!util_udptx_queued(io->tx))
		return;
	int rc = util_udptx_flush(io->tx, w->fd, 0);
	if (rc < 0)
		sw_log(3, "worker %u: sendmmsg: %s", w->idx, strerror(-rc));
	w->cnt.tx_pkts += st->pkts - io->tx_seen.pkts;
	w->cnt.tx_bytes += st->bytes - io->tx_seen.bytes;
	w->cnt.tx_batches += st->syscalls - io->tx_seen.syscalls;
	w->cnt.tx_gso_sends += st->gso_sends - io->tx_seen.gso_sends;
	w->cnt.sw_drops[SW_DROP_TX_ERROR] += st->errors - io->tx_seen.errors;
	if (st->gso_failed != io->tx_seen.gso_failed) {
		sw_log(1, "worker %u: the kernel refused a GSO send: sending one by one", w->idx);
		w->gso = false;
		w->cnt.gso_on = 0;
	}
	io->tx_seen = *st;
}

/* Room for a datagram of len bytes to `to` (flushing first if the queue is full): where to
 * write it, and the IPv4 ID it will carry. src_ip (network order) is only used when listening
 * on the wildcard address, so the kernel sends from the address the ICRC was computed with. */
static uint8_t *reserve_tx(struct sw_worker *w, const struct sockaddr_in *to, uint32_t src_ip_be,
			   uint32_t tag, size_t len, uint16_t *ip_id)
{
	uint8_t *buf = util_udptx_add(w->io->tx, to, src_ip_be, tag, len, ip_id);

	if (!buf) {
		flush_tx(w);
		buf = util_udptx_add(w->io->tx, to, src_ip_be, tag, len, ip_id);
	}
	return buf;
}

static void drop_log(const struct sw_worker *w, const char *why, const struct sockaddr_in *from)
{
	char a[32];

	if (sw_verbosity >= 3)
		sw_log(3, "worker %u: drop %s from %s", w->idx, why,
		       util_format_addr(from, a, sizeof a));
}

/* Per neighbour receive accounting, including PSN continuity (UC: gaps are only counted). */
static void qp_rx(struct sw_worker *w, struct sw_tree *t, uint32_t nbr, uint32_t psn, size_t len)
{
	struct sw_qp_stats *q = &t->w[w->idx].qp[nbr];
	uint32_t expect = atomic_exchange_explicit(&t->psn[nbr].rx_next, (psn + 1) & 0xFFFFFF,
						   memory_order_relaxed);

	q->rx_pkts++;
	q->rx_bytes += len;
	if (expect != UINT32_MAX && expect != psn) {
		uint32_t d = (psn - expect) & 0xFFFFFF;
		if (d < 0x800000) {
			q->psn_gaps++;
			q->psn_lost += d;
		} else {
			q->psn_reorder++;
		}
	}
}

/* dcrc: CRC of the data shared by every copy of a replicated result (NULL: compute per copy). */
static void emit(struct sw_worker *w, struct sw_tree *t, struct agg_send *s, uint32_t src_ip_be,
		 const struct wire_dcrc *dcrc, struct sw_tx *tx)
{
	const struct sw_nbr *nb;
	struct wire_ipinfo ip;
	int len;

	if (s->nbr >= t->nnbr) {
		w->cnt.sw_drops[SW_DROP_TX_ENCODE]++;
		return;
	}
	nb = &t->nbr[s->nbr];
	s->pkt.bth.dest_qp = nb->qpn;
	s->pkt.bth.psn = atomic_fetch_add_explicit(&t->psn[s->nbr].tx_next, 1,
						   memory_order_relaxed) & 0xFFFFFF;
	ip = (struct wire_ipinfo){
		.src_ip = ntohl(src_ip_be),
		.dst_ip = ntohl(nb->addr.sin_addr.s_addr),
		.src_port = ntohs(w->sw->cfg->listen.sin_port),
		.dst_port = ntohs(nb->addr.sin_port),
		.ip_id = 0,
	};
	if (inject_drop(w)) {
		w->cnt.sw_drops[SW_DROP_INJECTED_TX]++;
		return;
	}
	len = tx->send(tx, nb, &s->pkt, &ip, dcrc);
	if (len < 0) {
		w->cnt.sw_drops[len == -EINVAL || len == -ENOSPC ? SW_DROP_TX_ENCODE
								 : SW_DROP_TX_ERROR]++;
		sw_log(2, "worker %u: tree %u: encode/queue failed: %d", w->idx, t->conf.id, len);
		return;
	}
	t->w[w->idx].qp[s->nbr].tx_pkts++;
	t->w[w->idx].qp[s->nbr].tx_bytes += (uint64_t)len;
}

/* The socket path's output: UDP payloads into the send queue (GSO batches per destination and
 * slot block), flushed after each receive batch. */
struct sock_tx {
	struct sw_tx tx;
	struct sw_worker *w;
};

static void sock_tx_reserve(struct sw_tx *tx, size_t n)
{
	struct sw_worker *w = ((struct sock_tx *)tx)->w;

	if (util_udptx_queued(w->io->tx) + n > w->io->tx_cap)
		flush_tx(w);
}

static int sock_tx_send(struct sw_tx *tx, const struct sw_nbr *nb, const struct wire_pkt *pkt,
			struct wire_ipinfo *ip, const struct wire_dcrc *dcrc)
{
	struct sw_worker *w = ((struct sock_tx *)tx)->w;
	size_t want = wire_pkt_udp_len(pkt);
	uint8_t *buf = want <= WIRE_MAX_UDP_PAYLOAD
			       ? reserve_tx(w, &nb->addr, htonl(ip->src_ip),
					    pkt->inca.slot / WIRE_SLOT_BLOCK, want, &ip->ip_id)
			       : NULL;
	int len = !buf ? -ENOSPC
		  : dcrc ? wire_encode_udp_dcrc(buf, want, pkt, ip, dcrc)
			 : wire_encode_udp(buf, want, pkt, ip);

	if (len != (int)want) {
		if (buf)
			util_udptx_cancel_last(w->io->tx);
		return len < 0 ? len : -EINVAL;
	}
	return len;
}

/* Authentication of a packet from neighbour nbr of a tree with auth: block present, the
 * tree's key id, the sender context of that neighbour (a member's BFR-id; a switch's
 * WIRE_AUTH_CTX_SWITCH | the BFR-id it sends with), then the MAC. Returns the drop reason,
 * SW_DROP_COUNT if the packet is authentic. */
static enum sw_drop auth_check(struct sw_worker *w, const struct sw_tree *t, uint32_t nbr,
			       const struct wire_pkt *pkt)
{
	const struct sw_nbr *nb = &t->nbr[nbr];

	if (!(pkt->inca.flags & WIRE_F_AUTH))
		return SW_DROP_AUTH_MISSING;
	if (pkt->auth.key_id != t->conf.auth_key_id)
		return SW_DROP_AUTH_KEY_ID;
	if (nb->kind == SW_NBR_MEMBER ? pkt->auth.ctx != nb->bfr_id
				      : pkt->auth.ctx != (WIRE_AUTH_CTX_SWITCH | pkt->inca.bfr_id))
		return SW_DROP_AUTH_CTX;
	if (wire_mac_verify(t->w[w->idx].mac, pkt) != 0)
		return SW_DROP_AUTH;
	return SW_DROP_COUNT;
}

/* Put an authentication block on every packet the engine emitted (tree with auth), or make
 * sure none carries one (tree without). The copies of one result or notice differ only in
 * what the MAC does not cover (BTH, bit-string), so consecutive copies with the same MAC
 * input share one nonce and one tag: one MAC per round, not per copy. */
static void auth_sign(struct sw_worker *w, struct sw_tree *t, struct agg_send *s, size_t n)
{
	uint8_t aad[2][WIRE_AUTH_AAD_MAX];
	size_t alen[2] = { 0, 0 };
	const struct wire_pkt *prev = NULL;

	for (size_t i = 0; i < n; i++) {
		struct wire_pkt *p = &s[i].pkt;
		uint8_t *cur = aad[i & 1];
		const uint8_t *last = aad[(i & 1) ^ 1];

		if (!t->conf.auth) {
			p->inca.flags &= (uint8_t)~WIRE_F_AUTH;
			p->inca.epoch = 0;
			continue;
		}
		p->inca.flags |= WIRE_F_AUTH;
		p->auth.key_id = t->conf.auth_key_id;
		p->auth.ctx = WIRE_AUTH_CTX_SWITCH | p->inca.bfr_id;
		/* Compare with the previous packet under its counter: equal input, same tag. */
		p->auth.ctr = prev ? prev->auth.ctr : 0;
		alen[i & 1] = wire_auth_aad(p, cur);
		if (prev && alen[i & 1] && alen[i & 1] == alen[(i & 1) ^ 1] &&
		    !memcmp(cur, last, alen[i & 1]) && p->data_len == prev->data_len &&
		    (p->data == prev->data || !memcmp(p->data, prev->data, p->data_len))) {
			memcpy(p->auth.tag, prev->auth.tag, WIRE_AUTH_TAG_LEN);
			continue;
		}
		p->auth.ctr = atomic_fetch_add_explicit(&t->auth_ctr, 1, memory_order_relaxed);
		alen[i & 1] = wire_auth_aad(p, cur);
		if (wire_mac_sign(t->w[w->idx].mac, p) != 0) {
			s[i].nbr = UINT32_MAX; /* emit counts it as tx_encode and sends nothing */
			continue;
		}
		prev = p;
	}
}

/* A UDP datagram's seg (struct sw_rx) is its index in its GRO buffer, the first guess of the
 * IPv4 ID the sender's kernel gave it (the ICRC covers the ID, which a UDP socket does not
 * show). A frame carries its ID. */
void sw_handle_inca(struct sw_worker *w, const struct sw_treeset *set, const struct sw_rx *rx,
		    struct sw_tx *tx)
{
	struct sw_switch *sw = w->sw;
	struct wire_pkt pkt;
	struct sockaddr_in fromf;
	const struct sockaddr_in *from = &rx->from;
	uint32_t dst_ip_be = rx->dst_ip_be;
	size_t len = rx->len;
	struct wire_ipinfo ip = {
		.src_ip = ntohl(from->sin_addr.s_addr),
		.dst_ip = ntohl(dst_ip_be),
		.src_port = ntohs(from->sin_port),
		.dst_port = ntohs(sw->cfg->listen.sin_port),
		.ip_id = rx->seg,
		.id_unseen = true,
	};
	enum wire_err e;
	struct sw_tree *t;
	uint16_t ti;
	uint32_t nbr, src_ip_be;
	size_t nsent = 0;
	enum agg_verdict v;

	if (rx->frame) {
		/* Every layer checked, the ICRC always (over the IPv4 ID the frame carries). */
		e = wire_decode_frame(rx->buf, rx->len, &pkt, &ip);
		fromf = (struct sockaddr_in){ .sin_family = AF_INET,
					      .sin_port = htons(ip.src_port),
					      .sin_addr.s_addr = htonl(ip.src_ip) };
		from = &fromf;
		dst_ip_be = htonl(ip.dst_ip);
		len = e == WIRE_OK ? wire_pkt_udp_len(&pkt) : 0;
	} else {
		/* The ICRC is checked below, once the packet is known to come from a neighbour of
		 * a tree without authentication (with it, the MAC supersedes the CRC). */
		e = wire_decode_udp(rx->buf, rx->len, &pkt, NULL);
	}
	if (e != WIRE_OK) {
		w->cnt.wire_drops[(unsigned)e < WIRE_E_COUNT_MAX_ ? e : WIRE_E_TRUNCATED]++;
		drop_log(w, wire_err_name(e), from);
		return;
	}
	ti = set->index[pkt.inca.tree_id];
	if (ti == UINT16_MAX) {
		w->cnt.sw_drops[SW_DROP_UNKNOWN_TREE]++;
		drop_log(w, "unknown_tree", from);
		return;
	}
	t = set->trees[ti];
	if (pkt.bth.dest_qp != t->conf.qpn) {
		w->cnt.sw_drops[SW_DROP_BAD_QPN]++;
		drop_log(w, "bad_qpn", from);
		return;
	}
	nbr = nbr_lookup(t, from);
	if (nbr == UINT32_MAX) {
		w->cnt.sw_drops[SW_DROP_UNKNOWN_SENDER]++;
		drop_log(w, "unknown_sender", from);
		return;
	}
	if (t->conf.auth) {
		enum sw_drop d = auth_check(w, t, nbr, &pkt);
		if (d != SW_DROP_COUNT) {
			w->cnt.sw_drops[d]++;
			drop_log(w, sw_drop_name(d), from);
			return;
		}
	} else if (!rx->frame && sw->cfg->check_icrc && !wire_icrc_check(&ip, rx->buf, rx->len)) {
		w->cnt.wire_drops[WIRE_E_ICRC]++;
		drop_log(w, wire_err_name(WIRE_E_ICRC), from);
		return;
	}
	qp_rx(w, t, nbr, pkt.bth.psn, len);
	if (tx->accepted)
		tx->accepted(tx, t, nbr, rx);
	tx->reserve(tx, w->max_sends);
	v = agg_tree_input(t->w[w->idx].agg, &pkt, nbr, w->io->sends, w->max_sends, &nsent);
	w->cnt.verdicts[(unsigned)v < AGG_VERDICT_COUNT ? v : AGG_DROP_FIRST]++;
	if (v >= AGG_DROP_FIRST)
		drop_log(w, agg_verdict_name(v), from);
	src_ip_be = sw->listen_any ? dst_ip_be : sw->cfg->listen.sin_addr.s_addr;
	if (nsent > w->max_sends)
		nsent = w->max_sends;
	/* A result replicated to several neighbours carries the same data in every copy: CRC the
	 * data once and let each copy pay only for its headers (wire_encode_udp_dcrc). */
	/* Header-only copies (per-chunk destinations, docs/protocol.md §4.1) carry no data and
	 * simply get their own (short) CRC. */
	struct wire_dcrc dcrc;
	const struct wire_dcrc *shared = NULL;
	const struct wire_pkt *p0 = NULL;
	size_t ndata = 0;
	for (size_t i = 0; i < nsent; i++) {
		const struct wire_pkt *p = &w->io->sends[i].pkt;
		if (!p->data_len)
			continue;
		if (!p0)
			p0 = p;
		else if (p->data != p0->data || p->data_len != p0->data_len)
			p0 = NULL, i = nsent; /* different data: no sharing */
		ndata++;
	}
	auth_sign(w, t, w->io->sends, nsent);
	if (p0 && ndata > 1 && p0->data_len >= 256 &&
	    wire_data_crc(&dcrc, p0->data, p0->data_len) == 0)
		shared = &dcrc;
	for (size_t i = 0; i < nsent; i++) {
		const struct wire_pkt *p = &w->io->sends[i].pkt;
		emit(w, t, &w->io->sends[i], src_ip_be,
		     shared && p->data_len == dcrc.len && p->data == p0->data ? shared : NULL, tx);
	}
}

/* The benchmark baseline: same sockets, steering and batching (GSO/GRO included), no decode:
 * each datagram is copied back to its sender as it came (its ICRC is not checked or redone). */
static void handle_reflect(struct sw_worker *w, uint8_t *buf, size_t len,
			   const struct sockaddr_in *from, uint32_t dst_ip_be)
{
	uint16_t id;
	uint8_t *out;

	if (len < WIRE_ROCE_HDR_LEN + WIRE_INCA_FIXED_LEN + 8 + WIRE_ICRC_LEN ||
	    buf[0] != WIRE_OPCODE_UC_WRITE_ONLY_IMM) {
		w->cnt.sw_drops[SW_DROP_NOT_INCA]++;
		return;
	}
	if (inject_drop(w)) {
		w->cnt.sw_drops[SW_DROP_INJECTED_TX]++;
		return;
	}
	/* Echoes leave in the shape of the aggregating path's results: GSO sends that never
	 * straddle a slot block (tag = the packet's slot / WIRE_SLOT_BLOCK), so the baseline gets
	 * no bigger sends than the switch can use. */
	uint32_t tag = (((uint32_t)buf[SW_SLOT_OFFSET] << 8) | buf[SW_SLOT_OFFSET + 1]) /
		       WIRE_SLOT_BLOCK;
	out = len <= WIRE_MAX_UDP_PAYLOAD ? reserve_tx(w, from, dst_ip_be, tag, len, &id) : NULL;
	if (!out) {
		w->cnt.sw_drops[SW_DROP_TX_ENCODE]++;
		return;
	}
	memcpy(out, buf, len);
	w->cnt.reflected++;
}

void sw_worker_take_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	w->snap_cnt = w->cnt;
	for (size_t i = 0; i < set->ntrees; i++) {
		struct sw_tree *t = set->trees[i];
		struct sw_tree_worker *tw = &t->w[w->idx];
		memcpy(tw->snap_qp, tw->qp, t->nnbr * sizeof *tw->qp);
		agg_tree_get_stats(tw->agg, &tw->snap);
	}
}

static void check_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	uint64_t req = atomic_load_explicit(&w->sw->snap_req, memory_order_acquire);

	if (req != w->snap_seen) {
		sw_worker_take_snapshot(w, set);
		w->snap_seen = req;
		atomic_store_explicit(&w->snap_ack, req, memory_order_release);
	}
}

/* A new tree set may need more sends per packet: grow this worker's buffers (nothing is
 * queued at the top of the loop, so they can simply be replaced). */
static void io_reserve(struct sw_worker *w, size_t max_sends)
{
	struct sw_io *nio;

	if (max_sends <= w->max_sends)
		return;
	nio = io_new(w->sw, max_sends, w->gso, w->gro);
	if (!nio) {
		sw_log(0, "worker %u: out of memory growing buffers", w->idx);
		return; /* keep the old ones; emit() clamps to w->max_sends */
	}
	io_free(w->io);
	w->io = nio;
	w->max_sends = max_sends;
}

/* True while a round on this worker's slots is under way (collecting, or waiting for the
 * result from the parent): its next packets are due within a round trip. Once every round is
 * complete the next packet only comes with the ranks' next call, and a spin until then would
 * just take a CPU from ranks that are between calls (barriers, computation). */
static bool worker_pending(const struct sw_worker *w, const struct sw_treeset *set)
{
	for (size_t i = 0; i < set->ntrees; i++) {
		const struct sw_tree *t = set->trees[i];
		if (w->idx < t->nworkers && t->w[w->idx].agg && agg_tree_pending(t->w[w->idx].agg))
			return true;
	}
	return false;
}

static void *worker_main(void *arg)
{
	struct sw_worker *w = arg;
	struct sw_switch *sw = w->sw;
	bool reflect = sw->opts.reflect;
	const uint64_t spin_ns = (uint64_t)sw->opts.busy_poll_us * 1000u;
	/* Busy-poll only under light traffic (latency-bound collectives): bulk traffic keeps the
	 * socket queue busy anyway, and spinning then takes CPU from the ranks and the kernel's
	 * forwarding on a shared machine. Light: at most SW_BUSY_POLL_MAX_BYTES_PER_MS received
	 * in the current and the previous millisecond. */
	uint64_t last_rx_ns = 0, win_start_ns = 0, win_bytes = 0, prev_win_bytes = 0;
	struct sock_tx stx = { { sock_tx_reserve, sock_tx_send, NULL }, w };

	sw_log(2, "worker %u: running on fd %d", w->idx, w->fd);
	while (!atomic_load_explicit(&sw->stop, memory_order_relaxed)) {
		const struct sw_treeset *set;
		struct sw_io *io;
		int n;

		/* Quiescent point: no tree of any set is referenced here. Announce the epoch seen,
		 * then load the set (seq_cst: a writer that waits for this epoch published its
		 * set before bumping it, so this load sees that set or a newer one). */
		atomic_store(&w->qs_epoch, atomic_load(&sw->epoch));
		set = atomic_load(&sw->set);
		io_reserve(w, set->max_sends);
		io = w->io;

		/* Busy-poll shortly after traffic; otherwise block for the first datagram (up to
		 * SW_RX_TIMEOUT_MS, or until woken). Either way take what is queued. */
		uint64_t idle_ns = spin_ns ? util_now_ns() - last_rx_ns : 0;
		if (spin_ns && idle_ns < spin_ns &&
		    win_bytes + prev_win_bytes <= SW_BUSY_POLL_MAX_BYTES_PER_MS &&
		    (reflect || idle_ns < spin_ns / SW_BUSY_POLL_IDLE_DIV || worker_pending(w, set))) {
			n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			if (n <= 0) {
				sched_yield();
				continue;
			}
		} else {
			/* Take what is queued; if nothing, sleep on the socket and the wake-up
			 * eventfd (SW_RX_TIMEOUT_MS at most). */
			n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			if (n == -EAGAIN) {
				struct pollfd pf[2] = { { .fd = w->fd, .events = POLLIN },
							{ .fd = w->wake_fd, .events = POLLIN } };
				int pr = poll(pf, 2, SW_RX_TIMEOUT_MS);
				uint64_t v;

				n = 0;
				if (pr > 0 && (pf[1].revents & POLLIN))
					(void)!read(w->wake_fd, &v, sizeof v);
				if (pr > 0 && (pf[0].revents & POLLIN))
					n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			}
		}
		if (n <= 0) {
			if (n < 0 && n != -EAGAIN) {
				sw_log(0, "worker %u: recvmmsg: %s", w->idx, strerror(-n));
				struct timespec ts = { 0, 10 * 1000 * 1000 };
				nanosleep(&ts, NULL); /* do not spin on a persistent error */
			}
			check_snapshot(w, set);
			continue;
		}
		if (spin_ns) {
			last_rx_ns = util_now_ns();
			if (last_rx_ns - win_start_ns >= 1000000u) {
				prev_win_bytes = last_rx_ns - win_start_ns < 2000000u ? win_bytes : 0;
				win_start_ns = last_rx_ns;
				win_bytes = 0;
			}
		}
		w->cnt.rx_batches++;
		struct util_udp_dgram d;
		while (util_udprx_next(io->rx, &d)) {
			w->cnt.rx_pkts++;
			w->cnt.rx_bytes += d.len;
			w->cnt.rx_coalesced += d.seg > 0;
			win_bytes += d.len;
			if (d.truncated) {
				w->cnt.wire_drops[WIRE_E_TOO_BIG]++;
				continue;
			}
			if (inject_drop(w)) {
				w->cnt.sw_drops[SW_DROP_INJECTED_RX]++;
				continue;
			}
			if (reflect)
				handle_reflect(w, d.data, d.len, &d.from, d.dst_ip_be);
			else
				sw_handle_inca(w, set,
					       &(struct sw_rx){ .buf = d.data, .len = d.len,
								.from = d.from,
								.dst_ip_be = d.dst_ip_be,
								.seg = d.seg },
					       &stx.tx);
		}
		flush_tx(w);
		check_snapshot(w, set);
	}
	flush_tx(w);
	atomic_store(&w->exited, true);
	sw_log(2, "worker %u: stopped", w->idx);
	return NULL;
}

int sw_switch_start(struct sw_switch *sw)
{
	for (unsigned i = 0; i < sw->nworkers; i++) {
		int rc = pthread_create(&sw->w[i].thread, NULL,
					sw->xdp ? sw_xdp_worker_main : worker_main, &sw->w[i]);
		if (rc) {
			sw_log(0, "pthread_create: %s", strerror(rc));
			sw_switch_stop(sw);
			return -rc;
		}
		sw->w[i].started = true;
	}
	return 0;
}

void sw_switch_stop(struct sw_switch *sw)
{
	atomic_store(&sw->stop, true);
	wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++)
		if (sw->w[i].started) {
			pthread_join(sw->w[i].thread, NULL);
			sw->w[i].started = false;
		}
}

void sw_switch_snapshot(struct sw_switch *sw, unsigned timeout_ms)
{
	uint64_t req = atomic_fetch_add_explicit(&sw->snap_req, 1, memory_order_acq_rel) + 1;
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct sw_worker *w = &sw->w[i];
		if (!w->started) {
			sw_worker_take_snapshot(w, atomic_load(&sw->set));
			continue;
		}
		while (atomic_load_explicit(&w->snap_ack, memory_order_acquire) < req &&
		       util_now_ns() < deadline) {
			struct timespec ts = { 0, 100 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* ---------------------------------------------------------------- hooks for xdp.c */

const struct sw_treeset *sw_worker_quiescent(struct sw_worker *w)
{
	const struct sw_treeset *set;

	atomic_store(&w->qs_epoch, atomic_load(&w->sw->epoch));
	set = atomic_load(&w->sw->set);
	io_reserve(w, set->max_sends);
	return set;
}

void sw_worker_poll_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	check_snapshot(w, set);
}

bool sw_worker_busy(const struct sw_worker *w, const struct sw_treeset *set)
{
	return worker_pending(w, set);
}

bool sw_worker_inject_drop(struct sw_worker *w)
{
	return inject_drop(w);
}

/* ---------------------------------------------------------------- logging */

int sw_verbosity;

UTIL_LOG_DEFINE(sw_log, sw_verbosity, "inca-switch", UTIL_LOG_TIME | UTIL_LOG_ERRTAG)
