/* inca-am: command line, configuration file, signals and the main loop (gRPC events, then the
 * periodic work of groups.c). Usage and the config format: docs/am.md. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "am.h"
#include "metrics.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/util.h"

int am_verbosity;

UTIL_LOG_DEFINE(am_log, am_verbosity, "inca-am", 0)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca-am -c FILE [options]\n"
		"  -c, --config FILE      configuration (switches, jobs, attachments; docs/am.md);\n"
		"                         required: without it there is no job to admit\n"
		"  -l, --listen IP:PORT   gRPC address (default 127.0.0.1:50051)\n"
		"  -j, --journal FILE     journal for restarts (append-only, fsync'd)\n"
		"      --tls-cert FILE    serve gRPC over TLS with this certificate chain (PEM)\n"
		"      --tls-key FILE     ... and this private key (PEM)\n"
		"      --insecure         serve gRPC in clear (as 'tls = off'): credentials and\n"
		"                         group keys cross the network readable by anyone\n"
		"      --ready-file PATH  created once the gRPC port is bound\n"
		"      --metrics-listen IP:PORT  Prometheus metrics on http://IP:PORT/metrics\n"
		"                         (port 0: any free port, logged)\n"
		"      --check-config     parse the configuration and exit\n"
		"      --recover          start from a damaged journal: keep its valid records,\n"
		"                         remove trees no recovered group owns, move it aside\n"
		"  -v, --verbose          more logging (repeat)\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version and exit\n"
		"SIGTERM/SIGINT stop the AM; running trees stay on the switches.\n");
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

int main(int argc, char **argv)
{
	static struct am am;
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "journal", required_argument, NULL, 'j' },
		{ "tls-cert", required_argument, NULL, 1 },
		{ "tls-key", required_argument, NULL, 2 },
		{ "ready-file", required_argument, NULL, 3 },
		{ "check-config", no_argument, NULL, 4 },
		{ "recover", no_argument, NULL, 5 },
		{ "insecure", no_argument, NULL, 6 },
		{ "metrics-listen", required_argument, NULL, 7 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *listen = NULL, *journal = NULL, *cert = NULL, *key = NULL;
	const char *ready = NULL, *metrics_listen = NULL;
	bool check = false, insecure = false;
	char err[512];
	struct sigaction sa;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:l:j:vhV", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'j':
			journal = optarg;
			break;
		case 1:
			cert = optarg;
			break;
		case 2:
			key = optarg;
			break;
		case 3:
			ready = optarg;
			break;
		case 4:
			check = true;
			break;
		case 5:
			am.recover = true;
			break;
		case 6:
			insecure = true;
			break;
		case 7: {
			struct sockaddr_in ma;
			if (util_parse_addr(optarg, -1, &ma) < 0) {
				util_cli_error("inca-am", "--metrics-listen '%s': expected IP:PORT",
					       optarg);
				return 2;
			}
			metrics_listen = optarg;
			break;
		}
		case 'v':
			am_verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			util_cli_print_version("inca-am");
			return 0;
		default: /* getopt_long named the option */
			fprintf(stderr, "inca-am: --help lists the options\n");
			return 2;
		}
	}
	if (optind < argc) {
		util_cli_error("inca-am", "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!config) {
		/* Built-in defaults know no switch and no job: such an AM could only refuse every
		 * client, which looks like a network problem from the client's side. */
		util_cli_error("inca-am", "no configuration: give -c FILE listing the switches "
			       "and jobs (docs/am.md)");
		return 2;
	}
	am_cfg_defaults(&am.cfg);
	if (config && am_cfg_load(&am.cfg, config, err, sizeof err) < 0) {
		fprintf(stderr, "inca-am: %s\n", err);
		return 2;
	}
	if ((listen && strlen(listen) >= AM_STR) || (journal && strlen(journal) >= AM_PATH) ||
	    (cert && strlen(cert) >= AM_PATH) || (key && strlen(key) >= AM_PATH)) {
		fprintf(stderr, "inca-am: argument too long\n");
		return 2;
	}
	if (listen)
		snprintf(am.cfg.listen, sizeof am.cfg.listen, "%s", listen);
	if (journal)
		snprintf(am.cfg.journal, sizeof am.cfg.journal, "%s", journal);
	if (cert)
		snprintf(am.cfg.tls_cert, sizeof am.cfg.tls_cert, "%s", cert);
	if (key)
		snprintf(am.cfg.tls_key, sizeof am.cfg.tls_key, "%s", key);
	if (!!am.cfg.tls_cert[0] != !!am.cfg.tls_key[0]) {
		fprintf(stderr, "inca-am: --tls-cert and --tls-key go together\n");
		return 2;
	}
	if (insecure)
		am.cfg.tls_off = true;
	if (am.cfg.tls_off && am.cfg.tls_cert[0]) {
		fprintf(stderr, "inca-am: --insecure / tls = off together with a TLS certificate\n");
		return 2;
	}
	if (!am.cfg.tls_off && !am.cfg.tls_cert[0]) {
		fprintf(stderr, "inca-am: no TLS certificate: set tls_cert and tls_key in the config "
				"(or --tls-cert/--tls-key); to serve gRPC in clear, say so with "
				"'tls = off' or --insecure (docs/am.md)\n");
		return 2;
	}
	if (check) {
		printf("listen = %s\njournal = %s\nheartbeat_ms = %u\nheartbeat_misses = %u\n"
		       "poll_ms = %u\nswitch_timeout_ms = %u\nslots = %u\nslots_min = %u\n"
		       "tree_ids = %u-%u\nallow_first_joiner = %s\nfirst_joiner_ttl_s = %u\n"
		       "tls = %s\nadmin_token = %s\njob_max_trees = %u\njob_max_slots = %u\n"
		       "job_max_forming = %u\njob_max_size = %u\n",
		       am.cfg.listen, am.cfg.journal, am.cfg.heartbeat_ms, am.cfg.heartbeat_misses,
		       am.cfg.poll_ms, am.cfg.switch_timeout_ms, am.cfg.slots_default,
		       am.cfg.slots_min, am.cfg.tree_id_min, am.cfg.tree_id_max, am.cfg.allow_first_joiner ? "yes" : "no",
		       am.cfg.first_joiner_ttl_s, am.cfg.tls_cert[0] ? "on" : "off",
		       am.cfg.admin_token[0] ? "*** (set)" : "(none: admin operations refused)",
		       am.cfg.quota.max_trees, am.cfg.quota.max_slots, am.cfg.quota.max_forming,
		       am.cfg.quota.max_size);
		for (size_t i = 0; i < am.cfg.nswitches; i++)
			printf("switch %s %s\n", am.cfg.sw[i].name, am.cfg.sw[i].target);
		for (size_t i = 0; i < am.cfg.njobs; i++) {
			struct am_quota q;
			am_cfg_quota(&am.cfg, am.cfg.jobs[i].id, &q);
			printf("job %s credential *** max_trees=%u max_slots=%u max_forming=%u "
			       "max_size=%u\n", am.cfg.jobs[i].id, q.max_trees, q.max_slots,
			       q.max_forming, q.max_size);
		}
		for (size_t i = 0; i < am.cfg.nattach; i++)
			printf("attach %s %s\n", am.cfg.attach[i].host, am.cfg.attach[i].sw);
		return 0;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (am.cfg.tls_off)
		am_log(0, "WARNING: gRPC without TLS (tls = off / --insecure): job credentials, "
			  "the admin token and group keys of data-plane authentication cross the "
			  "network in clear; anyone on the path can join jobs and forge packets "
			  "(set tls_cert / tls_key)");
	grpc_init();
	if (am_init(&am) < 0) {
		am_fini(&am);
		grpc_shutdown();
		return 1;
	}
	if (am_server_start(&am, err, sizeof err) < 0) {
		fprintf(stderr, "inca-am: %s\n", err);
		am_server_stop(&am);
		am_fini(&am);
		grpc_shutdown();
		return 1;
	}
	if (metrics_listen && am_metrics_start(&am, metrics_listen, &am.metrics, err,
					       sizeof err) < 0) {
		fprintf(stderr, "inca-am: %s\n", err);
		am_server_stop(&am);
		am_fini(&am);
		grpc_shutdown();
		return 1;
	}
	if (am.cfg.njobs == 0 && !am.cfg.allow_first_joiner)
		am_log(0, "warning: %s lists no job and allow_first_joiner is off: every Join "
			  "will be refused", config);
	if (am.cfg.nswitches == 0)
		am_log(0, "warning: %s lists no switch: every group will run on the host path",
		       config);
	am_log(1, "serving on %s (%s), %zu switch(es), journal %s", am.cfg.listen,
	       am.cfg.tls_cert[0] ? "TLS" : "insecure", am.nsw,
	       am.cfg.journal[0] ? am.cfg.journal : "off");
	if (ready) {
		FILE *f = fopen(ready, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	while (!stop_flag) {
		am_server_run_once(&am, 50);
		am_tick(&am);
		am_metrics_poll(am.metrics); /* never waits: a scrape is at most 50 ms late */
	}
	am_log(1, "stopping (trees stay on the switches)");
	/* A push under way ends journalled and told (bounded: each request times out). */
	for (uint64_t until = util_now_ns() + (am.cfg.switch_timeout_ms * 2ull + 1000) * NS_PER_MS;
	     am_switch_work_pending(&am) && util_now_ns() < until;) {
		am_server_run_once(&am, 50);
		am_tick(&am);
	}
	am_server_stop(&am);
	am_metrics_stop(am.metrics);
	am.metrics = NULL;
	am_fini(&am);
	grpc_shutdown();
	if (ready)
		unlink(ready);
	return 0;
}
