/* bench-switch: inca-switch's aggregating data path against its own UDP reflector
 * (inca-switch --reflect) under the same load generator, in one run. The generator emulates N
 * members (one UDP socket each on 127.1.K.(10+i):4791), keeps a window of slots in flight per
 * member with real INCA packets (lib/wire, valid ICRC, proper slot rounds) and counts what
 * comes back. Figures are packets handled per second by the daemon (its input rate); the same
 * number of packets leaves it in both modes (one result per contribution / one echo per
 * packet), so the two modes are compared in the same units. Prints figures, asserts nothing. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "util/util.h"
#include "wire/wire.h"

#define MAX_MEMBERS 16
#define MAX_BATCH 64
#define MAX_SLOTS 1024
#define RTO_NS (250ull * 1000000ull) /* loopback with big buffers does not lose packets:
					       only a stuck peer needs a retransmission */

struct slot_state {
	uint32_t round;
	uint64_t sent_ns;
	bool outstanding;
};

struct gen;

/* One emulated member: its own socket and thread, so members run concurrently like hosts. */
struct member {
	struct gen *g;
	int idx;
	int fd;
	uint32_t ip; /* host order */
	uint32_t psn;
	uint8_t pbm[8];
	pthread_t thr;
	struct slot_state slot[MAX_SLOTS];
	uint8_t txbuf[MAX_BATCH][WIRE_MAX_UDP_PAYLOAD];
	struct iovec txiov[MAX_BATCH];
	struct mmsghdr txm[MAX_BATCH];
	int ntx;
	uint8_t rxbuf[MAX_BATCH][WIRE_MAX_UDP_PAYLOAD + 64];
	struct iovec rxiov[MAX_BATCH];
	struct mmsghdr rxm[MAX_BATCH];
	/* counters, read by the main thread while running */
	_Atomic uint64_t tx, rx_ok, rx_other, rx_bytes, retx, send_err;
};

struct gen {
	int nmem;
	unsigned nslots;
	unsigned batch;
	size_t data_len;
	uint16_t count;
	uint16_t tree_id;
	uint32_t key;
	uint32_t sw_ip;
	struct sockaddr_in sw_addr;
	bool reflect;
	struct member *m;
	uint8_t data[4096];
	_Atomic int stop;
};

struct run_res {
	double secs;
	double in_pps, out_pps, goodput_gbps, daemon_cpu, pkts_per_cpu_s;
	uint64_t tx, rx, retx, rx_other, send_err, daemon_rx, daemon_drops;
};

#define RELAXED memory_order_relaxed
#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), RELAXED)
#define GET(x) atomic_load_explicit(&(x), RELAXED)

static int open_member(struct member *mb, const char *ip)
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
	/* DF and IPv4 ID 0 on an unconnected socket: what the ICRC assumes (protocol.md). */
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

static void flush_member(struct member *mb)
{
	int off = 0;
	while (off < mb->ntx) {
		int n = sendmmsg(mb->fd, mb->txm + off, (unsigned)(mb->ntx - off), 0);
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR))
				continue;
			ADD(mb->send_err, (uint64_t)(mb->ntx - off));
			break;
		}
		off += n;
	}
	mb->ntx = 0;
}

static void queue_send(struct member *mb, unsigned s, bool retx, uint64_t now)
{
	struct gen *g = mb->g;
	if (mb->ntx == (int)g->batch)
		flush_member(mb);
	struct slot_state *ss = &mb->slot[s];
	uint64_t gseq = (uint64_t)ss->round * g->nslots + s;
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
	struct wire_ipinfo ip = { .src_ip = mb->ip, .dst_ip = g->sw_ip, .src_port = 4791,
				  .dst_port = 4791, .ip_id = 0 };
	int len = wire_encode_udp(mb->txbuf[mb->ntx], WIRE_MAX_UDP_PAYLOAD, &p, &ip);
	if (len < 0) {
		ADD(mb->send_err, 1);
		return;
	}
	mb->txiov[mb->ntx].iov_len = (size_t)len;
	mb->ntx++;
	ss->sent_ns = now;
	ss->outstanding = true;
	ADD(mb->tx, 1);
	if (retx)
		ADD(mb->retx, 1);
}

static void *member_main(void *arg)
{
	struct member *mb = arg;
	struct gen *g = mb->g;
	uint64_t now = util_now_ns(), next_scan = now + 10000000;
	/* Open the window: round 0 of every slot. */
	for (unsigned s = 0; s < g->nslots; s++)
		queue_send(mb, s, false, now);
	flush_member(mb);
	while (!atomic_load(&g->stop)) {
		int n = recvmmsg(mb->fd, mb->rxm, g->batch, MSG_WAITFORONE, NULL);
		now = util_now_ns();
		uint64_t ok = 0, other = 0, bytes = 0;
		for (int k = 0; k < n; k++) {
			struct wire_pkt p;
			/* No ICRC check: an echo carries the sender's ICRC over swapped addresses,
			 * and the generator's cost must not depend on the mode. */
			if (wire_decode_udp(mb->rxbuf[k], mb->rxm[k].msg_len, &p, NULL) != WIRE_OK) {
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
			ok++;
			bytes += p.data_len;
			mb->slot[s].outstanding = false;
			mb->slot[s].round++;
			queue_send(mb, s, false, now);
		}
		flush_member(mb);
		ADD(mb->rx_ok, ok);
		ADD(mb->rx_other, other);
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
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD + 64];
	for (int i = 0; i < g->nmem; i++)
		while (recv(g->m[i].fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
}

struct snap {
	uint64_t tx, rx, bytes, retx, other, send_err;
};

static void take(struct gen *g, struct snap *sn)
{
	memset(sn, 0, sizeof(*sn));
	for (int i = 0; i < g->nmem; i++) {
		sn->tx += GET(g->m[i].tx);
		sn->rx += GET(g->m[i].rx_ok);
		sn->bytes += GET(g->m[i].rx_bytes);
		sn->retx += GET(g->m[i].retx);
		sn->other += GET(g->m[i].rx_other);
		sn->send_err += GET(g->m[i].send_err);
	}
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

static int run_one(struct gen *g, double warm_s, double secs, pid_t daemon, struct run_res *r)
{
	drain(g);
	atomic_store(&g->stop, 0);
	for (int i = 0; i < g->nmem; i++) {
		struct member *mb = &g->m[i];
		memset(mb->slot, 0, sizeof(mb->slot));
		mb->psn = 0;
		mb->ntx = 0;
		atomic_store(&mb->tx, 0);
		atomic_store(&mb->rx_ok, 0);
		atomic_store(&mb->rx_other, 0);
		atomic_store(&mb->rx_bytes, 0);
		atomic_store(&mb->retx, 0);
		atomic_store(&mb->send_err, 0);
		for (unsigned k = 0; k < MAX_BATCH; k++) {
			mb->txiov[k].iov_base = mb->txbuf[k];
			memset(&mb->txm[k], 0, sizeof(mb->txm[k]));
			mb->txm[k].msg_hdr.msg_name = &g->sw_addr;
			mb->txm[k].msg_hdr.msg_namelen = sizeof(g->sw_addr);
			mb->txm[k].msg_hdr.msg_iov = &mb->txiov[k];
			mb->txm[k].msg_hdr.msg_iovlen = 1;
			mb->rxiov[k].iov_base = mb->rxbuf[k];
			mb->rxiov[k].iov_len = sizeof(mb->rxbuf[k]);
			memset(&mb->rxm[k], 0, sizeof(mb->rxm[k]));
			mb->rxm[k].msg_hdr.msg_iov = &mb->rxiov[k];
			mb->rxm[k].msg_hdr.msg_iovlen = 1;
		}
	}
	for (int i = 0; i < g->nmem; i++)
		if (pthread_create(&g->m[i].thr, NULL, member_main, &g->m[i])) {
			atomic_store(&g->stop, 1);
			for (int k = 0; k < i; k++)
				pthread_join(g->m[k].thr, NULL);
			return -EAGAIN;
		}
	uint64_t t0 = util_now_ns();
	sleep_until(t0 + (uint64_t)(warm_s * 1e9));
	struct snap a, b;
	double cpu0 = launch_proc_cpu_s(daemon);
	uint64_t ta = util_now_ns();
	take(g, &a);
	sleep_until(ta + (uint64_t)(secs * 1e9));
	take(g, &b);
	uint64_t tb = util_now_ns();
	double cpu1 = launch_proc_cpu_s(daemon);
	atomic_store(&g->stop, 1);
	for (int i = 0; i < g->nmem; i++)
		pthread_join(g->m[i].thr, NULL);

	r->secs = (double)(tb - ta) * 1e-9;
	r->tx = b.tx - a.tx;
	r->rx = b.rx - a.rx;
	r->retx = b.retx - a.retx;
	r->rx_other = b.other - a.other;
	r->send_err = b.send_err;
	r->in_pps = (double)r->tx / r->secs;
	r->out_pps = (double)r->rx / r->secs;
	r->goodput_gbps = (double)(b.bytes - a.bytes) * 8 / r->secs / 1e9;
	r->daemon_cpu = cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) / r->secs : -1;
	r->pkts_per_cpu_s = r->daemon_cpu > 0 ? r->in_pps / r->daemon_cpu : 0;
	return 0;
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: n <= 16 */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-switch [options]\n"
		"  --members N      emulated members (default 4)\n"
		"  --slots N        slots = window per member (default 256)\n"
		"  --bytes LIST     data bytes per packet, e.g. 64,1024,max (default 64,1024,max)\n"
		"  --batch N        sendmmsg/recvmmsg batch of the generator (default 32)\n"
		"  --time S         measured seconds per run (default 2), after 0.3 s warmup\n"
		"  --threads N      switch worker threads (default 1)\n"
		"  --no-icrc        switch does not verify ICRCs (default: verifies)\n"
		"  --addr-index K   loopback block 127.1.K.x (default 40)\n"
		"  --switch PATH    inca-switch binary\n"
		"  --json FILE      append one JSON line per run and per ratio\n"
		"  --trials N       alternating switch/reflector pairs per size, median ratio (default 3)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "members", required_argument, 0, 'm' }, { "slots", required_argument, 0, 's' },
		{ "bytes", required_argument, 0, 'b' },   { "batch", required_argument, 0, 'B' },
		{ "time", required_argument, 0, 'T' },    { "threads", required_argument, 0, 't' },
		{ "no-icrc", no_argument, 0, 'I' },       { "addr-index", required_argument, 0, 'a' },
		{ "switch", required_argument, 0, 'S' },  { "json", required_argument, 0, 'j' },
		{ "trials", required_argument, 0, 'n' },  { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct launch_cfg cfg;
	launch_cfg_defaults(&cfg);
	cfg.addr_index = 40;
	cfg.stats_interval_ms = 0;
	const char *bytes_list = "64,1024,max", *json_path = NULL;
	unsigned batch = 32;
	double secs = 2.0;
	int trials = 3;
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'm': cfg.nranks = atoi(optarg); break;
		case 's': cfg.nslots = (uint16_t)atoi(optarg); break;
		case 'b': bytes_list = optarg; break;
		case 'B': batch = (unsigned)atoi(optarg); break;
		case 'T': secs = atof(optarg); break;
		case 't': cfg.switch_threads = atoi(optarg); break;
		case 'I': cfg.check_icrc = false; break;
		case 'a': cfg.addr_index = (unsigned)atoi(optarg); break;
		case 'S': cfg.switch_path = optarg; break;
		case 'j': json_path = optarg; break;
		case 'n': trials = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (cfg.nranks < 1 || cfg.nranks > MAX_MEMBERS || cfg.nslots < 1 || cfg.nslots > MAX_SLOTS ||
	    batch < 1 || batch > MAX_BATCH || secs <= 0 || trials < 1 || trials > 16 || cfg.addr_index < 1 ||
	    cfg.addr_index > 255) {
		usage(stderr);
		return 2;
	}

	struct launch_addrs a;
	if (launch_addrs_pick(&a, cfg.addr_index, cfg.nranks)) {
		fprintf(stderr, "bench-switch: loopback block %u is busy\n", cfg.addr_index);
		return 2;
	}
	struct gen g;
	memset(&g, 0, sizeof(g));
	g.nmem = cfg.nranks;
	g.nslots = cfg.nslots;
	g.batch = batch;
	g.tree_id = cfg.tree_id;
	g.key = cfg.key;
	util_parse_addr(a.switch_ip, 4791, &g.sw_addr);
	g.sw_ip = ntohl(g.sw_addr.sin_addr.s_addr);
	for (size_t i = 0; i < sizeof(g.data) / 4; i++) {
		float f = (float)(i % 7);
		memcpy(g.data + i * 4, &f, 4);
	}
	g.m = calloc((size_t)g.nmem, sizeof(*g.m));
	if (!g.m)
		return 2;
	for (int i = 0; i < g.nmem; i++) {
		char ip[LAUNCH_IP_LEN];
		g.m[i].g = &g;
		g.m[i].idx = i;
		launch_rank_ip(&a, i, ip);
		int rc = open_member(&g.m[i], ip);
		if (rc) {
			fprintf(stderr, "bench-switch: bind %s:4791: %s\n", ip, strerror(-rc));
			return 2;
		}
		wire_bier_set(g.m[i].pbm, 8, wire_bier_bp((uint16_t)(i + 1), 64, 0));
	}
	FILE *jf = json_path ? fopen(json_path, "a") : NULL;

	size_t maxdata = wire_max_data(4096, 4, 1);
	printf("# bench-switch: inca-switch aggregating vs inca-switch --reflect, same generator\n");
	printf("# %d members on %s10.., switch %s:4791, window %u slots per member, generator "
	       "batch %u, %.1f s per run (+0.3 s warmup), switch threads %d, check_icrc %s\n",
	       g.nmem, a.prefix, a.switch_ip, g.nslots, batch, secs, cfg.switch_threads,
	       cfg.check_icrc ? "yes" : "no");
	printf("# in_pps = packets the generator sent = packets the daemon had to handle per "
	       "second; out_pps = responses received (results or echoes)\n");
	printf("# cpu = daemon CPU (cores); pkts/cpu-s = in_pps / cpu\n");
	printf("#%8s %8s %12s %12s %10s %6s %12s %8s\n", "data(B)", "daemon", "in_pps", "out_pps",
	       "Gbit/s", "cpu", "pkts/cpu-s", "retx");
	fflush(stdout);

	int fails = 0;
	char list[256];
	snprintf(list, sizeof(list), "%s", bytes_list);
	char *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t db = !strcmp(tok, "max") ? maxdata : (size_t)strtoul(tok, NULL, 10);
		db = db / 4 * 4;
		if (db < 4 || db > maxdata) {
			fprintf(stderr, "bench-switch: bad size %s (4..%zu)\n", tok, maxdata);
			fails++;
			continue;
		}
		g.data_len = db;
		g.count = (uint16_t)(db / 4);
		/* Alternate switch and reflector `trials` times and report the median ratio: on a
		 * small shared machine one pair of runs swings by +-10%. */
		double ratios[16], ratios_cpu[16];
		int nt = 0;
		for (int trial = 0; trial < trials; trial++) {
		struct run_res res[2];
		for (int mode = 0; mode < 2; mode++) {
			cfg.reflect = mode == 1;
			g.reflect = cfg.reflect;
			struct launch_switch sw;
			if (launch_switch_start(&cfg, &a, NULL, &sw)) {
				fails++;
				break;
			}
			run_one(&g, 0.3, secs, sw.pid, &res[mode]);
			struct json *st = NULL;
			int rc = launch_switch_stop(&sw, &st);
			if (rc)
				fails++;
			res[mode].daemon_rx = (uint64_t)json_num(json_get(st, "rx_pkts"), 0);
			res[mode].daemon_drops = (uint64_t)json_num(json_get(st, "drops_total"), 0);
			json_free(st);
			const struct run_res *r = &res[mode];
			printf(" %8zu %8s %12.0f %12.0f %10.3f %6.2f %12.0f %8llu\n", db,
			       mode ? "reflect" : "switch", r->in_pps, r->out_pps, r->goodput_gbps,
			       r->daemon_cpu, r->pkts_per_cpu_s, (unsigned long long)r->retx);
			if (r->daemon_drops)
				printf("#   note: the daemon counted %llu drops\n",
				       (unsigned long long)r->daemon_drops);
			if (r->send_err || r->rx_other)
				printf("#   note: %llu stale/duplicate responses, %llu send errors\n",
				       (unsigned long long)r->rx_other,
				       (unsigned long long)r->send_err);
			if (jf)
				fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"%s\",\"members\":%d,"
					    "\"slots\":%u,\"batch\":%u,\"data_bytes\":%zu,\"secs\":%.3f,"
					    "\"in_pps\":%.1f,\"out_pps\":%.1f,\"goodput_gbps\":%.4f,"
					    "\"daemon_cpu\":%.3f,\"pkts_per_cpu_s\":%.1f,\"retx\":%llu,"
					    "\"daemon_rx_pkts\":%llu,\"daemon_drops\":%llu}\n",
					mode ? "reflect" : "switch", g.nmem, g.nslots, batch, db, r->secs,
					r->in_pps, r->out_pps, r->goodput_gbps, r->daemon_cpu,
					r->pkts_per_cpu_s, (unsigned long long)r->retx,
					(unsigned long long)r->daemon_rx,
					(unsigned long long)r->daemon_drops);
			fflush(stdout);
		}
		ratios[nt] = res[1].in_pps > 0 ? res[0].in_pps / res[1].in_pps : 0;
		ratios_cpu[nt] = res[1].pkts_per_cpu_s > 0 ? res[0].pkts_per_cpu_s /
								 res[1].pkts_per_cpu_s : 0;
		nt++;
		}
		double ratio = median(ratios, nt), ratio_cpu = median(ratios_cpu, nt);
		printf("# %zu B: switch/reflector = %.3f in packets/s (%s 0.8), %.3f in packets per "
		       "daemon CPU-second (medians of %d alternating pairs)\n", db, ratio,
		       ratio >= 0.8 ? ">=" : "<", ratio_cpu, nt);
		if (jf)
			fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"ratio\",\"data_bytes\":%zu,"
				    "\"pps_ratio\":%.4f,\"per_cpu_ratio\":%.4f}\n",
				db, ratio, ratio_cpu);
		fflush(stdout);
	}
	if (jf)
		fclose(jf);
	for (int i = 0; i < g.nmem; i++)
		close(g.m[i].fd);
	free(g.m);
	return fails ? 1 : 0;
}
