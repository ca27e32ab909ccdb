/* tools/inca_bench_ompi: inca-bench's Open MPI baseline (inca_bench.h): finds
 * ompi-coll-bench and mpirun, runs the same sizes, data and checks under Open MPI's own
 * collectives over TCP (on loopback, or in the fabric through tools/ompi-fabric-run), and
 * keeps its JSON rows for rank 0 to print next to INCA's. */
#include "inca_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "launch.h"
#include "util/util.h"

#define MAX_OMPI_ROWS 4096

static struct ompi_row ompi_rows[MAX_OMPI_ROWS];
static int n_ompi_rows;

const struct ompi_row *bench_ompi_find(int coll, size_t size_bytes, const char *type,
				       const char *op)
{
	for (int i = 0; i < n_ompi_rows; i++) {
		const struct ompi_row *r = &ompi_rows[i];
		if (r->coll == coll && r->size_bytes == size_bytes && !strcmp(r->type, type) &&
		    !strcmp(r->op, op))
			return r;
	}
	return NULL;
}

/* ompi-coll-bench: $INCA_OMPI_BENCH, else next to this executable's build tree, else where
 * INCA installs its helper programs, else $PATH. */
static int find_ompi_bench(char *out, size_t cap)
{
	static const char *const rel[] = { "/../bench/ompi-coll-bench", "/ompi-coll-bench" };
	return launch_find_program("INCA_OMPI_BENCH", rel, sizeof(rel) / sizeof(rel[0]),
				   "ompi-coll-bench", true, out, cap);
}

static int parse_ompi_rows(const char *path)
{
	char *text = json_read_file(path, NULL);
	if (!text)
		return -errno;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct json *jr = json_parse(line, NULL);
		if (!jr)
			continue;
		const struct json *cn = json_get(jr, "coll"), *ty = json_get(jr, "type"),
				  *op = json_get(jr, "op");
		if (n_ompi_rows < MAX_OMPI_ROWS && cn && cn->str && ty && ty->str && op && op->str) {
			struct ompi_row *r = &ompi_rows[n_ompi_rows];
			r->coll = -1;
			for (int k = 0; k < INCA_COLL_COUNT; k++)
				if (!strcmp(cn->str, inca_coll_name((enum inca_coll)k)))
					r->coll = k;
			r->size_bytes = (size_t)json_num(json_get(jr, "size_bytes"), 0);
			r->count = (size_t)json_num(json_get(jr, "count"), 0);
			snprintf(r->type, sizeof(r->type), "%s", ty->str);
			snprintf(r->op, sizeof(r->op), "%s", op->str);
			r->time_us = json_num(json_get(jr, "time_us"), 0);
			r->skew_us = json_num(json_get(jr, "skew_us"), -1);
			r->algbw = json_num(json_get(jr, "algbw_gbps"), 0);
			r->busbw = json_num(json_get(jr, "busbw_gbps"), 0);
			r->wrong = (uint64_t)json_num(json_get(jr, "wrong"), 0);
			r->errors = (uint64_t)json_num(json_get(jr, "errors"), 0);
			r->iters = (int)json_num(json_get(jr, "iters"), 0);
			snprintf(r->line, sizeof(r->line), "%s", line);
			n_ompi_rows++;
		}
		json_free(jr);
	}
	free(text);
	return n_ompi_rows;
}


int bench_ompi_run(const struct ompi_cfg *oc, const struct bench_opts *o, int nranks)
{
	char mpirun[PATH_MAX], bench[PATH_MAX];
	if (launch_find_in_path(oc->mpirun ? oc->mpirun : "mpirun.openmpi", mpirun, sizeof(mpirun))) {
		printf("# ompi   : skipped (%s not found)\n", oc->mpirun ? oc->mpirun : "mpirun.openmpi");
		return -ENOENT;
	}
	if (oc->bench ? (snprintf(bench, sizeof(bench), "%s", oc->bench), !launch_is_exec(bench))
		      : find_ompi_bench(bench, sizeof(bench)) != 0) {
		printf("# ompi   : skipped (ompi-coll-bench not built: needs Open MPI's ompi-c)\n");
		return -ENOENT;
	}
	char dir[] = "/tmp/inca-bench-XXXXXX";
	if (!mkdtemp(dir))
		return -errno;
	char out[300], log[300];
	snprintf(out, sizeof(out), "%s/ompi.jsonl", dir);
	snprintf(log, sizeof(log), "%s/mpirun.log", dir);
	char np[16], b[32], e[32], f[32], w[16], it[16], bud[32], root[16], seed[32];
	snprintf(np, sizeof(np), "%d", nranks);
	snprintf(b, sizeof(b), "%llu", (unsigned long long)oc->minb);
	snprintf(e, sizeof(e), "%llu", (unsigned long long)oc->maxb);
	snprintf(f, sizeof(f), "%llu", (unsigned long long)oc->factor);
	snprintf(w, sizeof(w), "%d", o->warmup);
	snprintf(it, sizeof(it), "%d", o->iters);
	snprintf(bud, sizeof(bud), "%g", o->budget_s);
	snprintf(root, sizeof(root), "%d", o->root);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->seed);
	const char *argv[64];
	int ac = 0;
	char runner[PATH_MAX];
	if (oc->fabric_plan) {
		/* tools/ompi-fabric-run: mpirun with MPI rank r in the namespace of plan rank r,
		 * Open MPI over TCP across the fabric's links (bench/README.md "Fabric mode"). */
		if (launch_find_file(LAUNCH_LIBEXEC, "ompi-fabric-run", runner, sizeof(runner))) {
			printf("# ompi   : skipped (%s missing)\n", runner);
			rmdir(dir);
			return -ENOENT;
		}
		argv[ac++] = runner;
		argv[ac++] = oc->fabric_plan;
		argv[ac++] = "--np";
		argv[ac++] = np;
		argv[ac++] = "--";
	} else {
		argv[ac++] = mpirun;
		argv[ac++] = "-np";
		argv[ac++] = np;
		argv[ac++] = "--oversubscribe";
		if (geteuid() == 0)
			argv[ac++] = "--allow-run-as-root";
		/* Open MPI over TCP: the ob1 PML with only the tcp (and self) BTL, on loopback. */
		static const char *const mca[] = { "btl", "tcp,self", "pml", "ob1",
						   "btl_tcp_if_include", "lo", "oob_tcp_if_include",
						   "lo" };
		for (size_t i = 0; i < sizeof(mca) / sizeof(mca[0]); i += 2) {
			argv[ac++] = "--mca";
			argv[ac++] = mca[i];
			argv[ac++] = mca[i + 1];
		}
		argv[ac++] = "--bind-to";
		argv[ac++] = "none";
	}
	argv[ac++] = bench;
	const char *flags[][2] = { { "-b", b }, { "-e", e }, { "-f", f },
				   { "-C", oc->colls_arg }, { "-t", oc->types_arg }, { "-w", w },
				   { "-i", it }, { "--budget", bud }, { "--root", root },
				   { "--seed", seed }, { "--json", out } };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		argv[ac++] = flags[i][0];
		argv[ac++] = flags[i][1];
	}
	argv[ac] = NULL;
	if (oc->fabric_plan)
		printf("# ompi   : %s %s --np %s -- %s (Open MPI over TCP across the fabric)\n",
		       runner, oc->fabric_plan, np, bench);
	else
		printf("# ompi   : %s -np %s --oversubscribe%s --mca btl tcp,self --mca pml ob1 "
		       "--mca btl_tcp_if_include lo ... %s\n", mpirun, np,
		       geteuid() == 0 ? " --allow-run-as-root" : "", bench);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		/* Sanitizer builds: Open MPI's runtime leaves allocations behind at exit (hwloc,
		 * MCA strings) that LeakSanitizer would turn into a failed rank; they are not
		 * ours. Same default as tools/inca-mpirun. */
		const char *asan = getenv("ASAN_OPTIONS");
		{ /* appended: wins over a caller's detect_leaks=1 (make check-asan) */
			char buf[512];
			snprintf(buf, sizeof(buf), "%s%sdetect_leaks=0", asan ? asan : "",
				 asan && *asan ? ":" : "");
			setenv("ASAN_OPTIONS", buf, 1);
		}
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st = 0, rc = 0;
	if (pid < 0) {
		rc = -errno;
	} else {
		uint64_t deadline = util_now_ns() + (uint64_t)oc->timeout_s * 1000000000ull;
		for (;;) {
			pid_t w_ = waitpid(pid, &st, WNOHANG);
			if (w_ == pid)
				break;
			if (w_ < 0) {
				rc = -errno;
				break;
			}
			if (util_now_ns() > deadline) {
				kill(-pid, SIGKILL);
				waitpid(pid, &st, 0);
				rc = -ETIMEDOUT;
				break;
			}
			usleep(20000);
		}
	}
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = -EIO;
	if (!rc)
		rc = parse_ompi_rows(out);
	if (rc < 0) {
		printf("# ompi   : FAILED (%s, exit status %d); mpirun output:\n",
		       rc == -ETIMEDOUT ? "timed out" : "mpirun failed",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		char *t = json_read_file(log, NULL);
		if (t) {
			size_t l = strlen(t);
			printf("%s\n", l > 3000 ? t + l - 3000 : t);
			free(t);
		}
		if (rc == -ENOENT)
			rc = -EIO; /* not a "missing" skip: the run itself failed */
	}
	unlink(out);
	unlink(log);
	rmdir(dir);
	return rc;
}
