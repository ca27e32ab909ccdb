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

int am_verbosity;

void am_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > am_verbosity)
		return;
	fprintf(stderr, "inca-am: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

void am_cfg_defaults(struct am_cfg *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "127.0.0.1:50051");
	c->heartbeat_ms = 500;
	c->heartbeat_misses = 4;
	c->poll_ms = 1000;
	c->grace_ms = 10000;
	c->slots_default = 256;
	c->slots_min = 16;
	c->tree_id_min = 1024;
	c->tree_id_max = 65000;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") || !strcmp(s, "1"))
		*out = true;
	else if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off") || !strcmp(s, "0"))
		*out = false;
	else
		return -1;
	return 0;
}

#define CFG_ERR(...)                                                   \
	do {                                                           \
		int n_ = snprintf(err, cap, "%s:%d: ", path, lineno);  \
		if (n_ > 0 && (size_t)n_ < cap)                        \
			snprintf(err + n_, cap - (size_t)n_, __VA_ARGS__); \
		fclose(f);                                             \
		return -1;                                             \
	} while (0)

static bool fits(const char *v, size_t cap)
{
	return strlen(v) < cap;
}

int am_cfg_load(struct am_cfg *c, const char *path, char *err, size_t cap)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int lineno = 0;

	if (!f) {
		snprintf(err, cap, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *hash = strchr(line, '#'), *save = NULL, *w[8];
		int n = 0;
		lineno++;
		if (hash)
			*hash = '\0';
		for (char *t = strtok_r(line, " \t\r\n", &save); t && n < 8;
		     t = strtok_r(NULL, " \t\r\n", &save))
			w[n++] = t;
		if (n == 0)
			continue;
		if (!strcmp(w[0], "switch")) {
			struct am_cfg_switch *s;
			if (n < 3)
				CFG_ERR("switch NAME TARGET [role=leaf|spine] [key=PATH] "
					"[known_hosts=PATH]");
			if (c->nswitches == AM_MAX_SWITCHES)
				CFG_ERR("too many switches (max %d)", AM_MAX_SWITCHES);
			s = &c->sw[c->nswitches];
			memset(s, 0, sizeof *s);
			if (!fits(w[1], sizeof s->name) || !fits(w[2], sizeof s->target))
				CFG_ERR("switch name or target too long");
			for (size_t i = 0; i < c->nswitches; i++)
				if (!strcmp(c->sw[i].name, w[1]))
					CFG_ERR("switch %s listed twice", w[1]);
			snprintf(s->name, sizeof s->name, "%s", w[1]);
			snprintf(s->target, sizeof s->target, "%s", w[2]);
			for (int i = 3; i < n; i++) {
				if (!strcmp(w[i], "role=leaf"))
					s->role = AM_ROLE_LEAF;
				else if (!strcmp(w[i], "role=spine"))
					s->role = AM_ROLE_SPINE;
				else if (!strncmp(w[i], "key=", 4) && fits(w[i] + 4, AM_PATH))
					snprintf(s->key_path, sizeof s->key_path, "%s", w[i] + 4);
				else if (!strncmp(w[i], "known_hosts=", 12) && fits(w[i] + 12, AM_PATH))
					snprintf(s->known_hosts, sizeof s->known_hosts, "%s", w[i] + 12);
				else
					CFG_ERR("switch %s: unknown option '%s'", w[1], w[i]);
			}
			c->nswitches++;
			continue;
		}
		if (!strcmp(w[0], "job")) {
			if (n != 4 || strcmp(w[2], "credential"))
				CFG_ERR("job ID credential SECRET");
			if (c->njobs == AM_MAX_JOBS)
				CFG_ERR("too many jobs");
			if (!fits(w[1], AM_STR) || !fits(w[3], AM_STR * 2))
				CFG_ERR("job id or credential too long");
			snprintf(c->jobs[c->njobs].id, AM_STR, "%s", w[1]);
			snprintf(c->jobs[c->njobs].cred, AM_STR * 2, "%s", w[3]);
			c->njobs++;
			continue;
		}
		if (!strcmp(w[0], "attach")) {
			if (n != 3)
				CFG_ERR("attach HOST-OR-IP SWITCH");
			if (c->nattach == AM_MAX_ATTACH)
				CFG_ERR("too many attach lines");
			if (!fits(w[1], AM_STR) || !fits(w[2], AM_STR))
				CFG_ERR("attach: name too long");
			snprintf(c->attach[c->nattach].host, AM_STR, "%s", w[1]);
			snprintf(c->attach[c->nattach].sw, AM_STR, "%s", w[2]);
			c->nattach++;
			continue;
		}
		if (n != 3 || strcmp(w[1], "="))
			CFG_ERR("expected 'key = value', 'switch ...', 'job ...' or 'attach ...'");
		{
			const char *k = w[0], *v = w[2];
			uint32_t u;
			if (!strcmp(k, "listen") && fits(v, sizeof c->listen))
				snprintf(c->listen, sizeof c->listen, "%s", v);
			else if (!strcmp(k, "journal") && fits(v, AM_PATH))
				snprintf(c->journal, sizeof c->journal, "%s", v);
			else if (!strcmp(k, "tls_cert") && fits(v, AM_PATH))
				snprintf(c->tls_cert, sizeof c->tls_cert, "%s", v);
			else if (!strcmp(k, "tls_key") && fits(v, AM_PATH))
				snprintf(c->tls_key, sizeof c->tls_key, "%s", v);
			else if (!strcmp(k, "admin_token") && fits(v, AM_STR))
				snprintf(c->admin_token, sizeof c->admin_token, "%s", v);
			else if (!strcmp(k, "allow_first_joiner")) {
				if (parse_bool(v, &c->allow_first_joiner))
					CFG_ERR("allow_first_joiner: yes or no");
			} else if (!strcmp(k, "heartbeat_ms")) {
				if (parse_u32(v, 10, 600000, &c->heartbeat_ms))
					CFG_ERR("heartbeat_ms: 10..600000");
			} else if (!strcmp(k, "heartbeat_misses")) {
				if (parse_u32(v, 1, 100, &c->heartbeat_misses))
					CFG_ERR("heartbeat_misses: 1..100");
			} else if (!strcmp(k, "poll_ms")) {
				if (parse_u32(v, 10, 600000, &c->poll_ms))
					CFG_ERR("poll_ms: 10..600000");
			} else if (!strcmp(k, "grace_ms")) {
				if (parse_u32(v, 0, 3600000, &c->grace_ms))
					CFG_ERR("grace_ms: 0..3600000");
			} else if (!strcmp(k, "slots")) {
				if (parse_u32(v, 1, 65535, &u))
					CFG_ERR("slots: 1..65535");
				c->slots_default = (uint16_t)u;
			} else if (!strcmp(k, "slots_min")) {
				if (parse_u32(v, 1, 65535, &u))
					CFG_ERR("slots_min: 1..65535");
				c->slots_min = (uint16_t)u;
			} else if (!strcmp(k, "tree_ids")) {
				uint32_t lo, hi;
				char *dash = strchr(v, '-');
				if (!dash)
					CFG_ERR("tree_ids: LO-HI");
				*dash = '\0';
				if (parse_u32(v, 1, 65535, &lo) || parse_u32(dash + 1, lo, 65535, &hi))
					CFG_ERR("tree_ids: LO-HI within 1..65535");
				c->tree_id_min = (uint16_t)lo;
				c->tree_id_max = (uint16_t)hi;
			} else {
				CFG_ERR("unknown key '%s' (or value too long)", k);
			}
		}
	}
	fclose(f);
	if (!!c->tls_cert[0] != !!c->tls_key[0]) {
		snprintf(err, cap, "%s: tls_cert and tls_key go together", path);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca-am [options]\n"
		"  -c, --config FILE      configuration (switches, jobs, attachments; docs/am.md)\n"
		"  -l, --listen IP:PORT   gRPC address (default 127.0.0.1:50051)\n"
		"  -j, --journal FILE     journal for restarts (append-only, fsync'd)\n"
		"      --tls-cert FILE    serve gRPC over TLS with this certificate chain (PEM)\n"
		"      --tls-key FILE     ... and this private key (PEM)\n"
		"      --ready-file PATH  created once the gRPC port is bound\n"
		"      --check-config     parse the configuration and exit\n"
		"  -v, --verbose          more logging (repeat)\n"
		"  -h, --help\n"
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
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *listen = NULL, *journal = NULL, *cert = NULL, *key = NULL;
	const char *ready = NULL;
	bool check = false;
	char err[512];
	struct sigaction sa;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:l:j:vh", lo, NULL)) != -1) {
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
		case 'v':
			am_verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
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
	if (check) {
		printf("listen = %s\njournal = %s\nheartbeat_ms = %u\nheartbeat_misses = %u\n"
		       "poll_ms = %u\nslots = %u\nslots_min = %u\ntree_ids = %u-%u\n"
		       "allow_first_joiner = %s\ntls = %s\n",
		       am.cfg.listen, am.cfg.journal, am.cfg.heartbeat_ms, am.cfg.heartbeat_misses,
		       am.cfg.poll_ms, am.cfg.slots_default, am.cfg.slots_min, am.cfg.tree_id_min,
		       am.cfg.tree_id_max, am.cfg.allow_first_joiner ? "yes" : "no",
		       am.cfg.tls_cert[0] ? "yes" : "no");
		for (size_t i = 0; i < am.cfg.nswitches; i++)
			printf("switch %s %s\n", am.cfg.sw[i].name, am.cfg.sw[i].target);
		for (size_t i = 0; i < am.cfg.njobs; i++)
			printf("job %s credential ***\n", am.cfg.jobs[i].id);
		for (size_t i = 0; i < am.cfg.nattach; i++)
			printf("attach %s %s\n", am.cfg.attach[i].host, am.cfg.attach[i].sw);
		return 0;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

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
	}
	am_log(1, "stopping (trees stay on the switches)");
	am_server_stop(&am);
	am_fini(&am);
	grpc_shutdown();
	if (ready)
		unlink(ready);
	return 0;
}
