/* inca-switch data plane set-up: the workers' I/O buffers, the SO_REUSEPORT sockets with their
 * classic-BPF slot steering, and creating / destroying the switch (threads are started and
 * stopped in dataplane.c). */
#include "dataplane_int.h"

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

/* ---------------------------------------------------------------- per-worker I/O buffers */

void sw_io_free(struct sw_io *io)
{
	if (!io)
		return;
	util_udprx_destroy(io->rx);
	util_udptx_destroy(io->tx);
	free(io->sends);
	free(io->ref_bits);
	free(io->ref_list);
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

struct sw_io *sw_io_new(const struct sw_switch *sw, size_t max_sends, bool gso, bool gro)
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
	io->ref_bits = calloc(SW_SLOTS / 64, sizeof *io->ref_bits);
	io->ref_list = calloc(io->tx_cap, sizeof *io->ref_list);
	if (!io->sends || !io->ref_bits || !io->ref_list || util_udptx_create(&to, &io->tx) < 0 ||
	    util_udprx_create(&ro, &io->rx) < 0) {
		sw_io_free(io);
		return NULL;
	}
	return io;
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
	set = sw_treeset_alloc(cfg->ntrees);
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
		rc = sw_tree_new(&cfg->trees[i], sw->nworkers, &t, err, cap);
		if (rc < 0)
			goto fail;
		sw_treeset_add(set, t);
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
			sw->w[wi].io = sw_io_new(sw, sw->w[wi].max_sends, false, false);
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
			sw_io_free(sw->w[wi].io);
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
		w->io = sw_io_new(sw, w->max_sends, w->gso, w->gro);
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
		sw_io_free(w->io);
	}
	sw_treeset_free(atomic_load(&sw->set), true);
	pthread_mutex_destroy(&sw->ctl_lock);
	free(sw->w);
	free(sw);
}

