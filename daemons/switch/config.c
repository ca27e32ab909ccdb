/* inca-switch configuration parser: the line-oriented config file, the flags-only --tree spec
 * (translated into the same per-key setters, so both forms accept the same values) and the
 * effective-config dump. Every error names its source and line. */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/auth.h"

#define LINE_MAX_BYTES 4096
#define FILE_MAX_BYTES (16u << 20)

/* Data-plane authentication rule: when true, a tree with neither auth_key nor auth = off is a
 * configuration error. False until the data path verifies MACs; then flip it. */
static const bool SW_CONF_AUTH_REQUIRED = false;

bool sw_config_auth_required(void)
{
	return SW_CONF_AUTH_REQUIRED;
}

/* Parse state of one source (a file, a text buffer or one --tree flag). */
struct pctx {
	struct sw_config *c;
	const char *name;
	int line; /* 0: no line numbers (flags) */
	char *err;
	size_t cap;
};

static int fail(struct pctx *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct pctx *p, int line, const char *fmt, ...)
{
	char msg[SW_CONF_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (p->err && p->cap) {
		if (line > 0)
			snprintf(p->err, p->cap, "%s:%d: %s", p->name, line, msg);
		else
			snprintf(p->err, p->cap, "%s: %s", p->name, msg);
	}
	return -EINVAL;
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

/* ------------------------------------------------------------------ value parsers */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* Unsigned integer, decimal or 0x-hex (a leading 0 is NOT octal: "010" is ten). */
static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	int base = 10, ndig = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (; *s; s++, ndig++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -EINVAL;
		if (v > (max - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (ndig == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") || !strcmp(s, "1"))
		*out = true;
	else if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off") || !strcmp(s, "0"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

static int num(struct pctx *p, const char *key, const char *v, uint64_t min, uint64_t max,
	       uint64_t *out)
{
	int rc = parse_uint(v, max, out);

	if (rc == -EINVAL)
		return fail(p, p->line, "bad value '%s' for '%s' (expected a number)", v, key);
	if (rc < 0 || *out < min)
		return fail(p, p->line, "value '%s' for '%s' out of range %llu..%llu", v, key,
			    (unsigned long long)min, (unsigned long long)max);
	return 0;
}

static int addr(struct pctx *p, const char *what, const char *v, struct sockaddr_in *out)
{
	if (util_parse_addr(v, SW_PORT_DEFAULT, out) < 0)
		return fail(p, p->line, "bad address '%s' for '%s' (expected a.b.c.d[:port])", v,
			    what);
	return 0;
}

/* Split s in place into at most max whitespace-separated tokens. */
static size_t tokenize(char *s, char **tok, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		if (n == max)
			return max + 1;
		tok[n++] = t;
	}
	return n;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* "3-4,7" -> sorted unique BFR-ids (owned). */
static int parse_bfr_list(struct pctx *p, const char *v, uint16_t **out, size_t *nout)
{
	char buf[LINE_MAX_BYTES];
	char *save = NULL;
	uint16_t *ids = NULL;
	size_t n = 0;

	if (strlen(v) >= sizeof buf)
		return fail(p, p->line, "BFR-id list too long");
	strcpy(buf, v);
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(it, '-');
		uint64_t lo, hi;
		uint16_t *nids;

		if (dash)
			*dash = 0;
		if (parse_uint(trim(it), 65535, &lo) < 0 || lo == 0)
			goto bad;
		hi = lo;
		if (dash && (parse_uint(trim(dash + 1), 65535, &hi) < 0 || hi < lo))
			goto bad;
		if (n + (hi - lo + 1) > 65535)
			goto bad;
		nids = realloc(ids, (n + (hi - lo + 1)) * sizeof *ids);
		if (!nids) {
			free(ids);
			return fail(p, p->line, "out of memory");
		}
		ids = nids;
		for (uint64_t k = lo; k <= hi; k++)
			ids[n++] = (uint16_t)k;
	}
	if (n == 0)
		goto bad;
	qsort(ids, n, sizeof *ids, cmp_u16);
	for (size_t i = 1; i < n; i++)
		if (ids[i] == ids[i - 1]) {
			unsigned dup = ids[i];
			free(ids);
			return fail(p, p->line, "BFR-id %u listed twice in '%s'", dup, v);
		}
	*out = ids;
	*nout = n;
	return 0;
bad:
	free(ids);
	return fail(p, p->line, "bad BFR-id list '%s' (expected e.g. 3-4,7 with ids 1..65535)", v);
}

/* ------------------------------------------------------------------ tree keys */


/* Config-file names of the model's fields (enum ctl_tree_field order). */
static const char *const tree_key_names[CTL_TF_COUNT_] = {
	"key", "qpn", "slots", "slot_bytes", "bsl", "si", "role", "bfr_id", "parent",
	"deterministic", "check_sender", "dtypes", "ops", "auth", "auth_key", "auth_key_id",
	"pkey", "member", "child",
};

/* "fp32,int32" (also '+' or blanks between names) -> bit mask over names[]. */
static int parse_name_mask(struct pctx *p, const char *key, const char *v,
			   int (*parse)(const char *), uint32_t *out)
{
	char buf[LINE_MAX_BYTES];
	char *save = NULL;
	uint32_t m = 0;

	if (strlen(v) >= sizeof buf)
		return fail(p, p->line, "value of '%s' too long", key);
	strcpy(buf, v);
	for (char *it = strtok_r(buf, ",+ \t", &save); it; it = strtok_r(NULL, ",+ \t", &save)) {
		int i = parse(it);
		if (i < 0)
			return fail(p, p->line, "unknown name '%s' in '%s'", it, key);
		m |= 1u << i;
	}
	if (!m)
		return fail(p, p->line, "empty list for '%s'", key);
	*out = m;
	return 0;
}


static int parse_member(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[8];
	size_t n = tokenize(v, tok, 8);
	struct ctl_member m = { .line = p->line };
	uint64_t x;
	bool has_qpn = false;
	struct ctl_member *nm;

	if (n < 2 || n > 4)
		return fail(p, p->line, "bad member (expected '<bfr-id> <addr>[:port] [qpn N]')");
	if (num(p, "member BFR-id", tok[0], 1, 65535, &x) < 0)
		return -EINVAL;
	m.bfr_id = (uint16_t)x;
	if (addr(p, "member", tok[1], &m.addr) < 0)
		return -EINVAL;
	for (size_t i = 2; i < n; i += 2) {
		if (strcmp(tok[i], "qpn") || i + 1 >= n)
			return fail(p, p->line, "bad member option '%s' (expected 'qpn N')", tok[i]);
		if (num(p, "member qpn", tok[i + 1], 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		m.qpn = (uint32_t)x;
		has_qpn = true;
	}
	if (!has_qpn)
		m.qpn = wire_qpn_default(WIRE_QPN_MEMBER, m.bfr_id);
	nm = realloc(t->members, (t->nmembers + 1) * sizeof *nm);
	if (!nm)
		return fail(p, p->line, "out of memory");
	t->members = nm;
	t->members[t->nmembers++] = m;
	return 0;
}

static int parse_child(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[8];
	size_t n = tokenize(v, tok, 8);
	struct ctl_child ch = { .line = p->line,
				    .qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id) };
	struct ctl_child *nc;
	uint64_t x;

	if (n < 3 || n > 5 || n % 2 == 0)
		return fail(p, p->line,
			    "bad child (expected '<addr>[:port] [qpn N] bfr <list>', e.g. bfr 3-4,7)");
	if (addr(p, "child", tok[0], &ch.addr) < 0)
		return -EINVAL;
	for (size_t i = 1; i + 1 < n; i += 2) {
		if (!strcmp(tok[i], "qpn")) {
			if (num(p, "child qpn", tok[i + 1], 1, WIRE_QPN_MAX, &x) < 0)
				goto err;
			ch.qpn = (uint32_t)x;
		} else if (!strcmp(tok[i], "bfr") && !ch.bfr_ids) {
			if (parse_bfr_list(p, tok[i + 1], &ch.bfr_ids, &ch.nbfr) < 0)
				return -EINVAL;
		} else {
			fail(p, p->line, "bad child option '%s' (expected 'qpn N' or 'bfr LIST')",
			     tok[i]);
			goto err;
		}
	}
	if (!ch.bfr_ids)
		return fail(p, p->line, "child without 'bfr LIST'");
	nc = realloc(t->children, (t->nchildren + 1) * sizeof *nc);
	if (!nc) {
		fail(p, p->line, "out of memory");
		goto err;
	}
	t->children = nc;
	t->children[t->nchildren++] = ch;
	return 0;
err:
	free(ch.bfr_ids);
	return -EINVAL;
}

static int parse_parent(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[4];
	size_t n = tokenize(v, tok, 4);
	uint64_t x;

	if (n != 1 && n != 3)
		return fail(p, p->line, "bad parent (expected '<addr>[:port] [qpn N]')");
	if (addr(p, "parent", tok[0], &t->parent) < 0)
		return -EINVAL;
	t->parent_qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id);
	if (n == 3) {
		if (strcmp(tok[1], "qpn"))
			return fail(p, p->line, "bad parent option '%s' (expected 'qpn N')", tok[1]);
		if (num(p, "parent qpn", tok[2], 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		t->parent_qpn = (uint32_t)x;
	}
	t->has_parent = true;
	return 0;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* auth_key: exactly 2 * WIRE_AUTH_KEY_LEN hex digits (an optional 0x prefix). */
static int parse_auth_key(struct pctx *p, struct ctl_tree *t, const char *v)
{
	size_t n;

	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
		v += 2;
	n = strlen(v);
	if (n != 2 * WIRE_AUTH_KEY_LEN)
		return fail(p, p->line,
			    "tree %u: auth_key has %zu hex digits, expected %d (%d bytes)", t->id,
			    n, 2 * WIRE_AUTH_KEY_LEN, WIRE_AUTH_KEY_LEN);
	for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++) {
		int hi = hex_digit(v[2 * i]), lo = hex_digit(v[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return fail(p, p->line, "tree %u: auth_key: '%c' at digit %zu is not hex",
				    t->id, hi < 0 ? v[2 * i] : v[2 * i + 1],
				    hi < 0 ? 2 * i + 1 : 2 * i + 2);
		t->auth_key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int tree_set(struct pctx *p, struct ctl_tree *t, const char *key, char *v)
{
	int k;
	uint64_t x;

	for (k = 0; k < CTL_TF_COUNT_; k++)
		if (!strcmp(key, tree_key_names[k]))
			break;
	if (k == CTL_TF_COUNT_)
		return fail(p, p->line, "unknown tree key '%s'", key);
	if (k < CTL_TF_MEMBER) {
		if (t->given & (1u << k))
			return fail(p, p->line, "duplicate key '%s' in tree %u", key, t->id);
		t->given |= 1u << k;
	}
	switch ((enum ctl_tree_field)k) {
	case CTL_TF_KEY:
		if (num(p, key, v, 0, UINT32_MAX, &x) < 0)
			return -EINVAL;
		t->key = (uint32_t)x;
		return 0;
	case CTL_TF_QPN:
		if (num(p, key, v, 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		t->qpn = (uint32_t)x;
		return 0;
	case CTL_TF_SLOTS:
		if (num(p, key, v, 1, 65535, &x) < 0)
			return -EINVAL;
		t->slots = (uint16_t)x;
		return 0;
	case CTL_TF_SLOT_BYTES:
		if (num(p, key, v, 1, 4096, &x) < 0)
			return -EINVAL;
		t->slot_bytes = (uint32_t)x;
		return 0;
	case CTL_TF_BSL:
		if (num(p, key, v, 64, 4096, &x) < 0)
			return -EINVAL;
		if (x & (x - 1))
			return fail(p, p->line, "bsl %s is not a power of two (64..4096 bits)", v);
		t->bsl_bits = (unsigned)x;
		return 0;
	case CTL_TF_SI:
		if (num(p, key, v, 0, 255, &x) < 0)
			return -EINVAL;
		t->si = (uint8_t)x;
		return 0;
	case CTL_TF_ROLE:
		if (!strcmp(v, "root"))
			t->root = true;
		else if (!strcmp(v, "leaf"))
			t->root = false;
		else
			return fail(p, p->line, "bad role '%s' (expected root or leaf)", v);
		return 0;
	case CTL_TF_BFR_ID:
		if (num(p, key, v, 0, 65535, &x) < 0)
			return -EINVAL;
		t->bfr_id = (uint16_t)x;
		return 0;
	case CTL_TF_PARENT:
		return parse_parent(p, t, v);
	case CTL_TF_DETERMINISTIC:
	case CTL_TF_CHECK_SENDER:
		if (parse_bool(v, k == CTL_TF_DETERMINISTIC ? &t->deterministic : &t->check_sender) < 0)
			return fail(p, p->line, "bad value '%s' for '%s' (expected yes or no)", v,
				    key);
		return 0;
	case CTL_TF_PKEY:
		/* 0x0000 and 0x8000 are not valid P_Keys (IBTA) */
		if (num(p, key, v, 1, 0xFFFF, &x) < 0)
			return -EINVAL;
		if (x == 0x8000)
			return fail(p, p->line, "pkey 0x8000 is not a valid P_Key");
		t->pkey = (uint16_t)x;
		return 0;
	case CTL_TF_DTYPES:
		return parse_name_mask(p, key, v, wire_dtype_parse, &t->dtype_mask);
	case CTL_TF_OPS:
		return parse_name_mask(p, key, v, wire_op_parse, &t->op_mask);
	case CTL_TF_AUTH:
		/* on: the tree must have a key; off: explicit opt-out (no key allowed) */
		if (!strcmp(v, "on") || !strcmp(v, "off")) {
			t->auth = v[1] == 'n';
			return 0;
		}
		return fail(p, p->line, "bad value '%s' for 'auth' (expected on or off)", v);
	case CTL_TF_AUTH_KEY:
		return parse_auth_key(p, t, v);
	case CTL_TF_AUTH_KEY_ID:
		if (num(p, key, v, 1, UINT32_MAX, &x) < 0)
			return -EINVAL;
		t->auth_key_id = (uint32_t)x;
		return 0;
	case CTL_TF_MEMBER:
		return parse_member(p, t, v);
	case CTL_TF_CHILD:
		return parse_child(p, t, v);
	case CTL_TF_COUNT_:
		break;
	}
	return -EINVAL;
}

static int new_tree(struct pctx *p, uint64_t id, struct ctl_tree **out)
{
	struct sw_config *c = p->c;
	struct ctl_tree *nt;
	const struct ctl_tree *old = sw_config_find_tree(c, (uint16_t)id);

	if (old) {
		if (old->line > 0)
			return fail(p, p->line, "duplicate tree %u (first defined at line %d)",
				    (unsigned)id, old->line);
		return fail(p, p->line, "duplicate tree %u", (unsigned)id);
	}
	nt = realloc(c->trees, (c->ntrees + 1) * sizeof *nt);
	if (!nt)
		return fail(p, p->line, "out of memory");
	c->trees = nt;
	nt = &c->trees[c->ntrees++];
	ctl_tree_init(nt, (uint16_t)id);
	nt->line = p->line;
	*out = nt;
	return 0;
}

/* Checks that need the whole block, when '}' closes it (or the --tree spec ends): the model's
 * rules, reported at the line of the tree, member or child they are about. */
static int finish_tree(struct pctx *p, struct ctl_tree *t)
{
	struct ctl_tree_err e;
	int line = t->line;

	if (ctl_tree_finish(t, sw_config_auth_required(), &e) == 0)
		return 0;
	if (e.at == CTL_AT_MEMBER && e.index < t->nmembers)
		line = t->members[e.index].line;
	else if (e.at == CTL_AT_CHILD && e.index < t->nchildren)
		line = t->children[e.index].line;
	return fail(p, line, "%s", e.msg);
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
		return fail(p, p->line, "%s '%s': 1..%d characters", what, v, SW_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("-_.:/", v[i]))
			return fail(p, p->line, "%s '%s': bad character '%c'", what, v, v[i]);
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
	if (parse_uint(num_part, UINT64_MAX / mult, &x) < 0)
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
		return fail(p, p->line, "link too long");
	strcpy(buf, v);
	n = tokenize(buf, tok, 16);
	if (n < 1 || n > 16)
		return fail(p, p->line, "bad link (expected '<port> peer <name> [peer_addr A] "
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
			return fail(p, p->line, "link %s: '%s' needs a value", l.port, tok[i]);
		if (!strcmp(tok[i], "peer")) {
			if (check_name(p, "link peer", tok[i + 1]) < 0)
				return -EINVAL;
			strcpy(l.peer, tok[i + 1]);
		} else if (!strcmp(tok[i], "peer_addr")) {
			if (addr(p, "link peer_addr", tok[i + 1], &l.peer_addr) < 0)
				return -EINVAL;
			l.has_peer_addr = true;
		} else if (!strcmp(tok[i], "speed")) {
			if (parse_speed(tok[i + 1], &l.speed_bps) < 0)
				return fail(p, p->line, "link %s: bad speed '%s' (e.g. 1G, 100M)",
					    l.port, tok[i + 1]);
		} else {
			return fail(p, p->line, "link %s: unknown option '%s'", l.port, tok[i]);
		}
		i++;
	}
	for (size_t i = 0; i < c->nlinks; i++)
		if (!strcmp(c->links[i].port, l.port))
			return fail(p, p->line, "link %s: port listed twice", l.port);
	nl = realloc(c->links, (c->nlinks + 1) * sizeof *nl);
	if (!nl)
		return fail(p, p->line, "out of memory");
	c->links = nl;
	c->links[c->nlinks++] = l;
	return 0;
}

static int global_set(struct pctx *p, const char *key, const char *v, uint32_t *seen)
{
	struct sw_config *c = p->c;
	uint64_t x;
	int k;

	for (k = 0; k < GK_COUNT_; k++)
		if (!strcmp(key, global_key_names[k]))
			break;
	if (k == GK_COUNT_)
		return fail(p, p->line, "unknown key '%s'", key);
	if (seen && k != GK_LINK && k != GK_MGMT_ADDR) {
		if (*seen & (1u << k))
			return fail(p, p->line, "duplicate key '%s'", key);
		*seen |= 1u << k;
	}
	switch ((enum global_key)k) {
	case GK_LISTEN:
		return addr(p, key, v, &c->listen);
	case GK_THREADS:
		if (num(p, key, v, 1, SW_THREADS_MAX, &x) < 0)
			return -EINVAL;
		c->threads = (unsigned)x;
		return 0;
	case GK_CHECK_ICRC:
		if (parse_bool(v, &c->check_icrc) < 0)
			return fail(p, p->line, "bad value '%s' for '%s' (expected yes or no)", v,
				    key);
		return 0;
	case GK_STATS_FILE:
		if (strlen(v) >= sizeof c->stats_file)
			return fail(p, p->line, "stats_file path too long");
		strcpy(c->stats_file, v);
		return 0;
	case GK_STATS_INTERVAL:
		if (num(p, key, v, 0, 3600000, &x) < 0)
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
			return fail(p, p->line, "bad role '%s' (expected leaf or spine)", v);
		strcpy(c->role_hint, v);
		return 0;
	case GK_MAX_TREES:
		if (num(p, key, v, 1, 65536, &x) < 0)
			return -EINVAL;
		c->max_trees = (uint32_t)x;
		return 0;
	case GK_MAX_SLOTS:
		if (num(p, key, v, 1, UINT32_MAX, &x) < 0)
			return -EINVAL;
		c->max_slots = (uint32_t)x;
		return 0;
	case GK_LINK:
		return parse_link(p, v);
	case GK_MGMT_ADDR:
		if (c->nmgmt == SW_MGMT_MAX)
			return fail(p, p->line, "too many mgmt_addr (max %d)", SW_MGMT_MAX);
		if (strlen(v) >= sizeof c->mgmt_addr[0] || strpbrk(v, " \t"))
			return fail(p, p->line, "bad mgmt_addr '%s'", v);
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
	return global_set(&p, key, value, NULL);
}

/* ------------------------------------------------------------------ file form */

/* One logical line (comment stripped, trimmed, non-empty). */
static int parse_line(struct pctx *p, char *s, struct ctl_tree **cur, uint32_t *gseen)
{
	char *eq;

	if (!strcmp(s, "}")) {
		struct ctl_tree *t = *cur;
		if (!t)
			return fail(p, p->line, "'}' without an open tree block");
		*cur = NULL;
		return finish_tree(p, t);
	}
	if (!strncmp(s, "tree", 4) && (s[4] == 0 || isspace((unsigned char)s[4]))) {
		char *rest = trim(s + 4);
		size_t n = strlen(rest);
		uint64_t id;

		if (*cur)
			return fail(p, p->line, "tree inside tree %u (missing '}'?)", (*cur)->id);
		if (n < 2 || rest[n - 1] != '{')
			return fail(p, p->line, "expected 'tree <id> {'");
		rest[n - 1] = 0;
		rest = trim(rest);
		if (num(p, "tree id", rest, 0, 65535, &id) < 0)
			return -EINVAL;
		return new_tree(p, id, cur);
	}
	eq = strchr(s, '=');
	if (!eq)
		return fail(p, p->line, "expected 'key = value', got '%s'", s);
	*eq = 0;
	{
		char *key = trim(s), *v = trim(eq + 1);
		if (!*key)
			return fail(p, p->line, "missing key before '='");
		if (!*v)
			return fail(p, p->line, "missing value for '%s'", key);
		if (*cur)
			return tree_set(p, *cur, key, v);
		return global_set(p, key, v, gseen);
	}
}

int sw_config_parse_text(struct sw_config *c, const char *text, size_t len, const char *name,
			 char *err, size_t cap)
{
	struct pctx p = { .c = c, .name = name ? name : "config", .err = err, .cap = cap };
	struct ctl_tree *cur = NULL;
	uint32_t gseen = 0;
	size_t pos = 0;
	char line[LINE_MAX_BYTES];

	while (pos < len) {
		size_t end = pos, n;
		char *s, *hash;
		int rc;

		while (end < len && text[end] != '\n')
			end++;
		p.line++;
		n = end - pos;
		if (n >= sizeof line)
			return fail(&p, p.line, "line too long (max %d bytes)", LINE_MAX_BYTES - 1);
		memcpy(line, text + pos, n);
		line[n] = 0;
		pos = end + 1;
		if (strlen(line) != n)
			return fail(&p, p.line, "NUL byte in line");
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		s = trim(line);
		if (!*s)
			continue;
		/* cur points into c->trees; new_tree (which may move it) only runs when cur is
		 * NULL, so cur stays valid. */
		rc = parse_line(&p, s, &cur, &gseen);
		if (rc < 0)
			return rc;
	}
	if (cur)
		return fail(&p, cur->line, "tree %u: missing '}' at end of file", cur->id);
	return 0;
}

int sw_config_parse_file(struct sw_config *c, const char *path, char *err, size_t cap)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n = 0;
	int rc;

	if (!f) {
		rc = -errno;
		snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
		return rc;
	}
	buf = malloc(FILE_MAX_BYTES);
	if (!buf) {
		fclose(f);
		snprintf(err, cap, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = fread(buf, 1, FILE_MAX_BYTES, f);
	if (ferror(f) || n == FILE_MAX_BYTES) {
		snprintf(err, cap, "%s: %s", path, ferror(f) ? "read error" : "file too large");
		fclose(f);
		free(buf);
		return -EINVAL;
	}
	fclose(f);
	rc = sw_config_parse_text(c, buf, n, path, err, cap);
	free(buf);
	return rc;
}

/* ------------------------------------------------------------------ flags-only form */

/* Translate one spec item into the file syntax in out (see docs/switch.md):
 *   member=K@ADDR[/QPN]          -> "K ADDR [qpn QPN]"
 *   child=ADDR[/QPN]/L1+L2...    -> "ADDR [qpn QPN] bfr L1,L2"
 *   parent=ADDR[/QPN]            -> "ADDR [qpn QPN]" */
static int spec_member(const char *v, char *out, size_t cap)
{
	const char *at = strchr(v, '@');
	const char *sl;
	int n;

	if (!at || at == v)
		return -EINVAL;
	sl = strchr(at, '/');
	if (sl)
		n = snprintf(out, cap, "%.*s %.*s qpn %s", (int)(at - v), v, (int)(sl - at - 1),
			     at + 1, sl + 1);
	else
		n = snprintf(out, cap, "%.*s %s", (int)(at - v), v, at + 1);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int spec_child(const char *v, char *out, size_t cap)
{
	const char *s1 = strchr(v, '/'), *s2;
	char list[LINE_MAX_BYTES];
	int n;

	if (!s1)
		return -EINVAL;
	s2 = strchr(s1 + 1, '/');
	n = snprintf(list, sizeof list, "%s", s2 ? s2 + 1 : s1 + 1);
	if (n < 0 || (size_t)n >= sizeof list)
		return -EINVAL;
	for (char *q = list; *q; q++)
		if (*q == '+')
			*q = ',';
	if (s2)
		n = snprintf(out, cap, "%.*s qpn %.*s bfr %s", (int)(s1 - v), v,
			     (int)(s2 - s1 - 1), s1 + 1, list);
	else
		n = snprintf(out, cap, "%.*s bfr %s", (int)(s1 - v), v, list);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int add_tree_spec(struct pctx *p, const char *spec)
{
	char buf[LINE_MAX_BYTES], conv[LINE_MAX_BYTES];
	char *save = NULL, *item;
	struct ctl_tree *t = NULL;
	uint64_t id;
	bool have_id = false;

	if (strlen(spec) >= sizeof buf)
		return fail(p, 0, "spec too long");
	/* First pass: the id, needed before anything else (defaults depend on it). */
	strcpy(buf, spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (eq && !strncmp(item, "id", (size_t)(eq - item)) && eq - item == 2) {
			if (have_id)
				return fail(p, 0, "duplicate key 'id'");
			if (num(p, "id", trim(eq + 1), 0, 65535, &id) < 0)
				return -EINVAL;
			have_id = true;
		}
	}
	if (!have_id)
		return fail(p, 0, "missing id=N in '%s'", spec);
	if (new_tree(p, id, &t) < 0)
		return -EINVAL;
	strcpy(buf, spec);
	save = NULL;
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		char *key, *v;
		int rc;

		if (!eq)
			return fail(p, 0, "expected key=value, got '%s'", item);
		*eq = 0;
		key = trim(item);
		v = trim(eq + 1);
		if (!*v)
			return fail(p, 0, "missing value for '%s'", key);
		if (!strcmp(key, "id"))
			continue;
		if (!strcmp(key, "members") || !strcmp(key, "member")) {
			char *s2 = NULL;
			for (char *m = strtok_r(v, "+", &s2); m; m = strtok_r(NULL, "+", &s2)) {
				if (spec_member(m, conv, sizeof conv) < 0)
					return fail(p, 0, "bad member '%s' (expected BFR@ADDR[/QPN])",
						    m);
				if (tree_set(p, t, "member", conv) < 0)
					return -EINVAL;
			}
			continue;
		}
		if (!strcmp(key, "child")) {
			if (spec_child(v, conv, sizeof conv) < 0)
				return fail(p, 0, "bad child '%s' (expected ADDR[/QPN]/LIST)", v);
			rc = tree_set(p, t, "child", conv);
		} else if (!strcmp(key, "parent")) {
			char *sl = strchr(v, '/');
			int n;
			if (sl) {
				*sl = 0;
				n = snprintf(conv, sizeof conv, "%s qpn %s", v, sl + 1);
			} else {
				n = snprintf(conv, sizeof conv, "%s", v);
			}
			if (n < 0 || (size_t)n >= sizeof conv)
				return fail(p, 0, "parent too long");
			rc = tree_set(p, t, "parent", conv);
		} else {
			rc = tree_set(p, t, key, v);
		}
		if (rc < 0)
			return rc;
	}
	return finish_tree(p, t);
}

int sw_config_add_tree_spec(struct sw_config *c, const char *spec, char *err, size_t cap)
{
	struct pctx p = { .c = c, .name = "--tree", .err = err, .cap = cap };
	size_t before = c->ntrees;
	int rc = add_tree_spec(&p, spec);

	/* A rejected flag leaves the configuration as it was (no half-built tree). */
	if (rc < 0 && c->ntrees > before)
		ctl_tree_free(&c->trees[--c->ntrees]);
	return rc;
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
