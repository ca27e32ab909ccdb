/* bench-switch: inca-switch's aggregating data path against its own UDP reflector
 * (inca-switch --reflect) under the same load generator, in one run, for one or more worker
 * thread counts. The generator emulates N members (one UDP socket each on 127.1.K.(10+i):4791)
 * the way real INCA clients talk: UDP GSO sends (one send per slot block, valid ICRC for the
 * IPv4 ID the kernel gives each segment) and UDP_GRO receives, or one datagram per message
 * with --no-gso. It keeps a window of slots in flight per member with real INCA packets
 * (lib/wire, proper slot rounds), checks every response (slot, round, kind, data) and counts
 * what comes back. Figures are packets handled per second by the daemon (its input rate); the
 * same number of packets leaves it in both modes (one result per contribution / one echo per
 * packet), so the two modes are compared in the same units. The CPU of the daemon, of the
 * generator and of the whole machine is shown beside them. Prints figures; exits non-zero only
 * if a daemon failed or a response carried wrong data. */
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

/* Median of one field over the runs that completed. */
static double med_of(const struct run_res *r, int n, size_t off)
{
	double v[MAX_TRIALS];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (r[i].ok)
			memcpy(&v[k++], (const char *)&r[i] + off, sizeof(double));
	return util_median(v, k);
}
#define MED(r, n, field) med_of((r), (n), offsetof(struct run_res, field))

/* Medians of the switch runs at one worker count (one row of the scaling table). */
struct scale_row {
	int threads;
	double pps, cpu, per_cpu, gen_cpu, busy, rf_pps, rf_per_cpu;
};

/* Where the switch's packet rate stops growing with workers, and why, in text (for the table
 * and for JSON: no quotes or backslashes). Returns the worker count it stops at (0: it scaled
 * over the whole list, or only one count was measured). */
static int scaling_verdict(const struct scale_row *s, int n, int ncpu, char *out, size_t cap)
{
	for (int i = 1; i < n; i++) {
		double gain = s[i - 1].pps > 0 ? s[i].pps / s[i - 1].pps : 0;
		double ideal = (double)s[i].threads / s[i - 1].threads;
		if (gain >= 1 + 0.5 * (ideal - 1))
			continue;
		double rest = s[i].busy - s[i].cpu - s[i].gen_cpu;
		if (s[i].busy >= 0.9 * ncpu)
			snprintf(out, cap,
				 "stops scaling at %d worker(s): %d -> %d workers gives x%.2f packets/s "
				 "because the machine's %d cores are full (%.2f busy = daemon %.2f + "
				 "generator %.2f, which includes the kernel's loopback delivery run in "
				 "its send calls, + other %.2f): an added worker has no core of its own",
				 s[i - 1].threads, s[i - 1].threads, s[i].threads, gain, ncpu, s[i].busy,
				 s[i].cpu, s[i].gen_cpu, rest);
		else if (s[i - 1].cpu < 0.8 * s[i - 1].threads)
			snprintf(out, cap,
				 "stops scaling at %d worker(s): %d -> %d workers gives x%.2f packets/s; "
				 "the daemon was not CPU-bound (%.2f cores for %d workers): the input "
				 "rate is set by the generator (%.2f cores) and the kernel's loopback "
				 "path, with %.2f of %d cores busy",
				 s[i - 1].threads, s[i - 1].threads, s[i].threads, gain, s[i - 1].cpu,
				 s[i - 1].threads, s[i].gen_cpu, s[i].busy, ncpu);
		else
			snprintf(out, cap,
				 "stops scaling at %d worker(s): %d -> %d workers gives x%.2f packets/s "
				 "with %.2f of %d cores busy (daemon %.2f, generator %.2f): the workers "
				 "contend inside the daemon or the kernel",
				 s[i - 1].threads, s[i - 1].threads, s[i].threads, gain, s[i].busy, ncpu,
				 s[i].cpu, s[i].gen_cpu);
		return s[i - 1].threads;
	}
	if (n > 1)
		snprintf(out, cap, "scales over the whole list: x%.2f packets/s from %d to %d workers "
				   "(%.2f of %d cores busy at %d)",
			 s[0].pps > 0 ? s[n - 1].pps / s[0].pps : 0, s[0].threads, s[n - 1].threads,
			 s[n - 1].busy, ncpu, s[n - 1].threads);
	else
		snprintf(out, cap, "one worker count measured: CPU budget %.2f of %d cores busy = "
				   "daemon %.2f + generator %.2f (with the kernel's loopback delivery "
				   "in its send calls) + other %.2f",
			 s[0].busy, ncpu, s[0].cpu, s[0].gen_cpu, s[0].busy - s[0].cpu - s[0].gen_cpu);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-switch [options]\n"
		"  --members N      emulated members (default 4)\n"
		"  --slots N        slots = window per member (default 256)\n"
		"  --bytes LIST     data bytes per packet, e.g. 64,1024,max (default 64,1024,max;\n"
		"                   with --auth, max is the largest that fits with an auth block)\n"
		"  --auth           also run the switch with packet authentication (AES-256-GMAC,\n"
		"                   members sign every contribution) in each trial, and print the\n"
		"                   authenticated/plain ratio (default: plain switch only)\n"
		"  --batch N        messages per sendmmsg/recvmmsg of the generator (default 32)\n"
		"  --no-gso         one datagram per message (default: UDP GSO sends of a slot block,\n"
		"                   UDP_GRO receives, as INCA clients do)\n"
		"  --member-wait spin|sleep  members poll their sockets, yielding the CPU (default),\n"
		"                   or sleep in recvmmsg (then the daemon's sends pay their wakeups)\n"
		"  --time S         measured seconds per run (default 2), after 0.3 s warmup\n"
		"  --threads LIST   switch worker threads, one scaling row each, e.g. 1,2 (default 1)\n"
		"  --no-icrc        switch does not verify ICRCs (default: verifies)\n"
		"  --addr-index K   loopback block 127.1.K.x (default 40)\n"
		"  --switch PATH    inca-switch binary\n"
		"  --json FILE      append one JSON line per run, ratio and scaling row\n"
		"  --perf PREFIX    perf record (cpu-clock, call graphs) each daemon over its measured\n"
		"                   window into PREFIX-<switch|reflect>-<bytes>B-t<threads>-<trial>.data\n"
		"  --trials N       alternating switch/reflector pairs per size and thread count,\n"
		"                   medians (default 3)\n"
		"  --help, --version\n");
}

static int parse_threads(const char *s, int *out)
{
	char list[256];
	int n = 0;
	snprintf(list, sizeof(list), "%s", s);
	char *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);
		if (*end || v < 1 || v > 64 || n == MAX_THREADS)
			return -1;
		out[n++] = (int)v;
	}
	return n;
}

static void print_run(FILE *jf, const struct gen *g, int threads, size_t db, bool reflect,
		      const struct run_res *r)
{
	const char *mode = reflect ? "reflect" : g->auth ? "sw+auth" : "switch";
	printf(" %8zu %3d %8s %11.0f %11.0f %8.3f %5.2f %11.0f %5.2f %5.2f %6.1f %6.1f %5llu\n", db,
	       threads, mode, r->in_pps, r->out_pps, r->goodput_gbps, r->daemon_cpu,
	       r->pkts_per_cpu_s, r->gen_cpu, r->busy_cores, r->tx_per_msg, r->rx_per_buf,
	       (unsigned long long)r->retx);
	if (r->daemon_drops)
		printf("#   note: the daemon counted %llu drops\n",
		       (unsigned long long)r->daemon_drops);
	if (r->send_err || r->rx_other)
		printf("#   note: %llu stale/duplicate responses, %llu send errors\n",
		       (unsigned long long)r->rx_other, (unsigned long long)r->send_err);
	if (r->wrong)
		printf("#   ERROR: %llu responses carried wrong data\n", (unsigned long long)r->wrong);
	if (jf)
		fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"%s\",\"io\":\"%s\",\"threads\":%d,"
			    "\"members\":%d,\"slots\":%u,\"batch\":%u,\"data_bytes\":%zu,"
			    "\"secs\":%.3f,\"in_pps\":%.1f,\"out_pps\":%.1f,\"goodput_gbps\":%.4f,"
			    "\"daemon_cpu\":%.3f,\"pkts_per_cpu_s\":%.1f,\"gen_cpu\":%.3f,"
			    "\"busy_cores\":%.3f,\"tx_dgrams_per_msg\":%.2f,"
			    "\"rx_dgrams_per_buf\":%.2f,\"retx\":%llu,\"wrong\":%llu,"
			    "\"stale\":%llu,\"send_errors\":%llu,\"daemon_rx_pkts\":%llu,"
			    "\"daemon_drops\":%llu,\"daemon_rx_per_call\":%.2f,"
			    "\"daemon_tx_per_call\":%.2f}\n",
			mode, g->gso ? "gso" : "plain", threads, g->nmem, g->nslots, g->batch, db,
			r->secs, r->in_pps, r->out_pps, r->goodput_gbps, r->daemon_cpu,
			r->pkts_per_cpu_s, r->gen_cpu, r->busy_cores, r->tx_per_msg, r->rx_per_buf,
			(unsigned long long)r->retx, (unsigned long long)r->wrong,
			(unsigned long long)r->rx_other, (unsigned long long)r->send_err,
			(unsigned long long)r->daemon_rx, (unsigned long long)r->daemon_drops,
			r->daemon_rx_per_call, r->daemon_tx_per_call);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "members", required_argument, 0, 'm' }, { "slots", required_argument, 0, 's' },
		{ "bytes", required_argument, 0, 'b' },   { "batch", required_argument, 0, 'B' },
		{ "time", required_argument, 0, 'T' },    { "threads", required_argument, 0, 't' },
		{ "no-icrc", no_argument, 0, 'I' },       { "addr-index", required_argument, 0, 'a' },
		{ "switch", required_argument, 0, 'S' },  { "json", required_argument, 0, 'j' },
		{ "trials", required_argument, 0, 'n' },  { "no-gso", no_argument, 0, 'G' },
		{ "perf", required_argument, 0, 'P' },    { "help", no_argument, 0, 'h' },
		{ "member-wait", required_argument, 0, 'W' },
		{ "auth", no_argument, 0, 'A' },
		{ "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	struct launch_cfg cfg;
	launch_cfg_defaults(&cfg);
	cfg.addr_index = 40;
	cfg.stats_interval_ms = 0;
	const char *bytes_list = "64,1024,max", *json_path = NULL, *threads_list = "1";
	const char *perf_prefix = NULL;
	unsigned batch = 32;
	double secs = 2.0;
	int trials = 3;
	bool gso = true, spin = true, auth = false;
	static const char *const wait_modes[] = { "spin", "sleep", NULL };
	static const char P[] = "bench-switch";
	long long ll;
	int c;
	while ((c = getopt_long(argc, argv, "hV", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (util_cli_int(P, "--members", optarg, 1, MAX_MEMBERS, &ll))
				return 2;
			cfg.nranks = (int)ll;
			break;
		case 's':
			if (util_cli_int(P, "--slots", optarg, 1, MAX_SLOTS, &ll))
				return 2;
			cfg.nslots = (uint16_t)ll;
			break;
		case 'b': bytes_list = optarg; break;
		case 'B':
			if (util_cli_int(P, "--batch", optarg, 1, MAX_BATCH, &ll))
				return 2;
			batch = (unsigned)ll;
			break;
		case 'T':
			if (util_cli_double(P, "--time", optarg, 0.01, 3600, false, &secs))
				return 2;
			break;
		case 't': threads_list = optarg; break;
		case 'I': cfg.check_icrc = false; break;
		case 'a':
			if (util_cli_int(P, "--addr-index", optarg, 1, 255, &ll))
				return 2;
			cfg.addr_index = (unsigned)ll;
			break;
		case 'S': cfg.switch_path = optarg; break;
		case 'j': json_path = optarg; break;
		case 'n':
			if (util_cli_int(P, "--trials", optarg, 1, MAX_TRIALS, &ll))
				return 2;
			trials = (int)ll;
			break;
		case 'G': gso = false; break;
		case 'A': auth = true; break;
		case 'P': perf_prefix = optarg; break;
		case 'W':
			if (util_cli_choice(P, "--member-wait", optarg, wait_modes) < 0)
				return 2;
			spin = !strcmp(optarg, "spin");
			break;
		case 'h': usage(stdout); return 0;
		case 'V': util_cli_print_version(P); return 0;
		default: fprintf(stderr, "%s: --help lists the options\n", P); return 2;
		}
	}
	int thr[MAX_THREADS];
	int nthr = parse_threads(threads_list, thr);
	if (optind != argc) {
		util_cli_error(P, "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (nthr < 1) {
		util_cli_error(P, "--threads '%s': expected a list of thread counts, e.g. 1,2",
			       threads_list);
		return 2;
	}

	struct launch_addrs a;
	if (launch_addrs_pick(&a, cfg.addr_index, cfg.nranks)) {
		fprintf(stderr, "bench-switch: loopback block %u is busy\n", cfg.addr_index);
		return 2;
	}
	static struct gen g;
	g.nmem = cfg.nranks;
	g.nslots = cfg.nslots;
	g.batch = batch;
	g.gso = gso;
	g.spin = spin;
	/* Datagrams per send call: `batch` messages of one datagram, or of one slot block. */
	g.flush_at = gso ? (size_t)batch * WIRE_SLOT_BLOCK : batch;
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
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	size_t maxdata = wire_max_data_auth(4096, 4, 1, auth);
	g.auth_key_id = cfg.auth_key_id;
	for (int i = 0; auth && i < g.nmem; i++) {
		if (wire_mac_new(&g.m[i].mac, cfg.auth_key) < 0)
			return 2;
		g.m[i].auth_ctr = wire_auth_ctr_start();
	}
	printf("# bench-switch: inca-switch aggregating vs inca-switch --reflect, same generator\n");
	printf("# %d members on %s10.., switch %s:4791, window %u slots per member, generator %s, "
	       "members %s, batch %u messages, %.1f s per run (+0.3 s warmup), switch threads %s, "
	       "check_icrc %s, %d cores\n",
	       g.nmem, a.prefix, a.switch_ip, g.nslots,
	       gso ? "UDP GSO sends (one per slot block) + UDP_GRO receives"
		   : "one datagram per message (--no-gso)",
	       spin ? "polling (--member-wait spin)" : "sleeping in recvmmsg (--member-wait sleep)",
	       batch, secs, threads_list, cfg.check_icrc ? "yes" : "no", ncpu);
	printf("# in_pps = packets the generator sent = packets the daemon had to handle per "
	       "second; out_pps = responses received (results or echoes)\n");
	printf("# cpu = daemon CPU (cores); pkts/cpu-s = in_pps / cpu; gen = generator CPU (its "
	       "send calls also run the kernel's loopback delivery); busy = whole machine\n");
	printf("# tx/m = datagrams per send message (GSO segments), rx/b = datagrams per "
	       "receive buffer (GRO)\n");
	printf("#%8s %3s %8s %11s %11s %8s %5s %11s %5s %5s %6s %6s %5s\n", "data(B)", "thr",
	       "daemon", "in_pps", "out_pps", "Gbit/s", "cpu", "pkts/cpu-s", "gen", "busy",
	       "tx/m", "rx/b", "retx");
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
		struct scale_row rows[MAX_THREADS];
		for (int ti = 0; ti < nthr; ti++) {
			cfg.switch_threads = thr[ti];
			/* Alternate switch and reflector `trials` times and report medians: on a
			 * small shared machine one pair of runs swings by +-10%. */
			struct run_res res[3][MAX_TRIALS];
			double ratios[MAX_TRIALS], ratios_cpu[MAX_TRIALS], ratios_auth[MAX_TRIALS];
			int nt = 0;
			memset(res, 0, sizeof(res));
			for (int trial = 0; trial < trials; trial++) {
				bool both = true;
				/* mode 0: switch, 1: reflector, 2: switch with authentication */
				for (int mode = 0; mode < (auth ? 3 : 2); mode++) {
					struct run_res *r = &res[mode][trial];
					cfg.reflect = mode == 1;
					g.reflect = cfg.reflect;
					cfg.no_auth = mode != 2;
					g.auth = mode == 2;
					g.pkt_len = wire_udp_payload_len_auth(1, db, g.auth);
					char perf_out[512];
					if (perf_prefix) {
						snprintf(perf_out, sizeof(perf_out),
							 "%s-%s-%zuB-t%d-%d.data", perf_prefix,
							 cfg.reflect ? "reflect" : "switch", db,
							 thr[ti], trial);
						g.perf_out = perf_out;
					}
					struct launch_switch sw;
					if (launch_switch_start(&cfg, &a, NULL, &sw)) {
						fails++;
						both = false;
						break;
					}
					if (run_one(&g, 0.3, secs, sw.pid, r))
						fails++, both = false;
					struct json *st = NULL;
					if (launch_switch_stop(&sw, &st))
						fails++;
					r->daemon_rx = (uint64_t)json_num(json_get(st, "rx_pkts"), 0);
					r->daemon_drops =
						(uint64_t)json_num(json_get(st, "drops_total"), 0);
					double rxc = json_num(json_get(st, "rx_batches"), 0);
					double txc = json_num(json_get(st, "tx_batches"), 0);
					r->daemon_rx_per_call = rxc > 0 ? (double)r->daemon_rx / rxc : 0;
					r->daemon_tx_per_call =
						txc > 0 ? json_num(json_get(st, "tx_pkts"), 0) / txc : 0;
					json_free(st);
					if (r->wrong)
						fails++;
					print_run(jf, &g, thr[ti], db, cfg.reflect, r);
				}
				if (!both)
					continue;
				ratios[nt] = res[1][trial].in_pps > 0
						     ? res[0][trial].in_pps / res[1][trial].in_pps : 0;
				ratios_auth[nt] = auth && res[0][trial].pkts_per_cpu_s > 0
							  ? res[2][trial].pkts_per_cpu_s /
								    res[0][trial].pkts_per_cpu_s
							  : 0;
				ratios_cpu[nt] = res[1][trial].pkts_per_cpu_s > 0
							 ? res[0][trial].pkts_per_cpu_s /
								   res[1][trial].pkts_per_cpu_s
							 : 0;
				nt++;
			}
			double ratio = util_median(ratios, nt), ratio_cpu = util_median(ratios_cpu, nt);
			if (auth) {
				double ra = util_median(ratios_auth, nt);
				printf("# %zu B, %d thread(s): authenticated/plain switch = %.3f in packets "
				       "per daemon CPU-second (cost %.1f%%; medians of %d trials: "
				       "plain %.0f, authenticated %.0f)\n",
				       db, thr[ti], ra, (1 - ra) * 100, nt,
				       MED(res[0], trials, pkts_per_cpu_s),
				       MED(res[2], trials, pkts_per_cpu_s));
				if (jf)
					fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"auth_ratio\","
						    "\"threads\":%d,\"data_bytes\":%zu,"
						    "\"per_cpu_ratio\":%.4f}\n", thr[ti], db, ra);
			}
			printf("# %zu B, %d thread(s): switch/reflector = %.3f in packets/s (%s 0.8), "
			       "%.3f in packets per daemon CPU-second (medians of %d alternating "
			       "pairs)\n",
			       db, thr[ti], ratio, ratio >= 0.8 ? ">=" : "<", ratio_cpu, nt);
			if (jf)
				fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"ratio\",\"io\":\"%s\","
					    "\"threads\":%d,\"data_bytes\":%zu,\"pps_ratio\":%.4f,"
					    "\"per_cpu_ratio\":%.4f}\n",
					gso ? "gso" : "plain", thr[ti], db, ratio, ratio_cpu);
			struct scale_row *s = &rows[ti];
			s->threads = thr[ti];
			s->pps = MED(res[0], trials, in_pps);
			s->cpu = MED(res[0], trials, daemon_cpu);
			s->per_cpu = MED(res[0], trials, pkts_per_cpu_s);
			s->gen_cpu = MED(res[0], trials, gen_cpu);
			s->busy = MED(res[0], trials, busy_cores);
			s->rf_pps = MED(res[1], trials, in_pps);
			s->rf_per_cpu = MED(res[1], trials, pkts_per_cpu_s);
			fflush(stdout);
		}
		printf("# %zu B scaling of the switch (medians of %d runs; reflector beside it):\n", db,
		       trials);
		printf("#   %3s %11s %7s %5s %11s %5s %5s %11s %11s\n", "thr", "pkts/s", "speedup",
		       "cpu", "pkts/cpu-s", "gen", "busy", "refl pkts/s", "refl/cpu-s");
		for (int ti = 0; ti < nthr; ti++) {
			const struct scale_row *s = &rows[ti];
			double sp = rows[0].pps > 0 ? s->pps / rows[0].pps : 0;
			printf("#   %3d %11.0f %7.2f %5.2f %11.0f %5.2f %5.2f %11.0f %11.0f\n",
			       s->threads, s->pps, sp, s->cpu, s->per_cpu, s->gen_cpu, s->busy,
			       s->rf_pps, s->rf_per_cpu);
			if (jf)
				fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"scaling\",\"io\":\"%s\","
					    "\"data_bytes\":%zu,\"threads\":%d,\"in_pps\":%.1f,"
					    "\"speedup\":%.3f,\"daemon_cpu\":%.3f,"
					    "\"pkts_per_cpu_s\":%.1f,\"gen_cpu\":%.3f,"
					    "\"busy_cores\":%.3f,\"cores\":%d,"
					    "\"reflect_in_pps\":%.1f,\"reflect_pkts_per_cpu_s\":%.1f}\n",
					gso ? "gso" : "plain", db, s->threads, s->pps, sp, s->cpu,
					s->per_cpu, s->gen_cpu, s->busy, ncpu, s->rf_pps,
					s->rf_per_cpu);
		}
		char why[512];
		int stop = scaling_verdict(rows, nthr, ncpu, why, sizeof(why));
		printf("# %zu B: %s\n", db, why);
		if (jf)
			fprintf(jf, "{\"tool\":\"bench-switch\",\"mode\":\"scaling_verdict\","
				    "\"io\":\"%s\",\"data_bytes\":%zu,\"stops_at_threads\":%d,"
				    "\"why\":\"%s\"}\n",
				gso ? "gso" : "plain", db, stop, why);
		fflush(stdout);
	}
	if (jf)
		fclose(jf);
	for (int i = 0; i < g.nmem; i++)
		close(g.m[i].fd);
	free(g.m);
	return fails ? 1 : 0;
}
