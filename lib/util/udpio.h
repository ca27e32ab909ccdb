/* lib/util UDP batch I/O for the data paths (libinca, inca-switch, benchmarks): a send queue that
 * packs datagrams into UDP GSO sends handed to the kernel by one sendmmsg, and a receive batch
 * that reads with recvmmsg and splits UDP GRO buffers back into datagrams. Where the kernel has
 * neither it is plain sendmmsg/recvmmsg. Knows nothing of packet formats. Not thread-safe: one
 * queue and one batch per thread. */
#ifndef INCA_UTIL_UDPIO_H
#define INCA_UTIL_UDPIO_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most datagrams one GSO send carries (the kernel takes 64 or more). */
#define UTIL_GSO_MAX_SEGS 64
/* Largest UDP payload one send (a GSO send included) may carry over IPv4. */
#define UTIL_UDP_MAX_PAYLOAD 65507

/* Turn on what the kernel offers on fd: UDP_GRO (if want_gro) and check that UDP_SEGMENT is
 * accepted (if want_gso). *gso / *gro say what is on. Never fails: without them the socket
 * works as before. */
void util_udp_offloads(int fd, bool want_gso, bool want_gro, bool *gso, bool *gro);

struct util_udptx;

/* Called for each datagram the queue must send alone after its GSO send failed: the kernel
 * then gives it IPv4 ID 0 instead of the ID util_udptx_add promised, so a format whose checksum
 * covers the ID restamps it here. pkt holds the whole datagram (one queued with
 * util_udptx_add_ref has its data copied in first). */
typedef void (*util_udptx_reid_fn)(void *arg, uint8_t *pkt, size_t len,
				   const struct sockaddr_in *to, uint32_t src_ip_be);

struct util_udptx_opts {
	size_t max_pkts;    /* datagrams the queue holds between flushes */
	size_t pkt_cap;     /* largest datagram */
	bool gso;           /* pack datagrams to one destination into GSO sends */
	bool pktinfo;       /* give each send its source address (IP_PKTINFO) */
	util_udptx_reid_fn reid;
	void *reid_arg;
};

struct util_udptx_stats {
	uint64_t pkts, bytes; /* datagrams handed to the kernel */
	uint64_t msgs;        /* sendmmsg messages: GSO sends and single datagrams */
	uint64_t syscalls;
	uint64_t gso_sends;   /* messages carrying more than one datagram */
	uint64_t gso_failed;  /* GSO sends the kernel refused (sent one by one, GSO turned off) */
	uint64_t errors;      /* datagrams dropped on another send error */
};

/* Returns 0 or -ENOMEM / -EINVAL. */
int util_udptx_create(const struct util_udptx_opts *o, struct util_udptx **out);
void util_udptx_destroy(struct util_udptx *q);

/* Room for one datagram of exactly len bytes (1 .. pkt_cap) to `to` (copied), sent from
 * src_ip_be if the queue sets IP_PKTINFO. Returns where to write it, and in *ip_id the IPv4 ID
 * the kernel will give it: its index in its GSO send (0 when sent alone). Datagrams join a GSO
 * send only with the same destination, source, tag and length as its first one (a shorter one
 * ends it): callers pass as tag whatever must not share a send (the switch's slot blocks).
 * NULL if the queue is full: flush first. */
uint8_t *util_udptx_add(struct util_udptx *q, const struct sockaddr_in *to, uint32_t src_ip_be,
			uint32_t tag, size_t len, uint16_t *ip_id);
/* util_udptx_add for a datagram of len bytes whose bytes [off, off + data_len) are not copied
 * into the queue: they go out from data, which the queue keeps by reference until the datagram
 * has left or was dropped (util_udptx_flush returned, or util_udptx_clear). The caller writes
 * the rest at its place in the returned buffer (ret[0 .. off) and ret[off + data_len .. len))
 * and must not change data[0 .. data_len) until then. The datagram goes to the kernel as one
 * to three iovecs. NULL if the queue is full or off + data_len > len. */
uint8_t *util_udptx_add_ref(struct util_udptx *q, const struct sockaddr_in *to,
			    uint32_t src_ip_be, uint32_t tag, size_t len, size_t off,
			    const void *data, size_t data_len, uint16_t *ip_id);
/* Take back the datagram the last util_udptx_add (or _add_ref) returned (nothing was written into it that
 * must go out: an encoder failed). Only right after that add. */
void util_udptx_cancel_last(struct util_udptx *q);
/* Datagrams queued and not yet sent. */
size_t util_udptx_queued(const struct util_udptx *q);
/* Drop every datagram queued and not yet sent. */
void util_udptx_clear(struct util_udptx *q);
/* Send what is queued on fd (flags for sendmmsg, e.g. MSG_DONTWAIT). Returns 0 when the queue
 * is empty, -EAGAIN when the socket is full (the rest stays queued, in order), -EMSGSIZE when a
 * datagram exceeds the path MTU (dropped from the queue). Other errors drop the datagrams
 * concerned, are counted in stats.errors and the flush goes on. */
int util_udptx_flush(struct util_udptx *q, int fd, int flags);
const struct util_udptx_stats *util_udptx_stats(const struct util_udptx *q);
bool util_udptx_gso(const struct util_udptx *q);

struct util_udprx;

struct util_udprx_opts {
	size_t batch;    /* buffers per recvmmsg */
	size_t pkt_cap;  /* largest datagram accepted without GRO (bigger: truncated) */
	bool gro;        /* the socket has UDP_GRO on: buffers hold several datagrams */
	bool pktinfo;    /* the socket has IP_PKTINFO on: report the destination address */
};

/* One received datagram, pointing into the batch's buffers (valid until the next recv). */
struct util_udp_dgram {
	uint8_t *data;
	size_t len;
	struct sockaddr_in from;
	uint32_t dst_ip_be;  /* 0 without pktinfo */
	uint16_t seg;        /* index in its GRO buffer (0 when it came alone) */
	bool truncated;      /* longer than the buffer: len is what fitted */
};

/* Split a GRO buffer of total bytes into its datagrams of gso_size bytes (the last may be
 * shorter; gso_size 0: one datagram): the datagram at *off is *len bytes, *off moves past it.
 * False once *off reached total. Pure arithmetic (fuzzed with the decoder: tests/fuzz). */
bool util_gro_next(size_t total, size_t gso_size, size_t *off, size_t *len);

int util_udprx_create(const struct util_udprx_opts *o, struct util_udprx **out);
void util_udprx_destroy(struct util_udprx *r);
/* Read what fd holds: up to batch buffers (flags for recvmmsg, e.g. MSG_DONTWAIT). Returns the
 * number of buffers read (each one or more datagrams) or -errno (-EAGAIN: nothing queued). */
int util_udprx_recv(struct util_udprx *r, int fd, int flags);
/* The next datagram of the last recv; false when every one was returned. */
bool util_udprx_next(struct util_udprx *r, struct util_udp_dgram *d);

#endif
