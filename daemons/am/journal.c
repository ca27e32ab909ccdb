/* inca-am journal, writing: an append-only log of job credentials learned from first joiners
 * (and their expiry), groups, their members and tree keys, one checksummed record a line,
 * and its compaction to the live state. Reading it back at start (replay, reconciliation
 * with the switches, --recover) is journal_replay.c. Format: docs/am.md "Restart and the
 * journal". Main loop only. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "am.h"
#include "util/util.h"

/* ---------------------------------------------------------------- writing */

/* A string field: "-" for "", every byte that could split a record ('%', space, control,
 * non-ASCII; ':' too in a SWITCH:PARENT pair) as %XX; a string that is "-" itself as %2d. */
static void put_esc(FILE *f, const char *s, bool colon)
{
	if (!s[0]) {
		fputc('-', f);
		return;
	}
	if (strcmp(s, "-") == 0) {
		fputs("%2d", f);
		return;
	}
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c >= 0x7f || c == '%' || (colon && c == ':'))
			fprintf(f, "%%%02x", c);
		else
			fputc(c, f);
	}
}

static void put_str(FILE *f, const char *s)
{
	fputc(' ', f);
	put_esc(f, s, false);
}

/* One record is built in memory, then written as one line: the record, a space and the
 * CRC-32 (zlib) of the record as 8 hex digits. */
struct jrec {
	FILE *f;
	char *buf;
	size_t len;
};

static FILE *rec_begin(struct jrec *r)
{
	r->buf = NULL;
	r->len = 0;
	r->f = open_memstream(&r->buf, &r->len);
	return r->f;
}

static void rec_end(struct am *am, struct jrec *r, FILE *out)
{
	if (fclose(r->f) != 0 || !r->buf) {
		am_log(0, "journal: out of memory, record lost");
		free(r->buf);
		return;
	}
	fprintf(out, "%s %08lx\n", r->buf, crc32(0, (const Bytef *)r->buf, (uInt)r->len));
	explicit_bzero(r->buf, r->len); /* K and J records hold secrets */
	free(r->buf);
}

static void journal_sync(struct am *am)
{
	if (!am->journal)
		return;
	fflush(am->journal);
	fsync(fileno(am->journal));
	am->st.journal_records++;
}

static void journal_group_write(struct am *am, FILE *out, const struct am_group *g)
{
	struct jrec r;
	FILE *f;

	if ((f = rec_begin(&r))) {
		fprintf(f, "G %llu %s", (unsigned long long)g->id, am_state_name(g->state));
		put_str(f, g->job);
		put_str(f, g->name);
		fprintf(f, " %u %u %u %u %u %u %u %u %u %d %zu", g->size, g->slots_wanted,
			g->generation, g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.id : 0,
			g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.key : 0, g->plan.slots,
			g->plan.bsl_bits, g->plan.mtu, g->plan.slot_bytes, g->rebuildable ? 1 : 0,
			g->plan.ok ? g->plan.nsw : 0);
		for (size_t i = 0; g->plan.ok && i < g->plan.nsw; i++) {
			int p = g->plan.sws[i].parent;
			fputc(' ', f);
			put_esc(f, am->sw[g->plan.sws[i].sw].cfg->name, true);
			fputc(':', f);
			put_esc(f, p < 0 ? "" : am->sw[p].cfg->name, true);
		}
		rec_end(am, &r, out);
	}
	/* K: the tree's data-plane key (the journal file is 0600) */
	if (g->plan.ok && g->plan.sws[0].tree.auth && (f = rec_begin(&r))) {
		const struct ctl_tree *t = &g->plan.sws[0].tree;
		fprintf(f, "K %llu %u ", (unsigned long long)g->id, t->auth_key_id);
		for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++)
			fprintf(f, "%02x", t->auth_key[i]);
		rec_end(am, &r, out);
	}
	for (uint32_t rk = 0; rk < g->size; rk++) {
		const struct am_member *m = &g->m[rk];
		if (!m->joined || !(f = rec_begin(&r)))
			continue;
		fprintf(f, "M %llu %u %llu %u %u", (unsigned long long)g->id, rk,
			(unsigned long long)m->token, m->bfr_id, m->qpn);
		put_str(f, m->addr);
		put_str(f, m->host);
		put_str(f, g->plan.ok ? am->sw[g->plan.send_sw[rk]].cfg->name : "");
		fprintf(f, " %u %u %d %d %u", m->dtype_mask, m->op_mask, m->left ? 1 : 0,
			m->wants_det ? 1 : 0, m->max_mtu);
		rec_end(am, &r, out);
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
	struct jrec r;

	if (!am->journal || !rec_begin(&r))
		return;
	fprintf(r.f, "D %llu", (unsigned long long)id);
	rec_end(am, &r, am->journal);
	journal_sync(am);
}

static void journal_job_write(struct am *am, FILE *out, const char *job, const char *cred)
{
	struct jrec r;

	if (!rec_begin(&r))
		return;
	fputc('J', r.f);
	put_str(r.f, job);
	put_str(r.f, cred);
	rec_end(am, &r, out);
}

void am_journal_job(struct am *am, const char *job, const char *cred)
{
	if (!am->journal)
		return;
	journal_job_write(am, am->journal, job, cred);
	journal_sync(am);
}

void am_journal_job_forget(struct am *am, const char *job)
{
	struct jrec r;

	if (!am->journal || !rec_begin(&r))
		return;
	fputc('E', r.f);
	put_str(r.f, job);
	rec_end(am, &r, am->journal);
	journal_sync(am);
}

/* ---------------------------------------------------------------- compaction */

/* Rewrite the journal with the live state only (temp file + fsync + rename). */
int am_journal_compact(struct am *am)
{
	char tmp[AM_PATH + 16];
	struct jrec r;
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
	if (rec_begin(&r)) {
		fprintf(r.f, "H %s %d", JOURNAL_MAGIC, JOURNAL_VERSION);
		rec_end(am, &r, f);
	}
	for (size_t i = 0; i < am->nlearned; i++)
		journal_job_write(am, f, am->learned[i].id, am->learned[i].cred);
	for (struct am_group *g = am->groups; g; g = g->next)
		journal_group_write(am, f, g);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		int e = errno;
		fclose(f);
		return -e;
	}
	if (fclose(f) != 0)
		return -errno;
	if (rename(tmp, am->cfg.journal) < 0)
		return -errno;
	am->journal = fopen(am->cfg.journal, "a");
	return am->journal ? 0 : -errno;
}
