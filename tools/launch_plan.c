/* tools/launch_plan: fabric plans of the netns harness (launch.h "Fabric plans"): the plan
 * file parser, applying a plan to a job, entering a rank's network namespace, and fresh
 * statistics from the plan's switches. The loopback launcher itself is launch.c. */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"
#include "wire/auth.h"

/* ---- fabric plans ---------------------------------------------------------------------- */

/* Next whitespace-separated word of *s (modified in place), or NULL. */
static char *plan_word(char **s)
{
	char *p = *s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return NULL;
	char *w = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return w;
}

static int plan_num(const char *w, unsigned long long max, unsigned long long *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(w ? w : "", &end, 0);
	if (!w || end == w || *end || errno || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Copy a plan value; a value that does not fit is an error, not silently cut (a cut netns
 * name or address would name another namespace or host). */
static int plan_str(char *dst, size_t cap, const char *val)
{
	if (strlen(val) >= cap)
		return -EINVAL;
	memcpy(dst, val, strlen(val) + 1);
	return 0;
}

/* "key value key value ..." after the leading word(s); calls back per pair. */
static int plan_line(struct launch_plan *p, char *rest, const char *kind)
{
	unsigned long long v;
	if (!strcmp(kind, "tree")) {
		char *id = plan_word(&rest);
		if (plan_num(id, 65535, &v))
			return -EINVAL;
		p->tree_id = (uint16_t)v;
		for (char *k; (k = plan_word(&rest)) != NULL;) {
			char *val = plan_word(&rest);
			if (!strcmp(k, "key") && !plan_num(val, 0xffffffffull, &v))
				p->key = (uint32_t)v;
			else if (!strcmp(k, "slots") && !plan_num(val, 65535, &v) && v)
				p->nslots = (uint16_t)v;
			else if (!strcmp(k, "bsl") && !plan_num(val, 4096, &v) && v >= 64)
				p->bsl_bits = (uint16_t)v;
			else if (!strcmp(k, "auth_key") && val &&
				 !wire_auth_key_parse(val, p->auth_key))
				p->has_auth_key = true;
			else if (!strcmp(k, "auth_key_id") && !plan_num(val, 0xffffffffull, &v) && v)
				p->auth_key_id = (uint32_t)v;
			else if (!strcmp(k, "auth") && val && !strcmp(val, "off"))
				p->auth_off = true;
			else
				return -EINVAL;
		}
		return 0;
	}
	if (!strcmp(kind, "rank")) {
		char *id = plan_word(&rest);
		if (plan_num(id, LAUNCH_MAX_RANKS - 1, &v))
			return -EINVAL;
		int r = (int)v;
		struct launch_plan_rank *pr = &p->ranks[r];
		if (r + 1 > p->nranks)
			p->nranks = r + 1;
		for (char *k; (k = plan_word(&rest)) != NULL;) {
			char *val = plan_word(&rest);
			int bad = 0;
			if (!val)
				return -EINVAL;
			if (!strcmp(k, "netns"))
				bad = plan_str(pr->netns, sizeof(pr->netns), val);
			else if (!strcmp(k, "ip"))
				bad = plan_str(pr->ip, sizeof(pr->ip), val);
			else if (!strcmp(k, "switch"))
				bad = plan_str(pr->switch_addr, sizeof(pr->switch_addr), val);
			else if (!strcmp(k, "bfr") && !plan_num(val, 65535, &v) && v)
				pr->bfr_id = (uint16_t)v;
			else if (!strcmp(k, "host") && strlen(val) < sizeof(pr->host))
				snprintf(pr->host, sizeof(pr->host), "%s", val);
			else
				return -EINVAL;
			if (bad)
				return -EINVAL;
		}
		return pr->ip[0] ? 0 : -EINVAL;
	}
	if (!strcmp(kind, "switch")) {
		if (p->nswitches >= LAUNCH_MAX_SWITCHES)
			return -E2BIG;
		struct launch_plan_switch *s = &p->sw[p->nswitches];
		char *name = plan_word(&rest);
		if (!name || plan_str(s->name, sizeof(s->name), name))
			return -EINVAL;
		for (char *k; (k = plan_word(&rest)) != NULL;) {
			char *val = plan_word(&rest);
			int bad = 0;
			if (!val)
				return -EINVAL;
			if (!strcmp(k, "role"))
				bad = plan_str(s->role, sizeof(s->role), val);
			else if (!strcmp(k, "netns"))
				bad = plan_str(s->netns, sizeof(s->netns), val);
			else if (!strcmp(k, "listen"))
				bad = plan_str(s->listen, sizeof(s->listen), val);
			else if (!strcmp(k, "pid") && !plan_num(val, INT_MAX, &v))
				s->pid = (pid_t)v;
			else if (!strcmp(k, "stats"))
				bad = plan_str(s->stats_path, sizeof(s->stats_path), val);
			else
				return -EINVAL;
			if (bad)
				return -EINVAL;
		}
		p->nswitches++;
		return 0;
	}
	if (!strcmp(kind, "bootstrap")) {
		char *w = plan_word(&rest);
		if (!w)
			return -EINVAL;
		char *colon = strchr(w, ':');
		p->boot_port = 0;
		if (colon) {
			*colon++ = '\0';
			if (plan_num(colon, 65535, &v))
				return -EINVAL;
			p->boot_port = (uint16_t)v;
		}
		return plan_str(p->boot_ip, sizeof(p->boot_ip), w);
	}
	if (!strcmp(kind, "am")) {
		char *w = plan_word(&rest);
		if (!w || strlen(w) >= sizeof(p->am_addr))
			return -EINVAL;
		snprintf(p->am_addr, sizeof(p->am_addr), "%s", w);
		for (char *k; (k = plan_word(&rest)) != NULL;) {
			char *val = plan_word(&rest);
			char *dst;
			size_t cap;
			if (!val)
				return -EINVAL;
			if (!strcmp(k, "job"))
				dst = p->job_id, cap = sizeof(p->job_id);
			else if (!strcmp(k, "credential"))
				dst = p->job_credential, cap = sizeof(p->job_credential);
			else if (!strcmp(k, "group"))
				dst = p->group_name, cap = sizeof(p->group_name);
			else if (!strcmp(k, "cli"))
				dst = p->cli_path, cap = sizeof(p->cli_path);
			else if (!strcmp(k, "ca"))
				dst = p->am_ca, cap = sizeof(p->am_ca);
			else if (!strcmp(k, "insecure") && !strcmp(val, "1")) {
				p->am_insecure = 1;
				continue;
			} else
				return -EINVAL;
			if (strlen(val) >= cap)
				return -EINVAL;
			snprintf(dst, cap, "%s", val);
		}
		return p->job_id[0] ? 0 : -EINVAL;
	}
	if (!strcmp(kind, "name")) {
		char *w = plan_word(&rest);
		if (!w)
			return -EINVAL;
		return plan_str(p->name, sizeof(p->name), w);
	}
	return -EINVAL;
}

int launch_plan_load(const char *path, struct launch_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->tree_id = 1;
	p->key = 0x5eed0001;
	p->nslots = 256;
	p->bsl_bits = 64;
	FILE *f = fopen(path, "r");
	if (!f) {
		int rc = -errno;
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return rc;
	}
	char line[1024];
	int lineno = 0, rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		lineno++;
		/* fgets splits a longer line: its tail would be read as a line of its own */
		if (!strchr(line, '\n') && getc(f) != EOF) {
			fprintf(stderr, "%s:%d: line too long or holds a NUL byte\n", path,
				lineno);
			rc = -EINVAL;
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		char *rest = line;
		char *kind = plan_word(&rest);
		if (!kind || kind[0] == '#')
			continue;
		if (!strcmp(kind, "desc")) {
			while (*rest == ' ')
				rest++;
			snprintf(p->desc, sizeof(p->desc), "%s", rest);
			continue;
		}
		rc = plan_line(p, rest, kind);
		if (rc)
			fprintf(stderr, "%s:%d: bad '%s' line\n", path, lineno, kind);
	}
	fclose(f);
	if (rc)
		return rc;
	if (p->nranks < 1 || !p->boot_ip[0]) {
		fprintf(stderr, "%s: needs 'bootstrap' and at least one 'rank' line\n", path);
		return -EINVAL;
	}
	if (!p->am_addr[0] && p->has_auth_key == p->auth_off) {
		fprintf(stderr, "%s: a standalone plan's 'tree' line needs 'auth_key HEX auth_key_id "
				"N' (the switches' group key) or 'auth off', not %s\n", path,
			p->auth_off ? "both" : "neither");
		return -EINVAL;
	}
	if (p->has_auth_key && !p->auth_key_id) {
		fprintf(stderr, "%s: auth_key needs auth_key_id\n", path);
		return -EINVAL;
	}
	for (int r = 0; r < p->nranks; r++) {
		if (!p->ranks[r].ip[0]) {
			fprintf(stderr, "%s: rank %d missing\n", path, r);
			return -EINVAL;
		}
	}
	return 0;
}

void launch_plan_apply(const struct launch_plan *p, struct launch_cfg *c)
{
	c->nranks = p->nranks;
	c->tree_id = p->tree_id;
	c->key = p->key;
	c->nslots = p->nslots;
	c->bsl_bits = p->bsl_bits;
	c->plan = p;
	/* Standalone trees: the ranks use the plan's group key, or its explicit opt-out (AM
	 * plans: the AM hands out the keys). */
	if (p->has_auth_key) {
		memcpy(c->auth_key, p->auth_key, sizeof c->auth_key);
		c->auth_key_id = p->auth_key_id;
		c->no_auth = false;
	} else if (p->auth_off) {
		c->no_auth = true;
	}
}

int launch_enter_netns(const char *name)
{
	char path[PATH_MAX];
	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return rc;
}

void launch_plan_switch_stats(const struct launch_plan *p, struct json **stats,
			      unsigned timeout_ms)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	double t_sig_ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
	for (int i = 0; i < p->nswitches; i++) {
		stats[i] = NULL;
		if (p->sw[i].pid > 0)
			kill(p->sw[i].pid, SIGUSR1);
	}
	/* The switch stamps time_unix_ms when it writes: wait for a file written after the
	 * signal (the workers snapshot their counters between batches first). */
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int missing = 0;
		for (int i = 0; i < p->nswitches; i++) {
			if (stats[i] || !p->sw[i].stats_path[0])
				continue;
			char *txt = json_read_file(p->sw[i].stats_path, NULL);
			struct json *j = txt ? json_parse(txt, NULL) : NULL;
			free(txt);
			if (j && json_num(json_get(j, "time_unix_ms"), 0) + 1.0 >= t_sig_ms)
				stats[i] = j;
			else {
				json_free(j);
				missing++;
			}
		}
		if (!missing || util_now_ns() > deadline)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000L }, NULL);
	}
}
