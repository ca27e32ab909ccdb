/* inca-switch configuration: defaults, the global keys (listen, threads, links, ...), the
 * whole-config checks and the effective-config dump. The file form and the --tree flags are
 * parsed in config_parse.c, the keys of a tree block in config_tree.c. */
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/auth.h"

/* Data-plane authentication rule: a tree with neither auth_key nor auth = off is a
 * configuration error, so a tree only runs unauthenticated when someone said so. */
static const bool SW_CONF_AUTH_REQUIRED = true;

bool sw_config_auth_required(void)
{
	return SW_CONF_AUTH_REQUIRED;
}

void sw_config_init(struct sw_config *c)
{
	memset(c, 0, sizeof *c);
	c->listen.sin_family = AF_INET;
	c->listen.sin_addr.s_addr = htonl(INADDR_ANY);
	c->listen.sin_port = htons(4791);
	c->threads = 1;
	c->check_icrc = true;
	c->stats_interval_ms = 1000;
	c->max_trees = SW_DEFAULT_MAX_TREES;
	c->max_slots = SW_DEFAULT_MAX_SLOTS;
}

void sw_config_free(struct sw_config *c)
{
	for (size_t i = 0; i < c->ntrees; i++)
		ctl_tree_free(&c->trees[i]);
	free(c->trees);
	c->trees = NULL;
	c->ntrees = 0;
	free(c->links);
	c->links = NULL;
	c->nlinks = 0;
}

const char *sw_dtype_name(unsigned dt)
{
	return wire_dtype_name(dt);
}

const char *sw_op_name(unsigned op)
{
	return wire_op_name(op);
}

/* ------------------------------------------------------------------ globals */

enum global_key {
	GK_LISTEN,
	GK_THREADS,
	GK_CHECK_ICRC,
	GK_STATS_FILE,
	GK_STATS_INTERVAL,
	GK_NAME,
	GK_ROLE,
	GK_MAX_TREES,
	GK_MAX_SLOTS,
	GK_LINK,     /* repeatable */
	GK_MGMT_ADDR, /* repeatable */
	GK_COUNT_
};
static const char *const global_key_names[GK_COUNT_] = {
	"listen", "threads", "check_icrc", "stats_file", "stats_interval_ms",
	"name", "role", "max_trees", "max_slots", "link", "mgmt_addr",
};

/* A name: letters, digits and "-_.:/", 1..SW_NAME_MAX-1 bytes. */
static int check_name(struct pctx *p, const char *what, const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n >= SW_NAME_MAX)
		return swc_fail(p, p->line, "%s '%s': 1..%d characters", what, v, SW_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("-_.:/", v[i]))
			return swc_fail(p, p->line, "%s '%s': bad character '%c'", what, v, v[i]);
	return 0;
}

/* "1G", "100M", "25000000000", "10g" -> bits/s. */
static int parse_speed(const char *v, uint64_t *out)
{
	char num_part[32];
	size_t n = strlen(v);
	uint64_t mult = 1, x;

	if (n == 0 || n >= sizeof num_part)
		return -EINVAL;
	strcpy(num_part, v);
	switch (num_part[n - 1]) {
	case 'k': case 'K': mult = 1000ull; break;
	case 'm': case 'M': mult = 1000000ull; break;
	case 'g': case 'G': mult = 1000000000ull; break;
	case 't': case 'T': mult = 1000000000000ull; break;
	default: break;
	}
	if (mult > 1)
		num_part[n - 1] = 0;
	if (swc_parse_uint(num_part, UINT64_MAX / mult, &x) < 0)
		return -EINVAL;
	*out = x * mult;
	return 0;
}

/* link = PORT peer NAME [peer_addr A[:P]] [speed S] [down|up] */
static int parse_link(struct pctx *p, const char *v)
{
	struct sw_config *c = p->c;
	char buf[LINE_MAX_BYTES];
	char *tok[16];
	size_t n;
	struct sw_conf_link l = { .up = true };
	struct sw_conf_link *nl;

	if (strlen(v) >= sizeof buf)
		return swc_fail(p, p->line, "link too long");
	strcpy(buf, v);
	n = swc_tokenize(buf, tok, 16);
	if (n < 1 || n > 16)
		return swc_fail(p, p->line, "bad link (expected '<port> peer <name> [peer_addr A] "
					"[speed S] [up|down]')");
	if (check_name(p, "link port", tok[0]) < 0)
		return -EINVAL;
	strcpy(l.port, tok[0]);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(tok[i], "up") || !strcmp(tok[i], "down")) {
			l.up = tok[i][0] == 'u';
			continue;
		}
		if (i + 1 >= n)
			return swc_fail(p, p->line, "link %s: '%s' needs a value", l.port, tok[i]);
		if (!strcmp(tok[i], "peer")) {
			if (check_name(p, "link peer", tok[i + 1]) < 0)
				return -EINVAL;
			strcpy(l.peer, tok[i + 1]);
		} else if (!strcmp(tok[i], "peer_addr")) {
			if (swc_addr(p, "link peer_addr", tok[i + 1], &l.peer_addr) < 0)
				return -EINVAL;
			l.has_peer_addr = true;
		} else if (!strcmp(tok[i], "speed")) {
			if (parse_speed(tok[i + 1], &l.speed_bps) < 0)
				return swc_fail(p, p->line, "link %s: bad speed '%s' (e.g. 1G, 100M)",
					    l.port, tok[i + 1]);
		} else {
			return swc_fail(p, p->line, "link %s: unknown option '%s'", l.port, tok[i]);
		}
		i++;
	}
	for (size_t i = 0; i < c->nlinks; i++)
		if (!strcmp(c->links[i].port, l.port))
			return swc_fail(p, p->line, "link %s: port listed twice", l.port);
	nl = realloc(c->links, (c->nlinks + 1) * sizeof *nl);
	if (!nl)
		return swc_fail(p, p->line, "out of memory");
	c->links = nl;
	c->links[c->nlinks++] = l;
	return 0;
}

int swc_global_set(struct pctx *p, const char *key, const char *v, uint32_t *seen)
{
	struct sw_config *c = p->c;
	uint64_t x;
	int k;

	for (k = 0; k < GK_COUNT_; k++)
		if (!strcmp(key, global_key_names[k]))
			break;
	if (k == GK_COUNT_)
		return swc_fail(p, p->line, "unknown key '%s'", key);
	if (seen && k != GK_LINK && k != GK_MGMT_ADDR) {
		if (*seen & (1u << k))
			return swc_fail(p, p->line, "duplicate key '%s'", key);
		*seen |= 1u << k;
	}
	switch ((enum global_key)k) {
	case GK_LISTEN:
		return swc_addr(p, key, v, &c->listen);
	case GK_THREADS:
		if (swc_num(p, key, v, 1, SW_THREADS_MAX, &x) < 0)
			return -EINVAL;
		c->threads = (unsigned)x;
		return 0;
	case GK_CHECK_ICRC:
		if (swc_parse_bool(v, &c->check_icrc) < 0)
			return swc_fail(p, p->line, "bad value '%s' for '%s' (expected yes or no)", v,
				    key);
		return 0;
	case GK_STATS_FILE:
		if (strlen(v) >= sizeof c->stats_file)
			return swc_fail(p, p->line, "stats_file path too long");
		strcpy(c->stats_file, v);
		return 0;
	case GK_STATS_INTERVAL:
		if (swc_num(p, key, v, 0, 3600000, &x) < 0)
			return -EINVAL;
		c->stats_interval_ms = (unsigned)x;
		return 0;
	case GK_NAME:
		if (check_name(p, "name", v) < 0)
			return -EINVAL;
		strcpy(c->name, v);
		return 0;
	case GK_ROLE:
		if (strcmp(v, "leaf") && strcmp(v, "spine"))
			return swc_fail(p, p->line, "bad role '%s' (expected leaf or spine)", v);
		strcpy(c->role_hint, v);
		return 0;
	case GK_MAX_TREES:
		if (swc_num(p, key, v, 1, 65536, &x) < 0)
			return -EINVAL;
		c->max_trees = (uint32_t)x;
		return 0;
	case GK_MAX_SLOTS:
		if (swc_num(p, key, v, 1, UINT32_MAX, &x) < 0)
			return -EINVAL;
		c->max_slots = (uint32_t)x;
		return 0;
	case GK_LINK:
		return parse_link(p, v);
	case GK_MGMT_ADDR:
		if (c->nmgmt == SW_MGMT_MAX)
			return swc_fail(p, p->line, "too many mgmt_addr (max %d)", SW_MGMT_MAX);
		if (strlen(v) >= sizeof c->mgmt_addr[0] || strpbrk(v, " \t"))
			return swc_fail(p, p->line, "bad mgmt_addr '%s'", v);
		strcpy(c->mgmt_addr[c->nmgmt++], v);
		return 0;
	case GK_COUNT_:
		break;
	}
	return -EINVAL;
}

int sw_config_set_global(struct sw_config *c, const char *key, const char *value, char *err,
			 size_t cap)
{
	struct pctx p = { .c = c, .name = "flags", .err = err, .cap = cap };
	char name[64];

	snprintf(name, sizeof name, "--%s", key);
	p.name = name;
	return swc_global_set(&p, key, value, NULL);
}

/* ------------------------------------------------------------------ whole config */

int sw_config_check_limits(const struct sw_config *c, const struct ctl_tree *trees, size_t n,
			   char *err, size_t cap)
{
	uint64_t slots = 0;

	if (n > c->max_trees) {
		snprintf(err, cap, "%zu trees exceed max_trees %u", n, c->max_trees);
		return -ENOSPC;
	}
	for (size_t i = 0; i < n; i++)
		slots += trees[i].slots;
	if (slots > c->max_slots) {
		snprintf(err, cap, "%llu slots exceed max_slots %u", (unsigned long long)slots,
			 c->max_slots);
		return -ENOSPC;
	}
	return 0;
}

int sw_config_validate(const struct sw_config *c, char *err, size_t cap)
{
	if (sw_config_check_limits(c, c->trees, c->ntrees, err, cap) < 0)
		return -EINVAL;
	if (c->ntrees == 0 && !c->allow_no_trees) {
		snprintf(err, cap, "no trees configured (use -c FILE or --tree SPEC)");
		return -EINVAL;
	}
	if (c->threads < 1 || c->threads > SW_THREADS_MAX) {
		snprintf(err, cap, "threads must be 1..%d", SW_THREADS_MAX);
		return -EINVAL;
	}
	return 0;
}

const struct ctl_tree *sw_config_find_tree(const struct sw_config *c, uint16_t id)
{
	for (size_t i = 0; i < c->ntrees; i++)
		if (c->trees[i].id == id)
			return &c->trees[i];
	return NULL;
}

static void dump_list(FILE *f, const uint16_t *ids, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		fprintf(f, "%s%u", i ? "," : "", ids[i]);
		if (j > i)
			fprintf(f, "-%u", ids[j]);
		i = j + 1;
	}
}

void sw_config_dump(const struct sw_config *c, FILE *f)
{
	char a[32];

	fprintf(f, "listen = %s\n", util_format_addr(&c->listen, a, sizeof a));
	fprintf(f, "threads = %u\n", c->threads);
	fprintf(f, "check_icrc = %s\n", c->check_icrc ? "yes" : "no");
	if (c->stats_file[0])
		fprintf(f, "stats_file = %s\n", c->stats_file);
	fprintf(f, "stats_interval_ms = %u\n", c->stats_interval_ms);
	if (c->name[0])
		fprintf(f, "name = %s\n", c->name);
	if (c->role_hint[0])
		fprintf(f, "role = %s\n", c->role_hint);
	fprintf(f, "max_trees = %u\n", c->max_trees);
	fprintf(f, "max_slots = %u\n", c->max_slots);
	for (size_t i = 0; i < c->nmgmt; i++)
		fprintf(f, "mgmt_addr = %s\n", c->mgmt_addr[i]);
	for (size_t i = 0; i < c->nlinks; i++) {
		const struct sw_conf_link *l = &c->links[i];
		fprintf(f, "link = %s", l->port);
		if (l->peer[0])
			fprintf(f, " peer %s", l->peer);
		if (l->has_peer_addr)
			fprintf(f, " peer_addr %s", util_format_addr(&l->peer_addr, a, sizeof a));
		if (l->speed_bps)
			fprintf(f, " speed %llu", (unsigned long long)l->speed_bps);
		fprintf(f, " %s\n", l->up ? "up" : "down");
	}
	for (size_t i = 0; i < c->ntrees; i++) {
		fputc('\n', f);
		sw_config_dump_tree(&c->trees[i], f);
	}
}

static void dump_mask(FILE *f, const char *key, uint32_t m, const char *(*name)(unsigned),
		      unsigned n)
{
	const char *sep = "";

	if (!m)
		return;
	fprintf(f, "  %s = ", key);
	for (unsigned i = 0; i < n; i++)
		if (m & (1u << i)) {
			fprintf(f, "%s%s", sep, name(i));
			sep = ",";
		}
	fputc('\n', f);
}

void sw_config_dump_tree(const struct ctl_tree *t, FILE *f)
{
	char a[32];

	{
		fprintf(f, "tree %u {\n", t->id);
		fprintf(f, "  key = 0x%08x\n", t->key);
		fprintf(f, "  qpn = 0x%x\n", t->qpn);
		fprintf(f, "  slots = %u\n", t->slots);
		fprintf(f, "  slot_bytes = %u\n", t->slot_bytes);
		fprintf(f, "  bsl = %u\n", t->bsl_bits);
		fprintf(f, "  si = %u\n", t->si);
		fprintf(f, "  role = %s\n", t->root ? "root" : "leaf");
		fprintf(f, "  bfr_id = %u\n", t->bfr_id);
		if (t->has_parent)
			fprintf(f, "  parent = %s qpn 0x%x\n", util_format_addr(&t->parent, a, sizeof a),
				t->parent_qpn);
		fprintf(f, "  deterministic = %s\n", t->deterministic ? "yes" : "no");
		fprintf(f, "  check_sender = %s\n", t->check_sender ? "yes" : "no");
		fprintf(f, "  pkey = 0x%04x\n", t->pkey);
		if (t->auth) {
			fprintf(f, "  auth_key = ");
			for (size_t j = 0; j < WIRE_AUTH_KEY_LEN; j++)
				fprintf(f, "%02x", t->auth_key[j]);
			fprintf(f, "\n  auth_key_id = %u\n", t->auth_key_id);
		} else {
			fprintf(f, "  auth = off\n");
		}
		dump_mask(f, "dtypes", t->dtype_mask, wire_dtype_name, WIRE_DTYPE_COUNT);
		dump_mask(f, "ops", t->op_mask, wire_op_name, WIRE_OP_COUNT);
		for (size_t j = 0; j < t->nmembers; j++)
			fprintf(f, "  member = %u %s qpn 0x%x\n", t->members[j].bfr_id,
				util_format_addr(&t->members[j].addr, a, sizeof a), t->members[j].qpn);
		for (size_t j = 0; j < t->nchildren; j++) {
			fprintf(f, "  child = %s qpn 0x%x bfr ",
				util_format_addr(&t->children[j].addr, a, sizeof a),
				t->children[j].qpn);
			dump_list(f, t->children[j].bfr_ids, t->children[j].nbfr);
			fputc('\n', f);
		}
		fprintf(f, "}\n");
	}
}

