/* inca-switch: command line, configuration loading, signal handling and the stats timer.
 * The main thread only waits for signals and writes statistics; the data plane runs in the
 * worker threads of dataplane.c. Usage and file format: docs/switch.md. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "util/cli.h"
#include "config.h"
#include "metrics.h"
#include "switch.h"
#ifdef SW_HAVE_NETCONF
#include "netconf.h"
#endif

/* --cpus LIST: "3", "0,2-3": CPUs this process may use, each once, in order. 0 or -1 (said). */
static int parse_cpus(const char *arg, struct sw_opts *o)
{
	static const char P[] = "inca-switch";
	cpu_set_t allowed;
	const char *p = arg;

	if (sched_getaffinity(0, sizeof allowed, &allowed)) {
		util_cli_error(P, "--cpus: cannot read this process's CPUs: %s", strerror(errno));
		return -1;
	}
	o->ncpus = 0;
	for (;;) {
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10), b = a;
		if (end == p || errno || a < 0 || a >= CPU_SETSIZE)
			goto bad;
		p = end;
		if (*p == '-') {
			b = strtol(++p, &end, 10);
			if (end == p || errno || b < a || b >= CPU_SETSIZE)
				goto bad;
			p = end;
		}
		for (long c = a; c <= b; c++) {
			if (!CPU_ISSET((int)c, &allowed)) {
				util_cli_error(P, "--cpus '%s': CPU %ld is not one this process may use",
					       arg, c);
				return -1;
			}
			for (unsigned i = 0; i < o->ncpus; i++)
				if (o->cpus[i] == (int)c) {
					util_cli_error(P, "--cpus '%s': CPU %ld twice", arg, c);
					return -1;
				}
			if (o->ncpus == SW_MAX_CPUS) {
				util_cli_error(P, "--cpus '%s': more than %d CPUs", arg, SW_MAX_CPUS);
				return -1;
			}
			o->cpus[o->ncpus++] = (int)c;
		}
		if (!*p)
			return 0;
		if (*p++ != ',')
			goto bad;
	}
bad:
	util_cli_error(P, "--cpus '%s': expected CPU numbers and ranges, e.g. 3 or 0,2-3", arg);
	return -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca-switch [options]\n"
		"  -c, --config FILE          standalone config file (docs/switch.md)\n"
		"  -l, --listen IP[:PORT]     data-plane address (default 0.0.0.0:4791)\n"
		"      --threads N            worker threads, one SO_REUSEPORT socket each (1)\n"
		"      --tree SPEC            add a tree, e.g. 'id=1,key=0x5eed0001,slots=256,\n"
		"                             members=1@127.0.0.10:4791+2@127.0.0.11:4791'\n"
		"      --check-icrc yes|no    verify the RoCEv2 ICRC of received packets (yes)\n"
		"      --no-icrc              same as --check-icrc no\n"
		"      --stats-file PATH      JSON statistics, rewritten periodically\n"
		"      --stats-interval-ms N  period of --stats-file (1000; 0: SIGUSR1/exit only)\n"
		"      --stats-stdout         print the JSON statistics on stdout at exit\n"
		"      --metrics-listen IP:PORT  Prometheus metrics on http://IP:PORT/metrics\n"
		"                             (port 0: any free port, logged)\n"
		"      --reflect              echo valid-looking packets back (I/O baseline)\n"
		"      --no-gso               send datagram by datagram (default: UDP GSO batches)\n"
		"      --no-gro               receive datagram by datagram (default: UDP GRO)\n"
		"      --drop-rate P          drop this fraction of packets on rx and on tx\n"
		"      --seed S               seed of the fault injection generator (1)\n"
		"      --busy-poll-us N       after a packet, poll (yielding the CPU) this long before\n"
		"                             sleeping in the kernel again (200; 0: always sleep)\n"
		"      --cpus LIST            worker i on the i-th CPU of LIST alone, e.g. 3 or 2-3,\n"
		"                             polling also between calls (the CPU is its own)\n"
		"      --xdp IFACE            data plane on an AF_XDP socket of IFACE (docs/switch.md);\n"
		"                             falls back to UDP sockets if XDP is unavailable\n"
		"      --xdp-queue Q          queue of IFACE to bind (0)\n"
		"      --xdp-mode native|skb  XDP attach mode (native)\n"
		"      --xdp-bind auto|copy|zerocopy  AF_XDP bind mode (auto: zero-copy if possible)\n"
		"      --xdp-required         exit with an error instead of falling back to sockets\n"
		"      --ready-file PATH      create PATH once sockets are bound and trees built\n"
		"      --check-config         print the effective configuration and exit\n"
		"      --netconf-unix PATH    NETCONF server on a UNIX socket (docs/netconf.md)\n"
		"      --netconf-ssh IP:PORT  NETCONF server over SSH (public-key authentication)\n"
		"      --netconf-hostkey FILE SSH host private key (with --netconf-ssh)\n"
		"      --netconf-authorized-keys FILE  client public keys allowed (OpenSSH format)\n"
		"  -v, --verbose              more logging on stderr (repeat: -vv, -vvv)\n"
		"  -h, --help                 this text\n"
		"  -V, --version              print the version and exit\n"
		"Signals: SIGUSR1 writes statistics now; SIGTERM/SIGINT stop cleanly.\n");
}

enum {
	OPT_TREE = 256,
	OPT_CHECK_ICRC,
	OPT_NO_ICRC,
	OPT_STATS_FILE,
	OPT_STATS_INTERVAL,
	OPT_STATS_STDOUT,
	OPT_REFLECT,
	OPT_NO_GSO,
	OPT_NO_GRO,
	OPT_DROP_RATE,
	OPT_SEED,
	OPT_BUSY_POLL,
	OPT_CPUS,
	OPT_READY_FILE,
	OPT_XDP,
	OPT_XDP_QUEUE,
	OPT_XDP_MODE,
	OPT_XDP_BIND,
	OPT_XDP_REQUIRED,
	OPT_CHECK_CONFIG,
	OPT_NC_UNIX,
	OPT_NC_SSH,
	OPT_NC_HOSTKEY,
	OPT_NC_AUTHKEYS,
	OPT_THREADS,
	OPT_METRICS_LISTEN,
};

static const struct option long_opts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "listen", required_argument, NULL, 'l' },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "tree", required_argument, NULL, OPT_TREE },
	{ "check-icrc", required_argument, NULL, OPT_CHECK_ICRC },
	{ "no-icrc", no_argument, NULL, OPT_NO_ICRC },
	{ "stats-file", required_argument, NULL, OPT_STATS_FILE },
	{ "stats-interval-ms", required_argument, NULL, OPT_STATS_INTERVAL },
	{ "stats-stdout", no_argument, NULL, OPT_STATS_STDOUT },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "reflect", no_argument, NULL, OPT_REFLECT },
	{ "no-gso", no_argument, NULL, OPT_NO_GSO },
	{ "no-gro", no_argument, NULL, OPT_NO_GRO },
	{ "drop-rate", required_argument, NULL, OPT_DROP_RATE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "xdp", required_argument, NULL, OPT_XDP },
	{ "xdp-queue", required_argument, NULL, OPT_XDP_QUEUE },
	{ "xdp-mode", required_argument, NULL, OPT_XDP_MODE },
	{ "xdp-bind", required_argument, NULL, OPT_XDP_BIND },
	{ "xdp-required", no_argument, NULL, OPT_XDP_REQUIRED },
	{ "busy-poll-us", required_argument, NULL, OPT_BUSY_POLL },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "ready-file", required_argument, NULL, OPT_READY_FILE },
	{ "check-config", no_argument, NULL, OPT_CHECK_CONFIG },
	{ "netconf-unix", required_argument, NULL, OPT_NC_UNIX },
	{ "netconf-ssh", required_argument, NULL, OPT_NC_SSH },
	{ "netconf-hostkey", required_argument, NULL, OPT_NC_HOSTKEY },
	{ "netconf-authorized-keys", required_argument, NULL, OPT_NC_AUTHKEYS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* A global flag remembered until the config file (if any) has been read: flags win. */
struct global_flag {
	const char *key, *value;
};

static int write_ready_file(const char *path)
{
	char tmp[SW_CONF_PATH_MAX + 32];
	FILE *f;

	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return -e;
	}
	return 0;
}

/* Snapshot and write under the switch lock: the NETCONF thread may replace trees or take its
 * own snapshot meanwhile. */
static void write_stats(struct sw_switch *sw, const char *path, unsigned timeout_ms)
{
	int rc;

	if (!path[0])
		return;
	sw_switch_lock(sw);
	sw_switch_snapshot(sw, timeout_ms);
	rc = sw_stats_write_file(sw, path);
	sw_switch_unlock(sw);
	if (rc < 0)
		sw_log(0, "cannot write stats to %s: %s", path, strerror(-rc));
}

int main(int argc, char **argv)
{
	static struct sw_config cfg;
	struct global_flag gflags[32];
	size_t ngflags = 0;
	const char *trees[256];
	size_t ntrees = 0;
	const char *config_file = NULL, *ready_file = NULL, *metrics_listen = NULL;
	struct sw_metrics *metrics = NULL;
	struct sw_opts opts = { .seed = 1, .busy_poll_us = SW_BUSY_POLL_US };
	bool stats_stdout = false, check_config = false, metrics_any_port = false;
	char err[SW_CONF_ERR_MAX];
	struct sw_switch *sw = NULL;
	const char *nc_unix = NULL, *nc_ssh = NULL, *nc_hostkey = NULL, *nc_authkeys = NULL;
#ifdef SW_HAVE_NETCONF
	struct sw_netconf *nc = NULL;
#endif
	sigset_t sigs;
	int opt, rc;
	uint64_t next_stats_ns;

	static const char *const xdp_modes[] = { "native", "skb", NULL };
	static const char *const xdp_binds[] = { "auto", "copy", "zerocopy", NULL };
	static const char P[] = "inca-switch";

	sw_config_init(&cfg);
	while ((opt = getopt_long(argc, argv, "c:l:vhV", long_opts, NULL)) != -1) {
		const char *gkey = NULL;
		long long ll;
		uint64_t u;

		switch (opt) {
		case 'c':
			config_file = optarg;
			break;
		case 'l':
			gkey = "listen";
			break;
		case OPT_THREADS:
			gkey = "threads";
			break;
		case OPT_CHECK_ICRC:
			gkey = "check_icrc";
			break;
		case OPT_NO_ICRC:
			gkey = "check_icrc";
			optarg = (char *)"no";
			break;
		case OPT_STATS_FILE:
			gkey = "stats_file";
			break;
		case OPT_STATS_INTERVAL:
			gkey = "stats_interval_ms";
			break;
		case OPT_TREE:
			if (ntrees == sizeof trees / sizeof trees[0]) {
				fprintf(stderr, "inca-switch: too many --tree flags\n");
				return 2;
			}
			trees[ntrees++] = optarg;
			break;
		case OPT_STATS_STDOUT:
			stats_stdout = true;
			break;
		case OPT_METRICS_LISTEN: {
			struct sockaddr_in sa;
			if (util_parse_addr(optarg, -1, &sa) < 0) {
				util_cli_error(P, "--metrics-listen '%s': expected IP:PORT", optarg);
				return 2;
			}
			metrics_listen = optarg;
			metrics_any_port = sa.sin_port == 0;
			break;
		}
		case OPT_REFLECT:
			opts.reflect = true;
			break;
		case OPT_NO_GSO:
			opts.no_gso = true;
			break;
		case OPT_NO_GRO:
			opts.no_gro = true;
			break;
		case OPT_BUSY_POLL:
			if (util_cli_int(P, "--busy-poll-us", optarg, 0, 1000000, &ll))
				return 2;
			opts.busy_poll_us = (uint32_t)ll;
			break;
		case OPT_CPUS:
			if (parse_cpus(optarg, &opts))
				return 2;
			break;
		case OPT_DROP_RATE:
			if (util_cli_double(P, "--drop-rate", optarg, 0, 1, false, &opts.drop_rate))
				return 2;
			break;
		case OPT_SEED:
			if (util_cli_u64(P, "--seed", optarg, 0, UINT64_MAX, &u))
				return 2;
			opts.seed = u;
			break;
		case OPT_READY_FILE:
			ready_file = optarg;
			break;
		case OPT_XDP:
			opts.xdp_ifname = optarg;
			break;
		case OPT_XDP_QUEUE:
			if (util_cli_int(P, "--xdp-queue", optarg, 0, 63, &ll))
				return 2;
			opts.xdp_queue = (uint32_t)ll;
			break;
		case OPT_XDP_MODE:
			rc = util_cli_choice(P, "--xdp-mode", optarg, xdp_modes);
			if (rc < 0)
				return 2;
			opts.xdp_skb_mode = rc == 1;
			break;
		case OPT_XDP_BIND:
			rc = util_cli_choice(P, "--xdp-bind", optarg, xdp_binds);
			if (rc < 0)
				return 2;
			opts.xdp_bind = rc;
			break;
		case OPT_XDP_REQUIRED:
			opts.xdp_required = true;
			break;
		case OPT_CHECK_CONFIG:
			check_config = true;
			break;
		case OPT_NC_UNIX:
			nc_unix = optarg;
			break;
		case OPT_NC_SSH:
			nc_ssh = optarg;
			break;
		case OPT_NC_HOSTKEY:
			nc_hostkey = optarg;
			break;
		case OPT_NC_AUTHKEYS:
			nc_authkeys = optarg;
			break;
		case 'v':
			sw_verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			util_cli_print_version("inca-switch");
			return 0;
		default: /* getopt_long named the option */
			fprintf(stderr, "inca-switch: --help lists the options\n");
			return 2;
		}
		if (gkey) {
			if (ngflags == sizeof gflags / sizeof gflags[0]) {
				fprintf(stderr, "inca-switch: too many flags\n");
				return 2;
			}
			gflags[ngflags++] = (struct global_flag){ gkey, optarg };
		}
	}
	if (optind < argc) {
		util_cli_error(P, "unexpected argument '%s'", argv[optind]);
		return 2;
	}

#ifndef SW_HAVE_NETCONF
	if (nc_unix || nc_ssh) {
		fprintf(stderr, "inca-switch: built without NETCONF support (libnetconf2)\n");
		return 2;
	}
#endif
	if ((nc_hostkey || nc_authkeys) && !nc_ssh) {
		fprintf(stderr, "inca-switch: --netconf-hostkey/--netconf-authorized-keys need "
				"--netconf-ssh\n");
		return 2;
	}
	/* With NETCONF the trees may all come later from the Aggregation Manager; a configuration
	 * check judges the file alone, whether or not this run would add a NETCONF server. */
	cfg.allow_no_trees = nc_unix || nc_ssh || check_config;

	/* File first, then flags override its globals, then flag trees are added. */
	if (config_file && sw_config_parse_file(&cfg, config_file, err, sizeof err) < 0)
		goto config_error;
	for (size_t i = 0; i < ngflags; i++)
		if (sw_config_set_global(&cfg, gflags[i].key, gflags[i].value, err, sizeof err) < 0)
			goto config_error;
	for (size_t i = 0; i < ntrees; i++)
		if (sw_config_add_tree_spec(&cfg, trees[i], err, sizeof err) < 0)
			goto config_error;
	if (sw_config_validate(&cfg, err, sizeof err) < 0)
		goto config_error;
	if (!opts.xdp_ifname && (opts.xdp_required || opts.xdp_queue || opts.xdp_skb_mode ||
				 opts.xdp_bind)) {
		fprintf(stderr, "inca-switch: --xdp-queue/--xdp-mode/--xdp-bind/--xdp-required "
				"need --xdp IFACE\n");
		sw_config_free(&cfg);
		return 2;
	}
	if (opts.xdp_ifname && (opts.reflect || cfg.threads != 1 ||
				ntohs(cfg.listen.sin_port) != WIRE_ROCE_UDP_PORT)) {
		/* One AF_XDP socket on one queue: the NIC's RSS cannot steer by slot, and the frame
		 * decoder accepts RoCEv2's port only. */
		fprintf(stderr, "inca-switch: --xdp needs --threads 1, the listen port %d and no "
				"--reflect\n", WIRE_ROCE_UDP_PORT);
		sw_config_free(&cfg);
		return 2;
	}
	if (opts.ncpus && opts.ncpus < cfg.threads) {
		fprintf(stderr, "inca-switch: --cpus names %u CPU%s for %u worker threads (one each)\n",
			opts.ncpus, opts.ncpus == 1 ? "" : "s", cfg.threads);
		sw_config_free(&cfg);
		return 2;
	}
	if (check_config) {
		sw_config_dump(&cfg, stdout);
		sw_config_free(&cfg);
		return 0;
	}

	/* Workers inherit this mask: only the main thread takes signals, via sigtimedwait. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = sw_switch_create(&cfg, &opts, &sw, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "inca-switch: %s\n", err);
		sw_config_free(&cfg);
		return 1;
	}
	rc = sw_switch_start(sw);
	if (rc < 0) {
		sw_switch_destroy(sw);
		sw_config_free(&cfg);
		return 1;
	}
#ifdef SW_HAVE_NETCONF
	if (nc_unix || nc_ssh) {
		struct sw_netconf_opts no = {
			.unix_path = nc_unix,
			.ssh_addr = nc_ssh,
			.hostkey_path = nc_hostkey,
			.authorized_keys = nc_authkeys,
		};
		rc = sw_netconf_start(sw, &cfg, &no, &nc, err, sizeof err);
		if (rc < 0) {
			fprintf(stderr, "inca-switch: %s\n", err);
			sw_switch_stop(sw);
			sw_switch_destroy(sw);
			sw_config_free(&cfg);
			return 1;
		}
		sw_log(1, "netconf:%s%s%s%s", nc_unix ? " unix:" : "", nc_unix ? nc_unix : "",
		       nc_ssh ? " ssh:" : "", nc_ssh ? nc_ssh : "");
	}
#endif
	if (metrics_listen) {
		char a[32];
		rc = sw_metrics_start(sw, metrics_listen, &metrics, err, sizeof err);
		if (rc < 0) {
			fprintf(stderr, "inca-switch: %s\n", err);
#ifdef SW_HAVE_NETCONF
			sw_netconf_stop(nc);
#endif
			sw_switch_stop(sw);
			sw_switch_destroy(sw);
			sw_config_free(&cfg);
			return 1;
		}
		/* With port 0 the log is the only place the port shows: say it at any verbosity
		 * (sw_log's level 0 would call it an error). */
		util_format_addr(sw_metrics_addr(metrics), a, sizeof a);
		if (metrics_any_port && sw_verbosity < 1)
			fprintf(stderr, "inca-switch: metrics on http://%s/metrics\n", a);
		else
			sw_log(1, "metrics on http://%s/metrics", a);
	}
	{
		char a[32];
		sw_log(1, "%s on %s: %zu tree(s), %u thread(s), ICRC %s, UDP GSO %s, GRO %s%s",
		       opts.reflect ? "reflecting" : "aggregating",
		       util_format_addr(&cfg.listen, a, sizeof a), cfg.ntrees, cfg.threads,
		       cfg.check_icrc ? "checked" : "not checked", sw->w[0].gso ? "on" : "off",
		       sw->w[0].gro ? "on" : "off", opts.drop_rate > 0 ? ", fault injection on" : "");
	}
	if (ready_file) {
		rc = write_ready_file(ready_file);
		if (rc < 0)
			sw_log(0, "cannot write ready file %s: %s", ready_file, strerror(-rc));
	}

	next_stats_ns = util_now_ns() + (uint64_t)cfg.stats_interval_ms * 1000000ull;
	for (;;) {
		struct timespec ts = { 1, 0 };
		int sig;

		if (cfg.stats_file[0] && cfg.stats_interval_ms) {
			uint64_t now = util_now_ns();
			uint64_t wait = next_stats_ns > now ? next_stats_ns - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
		}
		sig = sigtimedwait(&sigs, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			sw_log(1, "signal %d: stopping", sig);
			break;
		}
		if (sig == SIGUSR1 || sig == SIGHUP) {
			write_stats(sw, cfg.stats_file, 500);
			continue;
		}
		if (sig < 0 && errno == EAGAIN && cfg.stats_file[0] && cfg.stats_interval_ms &&
		    util_now_ns() >= next_stats_ns) {
			write_stats(sw, cfg.stats_file, 500);
			next_stats_ns += (uint64_t)cfg.stats_interval_ms * 1000000ull;
			if (next_stats_ns < util_now_ns()) /* fell behind: do not burst */
				next_stats_ns = util_now_ns() + (uint64_t)cfg.stats_interval_ms * 1000000ull;
		}
	}

	sw_metrics_stop(metrics); /* before the workers: a scrape takes a snapshot */
#ifdef SW_HAVE_NETCONF
	sw_netconf_stop(nc); /* before the workers: a tree update waits for them */
#endif
	sw_switch_stop(sw);
	sw_switch_snapshot(sw, 0); /* workers are joined: copies directly */
	write_stats(sw, cfg.stats_file, 0);
	if (stats_stdout)
		sw_stats_write_json(sw, stdout);
	if (ready_file)
		unlink(ready_file);
	sw_switch_destroy(sw);
	sw_config_free(&cfg);
	sw_log(1, "stopped");
	return 0;

config_error:
	fprintf(stderr, "inca-switch: %s\n", err);
	sw_config_free(&cfg);
	return 2;
}
