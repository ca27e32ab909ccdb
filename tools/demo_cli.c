/* tools/demo_cli: the command line shared by inca-demo and bench-allreduce. Starts an
 * inca-switch and N rank processes on loopback, sweeps AllReduce sizes for INC and the host
 * ring side by side, verifies every result and prints an nccl-tests-style table plus the
 * switch's counters; optionally JSON lines and a PNG plot. Exit 0 only if all is right. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cli.h"
#include "check.h"
#include "demo_cli.h"
#include "json.h"
#include "launch.h"
#include "sweep.h"
#include "util/cli.h"
#include "util/util.h"
#include "wire/wire.h"

static void usage(FILE *f, const struct demo_defaults *d)
{
	char b0[32], b1[32];
	fprintf(f,
		"usage: %s [options]\n"
		"  -b, --minbytes N       smallest size (default %s; K/M/G suffixes)\n"
		"  -e, --maxbytes N       largest size (default %s)\n"
		"  -f, --stepfactor F     size multiplier between rows (default %llu)\n"
		"  -n, -i, --iters N      timed iterations per row, at most (default %d)\n"
		"  -w, --warmup N         warmup iterations per row, at most (default %d)\n"
		"      --budget S         wall-time bound in seconds of one row's timed part per\n"
		"                         algorithm (default %.1f; 0 = none)\n"
		"  -r, --ranks N          number of rank processes (default 4, at most 64)\n"
		"  -t, --types LIST       type:op pairs, e.g. fp32:sum,int32:max,fp16:sum; a pair may\n"
		"                         carry its own range: fp32:sum@4-1M/16.\n"
		"                         Default: fp32:sum over -b..-e%s%s\n",
		d->tool, launch_fmt_bytes(d->minb, b0, sizeof(b0)),
		launch_fmt_bytes(d->maxb, b1, sizeof(b1)), (unsigned long long)d->factor, d->iters,
		d->warmup, d->budget, d->extra ? ", plus " : "", d->extra ? d->extra : "");
	fprintf(f,
		"      --mtu N            RoCE MTU of the clients, 256..4096 (default 4096)\n"
		"      --slots N          switch slots per tree = client window (default 256)\n"
		"      --rto-us N         clients' initial and minimum retransmission timeout (libinca\n"
		"                         default: 20000 initially, then SRTT + 4 RTTVAR, at least 2000)\n"
		"      --drop-rate P      clients drop P of data packets on send and on receive\n"
		"      --switch-drop-rate P  the switch drops P of its input (inca-switch --drop-rate)\n"
		"      --deterministic    deterministic switch; INC results compared bitwise with a\n"
		"                         rank-ordered reduction of random (rounding) float data\n"
		"      --in-place         sendbuf == recvbuf\n"
		"      --link-rate BPS    link rate in bit/s: adds an INC/link algbw column\n"
		"      --no-inc, --no-ring  run only one algorithm\n"
		"      --no-auth          switch and ranks run without packet authentication (the\n"
		"                         default is a random group key per job, docs/protocol.md §14)\n"
		"      --auth-compare     run everything twice, authentication on then off\n"
		"      --loss-compare P   INC only, runs alternated without loss and with --drop-rate P\n"
		"                         (--loss-pairs of each, default 5); prints the median time of\n"
		"                         each row both ways and the lossy/lossless ratio of the pairs\n"
		"      --loss-pairs K     pairs of runs of --loss-compare, 1..50 (default 5)\n"
		"      --switch PATH      inca-switch binary (default: $INCA_SWITCH or the build tree)\n"
		"      --switch-threads N switch worker threads (default 1)\n"
		"      --switch-cpu N|auto|none  run inca-switch on CPU N alone, as a switch has\n"
		"                         silicon of its own (inca-switch --cpus N); the ranks\n"
		"                         leave CPU N to it in INC rows of %u KiB or more and use\n"
		"                         every CPU in the others. auto: the last CPU, where this\n"
		"                         process has two or more and the switch one worker; none:\n"
		"                         the scheduler places everything (default %s)\n"
		"      --addr-index K     loopback address block: 0 = 127.0.0.x, 1..255 = 127.1.K.x\n"
		"                         (run several demos/tests at once); default %u\n"
		"      --fabric PLAN      run the ranks in the network namespaces of a fabric plan\n"
		"                         written by tests/netns/fabric.py (switches already running\n"
		"                         there; needs root). Ranks, tree and addresses come from it\n"
		"      --hold S           AM fabric plans: after the sweep every rank keeps its group\n"
		"                         S seconds, idle (status views, fault tests)\n"
		"      --json FILE        also write one JSON line per row to FILE\n"
		"      --plot PNG         plot algbw vs size from the JSON lines (needs --json and\n"
		"                         /usr/bin/python3 with matplotlib; skipped if missing)\n"
		"      --seed S           data and fault-injection seed (default 1)\n"
		"  -v, --verbose          libinca warnings/info on stderr, switch -v\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version and exit\n"
		"Options follow docs/cli.md; a bad value is reported with the option that took it.\n",
		SWEEP_SWITCH_ALONE_BYTES / 1024, d->switch_cpu_auto ? "auto" : "none", d->addr_index);
}

enum {
	OPT_MTU = BENCH_OPT_TOOL, OPT_SLOTS, OPT_DROP, OPT_SWDROP, OPT_DET, OPT_INPLACE, OPT_NOAUTH,
	OPT_NOINC, OPT_NORING, OPT_SWTHREADS, OPT_RTO, OPT_HOLD, OPT_SWCPU,
};

const struct demo_defaults demo_inca_defaults = {
	.tool = "inca-demo",
	.minb = 4,
	.maxb = 64u << 20,
	.factor = 4,
	.extra = "int32:max,fp16:sum,bf16:sum,int64:bxor,fp64:min,uint8:prod",
	.extra_max = 1u << 20,
	.extra_factor = 16,
	.iters = 20,
	.warmup = 5,
	.budget = 1.5,
	.addr_index = 0,
};

int demo_plot(const char *json_path, const char *png_path)
{
	return demo_plot_with("plot_bench.py", json_path, png_path);
}

int demo_plot_with(const char *script_name, const char *json_path, const char *png_path)
{
	const char *py = "/usr/bin/python3";
	char script[PATH_MAX];
	if (!json_path) {
		fprintf(stderr, "--plot needs --json\n");
		return -EINVAL;
	}
	if (access(py, X_OK) || launch_find_file(LAUNCH_DATA, script_name, script, sizeof(script))) {
		printf("# plot: skipped (%s or %s missing)\n", py, script);
		return 0;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execl(py, py, script, json_path, png_path, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		printf("# plot: %s\n", png_path);
	else
		printf("# plot: not written (%s exit status %d)\n", script_name,
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}

/* One switch's line of fabric_report: its whole statistics. Returns its aggregations. */
static double switch_line(const struct launch_plan *p, int i, const struct json *st)
{
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	double down = json_sum_key(json_get(st, "trees"), "results_down");
	printf("# switch %-8s (%s): rx %.0f pkts, tx %.0f pkts, contributions %.0f, "
	       "aggregations %.0f, results down %.0f, duplicates %.0f, re-sent %.0f, "
	       "drops %.0f\n", p->sw[i].name, p->sw[i].role, s.sw_rx_pkts, s.sw_tx_pkts,
	       s.contributions, s.aggregations, down, s.duplicates, s.results_resent, s.drops);
	return s.aggregations;
}

/* One switch's line of fabric_report: its statistics of tree tree_id. Returns the tree's
 * aggregations there, or -1 if the switch does not hold the tree. */
static double tree_line(const struct launch_plan *p, int i, const struct json *st,
			unsigned tree_id)
{
	const struct json *t = NULL;
	const struct json *trees = json_get(st, "trees");
	for (const struct json *k = trees ? trees->kid : NULL; k; k = k->next)
		if ((unsigned)json_num(json_get(k, "id"), -1) == tree_id)
			t = k;
	if (!t) {
		printf("# switch %-8s: not in tree %u\n", p->sw[i].name, tree_id);
		return -1;
	}
	const struct json *role = json_get(t, "role");
	double agg = json_num(json_get(t, "aggregations"), 0);
	printf("# switch %-8s tree %u (%s, %.0f members, %.0f children): rx %.0f pkts, tx "
	       "%.0f pkts, contributions %.0f, aggregations %.0f, results down %.0f, "
	       "duplicates %.0f, re-sent %.0f, drops %.0f\n", p->sw[i].name, tree_id,
	       role && role->str ? role->str : "?", json_num(json_get(t, "members"), 0),
	       json_num(json_get(t, "children"), 0), json_num(json_get(t, "rx_pkts"), 0),
	       json_num(json_get(t, "tx_pkts"), 0), json_num(json_get(t, "contributions"), 0), agg,
	       json_num(json_get(t, "results_down"), 0), json_num(json_get(t, "duplicates"), 0),
	       json_num(json_get(t, "results_resent"), 0), json_sum_all(json_get(t, "drops")));
	return agg;
}

/* Fabric mode: fresh statistics from every switch of the plan, one line each, of the whole
 * switch (tree NULL) or of one tree (*tree, the group's in AM fabric mode, taken while the
 * group is still up: the AM deletes the tree when the ranks leave). Every switch reporting
 * (leaf or root) must have completed each chunk round exactly once. Returns failures; *nsw
 * (may be NULL) gets the switches that reported. */
static int fabric_report(const struct launch_plan *p, uint64_t chunks, const unsigned *tree,
			 int *nsw)
{
	struct json *st[LAUNCH_MAX_SWITCHES];
	char of_tree[32] = "";
	int fail = 0, n = 0;

	if (tree)
		snprintf(of_tree, sizeof of_tree, " of tree %u", *tree);
	launch_plan_switch_stats(p, st, 3000);
	for (int i = 0; i < p->nswitches; i++) {
		if (!st[i]) {
			printf("# ERROR: switch %s: no fresh statistics from %s\n", p->sw[i].name,
			       p->sw[i].stats_path);
			fail++;
			continue;
		}
		double agg = tree ? tree_line(p, i, st[i], *tree) : switch_line(p, i, st[i]);
		json_free(st[i]);
		if (agg < 0)
			continue;
		n++;
		if (agg != (double)chunks) {
			printf("# ERROR: switch %s completed %.0f aggregations%s for %llu chunk "
			       "rounds\n", p->sw[i].name, agg, of_tree, (unsigned long long)chunks);
			fail++;
		}
	}
	printf("# chunk rounds issued: %llu (every switch%s must aggregate each exactly once)\n",
	       (unsigned long long)chunks, of_tree);
	if (nsw)
		*nsw = n;
	return fail;
}

/* Run `inca --am ADDR ... status` in the calling process's network namespace (a rank's host
 * namespace, which reaches the AM). Returns its exit status (127: not started). */
static int run_inca_status(const struct launch_plan *p)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* the job's view: its own groups (and the fabric) */
		const char *argv[12] = { p->cli_path, "--am", p->am_addr, "--job", p->job_id,
					 "--credential", p->job_credential };
		int n = 7;
		if (p->am_insecure)
			argv[n++] = "--insecure";
		if (!p->am_insecure && p->am_ca[0]) {
			argv[n++] = "--ca";
			argv[n++] = p->am_ca;
		}
		argv[n++] = "status";
		argv[n] = NULL;
		execv(p->cli_path, (char *const *)argv);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return 127;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct am_epilogue_arg {
	const struct launch_plan *plan;
	const struct sweep_job *job;
	bool inc; /* the sweep ran INC rows: the group must have had a tree */
	double hold_s; /* --hold: every rank then keeps its group this long, idle */
};

/* AM fabric mode, in every rank after the sweep and before the communicator is destroyed
 * (leaving dismantles the group): rank 0 shows the AM's view of the group and checks the
 * tree's switch counters, the others wait at a barrier so the group stays up meanwhile. */
static int am_epilogue(struct inca_comm *comm, void *argp)
{
	const struct am_epilogue_arg *e = argp;
	int fail = 0;
	if (inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_RING }))
		return 1;
	if (inca_comm_rank(comm) == 0) {
		struct inca_am_info info;
		memset(&info, 0, sizeof(info));
		int rc = inca_comm_am_info(comm, &info, sizeof info);
		static const char *const states[] = { "waiting", "tree ready", "host fallback",
						      "dismantled" };
		printf("#\n# AM group %llu: %s, tree %u, generation %u, %llu session reconnects%s%s\n",
		       (unsigned long long)info.group_id,
		       rc == 0 && info.state >= 0 && info.state <= 3 ? states[info.state] : "?",
		       info.tree_id, info.generation, (unsigned long long)info.reconnects,
		       info.reason[0] ? ", reason: " : "", info.reason);
		if (e->inc && (rc || info.state != 1)) {
			printf("# ERROR: the AM did not give this job an aggregation tree\n");
			fail++;
		}
		if (e->plan->cli_path[0]) {
			printf("# inca --am %s status (while the job holds its group):\n",
			       e->plan->am_addr);
			fflush(stdout);
			int st = run_inca_status(e->plan);
			if (st) {
				printf("# ERROR: inca status exit status %d\n", st);
				fail++;
			}
		}
		if (e->inc && info.state == 1) {
			unsigned tree = info.tree_id;
			int nsw = 0;
			printf("#\n");
			fail += fabric_report(e->plan, sweep_job_totals(e->job)->inc_chunks, &tree,
					      &nsw);
			if (nsw == 0) {
				printf("# ERROR: no switch holds tree %u\n", info.tree_id);
				fail++;
			}
		}
		if (e->hold_s > 0)
			printf("# holding the group for %.1f s (ranks idle)\n", e->hold_s);
		fflush(stdout);
	}
	/* Idle ranks (no data-plane or ring traffic; only the libinca session thread keeps
	 * heart-beating): fault tests kill one of them and watch the AM. */
	for (uint64_t end = util_now_ns() + (uint64_t)(e->hold_s * 1e9); util_now_ns() < end;)
		usleep(50000);
	if (inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_RING }))
		fail++;
	return fail ? 1 : 0;
}

static int demo_run(int argc, char **argv, const struct demo_defaults *d);

/* --loss-compare: rows of one run, as the JSON lines give them. */
#define LC_MAX_ROWS 64
#define LC_MAX_PAIRS 50
struct lc_row {
	size_t bytes;
	char type[16], op[16];
	double us[2][LC_MAX_PAIRS]; /* [lossless, lossy][pair]; 0 where the run had no figure */
};

/* Add the INC times of one run's JSON lines (file `path`) as pair `pair`, side `lossy`. */
static int lc_read(const char *path, struct lc_row *rows, int *nrows, int pair, int lossy)
{
	char *text = json_read_file(path, NULL);
	if (!text)
		return -1;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		struct json *j = json_parse(line, NULL);
		const struct json *ty = j ? json_get(j, "type") : NULL, *op = j ? json_get(j, "op") : NULL;
		double us = j ? json_num(json_get(j, "inc_time_us"), 0) : 0;
		size_t bytes = j ? (size_t)json_num(json_get(j, "size_bytes"), 0) : 0;
		if (ty && ty->str && op && op->str && us > 0) {
			int r = 0;
			while (r < *nrows && !(rows[r].bytes == bytes && !strcmp(rows[r].type, ty->str) &&
					       !strcmp(rows[r].op, op->str)))
				r++;
			if (r == *nrows && r < LC_MAX_ROWS) {
				memset(&rows[r], 0, sizeof(rows[r]));
				rows[r].bytes = bytes;
				snprintf(rows[r].type, sizeof(rows[r].type), "%s", ty->str);
				snprintf(rows[r].op, sizeof(rows[r].op), "%s", op->str);
				(*nrows)++;
			}
			if (r < *nrows)
				rows[r].us[lossy][pair] = us;
		}
		json_free(j);
	}
	free(text);
	return 0;
}

/* Value of option `name` in argv ("--name V" or "--name=V"); *at, *len: where it is. */
static const char *find_opt(int argc, char **argv, const char *name, int *at, int *len)
{
	size_t l = strlen(name);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], name)) {
			*at = i;
			*len = 2;
			return i + 1 < argc ? argv[i + 1] : "";
		}
		if (!strncmp(argv[i], name, l) && argv[i][l] == '=') {
			*at = i;
			*len = 1;
			return argv[i] + l + 1;
		}
	}
	return NULL;
}

/* --loss-compare P: the drop-injection figure as a measurement of its own. This machine's
 * speed drifts between runs by more than loss costs, so lossless and lossy runs alternate
 * (each with its own switch and ranks, INC only) and each size's ratio is taken per pair:
 * lossless run i against lossy run i. */
static int loss_compare(int argc, char **argv, const struct demo_defaults *d)
{
	const char *tool = d->tool;
	int at = 0, len = 0, pat = 0, plen = 0;
	const char *pv = find_opt(argc, argv, "--loss-compare", &at, &len);
	const char *kv = find_opt(argc, argv, "--loss-pairs", &pat, &plen);
	double p;
	long long k = 5;
	if (util_cli_double(tool, "--loss-compare", pv, 0, 1, true, &p))
		return 2;
	if (p <= 0)
		return util_cli_error(tool, "--loss-compare P needs a drop rate above 0"), 2;
	if (kv && util_cli_int(tool, "--loss-pairs", kv, 1, LC_MAX_PAIRS, &k))
		return 2;
	static const char *const excl[] = { "--auth-compare", "--drop-rate", "--json", "--plot",
					    "--fabric", "--no-inc" };
	for (size_t e = 0; e < sizeof excl / sizeof excl[0]; e++) {
		int a2, l2;
		if (find_opt(argc, argv, excl[e], &a2, &l2)) {
			util_cli_error(tool, "--loss-compare runs its own passes: not with %s", excl[e]);
			return 2;
		}
	}
	char **v = calloc((size_t)argc + 8, sizeof(char *));
	struct lc_row *rows = calloc(LC_MAX_ROWS, sizeof(*rows));
	char path[2][PATH_MAX];
	int n = 0, nrows = 0, fail = 0;
	if (!v || !rows) {
		free(v);
		free(rows);
		return 2;
	}
	for (int i = 0; i < argc; i++)
		if (!(i >= at && i < at + len) && !(pat && i >= pat && i < pat + plen))
			v[n++] = argv[i];
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	for (int s = 0; s < 2; s++) {
		snprintf(path[s], sizeof(path[s]), "%s/inca-loss-compare-XXXXXX", tmp);
		int fd = mkstemp(path[s]);
		if (fd < 0) {
			fprintf(stderr, "%s: %s: %s\n", tool, path[s], strerror(errno));
			if (s)
				unlink(path[0]);
			free(v);
			free(rows);
			return 2;
		}
		close(fd);
	}
	printf("# %s --loss-compare %s: %lld pairs of runs, INC only, each pair a run without loss "
	       "and one with --drop-rate %s (clients drop that share of data packets on send and on "
	       "receive)\n", tool, pv, k, pv);
	fflush(stdout);
	for (int i = 0; i < k && !fail; i++) {
		for (int lossy = 0; lossy < 2 && !fail; lossy++) {
			uint64_t t0 = util_now_ns();
			FILE *f = fopen(path[lossy], "w"); /* one run's lines at a time */
			if (f)
				fclose(f);
			pid_t pid = fork();
			if (pid == 0) {
				/* The run's own table is not shown: the summary below is the result. */
				if (!freopen("/dev/null", "w", stdout))
					_exit(2);
				int m = n;
				v[m++] = (char *)"--no-ring";
				v[m++] = (char *)"--drop-rate";
				v[m++] = lossy ? (char *)pv : (char *)"0"; /* as given, checked above */
				v[m++] = (char *)"--json";
				v[m++] = path[lossy];
				v[m] = NULL;
				optind = 0;
				_exit(demo_run(m, v, d));
			}
			int st = 0;
			if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
			    WEXITSTATUS(st)) {
				fprintf(stderr, "%s: --loss-compare: run %d (%s) failed (exit %d)\n", tool,
					2 * i + lossy + 1, lossy ? "lossy" : "lossless",
					WIFEXITED(st) ? WEXITSTATUS(st) : -1);
				fail = 1;
				break;
			}
			if (lc_read(path[lossy], rows, &nrows, i, lossy)) {
				fprintf(stderr, "%s: --loss-compare: %s: %s\n", tool, path[lossy],
					strerror(errno));
				fail = 1;
			}
			printf("# run %d of %lld: %s, %.1f s\n", 2 * i + lossy + 1, 2 * k,
			       lossy ? "lossy" : "lossless", (double)(util_now_ns() - t0) * 1e-9);
			fflush(stdout);
		}
	}
	unlink(path[0]);
	unlink(path[1]);
	if (!fail) {
		printf("#\n# %10s %6s %6s  %13s %13s  %s\n", "size", "type", "redop", "lossless",
		       "lossy", "lossy / lossless");
		printf("# %10s %6s %6s  %13s %13s  %s\n", "(B)", "", "", "(us, median)", "(us, median)",
		       "(median of the pairs, lowest-highest)");
		for (int r = 0; r < nrows; r++) {
			double a[LC_MAX_PAIRS], b[LC_MAX_PAIRS], q[LC_MAX_PAIRS];
			int na = 0, nb = 0, nq = 0;
			for (int i = 0; i < k; i++) {
				double x = rows[r].us[0][i], y = rows[r].us[1][i];
				if (x > 0)
					a[na++] = x;
				if (y > 0)
					b[nb++] = y;
				if (x > 0 && y > 0)
					q[nq++] = y / x;
			}
			if (!na || !nb || !nq)
				continue;
			/* util_median sorts: q[0] and q[nq - 1] are then the range. */
			double ma = util_median(a, na), mb = util_median(b, nb), mq = util_median(q, nq);
			printf("  %10zu %6s %6s  %13.1f %13.1f  %.2fx (%.2f-%.2f)\n", rows[r].bytes,
			       rows[r].type, rows[r].op, ma, mb, mq, q[0], q[nq - 1]);
		}
	}
	free(v);
	free(rows);
	return fail ? 1 : 0;
}

/* --loss-compare: loss_compare. --auth-compare: the whole run twice, packet authentication on
 * then off (--no-auth), each with its own switch and ranks; both tables are printed. */
int demo_main(int argc, char **argv, const struct demo_defaults *d)
{
	int at = 0, len = 0;
	/* gRPC core (libinca's AM client) logs every failed TLS handshake on stderr; libinca
	 * reports the failure itself in one line ("no connection to the AM (TLS: ...)"). An
	 * operator's GRPC_VERBOSITY wins. */
	setenv("GRPC_VERBOSITY", "NONE", 0);
	if (find_opt(argc, argv, "--loss-compare", &at, &len))
		return loss_compare(argc, argv, d);
	if (find_opt(argc, argv, "--loss-pairs", &at, &len)) {
		util_cli_error(d->tool, "--loss-pairs counts the runs of --loss-compare");
		return 2;
	}
	at = 0;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--auth-compare"))
			at = i;
	if (!at)
		return demo_run(argc, argv, d);
	char **v = calloc((size_t)argc + 2, sizeof(char *));
	if (!v)
		return 2;
	int n = 0;
	for (int i = 0; i < argc; i++)
		if (i != at)
			v[n++] = argv[i];
	printf("# ==== pass 1 of 2: packet authentication on (AES-256-GMAC) ====\n");
	fflush(stdout);
	int rc1 = demo_run(n, v, d);
	v[n++] = (char *)"--no-auth";
	optind = 0; /* glibc: full getopt re-initialisation */
	printf("# ==== pass 2 of 2: packet authentication off (--no-auth) ====\n");
	fflush(stdout);
	int rc2 = demo_run(n, v, d);
	free(v);
	return rc1 ? rc1 : rc2;
}

static int demo_run(int argc, char **argv, const struct demo_defaults *d)
{
	static const struct option lo[] = {
		BENCH_CLI_LONGOPTS,
		{ "mtu", required_argument, 0, OPT_MTU },
		{ "slots", required_argument, 0, OPT_SLOTS },
		{ "drop-rate", required_argument, 0, OPT_DROP },
		{ "switch-drop-rate", required_argument, 0, OPT_SWDROP },
		{ "deterministic", no_argument, 0, OPT_DET },
		{ "in-place", no_argument, 0, OPT_INPLACE },
		{ "no-inc", no_argument, 0, OPT_NOINC },
		{ "no-ring", no_argument, 0, OPT_NORING },
		{ "no-auth", no_argument, 0, OPT_NOAUTH },
		{ "switch-threads", required_argument, 0, OPT_SWTHREADS },
		{ "rto-us", required_argument, 0, OPT_RTO },
		{ "hold", required_argument, 0, OPT_HOLD },
		{ "switch-cpu", required_argument, 0, OPT_SWCPU },
		{ 0, 0, 0, 0 },
	};
	struct launch_cfg cfg;
	launch_cfg_defaults(&cfg);
	cfg.job_timeout_s = 600;
	cfg.addr_index = d->addr_index;
	cfg.rto_us = d->rto_us;
	struct bench_cli b = { .tool = d->tool, .iters_min = 0, .minb = d->minb, .maxb = d->maxb,
				.factor = d->factor, .iters = d->iters, .warmup = d->warmup,
				.budget_s = d->budget, .seed = 1 };
	double v, hold_s = 0;
	static struct launch_plan plan; /* ~30 KiB: not on the stack */
	bool det = false, inplace = false, no_inc = false, no_ring = false;
	bool swcpu_auto = d->switch_cpu_auto;
	const char *tool = d->tool;
	long long ll;
	int c;
	/* Every value is checked here, before a switch or rank starts (docs/cli.md). */
	while ((c = bench_cli_next(&b, &cfg, argc, argv, "r:b:e:f:t:w:n:i:vhV", lo)) > 0) {
		switch (c) {
		case OPT_MTU:
			if (util_cli_int(tool, "--mtu", optarg, WIRE_MTU_MIN, WIRE_MTU_MAX, &ll))
				return 2;
			cfg.mtu = (uint16_t)ll;
			break;
		case OPT_SLOTS:
			if (util_cli_int(tool, "--slots", optarg, 1, 65535, &ll))
				return 2;
			cfg.nslots = (uint16_t)ll;
			break;
		case OPT_DROP:
			if (util_cli_double(tool, "--drop-rate", optarg, 0, 1, true,
					    &cfg.client_drop_rate))
				return 2;
			break;
		case OPT_SWDROP:
			if (util_cli_double(tool, "--switch-drop-rate", optarg, 0, 1, true,
					    &cfg.switch_drop_rate))
				return 2;
			break;
		case OPT_DET:
			det = true;
			break;
		case OPT_INPLACE:
			inplace = true;
			break;
		case OPT_NOINC:
			no_inc = true;
			break;
		case OPT_NORING:
			no_ring = true;
			break;
		case OPT_NOAUTH:
			cfg.no_auth = true;
			break;
		case OPT_SWTHREADS:
			if (util_cli_int(tool, "--switch-threads", optarg, 1, 64, &ll))
				return 2;
			cfg.switch_threads = (int)ll;
			break;
		case OPT_HOLD:
			if (util_cli_double(tool, "--hold", optarg, 0, 3600, false, &hold_s))
				return 2;
			break;
		case OPT_SWCPU:
			swcpu_auto = !strcmp(optarg, "auto");
			if (swcpu_auto || !strcmp(optarg, "none")) {
				cfg.switch_cpu = -1;
				break;
			}
			if (util_cli_int(tool, "--switch-cpu", optarg, 0, CPU_SETSIZE - 1, &ll))
				return 2;
			cfg.switch_cpu = (int)ll;
			break;
		case OPT_RTO:
			if (util_cli_double(tool, "--rto-us", optarg, 0, 60e6, false, &v))
				return 2;
			cfg.rto_us = (uint32_t)v;
			break;
		default: /* getopt_long named the option */
			goto bad;
		}
	}
	if (c == BENCH_CLI_HELP) {
		usage(stdout, d);
		return 0;
	}
	if (c != BENCH_CLI_END)
		return c == BENCH_CLI_VERSION ? 0 : 2;
	if (bench_cli_check(&b, argc, argv))
		return 2;
	if (no_inc && no_ring) {
		util_cli_error(tool, "--no-inc and --no-ring together leave nothing to run");
		return 2;
	}
	if (bench_cli_fabric(&b, &plan, &cfg))
		return 2;
	/* auto: the last CPU where that leaves the ranks at least one; otherwise shared, and
	 * the header says why. */
	const char *shared_why = NULL;
	if (swcpu_auto && !b.fabric_path && !no_inc) {
		char why[320];
		int last = launch_last_cpu();
		if (cfg.switch_threads != 1)
			shared_why = "several switch workers";
		else if (launch_switch_cpu_check(last, why, sizeof(why)))
			shared_why = "one CPU";
		else
			cfg.switch_cpu = last; /* checked just now */
	} else if (cfg.switch_cpu >= 0) {
		char why[320];
		if (b.fabric_path || no_inc) {
			util_cli_error(tool, "--switch-cpu places the switch this tool starts: not "
					     "with --fabric or --no-inc");
			return 2;
		}
		if (cfg.switch_threads != 1) {
			util_cli_error(tool, "--switch-cpu gives one CPU to one switch worker: not "
					     "with --switch-threads");
			return 2;
		}
		if (launch_switch_cpu_check(cfg.switch_cpu, why, sizeof(why))) {
			fprintf(stderr, "%s: --switch-cpu %d: %s\n", d->tool, cfg.switch_cpu, why);
			return 2;
		}
	}
	if (b.fabric_path && (cfg.switch_drop_rate > 0 || det)) {
		fprintf(stderr, "%s: --switch-drop-rate and --deterministic configure the switch: "
				"give them to the fabric harness instead\n", d->tool);
		return 2;
	}

	struct sweep_job job;
	memset(&job, 0, sizeof(job));
	struct sweep_opts *o = &job.o;
	if (b.types) {
		o->npairs = bench_cli_pairs(&b, o->pairs, SWEEP_MAX_PAIRS);
		if (o->npairs < 0)
			return 2;
	} else {
		o->npairs = 0;
		/* Pairs listed before the main one (bench-allreduce's small-size latency rows). */
		if (d->pre) {
			o->npairs = sweep_parse_pairs(d->pre, 4, 4, 2, o->pairs, SWEEP_MAX_PAIRS);
			if (o->npairs < 0)
				goto bad;
		}
		int k = sweep_parse_pairs("fp32:sum", b.minb, b.maxb, b.factor, o->pairs + o->npairs,
					  SWEEP_MAX_PAIRS - o->npairs);
		if (k < 0)
			goto bad;
		o->npairs += k;
		uint64_t emax = b.maxb < d->extra_max ? b.maxb : d->extra_max;
		if (d->extra && b.minb <= emax) {
			k = sweep_parse_pairs(d->extra, b.minb, emax, d->extra_factor,
					      o->pairs + o->npairs, SWEEP_MAX_PAIRS - o->npairs);
			if (k < 0)
				goto bad;
			o->npairs += k;
		}
	}
	if (o->npairs <= 0)
		goto bad;
	if (cfg.nranks > CHECK_EXACT_MAX_RANKS)
		fprintf(stderr, "note: with more than %d ranks some exact float data may round\n",
			CHECK_EXACT_MAX_RANKS);
	cfg.seed = b.seed;
	cfg.deterministic = det;
	cfg.no_switch = no_inc;
	cfg.log_level = b.verbose ? 2 : 0;
	cfg.switch_verbose = b.verbose;
	o->nranks = cfg.nranks;
	o->iters = b.iters;
	o->warmup = b.warmup;
	o->budget_s = b.budget_s;
	o->link_bps = b.link_bps;
	o->switch_alone = cfg.switch_cpu >= 0;
	o->switch_cpu = cfg.switch_cpu;
	o->inc = !no_inc;
	o->ring = !no_ring;
	o->ratio = d->ratio;
	o->deterministic = det;
	o->in_place = inplace;
	o->progress = true;
	o->json_path = b.json_path;
	o->label = d->tool;
	o->seed = b.seed;
	job.mtu = cfg.mtu;
	job.auth = !cfg.no_auth && !cfg.plan;
	job.bsl_bits = cfg.bsl_bits;
	if (bench_cli_json_create(&b))
		return 2;
	if (sweep_job_init(&job)) {
		fprintf(stderr, "%s: out of memory\n", d->tool);
		return 2;
	}

	struct launch_addrs a;
	if (b.fabric_path) {
		launch_addrs_init(&a, 0); /* only its pid-derived bootstrap port is used */
	} else if (launch_addrs_pick(&a, cfg.addr_index, cfg.nranks)) {
		fprintf(stderr, "%s: loopback block %u is busy\n", d->tool, cfg.addr_index);
		sweep_job_fini(&job);
		return 2;
	}
	struct launch_switch sw;
	char first_ip[LAUNCH_IP_LEN], last_ip[LAUNCH_IP_LEN];
	launch_rank_ip(&a, 0, first_ip);
	launch_rank_ip(&a, cfg.nranks - 1, last_ip);
	uint64_t t_start = util_now_ns();
	if (b.fabric_path) {
		printf("# %s: AllReduce on the fabric %s (%s), %d rank processes in network "
		       "namespaces, INC (in-network, through the switches) next to the host ring "
		       "(TCP)\n", d->tool, plan.name, plan.desc[0] ? plan.desc : b.fabric_path,
		       cfg.nranks);
		for (int i = 0; i < plan.nswitches && plan.am_addr[0]; i++)
			printf("# switch : %-8s %-5s inca-switch on %s (pid %d), NETCONF, trees from "
			       "the AM\n", plan.sw[i].name, plan.sw[i].role, plan.sw[i].listen,
			       (int)plan.sw[i].pid);
		if (plan.am_addr[0])
			printf("# AM     : inca-am on %s, job %s%s%s: the ranks join, the AM builds "
			       "the tree (window %u slots)\n", plan.am_addr, plan.job_id,
			       plan.group_name[0] ? " group " : "", plan.group_name, cfg.nslots);
		for (int i = 0; i < plan.nswitches && !plan.am_addr[0]; i++)
			printf("# switch : %-8s %-4s %s on %s (pid %d), tree %u key 0x%x, %u slots\n",
			       plan.sw[i].name, plan.sw[i].role, "inca-switch", plan.sw[i].listen,
			       (int)plan.sw[i].pid, cfg.tree_id, cfg.key, cfg.nslots);
		printf("# ranks  : %s .. %s in %s .. %s, bootstrap tcp %s:%u\n", plan.ranks[0].ip,
		       plan.ranks[cfg.nranks - 1].ip, plan.ranks[0].netns,
		       plan.ranks[cfg.nranks - 1].netns, plan.boot_ip,
		       plan.boot_port ? plan.boot_port : a.boot_port);
	} else {
		printf("# %s: AllReduce on loopback, %d rank processes, INC (in-network, through "
		       "inca-switch) next to the host ring (TCP)\n", d->tool, cfg.nranks);
	}
	if (!no_inc && !b.fabric_path) {
		int rc = launch_switch_start(&cfg, &a, NULL, &sw);
		if (rc) {
			fprintf(stderr, "%s: could not start inca-switch: %s\n", d->tool,
				strerror(-rc));
			sweep_job_fini(&job);
			return 2;
		}
		printf("# switch : %s (pid %d) on %s:%u, tree %u key 0x%x, %u slots x %u B, bsl %u, "
		       "deterministic %s, check_icrc %s, %d worker thread%s%s\n", sw.path, (int)sw.pid,
		       a.switch_ip, a.switch_port, cfg.tree_id, cfg.key, cfg.nslots, cfg.slot_bytes,
		       cfg.bsl_bits, det ? "yes" : "no", cfg.check_icrc ? "yes" : "no",
		       cfg.switch_threads, cfg.switch_threads == 1 ? "" : "s",
		       cfg.switch_drop_rate > 0 ? ", drop rate set" : "");
		if (cfg.switch_cpu >= 0) {
			/* Read back, not restated: what the kernel applied. */
			char swc[256] = "?", rest[256] = "?", all[256] = "?";
			(void)launch_cpus_of(sw.pid, -1, swc, sizeof(swc));
			(void)launch_cpus_of(0, cfg.switch_cpu, rest, sizeof(rest));
			(void)launch_cpus_of(0, -1, all, sizeof(all));
			printf("# cpus   : inca-switch on CPU %s alone (--cpus: its worker polls); "
			       "ranks on CPU %s in INC rows of %u KiB or more, on %s in the others\n",
			       swc, rest, SWEEP_SWITCH_ALONE_BYTES / 1024, all);
		} else if (shared_why) {
			printf("# cpus   : inca-switch and the ranks share the CPUs (%s)\n", shared_why);
		}
	}
	if (!b.fabric_path)
		printf("# ranks  : %s .. %s, data UDP 4791, QPN 0x%x.., BFR-id 1..%d, bootstrap tcp "
		       "%s:%u\n", first_ip, last_ip, 0x1001u, cfg.nranks, a.boot_ip, a.boot_port);
	printf("# clients: mtu %u, window %u, min RTO %u us, drop rate %g (tx and rx); switch drop "
	       "rate %g; seed %llu\n", cfg.mtu, cfg.nslots, cfg.rto_us ? cfg.rto_us : 20000,
	       cfg.client_drop_rate, cfg.switch_drop_rate, (unsigned long long)b.seed);
	printf("# rows   : up to %d timed + %d warmup iterations each (%.1f s budget per row and "
	       "algorithm), %s, every result verified%s\n", b.iters, b.warmup, b.budget_s,
	       inplace ? "in-place" : "out-of-place",
	       det ? " (INC bitwise vs rank-ordered reduction)" : " (exact-valued data)");
	printf("# time = mean over ranks of the per-call time; algbw = size/time; busbw = algbw * "
	       "2(n-1)/n\n");
	fflush(stdout);

	bool am_mode = b.fabric_path && plan.am_addr[0];
	struct am_epilogue_arg epi = { .plan = &plan, .job = &job, .inc = !no_inc,
				       .hold_s = hold_s };
	if (am_mode) {
		cfg.rank_epilogue = am_epilogue;
		cfg.epilogue_arg = &epi;
	}
	int status[LAUNCH_MAX_RANKS];
	int bad_ranks = launch_run_ranks(&cfg, &a, sweep_rank_main, &job, status);
	struct json *stats = NULL;
	int sw_rc = 0;
	if (!no_inc && !b.fabric_path)
		sw_rc = launch_switch_stop(&sw, &stats);

	const struct sweep_totals *t = sweep_job_totals(&job);
	struct inca_comm_stats cs;
	int nstats = sweep_job_client_stats(&job, &cs);
	int fail = 0;
	printf("#\n");
	if (!no_inc && am_mode) {
		/* checked per tree by rank 0 while the group was up (am_epilogue) */
	} else if (!no_inc && b.fabric_path) {
		fail += fabric_report(&plan, t->inc_chunks, NULL, NULL);
	} else if (!no_inc) {
		struct launch_sw_summary s;
		launch_sw_summarize(stats, &s);
		if (stats)
			printf("# packet authentication: %s\n",
			       cfg.no_auth ? "off (--no-auth)" : "on (AES-256-GMAC, random job key)");
		if (stats) {
			printf("# switch stats: rx %.0f pkts, tx %.0f pkts, contributions %.0f, "
			       "aggregations %.0f (chunk rounds issued: %llu), duplicates %.0f, "
			       "results re-sent %.0f (%.0f withheld), repair notices %.0f (%.0f "
			       "withheld), drops %.0f\n",
			       s.rx_pkts, s.tx_pkts, s.contributions, s.aggregations,
			       (unsigned long long)t->inc_chunks, s.duplicates, s.results_resent,
			       s.resends_limited, s.notices, s.notices_limited, s.drops);
			if (cfg.switch_cpu >= 0 && s.own_cpu_workers != 1) {
				printf("# ERROR: the switch reports %.0f workers on a CPU of their "
				       "own (--switch-cpu %d)\n", s.own_cpu_workers, cfg.switch_cpu);
				fail++;
			}
			if (s.aggregations != (double)t->inc_chunks) {
				printf("# ERROR: the switch completed %.0f aggregations for %llu chunk "
				       "rounds\n", s.aggregations, (unsigned long long)t->inc_chunks);
				fail++;
			}
		} else {
			printf("# switch stats: unavailable\n");
		}
		if (sw_rc != 0) {
			printf("# ERROR: inca-switch exit status %d\n", sw_rc);
			fail++;
		}
	}
	if (nstats)
		printf("# client stats (all ranks): tx %llu pkts, rx %llu pkts, retransmits %llu, "
		       "timeouts %llu, duplicate results %llu, bad packets %llu, injected drops "
		       "%llu, repair notices %llu\n",
		       (unsigned long long)cs.tx_pkts, (unsigned long long)cs.rx_pkts,
		       (unsigned long long)cs.retransmits, (unsigned long long)cs.timeouts,
		       (unsigned long long)cs.rx_dup_results, (unsigned long long)cs.rx_bad,
		       (unsigned long long)cs.injected_drops, (unsigned long long)cs.rx_nacks);
	struct inca_io_stats io;
	if (sweep_job_io_stats(&job, &io))
		printf("# client I/O (all ranks): UDP GSO on %d of %d ranks, GRO on %d; tx %llu syscalls, "
		       "%llu messages, %llu GSO sends (%llu refused); rx %llu syscalls, %llu buffers, "
		       "%llu GRO buffers\n",
		       io.gso, nstats, io.gro, (unsigned long long)io.tx_syscalls,
		       (unsigned long long)io.tx_msgs, (unsigned long long)io.gso_sends,
		       (unsigned long long)io.gso_failed, (unsigned long long)io.rx_syscalls,
		       (unsigned long long)io.rx_bufs, (unsigned long long)io.rx_gro_bufs);
	for (int r = 0; r < cfg.nranks; r++)
		if (status[r] != 0)
			printf("# ERROR: rank %d exited with status %d\n", r, status[r]);
	uint64_t wrong = t->inc_wrong + t->ring_wrong, errs = t->inc_errors + t->ring_errors;
	if (bad_ranks || wrong || errs)
		fail++;
	printf("# %s: %llu rows, %llu wrong elements (INC %llu, ring %llu), %llu failed calls, "
	       "%.1f s\n", fail ? "FAILED" : "OK", (unsigned long long)t->rows,
	       (unsigned long long)wrong, (unsigned long long)t->inc_wrong,
	       (unsigned long long)t->ring_wrong, (unsigned long long)errs,
	       (double)(util_now_ns() - t_start) * 1e-9);
	json_free(stats);
	sweep_job_fini(&job);
	if (b.plot_path)
		demo_plot(b.json_path, b.plot_path);
	return fail ? 1 : 0;

bad:
	fprintf(stderr, "%s: --help lists the options\n", d->tool);
	return 2;
}
