/* libFuzzer harness for inca-am's journal replay (journal_replay.c, through am_init): the
 * input is the journal a restarted AM finds (also a truncated or corrupted one: a crash
 * mid-write, a full disk, a flipped bit). No switches are configured, so every recovered group
 * is reconciled against an empty fabric. Either the AM accepts the journal, or it refuses
 * cleanly: no group, the file byte for byte as it was, no temp file. A refused journal is then
 * replayed with --recover, which must succeed and keep the damaged file aside byte for byte.
 * Whatever was accepted, every group must be consistent (0 < size <= 4096, joined <= size,
 * members indexed by rank), and the compacted journal the AM wrote must be mode 0600 and
 * replay (without --recover) to the same groups. Links the real groups.c, join.c, checks.c,
 * switches.c (no switch: no worker thread), journal.c, journal_replay.c, query.c, plan.c and
 * cfg.c with the NETCONF stub; the gRPC session calls and the logger are stubbed (no client
 * connects during a replay). Build: tests/fuzz/run_fuzz.sh (tests/fuzz/meson.build). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "am.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int am_verbosity;

void am_log(int level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

/* server.c: no session exists during a replay, so these are never reached with one. */
void am_session_send(struct am_session *s, const Inca__Am__V1__GroupEvent *ev)
{
	(void)s;
	(void)ev;
	abort();
}

void am_session_finish(struct am_session *s)
{
	(void)s;
	abort();
}

void am_session_bind(struct am_session *s, uint64_t gid, uint32_t rank)
{
	(void)s;
	(void)gid;
	(void)rank;
	abort();
}

uint64_t am_session_gid(const struct am_session *s)
{
	(void)s;
	abort();
}

uint32_t am_session_rank(const struct am_session *s)
{
	(void)s;
	abort();
}

/* server.c: only a ReportFailure keeps a call, and none comes during a replay. */
void am_pending_answer(struct am_pending *p, grpc_status_code st, const char *msg,
		       const ProtobufCMessage *reply)
{
	(void)p;
	(void)st;
	(void)msg;
	(void)reply;
	abort();
}

static char dir[64], jpath[128];

/* Remove every file in dir (the journal, its temp file, damaged journals moved aside). */
static void clean_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[400];

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

static void remove_dir(void)
{
	clean_dir();
	rmdir(dir);
}

/* The one file in dir whose name starts with "am.journal.damaged-", read whole; NULL if none
 * or more than one. */
static char *read_aside(size_t *len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[400], *buf;
	struct stat st;
	int n = 0;
	FILE *f;

	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "am.journal.damaged-", 19) == 0) {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			n++;
		}
	if (d)
		closedir(d);
	if (n != 1 || stat(p, &st) != 0 || !(f = fopen(p, "r")))
		return NULL;
	*len = (size_t)st.st_size; /* the file may hold NUL bytes */
	buf = malloc(*len + 1);
	if (!buf || fread(buf, 1, *len, f) != *len)
		abort();
	fclose(f);
	return buf;
}

static bool file_is(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "r");
	uint8_t *buf = malloc(size + 1);
	size_t n;
	bool same;

	if (!f || !buf)
		abort();
	n = fread(buf, 1, size + 1, f);
	fclose(f);
	same = n == size && (size == 0 || memcmp(buf, data, size) == 0);
	free(buf);
	return same;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* tmpfs when there is one: the AM fsyncs every journal write, which on a disk costs
	 * most of the run time */
	snprintf(dir, sizeof dir, "/dev/shm/inca-jfuzz.XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof dir, "/tmp/inca-jfuzz.XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	snprintf(jpath, sizeof jpath, "%s/am.journal", dir);
	atexit(remove_dir);
	return 0;
}

/* Groups as (id, size, joined) triples, sorted by id; returns how many. */
static size_t snapshot(const struct am *am, uint64_t (*out)[3], size_t cap)
{
	size_t n = 0;

	for (const struct am_group *g = am->groups; g; g = g->next) {
		uint32_t joined = 0;
		if (g->size == 0 || g->size > AM_MAX_GROUP_SIZE || !g->m || g->joined > g->size)
			abort();
		for (uint32_t r = 0; r < g->size; r++) {
			if (g->m[r].joined && g->m[r].rank != r)
				abort();
			joined += g->m[r].joined;
		}
		if (joined != g->joined)
			abort();
		if (n < cap) {
			out[n][0] = g->id;
			out[n][1] = g->size;
			out[n][2] = g->joined;
		}
		n++;
	}
	for (size_t i = 1; i < n && i < cap; i++) /* insertion sort by id */
		for (size_t j = i; j > 0 && out[j - 1][0] > out[j][0]; j--) {
			uint64_t t[3] = { out[j][0], out[j][1], out[j][2] };
			memcpy(out[j], out[j - 1], sizeof t);
			memcpy(out[j - 1], t, sizeof t);
		}
	return n;
}

static int load(struct am *am, bool recover)
{
	memset(am, 0, sizeof *am);
	am->recover = recover;
	am_cfg_defaults(&am->cfg);
	snprintf(am->cfg.journal, sizeof am->cfg.journal, "%s", jpath);
	return am_init(am);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct am a, b; /* large: not on the stack */
	static uint64_t sa[256][3], sb[256][3];
	FILE *f;
	size_t na, nb;
	int rc;

	clean_dir();
	f = fopen(jpath, "w");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	rc = load(&a, false);
	if (rc == -EBADMSG) {
		/* a clean refusal: nothing adopted, the evidence untouched */
		char tmp[160];
		char *aside;
		size_t alen = 0;
		snprintf(tmp, sizeof tmp, "%s.tmp", jpath);
		if (a.groups || a.journal || !file_is(jpath, data, size) || access(tmp, F_OK) == 0)
			abort();
		am_fini(&a);
		/* --recover: the valid records, the damaged file kept aside byte for byte */
		if (load(&a, true) < 0) {
			am_fini(&a);
			return 0; /* only I/O may fail */
		}
		aside = read_aside(&alen);
		if (!aside || alen != size || (size && memcmp(aside, data, size) != 0))
			abort();
		free(aside);
	} else if (rc < 0) { /* only a failing compaction (I/O) may fail otherwise */
		am_fini(&a);
		return 0;
	}
	na = snapshot(&a, sa, 256);
	am_fini(&a);
	{
		/* the compacted journal (job secrets, group keys) is readable by its owner only */
		struct stat st;
		if (stat(jpath, &st) == 0 && (st.st_mode & 0777) != 0600)
			abort();
	}
	/* the compacted journal is undamaged and holds the same groups */
	if (load(&b, false) < 0)
		abort();
	nb = snapshot(&b, sb, 256);
	am_fini(&b);
	if (na != nb || memcmp(sa, sb, sizeof sa[0] * (na < 256 ? na : 256)) != 0) {
		if (getenv("JF_DEBUG"))
			for (size_t i = 0; i < na || i < nb; i++)
				fprintf(stderr, "%zu: %llu/%llu/%llu vs %llu/%llu/%llu\n", i,
					(unsigned long long)sa[i][0], (unsigned long long)sa[i][1],
					(unsigned long long)sa[i][2], (unsigned long long)sb[i][0],
					(unsigned long long)sb[i][1], (unsigned long long)sb[i][2]);
		abort();
	}
	return 0;
}
