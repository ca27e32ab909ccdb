/* inca-am journal: an append-only log of job credentials learned from first joiners, groups,
 * their members and tree keys, so that a restarted AM keeps running groups (replayed and
 * reconciled with the switches' running trees at start, then compacted). Main loop only. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "am.h"
#include "util/util.h"


/* Tokens in the journal are whitespace separated; names are checked at join to have none. */
static const char *tok(const char *s)
{
	return s[0] ? s : "-";
}

static void untok(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", strcmp(s, "-") == 0 ? "" : s);
}

static void journal_sync(struct am *am)
{
	if (!am->journal)
		return;
	fflush(am->journal);
	fsync(fileno(am->journal));
	am->st.journal_records++;
}

static void journal_group_write(struct am *am, FILE *f, const struct am_group *g)
{
	fprintf(f, "G %llu %s %s %s %u %u %u %u %u %u %u %u %u %d %zu",
		(unsigned long long)g->id, am_state_name(g->state), g->job, tok(g->name), g->size,
		g->slots_wanted, g->generation, g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.id : 0,
		g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.key : 0, g->plan.slots,
		g->plan.bsl_bits, g->plan.mtu, g->plan.slot_bytes, g->rebuildable ? 1 : 0,
		g->plan.ok ? g->plan.nsw : 0);
	for (size_t i = 0; g->plan.ok && i < g->plan.nsw; i++) {
		int p = g->plan.sws[i].parent;
		fprintf(f, " %s:%s", am->sw[g->plan.sws[i].sw].cfg->name,
			p < 0 ? "-" : am->sw[p].cfg->name);
	}
	fprintf(f, "\n");
	/* K: the tree's data-plane key (the journal file is 0600) */
	if (g->plan.ok && g->plan.sws[0].tree.auth) {
		const struct ctl_tree *t = &g->plan.sws[0].tree;
		fprintf(f, "K %llu %u ", (unsigned long long)g->id, t->auth_key_id);
		for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++)
			fprintf(f, "%02x", t->auth_key[i]);
		fprintf(f, "\n");
	}
	for (uint32_t r = 0; r < g->size; r++) {
		const struct am_member *m = &g->m[r];
		if (!m->joined)
			continue;
		fprintf(f, "M %llu %u %llu %u %u %s %s %s %u %u %d %d\n", (unsigned long long)g->id,
			r, (unsigned long long)m->token, m->bfr_id, m->qpn, m->addr, tok(m->host),
			g->plan.ok ? am->sw[g->plan.send_sw[r]].cfg->name : "-", m->dtype_mask,
			m->op_mask, m->left ? 1 : 0, m->wants_det ? 1 : 0);
	}
}

void am_journal_group(struct am *am, const struct am_group *g)
{
	if (!am->journal)
		return;
	journal_group_write(am, am->journal, g);
	journal_sync(am);
}

void am_journal_del(struct am *am, uint64_t id)
{
	if (!am->journal)
		return;
	fprintf(am->journal, "D %llu\n", (unsigned long long)id);
	journal_sync(am);
}


/* ---------------------------------------------------------------- recovery */

static int tree_copy(struct ctl_tree *dst, const struct ctl_tree *src)
{
	*dst = *src;
	dst->members = NULL;
	dst->children = NULL;
	dst->nmembers = dst->nchildren = 0;
	if (src->nmembers) {
		dst->members = calloc(src->nmembers, sizeof *dst->members);
		if (!dst->members)
			return -ENOMEM;
		memcpy(dst->members, src->members, src->nmembers * sizeof *dst->members);
		dst->nmembers = src->nmembers;
	}
	if (src->nchildren) {
		dst->children = calloc(src->nchildren, sizeof *dst->children);
		if (!dst->children)
			return -ENOMEM;
		dst->nchildren = src->nchildren;
		for (size_t i = 0; i < src->nchildren; i++) {
			dst->children[i] = src->children[i];
			dst->children[i].bfr_ids = calloc(src->children[i].nbfr + 1, sizeof(uint16_t));
			if (!dst->children[i].bfr_ids)
				return -ENOMEM;
			memcpy(dst->children[i].bfr_ids, src->children[i].bfr_ids,
			       src->children[i].nbfr * sizeof(uint16_t));
		}
	}
	return 0;
}

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

static enum am_gstate parse_state(const char *s)
{
	if (strcmp(s, "forming") == 0)
		return AM_G_FORMING;
	if (strcmp(s, "ready") == 0)
		return AM_G_READY;
	if (strcmp(s, "fallback") == 0)
		return AM_G_FALLBACK;
	return AM_G_DISMANTLED;
}

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
		p->sws[k].parent = strcmp(rp->parent[k], "-") ? am_sw_index(am, rp->parent[k]) : -1;
		if (p->sws[k].parent < 0)
			p->root = s;
		if (tree_copy(&p->sws[k].tree, t) < 0)
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

/* 64 hex digits -> key; -EINVAL otherwise. */
static int parse_hex_key(const char *s, uint8_t *key)
{
	if (strlen(s) != 2 * WIRE_AUTH_KEY_LEN)
		return -EINVAL;
	for (size_t i = 0; i < 2 * WIRE_AUTH_KEY_LEN; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
		if (d < 0)
			return -EINVAL;
		if (i % 2 == 0)
			key[i / 2] = (uint8_t)(d << 4);
		else
			key[i / 2] |= (uint8_t)d;
	}
	return 0;
}

static void replay_journal(struct am *am)
{
	struct replay_group rg[1024];
	size_t nrg = 0;
	/* the longest record: a G line naming every switch and its parent */
	static char line[AM_MAX_SWITCHES * (2 * AM_STR + 2) + 512];
	FILE *f = fopen(am->cfg.journal, "r");

	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *t;
		if (!strchr(line, '\n') && !feof(f)) {
			/* longer than any record we write (corrupt): drop it whole, or its tail
			 * would be read as a record of its own */
			int ch;
			while ((ch = getc(f)) != EOF && ch != '\n')
				;
			continue;
		}
		t = strtok_r(line, " \n", &save);
		if (!t)
			continue;
		if (strcmp(t, "J") == 0) {
			char *id = strtok_r(NULL, " \n", &save), *cred = strtok_r(NULL, " \n", &save);
			if (id && cred && am->nlearned < AM_MAX_JOBS) {
				snprintf(am->learned[am->nlearned].id, AM_STR, "%s", id);
				snprintf(am->learned[am->nlearned].cred, sizeof am->learned[0].cred,
					 "%s", cred);
				am->nlearned++;
			}
		} else if (strcmp(t, "G") == 0) {
			char *f_[16];
			struct am_group *g;
			struct replay *r;
			uint64_t id;
			size_t i;
			for (i = 0; i < 16 && (f_[i] = strtok_r(NULL, " \n", &save)); i++)
				;
			/* 15 fields, then one per tree switch: a group without a tree (forming,
			 * fallback) has none (such groups were dropped at restarts before) */
			if (i < 15)
				continue;
			if (i == 15)
				f_[15] = NULL;
			id = strtoull(f_[0], NULL, 10);
			if (id == 0 || id == UINT64_MAX) /* never written: ids start at 1 */
				continue;
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg) {
				uint32_t size = (uint32_t)strtoul(f_[4], NULL, 10);
				if (nrg == 1024 || size < 1 || size > 65535)
					continue;
				g = calloc(1, sizeof *g);
				r = calloc(1, sizeof *r);
				if (!g || !r || !(g->m = calloc(size, sizeof *g->m)) ||
				    !(r->send = calloc(size, sizeof *r->send))) {
					free(g ? g->m : NULL);
					free(g);
					free(r);
					continue;
				}
				g->id = id;
				g->size = size;
				rg[nrg].g = g;
				rg[nrg].r = r;
				nrg++;
			}
			g = rg[i].g;
			r = rg[i].r;
			g->state = parse_state(f_[1]);
			snprintf(g->job, sizeof g->job, "%s", f_[2]);
			untok(g->name, sizeof g->name, f_[3]);
			g->slots_wanted = (uint16_t)strtoul(f_[5], NULL, 10);
			g->generation = (uint32_t)strtoul(f_[6], NULL, 10);
			r->tree_id = (uint16_t)strtoul(f_[7], NULL, 10);
			r->key = (uint32_t)strtoul(f_[8], NULL, 10);
			r->auth = false;
			r->auth_key_id = 0;
			explicit_bzero(r->auth_key, sizeof r->auth_key);
			r->slots = (uint16_t)strtoul(f_[9], NULL, 10);
			r->bsl = (unsigned)strtoul(f_[10], NULL, 10);
			r->mtu = (uint16_t)strtoul(f_[11], NULL, 10);
			r->slot_bytes = (uint32_t)strtoul(f_[12], NULL, 10);
			g->rebuildable = f_[13][0] == '1';
			r->nsw = strtoul(f_[14], NULL, 10);
			if (r->nsw > AM_MAX_SWITCHES)
				r->nsw = 0;
			/* f_[15] is the first switch: re-tokenise from it */
			for (size_t k = 0; k < r->nsw; k++) {
				char *e = k == 0 ? f_[15] : strtok_r(NULL, " \n", &save);
				char *colon = e ? strchr(e, ':') : NULL;
				if (!colon) {
					r->nsw = 0;
					break;
				}
				*colon = '\0';
				snprintf(r->sw[k], AM_STR, "%s", e);
				snprintf(r->parent[k], AM_STR, "%s", colon + 1);
			}
			memset(g->m, 0, g->size * sizeof *g->m);
			g->joined = 0;
		} else if (strcmp(t, "M") == 0) {
			char *f_[12];
			size_t i;
			uint64_t id;
			uint32_t rank;
			struct am_member *m;
			for (i = 0; i < 11 && (f_[i] = strtok_r(NULL, " \n", &save)); i++)
				;
			if (i < 11)
				continue;
			id = strtoull(f_[0], NULL, 10);
			rank = (uint32_t)strtoul(f_[1], NULL, 10);
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg || rank >= rg[i].g->size)
				continue;
			m = &rg[i].g->m[rank];
			if (!m->joined)
				rg[i].g->joined++;
			m->joined = true;
			m->rank = rank;
			m->token = strtoull(f_[2], NULL, 10);
			m->bfr_id = (uint16_t)strtoul(f_[3], NULL, 10);
			m->qpn = (uint32_t)strtoul(f_[4], NULL, 10);
			snprintf(m->addr, sizeof m->addr, "%s", f_[5]);
			untok(m->host, sizeof m->host, f_[6]);
			snprintf(rg[i].r->send[rank], AM_STR, "%s", f_[7]);
			m->dtype_mask = (uint32_t)strtoul(f_[8], NULL, 10);
			m->op_mask = (uint32_t)strtoul(f_[9], NULL, 10);
			m->left = f_[10][0] == '1';
			/* field 12 (deterministic) is absent in journals of older AMs */
			f_[11] = strtok_r(NULL, " \n", &save);
			m->wants_det = f_[11] && f_[11][0] == '1';
			m->wants_inc = true;
			m->attach = -1;
		} else if (strcmp(t, "K") == 0) {
			char *ids = strtok_r(NULL, " \n", &save), *kid = strtok_r(NULL, " \n", &save);
			char *hx = strtok_r(NULL, " \n", &save);
			uint64_t id = ids ? strtoull(ids, NULL, 10) : 0;
			unsigned long kv = kid ? strtoul(kid, NULL, 10) : 0;
			uint8_t key[WIRE_AUTH_KEY_LEN];
			size_t i;
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg || !hx || kv == 0 || kv > UINT32_MAX ||
			    parse_hex_key(hx, key) < 0)
				continue; /* a bad record leaves the group's key as it was */
			memcpy(rg[i].r->auth_key, key, sizeof key);
			explicit_bzero(key, sizeof key);
			rg[i].r->auth = true;
			rg[i].r->auth_key_id = (uint32_t)kv;
		} else if (strcmp(t, "D") == 0) {
			char *ids = strtok_r(NULL, " \n", &save);
			uint64_t id = ids ? strtoull(ids, NULL, 10) : 0;
			for (size_t i = 0; i < nrg; i++)
				if (rg[i].g->id == id) {
					am_group_free(rg[i].g);
					free(rg[i].r->send);
					free(rg[i].r);
					rg[i] = rg[--nrg];
					break;
				}
		}
	}
	fclose(f);

	/* Adopt: a READY group keeps running if every switch still has its tree; members get
	 * a grace period to reconnect their sessions. */
	for (size_t i = 0; i < nrg; i++) {
		struct am_group *g = rg[i].g;
		uint64_t now = util_now_ns();
		if (g->id >= am->next_group_id)
			am->next_group_id = g->id + 1;
		for (uint32_t r = 0; r < g->size; r++)
			g->m[r].last_hb_ns = now + (uint64_t)am->cfg.grace_ms * NS_PER_MS;
		g->created_ns = g->state_ns = now;
		if (g->state == AM_G_READY) {
			if (reconcile(am, g, rg[i].r)) {
				am_log(1, "recovered group %llu (%s/%s): tree %u still running",
				       (unsigned long long)g->id, g->job, g->name, rg[i].r->tree_id);
			} else {
				/* Remove what is left of it; rebuild once members are back. */
				for (size_t k = 0; k < rg[i].r->nsw; k++) {
					int s = am_sw_index(am, rg[i].r->sw[k]);
					if (s >= 0 && am->sw[s].up &&
					    am_running_find(&am->sw[s], rg[i].r->tree_id))
						am_sw_delete(am, (size_t)s, rg[i].r->tree_id);
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
		free(rg[i].r->send);
		free(rg[i].r);
	}
}

/* Rewrite the journal with the live state only (temp file + fsync + rename). */
static int journal_compact(struct am *am)
{
	char tmp[AM_PATH + 16];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof tmp, "%s.tmp", am->cfg.journal);
	/* 0600: the journal holds job secrets and group keys (fchmod: a left-over tmp file
	 * keeps its old mode through O_CREAT) */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0 && fchmod(fd, 0600) < 0) {
		close(fd);
		return -errno;
	}
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	fprintf(f, "# inca-am journal: J job secret | G group | K group key | M member | D deleted group\n");
	for (size_t i = 0; i < am->nlearned; i++)
		fprintf(f, "J %s %s\n", am->learned[i].id, am->learned[i].cred);
	for (struct am_group *g = am->groups; g; g = g->next)
		journal_group_write(am, f, g);
	fflush(f);
	fsync(fileno(f));
	fclose(f);
	if (rename(tmp, am->cfg.journal) < 0)
		return -errno;
	am->journal = fopen(am->cfg.journal, "a");
	return am->journal ? 0 : -errno;
}

int am_journal_open(struct am *am)
{
	int rc;

	replay_journal(am);
	am_account(am);
	rc = journal_compact(am);
	if (rc < 0)
		am_log(0, "journal %s: %s", am->cfg.journal, strerror(-rc));
	return rc;
}

void am_journal_job(struct am *am, const char *job, const char *cred)
{
	if (!am->journal)
		return;
	fprintf(am->journal, "J %s %s\n", job, cred);
	journal_sync(am);
}
