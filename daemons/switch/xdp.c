/* inca-switch AF_XDP data path (docs/switch.md, "AF_XDP data path"): the daemon owns one
 * queue of an interface. An XDP program (xdp_redirect.bpf.c, embedded in the binary) hands
 * INCA frames (IPv4/UDP to the switch's address and port) to an AF_XDP socket and passes
 * everything else to the kernel. The worker runs the same per-packet step as the socket path
 * (sw_handle_inca, on whole Ethernet frames) and writes whole frames into the socket's TX ring.
 *
 * Neighbour MAC addresses: learned from every packet that passed the switch's checks (its
 * source MAC under its source IPv4 address); a neighbour not heard from yet is looked up in
 * the kernel's neighbour table of the interface (/proc/net/arp) and, if absent, the kernel is
 * asked to resolve it (RTM_NEWNEIGH with NTF_USE); packets to it are dropped until then
 * (counted as no_mac). Neighbours must be on the interface's link. */
#include "switch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SW_HAVE_XDP

int sw_xdp_create(struct sw_switch *sw, char *err, size_t cap)
{
	(void)sw;
	snprintf(err, cap, "AF_XDP support not built in (libxdp/libbpf/clang missing at build "
			   "time; scripts/deps.sh installs them)");
	return -EOPNOTSUPP;
}

void sw_xdp_destroy(struct sw_switch *sw)
{
	(void)sw;
}

void *sw_xdp_worker_main(void *arg)
{
	return arg;
}

void sw_xdp_stats_json(const struct sw_switch *sw, FILE *f)
{
	(void)sw;
	(void)f;
}

#else

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "xdp_redirect.bpf.h" /* generated: sw_xdp_bpf_obj[], sw_xdp_bpf_obj_len */

/* Not in every installed linux/if_xdp.h (both since Linux 6.6). */
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

#define XSK_FRAME 4096u                 /* UMEM chunk (the kernel's upper limit: a page) */
#define XSK_NFRAMES 8192u               /* 32 MiB of UMEM */
#define XSK_FILL_SIZE 4096u             /* chunks lent to the kernel for receiving */
#define XSK_RX_SIZE 4096u
#define XSK_TX_SIZE 2048u
#define XSK_COMP_SIZE 4096u
#define XSK_BATCH 64u
#define XSK_L2L3 (WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN)
/* Largest INCA frame (4096 B of IB payload): spans two chunks (multi-buffer). */
#define XSK_MAX_FRAME (XSK_L2L3 + WIRE_MAX_UDP_PAYLOAD)
#define XSK_MAC_SLOTS 1024u /* open-addressing table of neighbour MACs, per worker */
#define XSK_RESOLVE_RETRY_NS 100000000ull /* ask the kernel again at most every 100 ms */
#define XSK_POLL_MS 50

/* XDP-path counters of one worker (the snapshot protocol is the workers', see switch.h). */
struct xsk_counters {
	uint64_t rx_frames, rx_multibuf, rx_oversize;
	uint64_t tx_frames, tx_multibuf, tx_kicks, tx_ring_full;
	uint64_t no_mac, mac_learned, mac_from_kernel, resolve_requests;
};

struct mac_entry {
	uint32_t ip_be;    /* 0 = empty */
	bool valid;        /* mac known */
	uint8_t mac[6];
	uint64_t tried_ns; /* last kernel resolution request */
};

/* One AF_XDP socket with its own UMEM, used by one worker. */
struct sw_xsk {
	struct sw_tx tx; /* first member: the callbacks get &tx */
	struct sw_xdp *x;
	struct sw_worker *w;
	void *area;
	struct xsk_umem *umem;
	struct xsk_socket *sock;
	int fd;
	bool zerocopy, sg;
	struct xsk_ring_prod fq, txr;
	struct xsk_ring_cons cq, rxr;
	uint64_t *free;       /* chunks not lent to the kernel */
	uint32_t nfree;
	uint32_t outstanding; /* TX descriptors not completed yet */
	uint32_t gather_len;  /* a multi-buffer frame being collected */
	bool gathering, gather_bad;
	struct mac_entry *macs;
	struct xsk_counters cnt, snap;
	uint8_t gather[XSK_MAX_FRAME + 64];
	uint8_t enc[XSK_MAX_FRAME + 64];
};

struct sw_xdp {
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint32_t queue;
	uint32_t attach_flags; /* XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE */
	int link_fd;           /* the attachment: closing it (or exiting) detaches the program */
	uint8_t mac[6];
	uint32_t ip_be;
	struct bpf_object *obj;
	int prog_fd, xsks_fd, cfg_fd, cnt_fd;
	int nl_fd; /* rtnetlink, for neighbour resolution requests */
	unsigned nxsk;
	struct sw_xsk **xsk; /* one per worker */
};

/* Must match struct inca_xdp_cfg of xdp_redirect.bpf.c. */
struct xdp_prog_cfg {
	uint32_t ip_be;
	uint16_t port_be;
	uint16_t pad;
};

/* ---------------------------------------------------------------- libbpf messages */

static char libbpf_last[256]; /* last warning, quoted in setup errors */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (level == LIBBPF_DEBUG && sw_verbosity < 3)
		return 0;
	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	if (level == LIBBPF_WARN) { /* keep the first part of a long warning */
		size_t k = n < sizeof libbpf_last - 1 ? n : sizeof libbpf_last - 1;
		memcpy(libbpf_last, line, k);
		libbpf_last[k] = 0;
	}
	sw_log(2, "%s", line); /* libbpf prefixes its own messages */
	return 0;
}

/* ---------------------------------------------------------------- interface facts */

static int iface_facts(struct sw_xdp *x, uint32_t listen_ip_be, char *err, size_t cap)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(err, cap, "socket: %s", strerror(errno));
		return -errno;
	}
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", x->ifname);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		int e = errno;
		snprintf(err, cap, "%s: MAC address: %s", x->ifname, strerror(e));
		close(fd);
		return -e;
	}
	memcpy(x->mac, ifr.ifr_hwaddr.sa_data, 6);
	x->ip_be = listen_ip_be;
	if (!x->ip_be) {
		/* Listening on 0.0.0.0: the interface's (first) IPv4 address is the switch's. */
		memset(&ifr, 0, sizeof ifr);
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", x->ifname);
		ifr.ifr_addr.sa_family = AF_INET;
		if (ioctl(fd, SIOCGIFADDR, &ifr) < 0) {
			int e = errno;
			snprintf(err, cap, "%s has no IPv4 address (%s): give --listen IP",
				 x->ifname, strerror(e));
			close(fd);
			return -e;
		}
		x->ip_be = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
	}
	close(fd);
	return 0;
}

/* ---------------------------------------------------------------- neighbour MACs */

static struct mac_entry *mac_slot(struct sw_xsk *xs, uint32_t ip_be, bool insert)
{
	uint32_t h = (uint32_t)((ip_be * 0x9E3779B1u) >> 16) & (XSK_MAC_SLOTS - 1);

	for (uint32_t i = 0; i < XSK_MAC_SLOTS; i++, h = (h + 1) & (XSK_MAC_SLOTS - 1)) {
		struct mac_entry *e = &xs->macs[h];
		if (e->ip_be == ip_be)
			return e;
		if (!e->ip_be) {
			if (!insert)
				return NULL;
			e->ip_be = ip_be;
			return e;
		}
	}
	return NULL; /* full: only with more neighbours than slots */
}

/* The kernel's ARP entry for ip on our interface (complete entries only). */
static bool kernel_neigh(const struct sw_xdp *x, uint32_t ip_be, uint8_t mac[6])
{
	FILE *f = fopen("/proc/net/arp", "re");
	char line[256], ipbuf[64], hw[64], dev[64];
	unsigned type, flags, m[6];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof line, f)) {
		struct in_addr a;
		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", ipbuf, &type, &flags, hw, dev) != 5)
			continue;
		if (!(flags & 0x2) || strcmp(dev, x->ifname) || inet_pton(AF_INET, ipbuf, &a) != 1 ||
		    a.s_addr != ip_be)
			continue;
		if (sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6) {
			for (int i = 0; i < 6; i++)
				mac[i] = (uint8_t)m[i];
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Ask the kernel to resolve ip on our interface (RTM_NEWNEIGH + NTF_USE: the kernel sends
 * its ARP request; the reply reaches the kernel because the XDP program passes ARP). */
static void kernel_resolve(struct sw_xdp *x, uint32_t ip_be)
{
	struct {
		struct nlmsghdr nh;
		struct ndmsg nd;
		struct rtattr ra;
		uint32_t ip;
	} req;
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };

	if (x->nl_fd < 0)
		return;
	memset(&req, 0, sizeof req);
	req.nh.nlmsg_len = sizeof req;
	req.nh.nlmsg_type = RTM_NEWNEIGH;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE;
	req.nd.ndm_family = AF_INET;
	req.nd.ndm_ifindex = x->ifindex;
	req.nd.ndm_state = NUD_NONE;
	req.nd.ndm_flags = NTF_USE;
	req.ra.rta_type = NDA_DST;
	req.ra.rta_len = RTA_LENGTH(sizeof req.ip);
	req.ip = ip_be;
	(void)!sendto(x->nl_fd, &req, sizeof req, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
}

static const uint8_t *mac_for(struct sw_xsk *xs, uint32_t ip_be)
{
	struct mac_entry *e = mac_slot(xs, ip_be, true);
	uint64_t now;

	if (!e)
		return NULL;
	if (e->valid)
		return e->mac;
	if (kernel_neigh(xs->x, ip_be, e->mac)) {
		e->valid = true;
		xs->cnt.mac_from_kernel++;
		return e->mac;
	}
	now = util_now_ns();
	if (!e->tried_ns || now - e->tried_ns >= XSK_RESOLVE_RETRY_NS) {
		e->tried_ns = now;
		xs->cnt.resolve_requests++;
		kernel_resolve(xs->x, ip_be);
	}
	return NULL;
}

/* ---------------------------------------------------------------- TX */

static void reclaim(struct sw_xsk *xs)
{
	uint32_t idx, n = xsk_ring_cons__peek(&xs->cq, XSK_COMP_SIZE, &idx);

	for (uint32_t i = 0; i < n; i++)
		xs->free[xs->nfree++] = *xsk_ring_cons__comp_addr(&xs->cq, idx + i) &
					~(uint64_t)(XSK_FRAME - 1);
	if (n) {
		xsk_ring_cons__release(&xs->cq, n);
		xs->outstanding -= n;
	}
}

/* Make the kernel transmit what is in the TX ring (copy mode moves a bounded number of
 * descriptors per call, so call until the ring is drained or the kernel pushes back). */
static void kick(struct sw_xsk *xs)
{
	for (int tries = 0; xs->outstanding && tries < 64; tries++) {
		uint32_t before = xs->outstanding;
		if (sendto(xs->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
		    errno != EBUSY && errno != ENOBUFS && errno != EINTR) {
			sw_log(3, "xdp: tx kick: %s", strerror(errno));
			break;
		}
		xs->cnt.tx_kicks++;
		reclaim(xs);
		if (xs->outstanding == before && xsk_prod_nb_free(&xs->txr, XSK_TX_SIZE) ==
							     XSK_TX_SIZE)
			break; /* ring consumed, completions come later */
	}
}

static void xsk_tx_reserve(struct sw_tx *tx, size_t n)
{
	struct sw_xsk *xs = (struct sw_xsk *)tx;

	reclaim(xs);
	if (xs->nfree < 2 * n || xsk_prod_nb_free(&xs->txr, (uint32_t)(2 * n)) < 2 * n)
		kick(xs);
}

static int xsk_tx_send(struct sw_tx *tx, const struct sw_nbr *nb, const struct wire_pkt *pkt,
		       struct wire_ipinfo *ip, const struct wire_dcrc *dcrc)
{
	struct sw_xsk *xs = (struct sw_xsk *)tx;
	const uint8_t *dmac = mac_for(xs, nb->addr.sin_addr.s_addr);
	size_t flen = XSK_L2L3 + wire_pkt_udp_len(pkt);
	uint32_t nd = flen <= XSK_FRAME ? 1 : 2, idx;
	uint64_t a[2];
	uint8_t *out;
	int len;

	if (!dmac) {
		xs->cnt.no_mac++;
		return -EHOSTUNREACH;
	}
	if (nd == 2 && !xs->sg)
		return -EMSGSIZE;
	if (xs->nfree < nd)
		reclaim(xs);
	if (xs->nfree < nd) {
		kick(xs);
		if (xs->nfree < nd) {
			xs->cnt.tx_ring_full++;
			return -ENOBUFS;
		}
	}
	/* DF is set (an atomic datagram, RFC 6864): ID 0, which is what a receiver reading a UDP
	 * socket assumes first when it verifies the ICRC (it cannot see the ID). */
	ip->ip_id = 0;
	a[0] = xs->free[xs->nfree - 1];
	out = nd == 1 ? xsk_umem__get_data(xs->area, a[0]) : xs->enc;
	len = dcrc ? wire_encode_frame_dcrc(out, nd == 1 ? XSK_FRAME : sizeof xs->enc, dmac,
					    xs->x->mac, pkt, ip, dcrc)
		   : wire_encode_frame(out, nd == 1 ? XSK_FRAME : sizeof xs->enc, dmac, xs->x->mac,
				       pkt, ip);
	if (len < 0)
		return len;
	if (xsk_ring_prod__reserve(&xs->txr, nd, &idx) != nd) {
		kick(xs);
		if (xsk_ring_prod__reserve(&xs->txr, nd, &idx) != nd) {
			xs->cnt.tx_ring_full++;
			return -ENOBUFS;
		}
	}
	xs->nfree--;
	if (nd == 2) {
		a[1] = xs->free[--xs->nfree];
		memcpy(xsk_umem__get_data(xs->area, a[0]), xs->enc, XSK_FRAME);
		memcpy(xsk_umem__get_data(xs->area, a[1]), xs->enc + XSK_FRAME,
		       (size_t)len - XSK_FRAME);
		xs->cnt.tx_multibuf++;
	}
	for (uint32_t i = 0; i < nd; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&xs->txr, idx + i);
		d->addr = a[i];
		d->len = i + 1 < nd ? XSK_FRAME : (uint32_t)len - i * XSK_FRAME;
		d->options = i + 1 < nd ? XDP_PKT_CONTD : 0;
	}
	xsk_ring_prod__submit(&xs->txr, nd);
	xs->outstanding += nd;
	xs->cnt.tx_frames++;
	xs->w->cnt.tx_pkts++;
	xs->w->cnt.tx_bytes += (uint64_t)len - XSK_L2L3;
	return len - (int)XSK_L2L3;
}

/* A frame passed the checks: remember its sender's MAC under its source IPv4 address. */
static void xsk_accepted(struct sw_tx *tx, const struct sw_tree *t, uint32_t nbr,
			 const struct sw_rx *rx)
{
	struct sw_xsk *xs = (struct sw_xsk *)tx;
	uint32_t ip_be;
	struct mac_entry *e;

	(void)t;
	(void)nbr;
	if (!rx->frame || rx->len < XSK_L2L3)
		return;
	memcpy(&ip_be, rx->buf + WIRE_ETH_LEN + 12, 4);
	e = mac_slot(xs, ip_be, true);
	if (!e || (e->valid && !memcmp(e->mac, rx->buf + 6, 6)))
		return;
	memcpy(e->mac, rx->buf + 6, 6);
	e->valid = true;
	xs->cnt.mac_learned++;
}

/* ---------------------------------------------------------------- setup */

static void xsk_free(struct sw_xsk *xs)
{
	if (!xs)
		return;
	if (xs->sock)
		xsk_socket__delete(xs->sock);
	if (xs->umem)
		xsk_umem__delete(xs->umem);
	if (xs->area)
		munmap(xs->area, (size_t)XSK_NFRAMES * XSK_FRAME);
	free(xs->free);
	free(xs->macs);
	free(xs);
}

static int xsk_open(struct sw_xdp *x, struct sw_worker *w, uint32_t queue, int bind_mode,
		    struct sw_xsk **out, char *err, size_t cap)
{
	struct sw_xsk *xs = calloc(1, sizeof *xs);
	struct xsk_umem_config ucfg = {
		.fill_size = XSK_FILL_SIZE,
		.comp_size = XSK_COMP_SIZE,
		.frame_size = XSK_FRAME,
		.frame_headroom = 0,
		.flags = 0,
	};
	struct xdp_options opts;
	socklen_t olen = sizeof opts;
	uint32_t idx;
	int rc = -ENOMEM;

	if (!xs) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	xs->x = x;
	xs->w = w;
	xs->tx = (struct sw_tx){ xsk_tx_reserve, xsk_tx_send, xsk_accepted };
	xs->free = calloc(XSK_NFRAMES, sizeof *xs->free);
	xs->macs = calloc(XSK_MAC_SLOTS, sizeof *xs->macs);
	xs->area = mmap(NULL, (size_t)XSK_NFRAMES * XSK_FRAME, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (xs->area == MAP_FAILED)
		xs->area = NULL;
	if (!xs->free || !xs->macs || !xs->area) {
		snprintf(err, cap, "out of memory (UMEM %u MiB)", XSK_NFRAMES * XSK_FRAME >> 20);
		goto fail;
	}
	/* Multi-buffer first (frames above one chunk); without it (kernels before 6.6, drivers
	 * without support) frames are limited to one chunk. A failed bind leaves the UMEM's
	 * rings configured on its socket, so each attempt starts from a new UMEM. */
	for (int attempt = 0; attempt < 2; attempt++) {
		struct xsk_socket_config scfg = {
			.rx_size = XSK_RX_SIZE,
			.tx_size = XSK_TX_SIZE,
			.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
			.xdp_flags = 0,
			.bind_flags = (uint16_t)((attempt == 0 ? XDP_USE_SG : 0) |
						 (bind_mode == 1	 ? XDP_COPY
						  : bind_mode == 2 ? XDP_ZEROCOPY
								   : 0)),
		};
		rc = xsk_umem__create(&xs->umem, xs->area, (uint64_t)XSK_NFRAMES * XSK_FRAME, &xs->fq,
				      &xs->cq, &ucfg);
		if (rc < 0) {
			snprintf(err, cap, "AF_XDP UMEM: %s", strerror(-rc));
			goto fail;
		}
		rc = xsk_socket__create(&xs->sock, x->ifname, queue, xs->umem, &xs->rxr, &xs->txr,
					&scfg);
		if (rc == 0) {
			xs->sg = attempt == 0;
			break;
		}
		xsk_umem__delete(xs->umem);
		xs->umem = NULL;
		xs->sock = NULL;
		if (attempt == 1 || (rc != -EINVAL && rc != -EOPNOTSUPP)) {
			snprintf(err, cap, "AF_XDP socket on %s queue %u (%s mode): %s%s", x->ifname,
				 queue, bind_mode == 1 ? "copy" : bind_mode == 2 ? "zero-copy" : "any",
				 strerror(-rc),
				 rc == -EPERM ? " (needs root: CAP_NET_ADMIN and CAP_NET_RAW)"
				 : rc == -EBUSY ? " (another AF_XDP socket is bound to that queue)"
				 : rc == -EOPNOTSUPP && bind_mode == 2
				     ? " (the driver has no zero-copy support: --xdp-bind copy)"
				 : rc == -EINVAL ? " (no such queue?)"
						 : "");
			goto fail;
		}
		sw_log(1, "xdp: multi-buffer AF_XDP refused (%s): frames limited to %u bytes",
		       strerror(-rc), XSK_FRAME);
	}
	xs->fd = xsk_socket__fd(xs->sock);
	if (getsockopt(xs->fd, SOL_XDP, XDP_OPTIONS, &opts, &olen) == 0)
		xs->zerocopy = opts.flags & XDP_OPTIONS_ZEROCOPY;
	/* Lend XSK_FILL_SIZE chunks for receiving; the rest are for sending. */
	for (uint32_t i = 0; i < XSK_NFRAMES; i++)
		xs->free[xs->nfree++] = (uint64_t)(XSK_NFRAMES - 1 - i) * XSK_FRAME;
	if (xsk_ring_prod__reserve(&xs->fq, XSK_FILL_SIZE, &idx) != XSK_FILL_SIZE) {
		snprintf(err, cap, "AF_XDP fill ring: cannot reserve %u entries", XSK_FILL_SIZE);
		rc = -ENOSPC;
		goto fail;
	}
	for (uint32_t i = 0; i < XSK_FILL_SIZE; i++)
		*xsk_ring_prod__fill_addr(&xs->fq, idx + i) = xs->free[--xs->nfree];
	xsk_ring_prod__submit(&xs->fq, XSK_FILL_SIZE);
	*out = xs;
	return 0;
fail:
	xsk_free(xs);
	return rc < 0 ? rc : -ENOMEM;
}

int sw_xdp_create(struct sw_switch *sw, char *err, size_t cap)
{
	const struct sw_opts *o = &sw->opts;
	struct sw_xdp *x = calloc(1, sizeof *x);
	struct bpf_program *prog;
	struct xdp_prog_cfg pc;
	uint32_t zero = 0;
	int rc;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "inca_xdp");

	if (!x) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	x->prog_fd = x->xsks_fd = x->cfg_fd = x->cnt_fd = x->nl_fd = x->link_fd = -1;
	sw->xdp = x;
	libbpf_set_print(libbpf_print);
	libbpf_last[0] = 0;
	snprintf(x->ifname, sizeof x->ifname, "%s", o->xdp_ifname);
	x->queue = o->xdp_queue;
	x->attach_flags = o->xdp_skb_mode ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	x->ifindex = (int)if_nametoindex(x->ifname);
	if (!x->ifindex) {
		rc = -errno;
		snprintf(err, cap, "no interface %s: %s", x->ifname, strerror(errno));
		goto fail;
	}
	if (strlen(o->xdp_ifname) >= IF_NAMESIZE) {
		rc = -EINVAL;
		snprintf(err, cap, "interface name too long: %s", o->xdp_ifname);
		goto fail;
	}
	rc = iface_facts(x, sw->cfg->listen.sin_addr.s_addr, err, cap);
	if (rc < 0)
		goto fail;

	x->obj = bpf_object__open_mem(sw_xdp_bpf_obj, sw_xdp_bpf_obj_len, &oo);
	if (!x->obj) {
		rc = -errno;
		snprintf(err, cap, "XDP program: open: %s", strerror(errno));
		x->obj = NULL;
		goto fail;
	}
	rc = bpf_object__load(x->obj);
	if (rc < 0) {
		snprintf(err, cap, "XDP program: load: %s%s%s%s", strerror(-rc),
			 rc == -EPERM ? " (needs root: CAP_BPF and CAP_NET_ADMIN)" : "",
			 libbpf_last[0] ? ": " : "", libbpf_last);
		goto fail;
	}
	prog = bpf_object__find_program_by_name(x->obj, "inca_xdp_redirect");
	x->prog_fd = prog ? bpf_program__fd(prog) : -1;
	x->xsks_fd = bpf_object__find_map_fd_by_name(x->obj, "xsks");
	x->cfg_fd = bpf_object__find_map_fd_by_name(x->obj, "cfg");
	x->cnt_fd = bpf_object__find_map_fd_by_name(x->obj, "counters");
	if (x->prog_fd < 0 || x->xsks_fd < 0 || x->cfg_fd < 0 || x->cnt_fd < 0) {
		rc = -ENOENT;
		snprintf(err, cap, "XDP program: program or map missing from the object");
		goto fail;
	}
	pc = (struct xdp_prog_cfg){ x->ip_be, sw->cfg->listen.sin_port, 0 };
	if (bpf_map_update_elem(x->cfg_fd, &zero, &pc, BPF_ANY) < 0) {
		rc = -errno;
		snprintf(err, cap, "XDP program: config map: %s", strerror(errno));
		goto fail;
	}

	x->nxsk = sw->nworkers;
	x->xsk = calloc(x->nxsk, sizeof *x->xsk);
	if (!x->xsk) {
		rc = -ENOMEM;
		snprintf(err, cap, "out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < x->nxsk; i++) {
		rc = xsk_open(x, &sw->w[i], x->queue + i, o->xdp_bind, &x->xsk[i], err, cap);
		if (rc < 0)
			goto fail;
		rc = xsk_socket__update_xskmap(x->xsk[i]->sock, x->xsks_fd);
		if (rc < 0) {
			snprintf(err, cap, "XSK map: %s", strerror(-rc));
			goto fail;
		}
	}
	/* Attach last: the sockets are in the map when the first frame is redirected. A BPF link:
	 * the kernel detaches the program when the link's last descriptor closes, also when the
	 * process dies; it never replaces a program someone else attached (EBUSY). */
	LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = x->attach_flags);
	rc = bpf_link_create(x->prog_fd, x->ifindex, BPF_XDP, &lo);
	if (rc >= 0) {
		x->link_fd = rc;
		rc = 0;
	} else {
		rc = -errno;
	}
	if (rc < 0) {
		snprintf(err, cap, "attach XDP (%s mode) to %s: %s%s%s%s",
			 o->xdp_skb_mode ? "skb" : "native", x->ifname, strerror(-rc),
			 rc == -EBUSY || rc == -EEXIST ? " (another XDP program is attached)"
			 : rc == -EOPNOTSUPP && !o->xdp_skb_mode
			     ? " (driver has no native XDP: --xdp-mode skb)"
			 : rc == -EPERM ? " (needs root)"
					: "",
			 libbpf_last[0] ? ": " : "", libbpf_last);
		goto fail;
	}
	x->nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	for (unsigned i = 0; i < x->nxsk; i++)
		sw_log(1, "xdp: %s queue %u: %s XDP, AF_XDP %s%s, switch %s", x->ifname,
		       x->queue + i, o->xdp_skb_mode ? "skb" : "native",
		       x->xsk[i]->zerocopy ? "zero-copy" : "copy",
		       x->xsk[i]->sg ? " multi-buffer" : "", inet_ntoa((struct in_addr){ x->ip_be }));
	return 0;
fail:
	sw_xdp_destroy(sw);
	return rc < 0 ? rc : -EINVAL;
}

void sw_xdp_destroy(struct sw_switch *sw)
{
	struct sw_xdp *x = sw->xdp;

	if (!x)
		return;
	if (x->link_fd >= 0)
		close(x->link_fd); /* detaches the program */
	for (unsigned i = 0; x->xsk && i < x->nxsk; i++)
		xsk_free(x->xsk[i]);
	free(x->xsk);
	if (x->obj)
		bpf_object__close(x->obj);
	if (x->nl_fd >= 0)
		close(x->nl_fd);
	free(x);
	sw->xdp = NULL;
}

/* ---------------------------------------------------------------- worker */

/* One received frame (fragments already gathered). */
static void rx_frame(struct sw_xsk *xs, const struct sw_treeset *set, uint8_t *buf, size_t len)
{
	struct sw_worker *w = xs->w;

	w->cnt.rx_pkts++;
	w->cnt.rx_bytes += len > XSK_L2L3 ? len - XSK_L2L3 : 0;
	xs->cnt.rx_frames++;
	if (sw_worker_inject_drop(w)) {
		w->cnt.sw_drops[SW_DROP_INJECTED_RX]++;
		return;
	}
	sw_handle_inca(w, set, &(struct sw_rx){ .buf = buf, .len = len, .frame = true }, &xs->tx);
}

/* Take up to XSK_BATCH descriptors from the RX ring; returns how many. */
static uint32_t rx_batch(struct sw_xsk *xs, const struct sw_treeset *set)
{
	uint32_t idx, fidx, n = xsk_ring_cons__peek(&xs->rxr, XSK_BATCH, &idx);
	uint64_t addrs[XSK_BATCH];

	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&xs->rxr, idx + i);
		uint8_t *p = xsk_umem__get_data(xs->area, d->addr);
		bool more = d->options & XDP_PKT_CONTD;

		addrs[i] = d->addr & ~(uint64_t)(XSK_FRAME - 1);
		if (!xs->gathering && !more) {
			rx_frame(xs, set, p, d->len);
			continue;
		}
		if (!xs->gathering) {
			xs->gathering = true;
			xs->gather_bad = false;
			xs->gather_len = 0;
		}
		if (xs->gather_len + d->len > XSK_MAX_FRAME)
			xs->gather_bad = true;
		else
			memcpy(xs->gather + xs->gather_len, p, d->len);
		xs->gather_len += d->len;
		if (more)
			continue;
		xs->gathering = false;
		xs->cnt.rx_multibuf++;
		if (xs->gather_bad) {
			xs->cnt.rx_oversize++;
			xs->w->cnt.rx_pkts++;
			xs->w->cnt.wire_drops[WIRE_E_TOO_BIG]++;
			continue;
		}
		rx_frame(xs, set, xs->gather, xs->gather_len);
	}
	if (!n)
		return 0;
	xsk_ring_cons__release(&xs->rxr, n);
	/* Give the chunks back for receiving (the fill ring has room: it held them before). */
	if (xsk_ring_prod__reserve(&xs->fq, n, &fidx) == n) {
		for (uint32_t i = 0; i < n; i++)
			*xsk_ring_prod__fill_addr(&xs->fq, fidx + i) = addrs[i];
		xsk_ring_prod__submit(&xs->fq, n);
	} else {
		for (uint32_t i = 0; i < n; i++)
			xs->free[xs->nfree++] = addrs[i];
	}
	xs->w->cnt.rx_batches++;
	xs->w->rx_ns = util_now_ns();
	return n;
}

void *sw_xdp_worker_main(void *arg)
{
	struct sw_worker *w = arg;
	struct sw_switch *sw = w->sw;
	struct sw_xsk *xs = sw->xdp->xsk[w->idx];
	uint64_t last_rx_ns = 0;

	sw_worker_pin(w);
	sw_log(2, "worker %u: AF_XDP on %s queue %u", w->idx, sw->xdp->ifname,
	       sw->xdp->queue + w->idx);
	while (!atomic_load_explicit(&sw->stop, memory_order_relaxed)) {
		const struct sw_treeset *set = sw_worker_quiescent(w);
		uint32_t n = rx_batch(xs, set);

		if (xs->outstanding) {
			kick(xs);
			w->cnt.tx_batches++;
		}
		if (atomic_load_explicit(&sw->snap_req, memory_order_acquire) != w->snap_seen)
			xs->snap = xs->cnt; /* published by the acknowledgement below */
		sw_worker_poll_snapshot(w, set);
		if (n) {
			last_rx_ns = util_now_ns();
			continue;
		}
		/* Nothing received: spin a little after traffic (as the socket path does), else
		 * sleep on the socket and the wake-up eventfd. */
		if (sw_worker_may_spin(w, set, util_now_ns() - last_rx_ns)) {
			sched_yield();
			continue;
		}
		struct pollfd pf[2] = { { .fd = xs->fd, .events = POLLIN },
					{ .fd = w->wake_fd, .events = POLLIN } };
		int pr = poll(pf, 2, xs->outstanding ? 1 : XSK_POLL_MS);
		uint64_t v;
		if (pr > 0 && (pf[1].revents & POLLIN))
			(void)!read(w->wake_fd, &v, sizeof v);
	}
	kick(xs);
	xs->snap = xs->cnt;
	atomic_store(&w->exited, true);
	sw_log(2, "worker %u: stopped", w->idx);
	return NULL;
}

/* ---------------------------------------------------------------- statistics */

void sw_xdp_stats_json(const struct sw_switch *sw, FILE *f)
{
	const struct sw_xdp *x = sw->xdp;
	struct xsk_counters c = { 0 };
	uint64_t prog[3] = { 0 }, *percpu;
	int ncpu = libbpf_num_possible_cpus();
	bool zc = false, sg = false;
	struct xdp_statistics ks = { 0 };

	if (!x)
		return;
	percpu = ncpu > 0 ? calloc((size_t)ncpu, sizeof *percpu) : NULL;
	for (uint32_t k = 0; percpu && k < 3; k++)
		if (bpf_map_lookup_elem(x->cnt_fd, &k, percpu) == 0)
			for (int i = 0; i < ncpu; i++)
				prog[k] += percpu[i];
	free(percpu);
	for (unsigned i = 0; i < x->nxsk; i++) {
		const struct xsk_counters *s = &x->xsk[i]->snap;
		struct xdp_statistics st;
		socklen_t sl = sizeof st;

		c.rx_frames += s->rx_frames;
		c.rx_multibuf += s->rx_multibuf;
		c.rx_oversize += s->rx_oversize;
		c.tx_frames += s->tx_frames;
		c.tx_multibuf += s->tx_multibuf;
		c.tx_kicks += s->tx_kicks;
		c.tx_ring_full += s->tx_ring_full;
		c.no_mac += s->no_mac;
		c.mac_learned += s->mac_learned;
		c.mac_from_kernel += s->mac_from_kernel;
		c.resolve_requests += s->resolve_requests;
		zc |= x->xsk[i]->zerocopy;
		sg |= x->xsk[i]->sg;
		if (getsockopt(x->xsk[i]->fd, SOL_XDP, XDP_STATISTICS, &st, &sl) == 0) {
			ks.rx_dropped += st.rx_dropped;
			ks.rx_invalid_descs += st.rx_invalid_descs;
			ks.tx_invalid_descs += st.tx_invalid_descs;
			ks.rx_ring_full += st.rx_ring_full;
			ks.rx_fill_ring_empty_descs += st.rx_fill_ring_empty_descs;
			ks.tx_ring_empty_descs += st.tx_ring_empty_descs;
		}
	}
	fprintf(f,
		"  \"xdp\": {\"ifname\": \"%s\", \"queue\": %u, \"queues\": %u, \"attach\": \"%s\", "
		"\"bind\": \"%s\", \"multi_buffer\": %s,\n"
		"    \"prog_redirected\": %llu, \"prog_passed\": %llu, \"prog_redirect_failed\": %llu,\n"
		"    \"rx_frames\": %llu, \"rx_multibuf\": %llu, \"rx_oversize\": %llu,\n"
		"    \"tx_frames\": %llu, \"tx_multibuf\": %llu, \"tx_kicks\": %llu, "
		"\"tx_ring_full\": %llu,\n"
		"    \"no_mac\": %llu, \"mac_learned\": %llu, \"mac_from_kernel\": %llu, "
		"\"resolve_requests\": %llu,\n"
		"    \"kernel_rx_dropped\": %llu, \"kernel_rx_ring_full\": %llu, "
		"\"kernel_fill_ring_empty\": %llu, \"kernel_rx_invalid_descs\": %llu, "
		"\"kernel_tx_invalid_descs\": %llu},\n",
		x->ifname, x->queue, x->nxsk, x->attach_flags == XDP_FLAGS_SKB_MODE ? "skb" : "native",
		zc ? "zerocopy" : "copy", sg ? "true" : "false", (unsigned long long)prog[0],
		(unsigned long long)prog[1], (unsigned long long)prog[2],
		(unsigned long long)c.rx_frames, (unsigned long long)c.rx_multibuf,
		(unsigned long long)c.rx_oversize, (unsigned long long)c.tx_frames,
		(unsigned long long)c.tx_multibuf, (unsigned long long)c.tx_kicks,
		(unsigned long long)c.tx_ring_full, (unsigned long long)c.no_mac,
		(unsigned long long)c.mac_learned, (unsigned long long)c.mac_from_kernel,
		(unsigned long long)c.resolve_requests, (unsigned long long)ks.rx_dropped,
		(unsigned long long)ks.rx_ring_full, (unsigned long long)ks.rx_fill_ring_empty_descs,
		(unsigned long long)ks.rx_invalid_descs, (unsigned long long)ks.tx_invalid_descs);
}

#endif /* SW_HAVE_XDP */
