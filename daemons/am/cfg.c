/* inca-am configuration file: defaults and the parser (format: docs/am.md "Configuration").
 * Kept apart from main.c so that the libFuzzer harness (cfg_fuzz.c) links it alone. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

void am_cfg_defaults(struct am_cfg *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "127.0.0.1:50051");
	c->heartbeat_ms = 500;
	c->heartbeat_misses = 4;
	c->poll_ms = 1000;
	c->grace_ms = 10000;
	c->switch_timeout_ms = 3000;
	c->slots_default = 256;
	c->slots_min = 16;
	c->tree_id_min = 1024;
	c->tree_id_max = 65000;
	/* One job cannot take a whole switch: 16 trees of the default 256 slots. */
	c->quota.max_trees = 16;
	c->quota.max_slots = 4096;
	c->quota.max_forming = 16;
	c->quota.max_size = AM_MAX_GROUP_SIZE;
	c->first_joiner_ttl_s = 600;
}

void am_cfg_quota(const struct am_cfg *c, const char *job, struct am_quota *out)
{
	*out = c->quota;
	for (size_t i = 0; i < c->njobs; i++) {
		const struct am_quota *q = &c->jobs[i].quota;
		if (strcmp(c->jobs[i].id, job) != 0)
			continue;
		if (q->max_trees)
			out->max_trees = q->max_trees;
		if (q->max_slots)
			out->max_slots = q->max_slots;
		if (q->max_forming)
			out->max_forming = q->max_forming;
		if (q->max_size)
			out->max_size = q->max_size;
		return;
	}
}

/* Quota keys: "NAME = N" (the default for every job) and "NAME=N" options of a job line. */
static const struct {
	const char *name;
	size_t off;
	uint32_t max;
} quota_keys[] = {
	{ "max_trees", offsetof(struct am_quota, max_trees), 65535 },
	{ "max_slots", offsetof(struct am_quota, max_slots), 1u << 24 },
	{ "max_forming", offsetof(struct am_quota, max_forming), 65535 },
	{ "max_size", offsetof(struct am_quota, max_size), AM_MAX_GROUP_SIZE },
};

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

/* 1 if name is a quota key (value parsed into q, or -1 when out of range), 0 otherwise. */
static int parse_quota(const char *name, const char *v, struct am_quota *q, uint32_t *max)
{
	for (size_t i = 0; i < sizeof quota_keys / sizeof quota_keys[0]; i++) {
		if (strcmp(name, quota_keys[i].name) != 0)
			continue;
		*max = quota_keys[i].max;
		if (parse_u32(v, 1, quota_keys[i].max, (uint32_t *)((char *)q + quota_keys[i].off)))
			return -1;
		return 1;
	}
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
		char *hash, *save = NULL, *w[8], *t;
		int n = 0;
		lineno++;
		/* fgets splits a longer line: its tail would be read as a line of its own */
		if (!strchr(line, '\n') && getc(f) != EOF)
			CFG_ERR("line too long (max %zu characters) or NUL byte", sizeof line - 2);
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		for (t = strtok_r(line, " \t\r\n", &save); t && n < 8;
		     t = strtok_r(NULL, " \t\r\n", &save))
			w[n++] = t;
		/* no statement has more than 8 words: do not drop a 9th one silently */
		if (t)
			CFG_ERR("too many words");
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
			if (n < 4 || strcmp(w[2], "credential"))
				CFG_ERR("job ID credential SECRET [max_trees=N] [max_slots=N] "
					"[max_forming=N] [max_size=N]");
			if (c->njobs == AM_MAX_JOBS)
				CFG_ERR("too many jobs");
			if (!fits(w[1], AM_STR) || !fits(w[3], AM_STR * 2))
				CFG_ERR("job id or credential too long");
			memset(&c->jobs[c->njobs], 0, sizeof c->jobs[0]);
			snprintf(c->jobs[c->njobs].id, AM_STR, "%s", w[1]);
			snprintf(c->jobs[c->njobs].cred, AM_STR * 2, "%s", w[3]);
			for (int i = 4; i < n; i++) {
				char *eq = strchr(w[i], '=');
				uint32_t max = 0;
				int rc;
				if (!eq)
					CFG_ERR("job %s: unknown option '%s'", w[1], w[i]);
				*eq = '\0';
				rc = parse_quota(w[i], eq + 1, &c->jobs[c->njobs].quota, &max);
				if (rc == 0)
					CFG_ERR("job %s: unknown option '%s'", w[1], w[i]);
				if (rc < 0)
					CFG_ERR("job %s: %s: 1..%u", w[1], w[i], max);
			}
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
			int qrc;
			if (!strcmp(k, "listen") && fits(v, sizeof c->listen))
				snprintf(c->listen, sizeof c->listen, "%s", v);
			else if (!strcmp(k, "journal") && fits(v, AM_PATH))
				snprintf(c->journal, sizeof c->journal, "%s", v);
			else if (!strcmp(k, "tls_cert") && fits(v, AM_PATH))
				snprintf(c->tls_cert, sizeof c->tls_cert, "%s", v);
			else if (!strcmp(k, "tls_key") && fits(v, AM_PATH))
				snprintf(c->tls_key, sizeof c->tls_key, "%s", v);
			else if (!strcmp(k, "tls")) {
				bool on;
				if (parse_bool(v, &on))
					CFG_ERR("tls: on or off");
				c->tls_off = !on;
			} else if (!strcmp(k, "admin_token") && fits(v, AM_STR))
				snprintf(c->admin_token, sizeof c->admin_token, "%s", v);
			else if (!strcmp(k, "allow_first_joiner")) {
				if (parse_bool(v, &c->allow_first_joiner))
					CFG_ERR("allow_first_joiner: yes or no");
			} else if (!strcmp(k, "first_joiner_ttl_s")) {
				if (parse_u32(v, 1, 30 * 86400, &c->first_joiner_ttl_s))
					CFG_ERR("first_joiner_ttl_s: 1..2592000");
			} else if (!strcmp(k, "heartbeat_ms")) {
				if (parse_u32(v, 10, 600000, &c->heartbeat_ms))
					CFG_ERR("heartbeat_ms: 10..600000");
			} else if (!strcmp(k, "heartbeat_misses")) {
				if (parse_u32(v, 1, 100, &c->heartbeat_misses))
					CFG_ERR("heartbeat_misses: 1..100");
			} else if (!strcmp(k, "poll_ms")) {
				if (parse_u32(v, 10, 600000, &c->poll_ms))
					CFG_ERR("poll_ms: 10..600000");
			} else if (!strcmp(k, "switch_timeout_ms")) {
				if (parse_u32(v, 100, 60000, &c->switch_timeout_ms))
					CFG_ERR("switch_timeout_ms: 100..60000");
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
			} else if (!strncmp(k, "job_", 4) &&
				   (qrc = parse_quota(k + 4, v, &c->quota, &u)) != 0) {
				if (qrc < 0)
					CFG_ERR("%s: 1..%u", k, u);
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
	if (c->tls_off && c->tls_cert[0]) {
		snprintf(err, cap, "%s: tls = off together with tls_cert / tls_key", path);
		return -1;
	}
	return 0;
}
