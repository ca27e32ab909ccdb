/* bench/bench_switch_gen: bench-switch's load generator: N emulated members, each a thread
 * with its own UDP socket, keeping a window of slots in flight with real INCA packets (GSO
 * sends, GRO receives), checking every response, and one measured run (counters, CPU times,
 * perf). The command line and reports are in bench_switch.c. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_switch.h"
#include "launch.h"
#include "util/cli.h"
#include "util/udpio.h"
#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

#define RELAXED memory_order_relaxed
#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), RELAXED)
#define SET(x, v) atomic_store_explicit(&(x), (v), RELAXED)
#define GET(x) atomic_load_explicit(&(x), RELAXED)

int open_member(struct member *mb, const char *ip)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return -errno;
	int one = 1, big = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	/* DF on an unconnected socket: a datagram sent alone gets IPv4 ID 0, segment k of a GSO
	 * send gets ID k (what the ICRC assumes, protocol.md). */
	int pmtu = IP_PMTUDISC_DO;
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	/* Blocking receive with a short timeout: the thread wakes for retransmission scans and
	 * the stop flag without spinning. */
	struct timeval tv = { 0, 2000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a;
	if (util_parse_addr(ip, 4791, &a)) {
		close(fd);
		return -EINVAL;
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = -errno;
		close(fd);
		return e;
	}
	mb->fd = fd;
	mb->ip = ntohl(a.sin_addr.s_addr);
	return 0;
}

/* A datagram the send queue had to send alone after its GSO send was refused gets IPv4 ID 0
 * from the kernel: recompute its ICRC for that ID. */
static void restamp(void *arg, uint8_t *pkt, size_t len, const struct sockaddr_in *to,
		    uint32_t src_ip_be)
{
	struct member *mb = arg;
	(void)src_ip_be;
	struct wire_ipinfo ip = { .src_ip = mb->ip, .dst_ip = ntohl(to->sin_addr.s_addr),
				  .src_port = 4791, .dst_port = ntohs(to->sin_port), .ip_id = 0 };
	(void)wire_set_icrc(pkt, len, &ip); /* -EINVAL only for a packet shorter than an ICRC */
}

static void flush_member(struct member *mb)
{
	int rc;
	do
		rc = util_udptx_flush(mb->tx, mb->fd, 0);
	while (rc == -EAGAIN);
	const struct util_udptx_stats *st = util_udptx_stats(mb->tx);
	SET(mb->tx_msgs, st->msgs);
	SET(mb->send_err, st->errors);
}

/* Queue round ss->round of slot s. Slots of one block (s / WIRE_SLOT_BLOCK) may share a GSO
 * send, two blocks never do: the switch gives whole blocks to its workers. */
static void queue_send(struct member *mb, unsigned s, bool retx, uint64_t now)
{
	struct gen *g = mb->g;
	struct slot_state *ss = &mb->slot[s];
	uint64_t gseq = (uint64_t)ss->round * g->nslots + s;
	uint16_t ip_id = 0;
	uint8_t *buf = util_udptx_add(mb->tx, &g->sw_addr, 0, s / WIRE_SLOT_BLOCK, g->pkt_len,
				      &ip_id);
	if (!buf) {
		flush_member(mb);
		buf = util_udptx_add(mb->tx, &g->sw_addr, 0, s / WIRE_SLOT_BLOCK, g->pkt_len,
				     &ip_id);
		if (!buf) {
			ADD(mb->send_err, 1);
			return;
		}
	}
	struct wire_pkt p;
	memset(&p, 0, sizeof(p));
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.bth.pkey = WIRE_PKEY_DEFAULT;
	p.bth.dest_qp = 0x100u + g->tree_id;
	p.bth.psn = mb->psn++ & 0xFFFFFF;
	p.reth.va = gseq * g->data_len;
	p.reth.rkey = g->key;
	p.imm = (uint32_t)gseq;
	p.inca.version = WIRE_INCA_VERSION;
	p.inca.flags = retx ? WIRE_F_RETX : 0;
	p.inca.coll = WIRE_COLL_ALLREDUCE;
	p.inca.dtype = INCA_FP32;
	p.inca.op = INCA_SUM;
	p.inca.tree_id = g->tree_id;
	p.inca.slot = (uint16_t)s;
	p.inca.round = ss->round;
	p.inca.bfr_id = (uint16_t)(mb->idx + 1);
	p.inca.bsl_code = 1;
	p.inca.count = g->count;
	p.inca.bits = mb->pbm;
	p.data = g->data;
	p.data_len = (uint32_t)g->data_len;
	if (g->auth) {
		p.inca.flags |= WIRE_F_AUTH;
		p.auth.key_id = g->auth_key_id;
		p.auth.ctx = p.inca.bfr_id;
		p.auth.ctr = mb->auth_ctr++;
		if (wire_mac_sign(mb->mac, &p) < 0)
			ADD(mb->send_err, 1);
	}
	struct wire_ipinfo ip = { .src_ip = mb->ip, .dst_ip = g->sw_ip, .src_port = 4791,
				  .dst_port = 4791, .ip_id = ip_id };
	/* The queue already holds the slot for pkt_len bytes: encode must fill exactly that. */
	int len = wire_encode_udp(buf, g->pkt_len, &p, &ip);
	if (len != (int)g->pkt_len)
		ADD(mb->send_err, 1); /* cannot happen: pkt_len is wire_udp_payload_len */
	ss->sent_ns = now;
	ss->outstanding = true;
	ADD(mb->tx_pkts, 1);
	if (retx)
		ADD(mb->retx, 1);
	if (util_udptx_queued(mb->tx) >= g->flush_at)
		flush_member(mb);
}

/* Expected value of float element i of a response: the member's own data echoed, or the sum of
 * every member's (all members send the same data). */
static float expect_at(const struct gen *g, size_t i)
{
	float v;
	memcpy(&v, g->data + i * 4, 4);
	return g->reflect ? v : v * (float)g->nmem;
}

/* Check a response's data: first, middle and last element (the full data is summed by the
 * switch; a wrong offset, count or operator shows in these). Same cost in both modes. */
static bool data_ok(const struct gen *g, const struct wire_pkt *p)
{
	if (p->data_len != g->data_len)
		return false;
	size_t n = g->data_len / 4, at[3] = { 0, n / 2, n - 1 };
	for (int k = 0; k < 3; k++) {
		float v;
		memcpy(&v, p->data + at[k] * 4, 4);
		if (v != expect_at(g, at[k]))
			return false;
	}
	return true;
}

/* Start the next chunks strictly in g order (chunk g goes to slot g mod nslots once that
 * slot's previous chunk is answered), as libinca starts them. The switch counts on that order:
 * a contribution to an older chunk still missing when a later chunk completes is taken for
 * lost and drawn with a repair notice (docs/protocol.md "Repair notices"). */
static void start_due(struct member *mb, uint64_t now)
{
	const struct gen *g = mb->g;

	/* At most one window per pass: a send that failed (send_err) leaves its slot idle. */
	for (unsigned k = 0; k < g->nslots && !mb->slot[mb->next_g % g->nslots].outstanding; k++)
		queue_send(mb, (unsigned)(mb->next_g++ % g->nslots), false, now);
}

static void *member_main(void *arg)
{
	struct member *mb = arg;
	struct gen *g = mb->g;
	uint64_t now = util_now_ns(), next_scan = now + 10000000;
	/* Open the window: chunks 0 .. nslots-1, round 0 of every slot. */
	start_due(mb, now);
	flush_member(mb);
	while (!atomic_load(&g->stop)) {
		/* A sleeping member makes the daemon pay its wakeup inside the daemon's send call
		 * (loopback delivers synchronously): ~20% of the daemon's time at 4 KiB on this
		 * 2-vCPU VM. Members on their own hosts never cost the switch that, so by default
		 * they poll (yielding the CPU between polls). */
		int n = util_udprx_recv(mb->rx, mb->fd, g->spin ? MSG_DONTWAIT : MSG_WAITFORONE);
		if (n <= 0 && g->spin)
			sched_yield();
		now = util_now_ns();
		uint64_t ok = 0, other = 0, wrong = 0, bytes = 0, dgrams = 0;
		struct util_udp_dgram d;
		while (n > 0 && util_udprx_next(mb->rx, &d)) {
			struct wire_pkt p;
			dgrams++;
			/* No ICRC check: an echo carries the sender's ICRC over swapped addresses,
			 * and the generator's cost must not depend on the mode. */
			if (d.truncated || wire_decode_udp(d.data, d.len, &p, NULL) != WIRE_OK) {
				other++;
				continue;
			}
			unsigned s = p.inca.slot;
			bool want_result = !g->reflect;
			if (s >= g->nslots || !mb->slot[s].outstanding ||
			    p.inca.round != mb->slot[s].round ||
			    want_result != !!(p.inca.flags & WIRE_F_RESULT)) {
				other++; /* duplicate result or stale echo */
				continue;
			}
			if (!data_ok(g, &p))
				wrong++;
			ok++;
			bytes += p.data_len;
			mb->slot[s].outstanding = false;
			mb->slot[s].round++;
		}
		start_due(mb, now);
		flush_member(mb);
		if (n > 0) {
			ADD(mb->rx_bufs, (uint64_t)n);
			ADD(mb->rx_dgrams, dgrams);
		}
		ADD(mb->rx_ok, ok);
		ADD(mb->rx_other, other);
		ADD(mb->rx_wrong, wrong);
		ADD(mb->rx_bytes, bytes);
		if (now >= next_scan) {
			next_scan = now + 10000000;
			for (unsigned s = 0; s < g->nslots; s++) {
				struct slot_state *ss = &mb->slot[s];
				if (ss->outstanding && now - ss->sent_ns > RTO_NS)
					queue_send(mb, s, true, now);
			}
			flush_member(mb);
		}
	}
	return NULL;
}

static void drain(struct gen *g)
{
	static uint8_t buf[65536];
	for (int i = 0; i < g->nmem; i++)
		while (recv(g->m[i].fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
}

struct snap {
	uint64_t tx, rx, bytes, retx, other, wrong, msgs, bufs, dgrams;
};

static void take(struct gen *g, struct snap *sn)
{
	memset(sn, 0, sizeof(*sn));
	for (int i = 0; i < g->nmem; i++) {
		struct member *mb = &g->m[i];
		sn->tx += GET(mb->tx_pkts);
		sn->rx += GET(mb->rx_ok);
		sn->bytes += GET(mb->rx_bytes);
		sn->retx += GET(mb->retx);
		sn->other += GET(mb->rx_other);
		sn->wrong += GET(mb->rx_wrong);
		sn->msgs += GET(mb->tx_msgs);
		sn->bufs += GET(mb->rx_bufs);
		sn->dgrams += GET(mb->rx_dgrams);
	}
}

/* Busy CPU time of the whole machine so far (all cores, seconds), from /proc/stat. */
static double machine_busy_s(void)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[10] = { 0 };
	if (!f)
		return -1;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		       &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 5)
		return -1;
	unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* all but idle, iowait */
	return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

static void sleep_until(uint64_t t)
{
	for (;;) {
		uint64_t now = util_now_ns();
		if (now >= t)
			return;
		uint64_t d = t - now;
		struct timespec ts = { (time_t)(d / 1000000000ull), (long)(d % 1000000000ull) };
		nanosleep(&ts, NULL);
	}
}

static void free_io(struct gen *g)
{
	for (int i = 0; i < g->nmem; i++) {
		util_udptx_destroy(g->m[i].tx);
		util_udprx_destroy(g->m[i].rx);
		g->m[i].tx = NULL;
		g->m[i].rx = NULL;
	}
}

extern char **environ;

/* `perf record -e cpu-clock -g` of the daemon for secs seconds, into g->perf_out. */
static pid_t start_perf(const struct gen *g, pid_t daemon, double secs)
{
	char pid[32], dur[32];
	snprintf(pid, sizeof(pid), "%d", (int)daemon);
	snprintf(dur, sizeof(dur), "%.3f", secs);
	char *argv[] = { "perf", "record", "-q", "-e", "cpu-clock", "-g", "-p", pid, "-o",
			 (char *)g->perf_out, "--", "sleep", dur, NULL };
	pid_t p;
	if (posix_spawnp(&p, "perf", NULL, NULL, argv, environ))
		return -1;
	return p;
}

int run_one(struct gen *g, double warm_s, double secs, pid_t daemon, struct run_res *r)
{
	memset(r, 0, sizeof(*r));
	drain(g);
	atomic_store(&g->stop, 0);
	for (int i = 0; i < g->nmem; i++) {
		struct member *mb = &g->m[i];
		memset(mb->slot, 0, sizeof(mb->slot));
		mb->next_g = 0;
		mb->psn = 0;
		atomic_store(&mb->tx_pkts, 0);
		atomic_store(&mb->rx_ok, 0);
		atomic_store(&mb->rx_other, 0);
		atomic_store(&mb->rx_wrong, 0);
		atomic_store(&mb->rx_bytes, 0);
		atomic_store(&mb->retx, 0);
		atomic_store(&mb->send_err, 0);
		atomic_store(&mb->tx_msgs, 0);
		atomic_store(&mb->rx_bufs, 0);
		atomic_store(&mb->rx_dgrams, 0);
		/* The mode is fixed for the process: GRO, once on, stays right for later runs. */
		bool gso = false, gro = false;
		util_udp_offloads(mb->fd, g->gso, g->gso, &gso, &gro);
		struct util_udptx_opts to = { .max_pkts = g->flush_at, .pkt_cap = g->pkt_len,
					      .gso = gso, .reid = restamp, .reid_arg = mb };
		struct util_udprx_opts ro = { .batch = g->batch,
					      .pkt_cap = WIRE_MAX_UDP_PAYLOAD + 64, .gro = gro };
		if (util_udptx_create(&to, &mb->tx) || util_udprx_create(&ro, &mb->rx)) {
			free_io(g);
			return -ENOMEM;
		}
	}
	for (int i = 0; i < g->nmem; i++)
		if (pthread_create(&g->m[i].thr, NULL, member_main, &g->m[i])) {
			atomic_store(&g->stop, 1);
			for (int k = 0; k < i; k++)
				pthread_join(g->m[k].thr, NULL);
			free_io(g);
			return -EAGAIN;
		}
	uint64_t t0 = util_now_ns();
	sleep_until(t0 + (uint64_t)(warm_s * 1e9));
	struct snap a, b;
	double cpu0 = launch_proc_cpu_s(daemon), gcpu0 = launch_proc_cpu_s(getpid());
	double busy0 = machine_busy_s();
	pid_t perf = g->perf_out ? start_perf(g, daemon, secs) : -1;
	uint64_t ta = util_now_ns();
	take(g, &a);
	sleep_until(ta + (uint64_t)(secs * 1e9));
	take(g, &b);
	uint64_t tb = util_now_ns();
	double cpu1 = launch_proc_cpu_s(daemon), gcpu1 = launch_proc_cpu_s(getpid());
	double busy1 = machine_busy_s();
	if (perf > 0)
		waitpid(perf, NULL, 0); /* ends with its sleep: the window just measured */
	atomic_store(&g->stop, 1);
	for (int i = 0; i < g->nmem; i++)
		pthread_join(g->m[i].thr, NULL);
	for (int i = 0; i < g->nmem; i++)
		r->send_err += GET(g->m[i].send_err);
	free_io(g);

	r->secs = (double)(tb - ta) * 1e-9;
	r->tx = b.tx - a.tx;
	r->rx = b.rx - a.rx;
	r->retx = b.retx - a.retx;
	r->rx_other = b.other - a.other;
	r->wrong = b.wrong; /* over the whole run, warmup included */
	r->in_pps = (double)r->tx / r->secs;
	r->out_pps = (double)r->rx / r->secs;
	r->goodput_gbps = (double)(b.bytes - a.bytes) * 8 / r->secs / 1e9;
	r->daemon_cpu = cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) / r->secs : -1;
	r->gen_cpu = gcpu0 >= 0 && gcpu1 >= 0 ? (gcpu1 - gcpu0) / r->secs : -1;
	r->busy_cores = busy0 >= 0 && busy1 >= 0 ? (busy1 - busy0) / r->secs : -1;
	r->pkts_per_cpu_s = r->daemon_cpu > 0 ? r->in_pps / r->daemon_cpu : 0;
	r->tx_per_msg = b.msgs > a.msgs ? (double)r->tx / (double)(b.msgs - a.msgs) : 0;
	r->rx_per_buf = b.bufs > a.bufs ? (double)(b.dgrams - a.dgrams) / (double)(b.bufs - a.bufs)
					: 0;
	r->ok = true;
	return 0;
}
