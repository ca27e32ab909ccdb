/* inca-am journal, reading: the replay at start of the journal journal.c writes, so that a
 * restarted AM keeps running groups (reconciled with the switches' running trees, then the
 * journal compacted), and the recovery from a damaged journal (--recover: valid records kept,
 * orphan trees removed, the file moved aside). Format: docs/am.md "Restart and the journal".
 * Main loop only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "am.h"
#include "util/util.h"

/* ---------------------------------------------------------------- recovery */

/* Journal replay state for one group: the switch layout as names until reconciled. */
struct replay {
	uint16_t tree_id;
	uint32_t key;
	bool auth; /* a K record followed the latest G record */
	uint8_t auth_key[WIRE_AUTH_KEY_LEN];
	uint32_t auth_key_id;
	size_t nsw;
	char sw[AM_MAX_SWITCHES][AM_STR], parent[AM_MAX_SWITCHES][AM_STR];
	char (*send)[AM_STR]; /* per rank */
	uint16_t slots, mtu;
	unsigned bsl;
	uint32_t slot_bytes;
};

struct replay_group {
	struct am_group *g;
	struct replay *r;
};

/* Rebuild g's plan from the switches' running trees. false if anything is missing. */
static bool reconcile(struct am *am, struct am_group *g, const struct replay *rp)
{
	struct am_plan *p = &g->plan;

	memset(p, 0, sizeof *p);
	p->sws = calloc(rp->nsw + 1, sizeof *p->sws);
	p->send_sw = calloc(g->size, sizeof *p->send_sw);
	if (!p->sws || !p->send_sw)
		goto bad;
	p->root = -1;
	for (size_t k = 0; k < rp->nsw; k++) {
		int s = am_sw_index(am, rp->sw[k]);
		const struct ctl_tree *t;
		if (s < 0 || !am->sw[s].up)
			goto bad;
		t = am_running_find(&am->sw[s], rp->tree_id);
		if (!t || t->key != rp->key || t->auth != rp->auth ||
		    (rp->auth && t->auth_key_id != rp->auth_key_id))
			goto bad;
		p->sws[k].sw = s;
		p->sws[k].parent = rp->parent[k][0] ? am_sw_index(am, rp->parent[k]) : -1;
		if (p->sws[k].parent < 0)
			p->root = s;
		if (ctl_tree_copy(&p->sws[k].tree, t) < 0)
			goto bad;
		/* the switch never returns the key: it comes from the journal */
		if (rp->auth)
			memcpy(p->sws[k].tree.auth_key, rp->auth_key, WIRE_AUTH_KEY_LEN);
		p->nsw = k + 1;
	}
	if (p->root < 0 || rp->nsw == 0)
		goto bad;
	for (uint32_t r = 0; r < g->size; r++) {
		int s = g->m[r].joined ? am_sw_index(am, rp->send[r]) : p->root;
		if (s < 0 || am_plan_find(p, s) < 0)
			goto bad;
		p->send_sw[r] = s;
	}
	p->ok = true;
	p->multi_level = rp->nsw > 1;
	p->slots = rp->slots;
	p->mtu = rp->mtu;
	p->bsl_bits = rp->bsl;
	p->slot_bytes = rp->slot_bytes;
	g->last_auth_key_id = rp->auth_key_id;
	return true;
bad:
	am_plan_free(p);
	return false;
}

/* ---------------------------------------------------------------- reading */

/* Why the first damaged line is damaged (and which). */
struct jdamage {
	unsigned line;
	char rec[48];   /* the record's type and first field, printable */
	char what[160];
};

struct replay_set {
	struct replay_group *rg;
	size_t n, cap;
};

static struct replay_group *rs_find(struct replay_set *rs, uint64_t id)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rg[i].g->id == id)
			return &rs->rg[i];
	return NULL;
}

static void rs_drop(struct replay_set *rs, size_t i)
{
	am_group_free(rs->rg[i].g);
	free(rs->rg[i].r->send);
	explicit_bzero(rs->rg[i].r, sizeof *rs->rg[i].r);
	free(rs->rg[i].r);
	rs->rg[i] = rs->rg[--rs->n];
}

static void rs_free(struct replay_set *rs)
{
	while (rs->n)
		rs_drop(rs, rs->n - 1);
	free(rs->rg);
	rs->rg = NULL;
	rs->cap = 0;
}

/* Decimal without sign or leading zeros, at most max. */
static bool num(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (d > 9 || v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* The inverse of put_esc; false if s is not what put_esc writes or does not fit cap. */
static bool unesc(const char *s, char *dst, size_t cap)
{
	size_t n = 0;

	if (strcmp(s, "-") == 0) {
		dst[0] = '\0';
		return true;
	}
	for (; *s; s++) {
		int c = (unsigned char)*s;
		if (c == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);
			if (lo < 0 || (c = hi << 4 | lo) == 0)
				return false;
			s += 2;
		} else if (c <= ' ' || c >= 0x7f) {
			return false;
		}
		if (n + 1 >= cap)
			return false;
		dst[n++] = (char)c;
	}
	dst[n] = '\0';
	return n > 0;
}

/* 64 lower-case hex digits -> key. */
static bool parse_hex_key(const char *s, uint8_t *key)
{
	if (strlen(s) != 2 * WIRE_AUTH_KEY_LEN)
		return false;
	for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool parse_state(const char *s, enum am_gstate *out)
{
	static const enum am_gstate all[] = { AM_G_FORMING, AM_G_READY, AM_G_FALLBACK,
					      AM_G_DISMANTLED };

	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strcmp(s, am_state_name(all[i])) == 0) {
			*out = all[i];
			return true;
		}
	return false;
}

#define BAD(...)                                   \
	do {                                       \
		snprintf(why, cap, __VA_ARGS__);   \
		return false;                      \
	} while (0)
#define NUM(i, max, dst, field)                                 \
	do {                                                    \
		uint64_t v_;                                    \
		if (!num(t[i], (max), &v_))                     \
			BAD("field %d (%s) is not a number in 0..%llu", (i), (field), \
			    (unsigned long long)(max));         \
		(dst) = v_;                                     \
	} while (0)
#define STR(i, dst, field)                                       \
	do {                                                     \
		if (!unesc(t[i], (dst), sizeof(dst)))            \
			BAD("field %d (%s) is not a valid string", (i), (field)); \
	} while (0)

static bool rec_job(struct am *am, char **t, size_t n, char *why, size_t cap)
{
	char id[AM_STR], cred[AM_STR * 2];
	size_t i;

	if (n != 3)
		BAD("J record with %zu fields, not 3", n);
	STR(1, id, "job");
	STR(2, cred, "credential");
	for (i = 0; i < am->nlearned && strcmp(am->learned[i].id, id) != 0; i++)
		;
	if (i == AM_MAX_JOBS) {
		explicit_bzero(cred, sizeof cred);
		BAD("more than %d learned job credentials", AM_MAX_JOBS);
	}
	snprintf(am->learned[i].id, AM_STR, "%s", id);
	snprintf(am->learned[i].cred, sizeof am->learned[0].cred, "%s", cred);
	explicit_bzero(cred, sizeof cred);
	if (i == am->nlearned)
		am->nlearned++;
	return true;
}

/* A learned credential expired: the job is unknown again. */
static bool rec_forget(struct am *am, char **t, size_t n, char *why, size_t cap)
{
	char id[AM_STR];

	if (n != 2)
		BAD("E record with %zu fields, not 2", n);
	STR(1, id, "job");
	for (size_t i = 0; i < am->nlearned; i++)
		if (strcmp(am->learned[i].id, id) == 0) {
			explicit_bzero(am->learned[i].cred, sizeof am->learned[i].cred);
			am->learned[i] = am->learned[--am->nlearned];
			break;
		}
	return true;
}

static bool rec_group(struct replay_set *rs, char **t, size_t n, char *why, size_t cap)
{
	static const struct {
		uint64_t max;
		const char *name;
	} spec[9] = {
		{ 65535, "slots wanted" }, { UINT32_MAX, "generation" }, { 65535, "tree id" },
		{ UINT32_MAX, "R_Key" }, { 65535, "slots" }, { 4096, "BSL" }, { 65535, "MTU" },
		{ UINT32_MAX, "slot bytes" }, { 1, "rebuildable" },
	};
	uint64_t id, size, nsw, f[9];
	struct replay_group *x;
	struct am_group *g;
	struct replay *r;
	enum am_gstate st;
	char job[AM_STR], name[AM_STR];
	char (*sw)[AM_STR] = NULL;

	/* Everything is parsed before anything changes: a refused record leaves the group as
	 * the records before it made it. */
	if (n < 16)
		BAD("G record with %zu fields, at least 16", n);
	NUM(1, UINT64_MAX - 1, id, "group id");
	if (id == 0)
		BAD("group id 0");
	if (!parse_state(t[2], &st))
		BAD("unknown group state");
	STR(3, job, "job");
	if (!unesc(t[4], name, sizeof name))
		BAD("field 4 (group name) is not a valid string");
	NUM(5, AM_MAX_GROUP_SIZE, size, "size");
	if (size == 0)
		BAD("size 0");
	for (int i = 0; i < 9; i++)
		NUM(6 + i, spec[i].max, f[i], spec[i].name);
	NUM(15, AM_MAX_SWITCHES, nsw, "tree switches");
	if (n != 16 + nsw)
		BAD("G record with %zu fields for %llu tree switches", n, (unsigned long long)nsw);
	x = rs_find(rs, id);
	if (x && x->g->size != size)
		BAD("group %llu changes its size from %u to %llu", (unsigned long long)id,
		    x->g->size, (unsigned long long)size);
	sw = calloc(2 * nsw + 1, sizeof *sw); /* name, parent ("" for the root) */
	if (!sw)
		BAD("out of memory");
	for (size_t k = 0; k < nsw; k++) {
		char *colon = strchr(t[16 + k], ':');
		if (colon)
			*colon = '\0';
		if (!colon || !unesc(t[16 + k], sw[2 * k], AM_STR) ||
		    !unesc(colon + 1, sw[2 * k + 1], AM_STR)) {
			free(sw);
			BAD("field %zu is not SWITCH:PARENT", 16 + k);
		}
	}
	if (!x) {
		if (rs->n == rs->cap) {
			size_t nc = rs->cap ? 2 * rs->cap : 16;
			struct replay_group *p = realloc(rs->rg, nc * sizeof *p);
			if (!p) {
				free(sw);
				BAD("out of memory");
			}
			rs->rg = p;
			rs->cap = nc;
		}
		g = calloc(1, sizeof *g);
		r = calloc(1, sizeof *r);
		if (!g || !r || !(g->m = calloc(size, sizeof *g->m)) ||
		    !(r->send = calloc(size, sizeof *r->send))) {
			free(g ? g->m : NULL);
			free(g);
			free(r);
			free(sw);
			BAD("out of memory");
		}
		g->id = id;
		g->size = (uint32_t)size;
		x = &rs->rg[rs->n++];
		x->g = g;
		x->r = r;
	}
	g = x->g;
	r = x->r;
	g->state = st;
	memcpy(g->job, job, sizeof job);
	memcpy(g->name, name, sizeof name);
	g->slots_wanted = (uint16_t)f[0];
	g->generation = (uint32_t)f[1];
	r->tree_id = (uint16_t)f[2];
	r->key = (uint32_t)f[3];
	r->slots = (uint16_t)f[4];
	r->bsl = (unsigned)f[5];
	r->mtu = (uint16_t)f[6];
	r->slot_bytes = (uint32_t)f[7];
	g->rebuildable = f[8] == 1;
	r->nsw = (size_t)nsw;
	for (size_t k = 0; k < nsw; k++) {
		memcpy(r->sw[k], sw[2 * k], AM_STR);
		memcpy(r->parent[k], sw[2 * k + 1], AM_STR);
	}
	free(sw);
	r->auth = false;
	r->auth_key_id = 0;
	explicit_bzero(r->auth_key, sizeof r->auth_key);
	/* the group's members follow in M records */
	memset(g->m, 0, g->size * sizeof *g->m);
	memset(r->send, 0, g->size * sizeof *r->send);
	g->joined = 0;
	return true;
}

/* The group a member (M) or key (K) record belongs to: the record has `want` fields and
 * field 1 names a group read before. NULL with the reason in why. */
static struct replay_group *group_of_rec(struct replay_set *rs, char **t, size_t n,
					 size_t want, const char *rec, const char *what,
					 char *why, size_t cap)
{
	struct replay_group *x;
	uint64_t id;

	if (n != want) {
		snprintf(why, cap, "%s record with %zu fields, not %zu", rec, n, want);
		return NULL;
	}
	if (!num(t[1], UINT64_MAX, &id)) {
		snprintf(why, cap, "field 1 (group id) is not a number in 0..%llu",
			 (unsigned long long)UINT64_MAX);
		return NULL;
	}
	x = rs_find(rs, id);
	if (!x)
		snprintf(why, cap, "%s of unknown group %llu", what, (unsigned long long)id);
	return x;
}

static bool rec_member(struct replay_set *rs, char **t, size_t n, char *why, size_t cap)
{
	uint64_t rank, token, bfr, qpn, dt, op, left, det, mtu;
	struct replay_group *x;
	struct am_member m;
	char send[AM_STR];

	x = group_of_rec(rs, t, n, 14, "M", "member", why, cap);
	if (!x)
		return false;
	NUM(2, x->g->size - 1, rank, "rank");
	memset(&m, 0, sizeof m);
	NUM(3, UINT64_MAX, token, "member token");
	NUM(4, 65535, bfr, "BFR-id");
	if (bfr != rank + 1)
		BAD("BFR-id %llu is not rank + 1", (unsigned long long)bfr);
	NUM(5, 0xFFFFFF, qpn, "QPN");
	STR(6, m.addr, "data address");
	if (!unesc(t[7], m.host, sizeof m.host))
		BAD("field 7 (host name) is not a valid string");
	if (!unesc(t[8], send, sizeof send))
		BAD("field 8 (send switch) is not a valid string");
	NUM(9, UINT32_MAX, dt, "dtype mask");
	NUM(10, UINT32_MAX, op, "op mask");
	NUM(11, 1, left, "left");
	NUM(12, 1, det, "deterministic");
	NUM(13, 65535, mtu, "max MTU");
	m.joined = true;
	m.rank = (uint32_t)rank;
	m.token = token;
	m.bfr_id = (uint16_t)bfr;
	m.qpn = (uint32_t)qpn;
	m.dtype_mask = (uint32_t)dt;
	m.op_mask = (uint32_t)op;
	m.left = left == 1;
	m.wants_det = det == 1;
	m.max_mtu = (uint16_t)mtu;
	m.wants_inc = true;
	m.attach = -1;
	if (!x->g->m[rank].joined)
		x->g->joined++;
	x->g->m[rank] = m;
	memcpy(x->r->send[rank], send, AM_STR);
	return true;
}

static bool rec_key(struct replay_set *rs, char **t, size_t n, char *why, size_t cap)
{
	uint64_t kid;
	struct replay_group *x;
	uint8_t key[WIRE_AUTH_KEY_LEN];

	x = group_of_rec(rs, t, n, 4, "K", "key", why, cap);
	if (!x)
		return false;
	NUM(2, UINT32_MAX, kid, "key id");
	if (kid == 0)
		BAD("key id 0");
	if (!parse_hex_key(t[3], key))
		BAD("field 3 (key) is not 64 hex digits");
	memcpy(x->r->auth_key, key, sizeof key);
	explicit_bzero(key, sizeof key);
	x->r->auth = true;
	x->r->auth_key_id = (uint32_t)kid;
	return true;
}

static bool rec_del(struct replay_set *rs, char **t, size_t n, char *why, size_t cap)
{
	uint64_t id;

	if (n != 2)
		BAD("D record with %zu fields, not 2", n);
	NUM(1, UINT64_MAX, id, "group id");
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rg[i].g->id == id) {
			rs_drop(rs, i);
			return true;
		}
	BAD("deletion of unknown group %llu", (unsigned long long)id);
}

/* One line (without its '\n'). false: damaged, why says how. */
static bool replay_line(struct am *am, struct replay_set *rs, char *line, size_t len,
			unsigned lineno, char *why, size_t cap)
{
	char *t[16 + AM_MAX_SWITCHES + 1], *sp, *save = NULL, *end;
	unsigned long want;
	size_t n = 0;

	if (strlen(line) != len)
		BAD("NUL byte");
	if (len > JOURNAL_LINE_MAX)
		BAD("longer than any record (%zu bytes)", len);
	if (lineno == 1 && strncmp(line, "H ", 2) != 0)
		BAD("no journal header (a journal of an older inca-am, or not a journal)");
	sp = strrchr(line, ' ');
	if (!sp || strlen(sp + 1) != 8 || hexval(sp[1]) < 0)
		BAD("no checksum");
	errno = 0;
	want = strtoul(sp + 1, &end, 16);
	if (*end || errno)
		BAD("no checksum");
	if (crc32(0, (const Bytef *)line, (uInt)(sp - line)) != want)
		BAD("bad checksum");
	*sp = '\0';
	for (char *x = strtok_r(line, " ", &save); x; x = strtok_r(NULL, " ", &save)) {
		if (n == sizeof t / sizeof t[0])
			BAD("too many fields");
		t[n++] = x;
	}
	if (n == 0)
		BAD("empty record");
	if (lineno == 1 || strcmp(t[0], "H") == 0) {
		uint64_t v;
		if (strcmp(t[0], "H") != 0)
			BAD("no journal header (a journal of an older inca-am, or not a journal)");
		if (lineno != 1)
			BAD("a header after line 1");
		if (n != 3 || strcmp(t[1], JOURNAL_MAGIC) != 0 || !num(t[2], UINT32_MAX, &v))
			BAD("not an inca-am journal header");
		if (v != JOURNAL_VERSION)
			BAD("journal version %llu, this inca-am reads version %d",
			    (unsigned long long)v, JOURNAL_VERSION);
		return true;
	}
	if (strcmp(t[0], "J") == 0)
		return rec_job(am, t, n, why, cap);
	if (strcmp(t[0], "E") == 0)
		return rec_forget(am, t, n, why, cap);
	if (strcmp(t[0], "G") == 0)
		return rec_group(rs, t, n, why, cap);
	if (strcmp(t[0], "M") == 0)
		return rec_member(rs, t, n, why, cap);
	if (strcmp(t[0], "K") == 0)
		return rec_key(rs, t, n, why, cap);
	if (strcmp(t[0], "D") == 0)
		return rec_del(rs, t, n, why, cap);
	BAD("unknown record type");
}

/* The record's type and first field, printable: enough to find it, never a secret (the
 * second field of J is the job id, of K the group id). */
static void describe(const char *line, size_t len, char *out, size_t cap)
{
	size_t n = 0, words = 0;

	for (size_t i = 0; i < len && n + 1 < cap && words < 2; i++) {
		unsigned char c = (unsigned char)line[i];
		if (c == ' ') {
			if (++words == 2)
				break;
		}
		out[n++] = c >= ' ' && c < 0x7f ? (char)c : '?';
	}
	out[n] = '\0';
}

/* Read the journal into rs. 0; -EBADMSG with the first damage in *dmg (recover: every
 * damaged line is logged, dropped and counted, and 0 is returned with dmg->line set);
 * -errno when it cannot be read. A missing or empty file is a fresh journal. */
static int replay_read(struct am *am, struct replay_set *rs, struct jdamage *dmg)
{
	FILE *f = fopen(am->cfg.journal, "r");
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	unsigned lineno = 0;
	int rc = 0;

	memset(dmg, 0, sizeof *dmg);
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while ((len = getline(&line, &lcap, f)) > 0) {
		char why[160], rec[48];
		bool nl = line[len - 1] == '\n';
		lineno++;
		describe(line, (size_t)len - nl, rec, sizeof rec);
		if (nl)
			line[--len] = '\0';
		if (!nl)
			snprintf(why, sizeof why, "truncated last record (no end of line: the AM "
				 "stopped while writing it)");
		if (nl && replay_line(am, rs, line, (size_t)len, lineno, why, sizeof why))
			continue;
		am->st.journal_damaged_records++;
		if (!dmg->line) {
			dmg->line = lineno;
			snprintf(dmg->rec, sizeof dmg->rec, "%s", rec);
			snprintf(dmg->what, sizeof dmg->what, "%s", why);
		}
		if (!am->recover) {
			rc = -EBADMSG;
			break;
		}
		am_log(0, "journal %s line %u (record '%s'): %s: record dropped", am->cfg.journal,
		       lineno, rec, why);
	}
	if (line) {
		explicit_bzero(line, lcap);
		free(line);
	}
	if (rc == 0 && ferror(f))
		rc = -EIO;
	fclose(f);
	return rc;
}

/* Adopt the replayed groups: a READY group keeps running if every switch still has its
 * tree; members get a grace period to reconnect their sessions. */
static void replay_adopt(struct am *am, struct replay_set *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		struct am_group *g = rs->rg[i].g;
		struct replay *rp = rs->rg[i].r;
		uint64_t now = util_now_ns();
		if (g->id >= am->next_group_id)
			am->next_group_id = g->id + 1;
		for (uint32_t r = 0; r < g->size; r++)
			g->m[r].last_hb_ns = now + (uint64_t)am->cfg.grace_ms * NS_PER_MS;
		g->created_ns = g->state_ns = now;
		if (g->state == AM_G_READY) {
			if (reconcile(am, g, rp)) {
				am_log(1, "recovered group %llu (%s/%s): tree %u still running",
				       (unsigned long long)g->id, g->job, g->name, rp->tree_id);
			} else {
				/* Remove what is left of it; rebuild once members are back. */
				for (size_t k = 0; k < rp->nsw; k++) {
					int s = am_sw_index(am, rp->sw[k]);
					if (s >= 0 && am->sw[s].up &&
					    am_running_find(&am->sw[s], rp->tree_id))
						am_sw_delete(am, (size_t)s, rp->tree_id);
				}
				am_group_set_state(g, AM_G_FALLBACK, "tree lost while the AM was down");
				g->rebuildable = true;
				am_log(1, "recovered group %llu: tree gone, will rebuild",
				       (unsigned long long)g->id);
			}
		}
		g->next = am->groups;
		am->groups = g;
		am->st.recovered_groups++;
		free(rp->send);
		explicit_bzero(rp, sizeof *rp);
		free(rp);
	}
	free(rs->rg);
	memset(rs, 0, sizeof *rs);
}

/* Recovery: a tree in this AM's tree-id range that no recovered group owns was built for a
 * group whose records were lost; nothing would ever remove it. */
static void sweep_orphans(struct am *am)
{
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_switch *s = &am->sw[i];
		if (!s->up) {
			am_log(0, "recovery: switch %s is down: its trees were not checked for "
				  "trees no recovered group owns", s->cfg->name);
			continue;
		}
		for (size_t j = 0; j < s->nrunning; j++) {
			uint16_t id = s->running[j].id;
			bool owned = false;
			if (id < am->cfg.tree_id_min || id > am->cfg.tree_id_max)
				continue;
			for (const struct am_group *g = am->groups; g && !owned; g = g->next) {
				int k = g->plan.ok ? am_plan_find(&g->plan, (int)i) : -1;
				owned = k >= 0 && g->plan.sws[k].tree.id == id;
			}
			if (owned)
				continue;
			/* queued on the switch's worker: a failure is logged there */
			am_sw_delete(am, i, id);
			am->st.orphan_trees_removed++;
			am_log(0, "recovery: switch %s: removing tree %u that no recovered group owns",
			       s->cfg->name, id);
		}
	}
}

/* Keep the damaged journal as JOURNAL.damaged-YYYYmmddTHHMMSS[.N] (never overwritten). */
static int move_aside(struct am *am, char *aside, size_t cap)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", gmtime_r(&now, &tm));
	for (int i = 0; i < 100; i++) {
		struct stat st;
		if (i == 0)
			snprintf(aside, cap, "%s.damaged-%s", am->cfg.journal, stamp);
		else
			snprintf(aside, cap, "%s.damaged-%s.%d", am->cfg.journal, stamp, i);
		if (link(am->cfg.journal, aside) == 0)
			return 0;
		if (errno == EEXIST)
			continue;
		/* no hard links here: a rename, but never over an existing file */
		if (lstat(aside, &st) == 0)
			continue;
		return rename(am->cfg.journal, aside) == 0 ? 0 : -errno;
	}
	return -EEXIST;
}

int am_journal_open(struct am *am)
{
	struct replay_set rs = { 0 };
	struct jdamage dmg;
	char aside[AM_PATH + 48];
	int rc = replay_read(am, &rs, &dmg);

	if (rc == -EBADMSG) {
		am_log(0, "journal %s line %u (record '%s'): %s. Refusing to start: its groups "
			  "would be lost and their trees left on the switches. Keep the file for "
			  "inspection; start with --recover to keep its valid records, remove the "
			  "trees no recovered group owns and move the file aside", am->cfg.journal,
		       dmg.line, dmg.rec, dmg.what);
		rs_free(&rs);
		explicit_bzero(am->learned, sizeof am->learned);
		am->nlearned = 0;
		return rc;
	}
	if (rc < 0) {
		am_log(0, "journal %s: cannot read it: %s; refusing to start", am->cfg.journal,
		       strerror(-rc));
		rs_free(&rs);
		explicit_bzero(am->learned, sizeof am->learned);
		am->nlearned = 0;
		return rc;
	}
	replay_adopt(am, &rs);
	if (am->recover)
		sweep_orphans(am);
	am_account(am);
	if (dmg.line) {
		rc = move_aside(am, aside, sizeof aside);
		if (rc < 0) {
			am_log(0, "journal %s: cannot move the damaged journal aside: %s; refusing "
				  "to start", am->cfg.journal, strerror(-rc));
			return rc;
		}
		am_log(0, "journal %s: recovered %llu group(s), dropped %llu damaged record(s) "
			  "(first: line %u, %s); the damaged journal is kept as %s", am->cfg.journal,
		       (unsigned long long)am->st.recovered_groups,
		       (unsigned long long)am->st.journal_damaged_records, dmg.line, dmg.what,
		       aside);
	}
	rc = am_journal_compact(am);
	if (rc < 0)
		am_log(0, "journal %s: %s", am->cfg.journal, strerror(-rc));
	return rc;
}
