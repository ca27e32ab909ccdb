/* tools/launch: loopback job launcher — address plan, inca-switch child process with config,
 * ready file and stats JSON, forked rank processes with a time bound — and where the tools
 * find inca-switch and their installed scripts and helpers. See launch.h. */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "install_dirs.h"
#include "util/cli.h"
#include "util/util.h"
#include "wire/auth.h"

static void set_block(struct launch_addrs *a, unsigned index, unsigned block)
{
	if (index == 0) {
		snprintf(a->prefix, sizeof(a->prefix), "127.0.0.");
		snprintf(a->switch_ip, sizeof(a->switch_ip), "127.0.0.1");
		snprintf(a->boot_ip, sizeof(a->boot_ip), "127.0.0.1");
	} else {
		snprintf(a->prefix, sizeof(a->prefix), "127.%u.%u.", block, index);
		snprintf(a->switch_ip, sizeof(a->switch_ip), "127.%u.%u.1", block, index);
		snprintf(a->boot_ip, sizeof(a->boot_ip), "127.%u.%u.2", block, index);
	}
}

int launch_addrs_init(struct launch_addrs *a, unsigned index)
{
	if (index > 255)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->index = index;
	a->switch_port = 4791;
	set_block(a, index, 1);
	/* A fresh port per run: a listener that closed first leaves TIME_WAIT sockets behind,
	 * and two jobs with index 0 on one host must not meet at the same rendezvous. */
	a->boot_port = (uint16_t)(20000 + ((unsigned)getpid() * 7919u + index * 131u) % 30000u);
	return 0;
}

/* 1 if UDP ip:4791 can be bound right now. */
static int udp_free(const char *ip)
{
	struct sockaddr_in sa;
	if (util_parse_addr(ip, 4791, &sa))
		return 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return 0;
	int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

int launch_addrs_pick(struct launch_addrs *a, unsigned index, int nranks)
{
	int rc = launch_addrs_init(a, index);
	if (rc || index == 0)
		return rc;
	/* The same test may run from two build trees at once (make check next to make
	 * check-asan): move to the next free 127.B.index.0/24 block instead of failing. */
	for (unsigned block = 1; block <= 16; block++) {
		set_block(a, index, block);
		int ok = udp_free(a->switch_ip);
		for (int r = 0; ok && r < nranks; r++) {
			char ip[LAUNCH_IP_LEN];
			launch_rank_ip(a, r, ip);
			ok = udp_free(ip);
		}
		if (ok)
			return 0;
	}
	set_block(a, index, 1);
	return -EADDRINUSE;
}

void launch_rank_ip(const struct launch_addrs *a, int rank, char out[LAUNCH_IP_LEN])
{
	snprintf(out, LAUNCH_IP_LEN, "%.16s%d", a->prefix, 10 + rank);
}

void launch_cfg_defaults(struct launch_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->nranks = 4;
	c->tree_id = 1;
	c->key = 0x5eed0001;
	c->nslots = 256;
	c->slot_bytes = 4096;
	c->bsl_bits = 64;
	c->check_icrc = true;
	c->switch_threads = 1;
	c->stats_interval_ms = 1000;
	c->mtu = 4096;
	c->timeout_ms = 30000;
	c->seed = 1;
	c->log_level = 0;
	c->job_timeout_s = 600;
	c->switch_cpu = -1;
	/* A fresh random key per job; if the kernel cannot give random bytes the key stays all
	 * zero and launch_switch_start refuses the job (never a predictable key, never a silent
	 * fallback to no authentication). */
	if (wire_auth_key_random(c->auth_key) < 0)
		memset(c->auth_key, 0, sizeof c->auth_key);
	c->auth_key_id = 1;
}

static void cpus_fmt(const cpu_set_t *s, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, s))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, s))
			e++;
		int w = e > c ? snprintf(out + n, cap - n, "%s%d-%d", n ? "," : "", c, e)
			      : snprintf(out + n, cap - n, "%s%d", n ? "," : "", c);
		if (w < 0 || (size_t)w >= cap - n)
			return; /* truncated: what fits */
		n += (size_t)w;
		c = e;
	}
}

int launch_cpus_of(pid_t pid, int exclude_cpu, char *out, size_t cap)
{
	cpu_set_t s;
	if (!cap)
		return -EINVAL;
	if (sched_getaffinity(pid, sizeof(s), &s))
		return -errno;
	if (exclude_cpu >= 0 && exclude_cpu < CPU_SETSIZE)
		CPU_CLR(exclude_cpu, &s);
	cpus_fmt(&s, out, cap);
	return 0;
}

int launch_switch_cpu_check(int cpu, char *why, size_t cap)
{
	cpu_set_t s;
	char list[256];
	if (sched_getaffinity(0, sizeof(s), &s)) {
		snprintf(why, cap, "cannot read this process's CPUs: %s", strerror(errno));
		return -EINVAL;
	}
	cpus_fmt(&s, list, sizeof(list));
	if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &s)) {
		snprintf(why, cap, "CPU %d is not one this process may use (%s)", cpu, list);
		return -EINVAL;
	}
	if (CPU_COUNT(&s) < 2) {
		snprintf(why, cap, "this process has one CPU (%s): none would be left for the ranks",
			 list);
		return -EINVAL;
	}
	return 0;
}

int launch_last_cpu(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof(s), &s))
		return -1;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &s))
			return c;
	return -1;
}

int launch_rank_cpus(int rank, int exclude_cpu)
{
	static cpu_set_t orig;
	static bool have;
	if (!have) {
		if (sched_getaffinity(0, sizeof(orig), &orig))
			return -errno;
		have = true;
	}
	cpu_set_t s = orig, one, got;
	if (exclude_cpu >= 0 && exclude_cpu < CPU_SETSIZE && CPU_COUNT(&s) > 1)
		CPU_CLR(exclude_cpu, &s);
	/* A wider set alone moves nobody until the load balancer runs (a short row would still
	 * have every rank where the last one put it): first rank r onto the (r mod n)-th CPU of
	 * the set, then the whole set. */
	int k = rank % CPU_COUNT(&s);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s) && k-- == 0) {
			CPU_SET(c, &one);
			break;
		}
	if (sched_setaffinity(0, sizeof(one), &one) || sched_setaffinity(0, sizeof(s), &s) ||
	    sched_getaffinity(0, sizeof(got), &got))
		return -errno;
	return CPU_EQUAL(&s, &got) ? 0 : -EIO; /* read back: what the kernel applied */
}

bool launch_is_exec(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int launch_find_in_path(const char *name, char *out, size_t cap)
{
	if (strchr(name, '/')) {
		snprintf(out, cap, "%s", name);
		return launch_is_exec(out) ? 0 : -ENOENT;
	}
	const char *path = getenv("PATH");
	while (path && *path) {
		size_t len = strcspn(path, ":");
		int k = snprintf(out, cap, "%.*s/%s", (int)len, path, name);
		if (len && k > 0 && (size_t)k < cap && launch_is_exec(out))
			return 0;
		path += len;
		if (*path == ':')
			path++;
	}
	return -ENOENT;
}

int launch_find_program(const char *env, const char *const *rel, size_t nrel, const char *name,
			bool libexec, char *out, size_t cap)
{
	const char *v = getenv(env);
	if (v && *v) {
		snprintf(out, cap, "%s", v);
		return launch_is_exec(out) ? 0 : -ENOENT;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			for (size_t i = 0; i < nrel; i++) {
				int k = snprintf(out, cap, "%s%s", exe, rel[i]);
				if (k > 0 && (size_t)k < cap && launch_is_exec(out))
					return 0;
			}
		}
	}
	if (libexec && launch_find_file(LAUNCH_LIBEXEC, name, out, cap) == 0)
		return 0;
	return launch_find_in_path(name, out, cap);
}

int launch_find_switch(char *out, size_t cap)
{
	static const char *const rel[] = {
		"/../daemons/switch/inca-switch",
		"/../../daemons/switch/inca-switch",
		"/inca-switch",
	};
	if (launch_find_program("INCA_SWITCH", rel, sizeof(rel) / sizeof(rel[0]), "inca-switch",
				false, out, cap) == 0)
		return 0;
	if (!getenv("INCA_SWITCH") || !*getenv("INCA_SWITCH"))
		snprintf(out, cap, "inca-switch");
	return -ENOENT;
}

/* The running executable's directory, or -ENOENT. */
static int exe_dir(char *out, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", out, cap - 1);
	if (n <= 0)
		return -ENOENT;
	out[n] = '\0';
	char *slash = strrchr(out, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

static bool is_file(const char *p, enum launch_file_kind kind)
{
	return kind == LAUNCH_LIBEXEC ? launch_is_exec(p) : access(p, R_OK) == 0;
}

int launch_find_file(enum launch_file_kind kind, const char *name, char *out, size_t cap)
{
	const char *env = getenv("INCA_DATA_DIR");
	if (env && *env) {
		snprintf(out, cap, "%s/%s", env, name);
		return is_file(out, kind) ? 0 : -ENOENT;
	}
	/* An installed program looks first beside itself (relocatable), then in the configured
	 * directory. A program in the build tree (<build>/tools, <build>/bench) finds the copies
	 * meson made in <build>/tools. The installed relative path is empty when bindir or the
	 * data directory is outside the prefix. */
	const char *rel = kind == LAUNCH_LIBEXEC ? INCA_BIN_TO_LIBEXECDIR : INCA_BIN_TO_DATADIR;
	const char *abs = kind == LAUNCH_LIBEXEC ? INCA_LIBEXECDIR : INCA_DATADIR;
	char dir[PATH_MAX];
	if (exe_dir(dir, sizeof(dir)) == 0) {
		const char *sub[] = { rel, ".", "../tools" };
		for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
			if (!*sub[i])
				continue;
			int k = snprintf(out, cap, "%s/%s/%s", dir, sub[i], name);
			if (k > 0 && (size_t)k < cap && is_file(out, kind))
				return 0;
		}
	}
	snprintf(out, cap, "%s/%s", abs, name);
	return is_file(out, kind) ? 0 : -ENOENT;
}

static int write_config(const struct launch_cfg *c, const struct launch_addrs *a,
			const struct launch_switch *sw)
{
	FILE *f = fopen(sw->conf_path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# written by tools/launch.c for a loopback job (address index %u)\n", a->index);
	fprintf(f, "listen = %s:%u\n", a->switch_ip, a->switch_port);
	fprintf(f, "threads = %d\n", c->switch_threads > 0 ? c->switch_threads : 1);
	fprintf(f, "check_icrc = %s\n", c->check_icrc ? "yes" : "no");
	fprintf(f, "stats_file = %s\n", sw->stats_path);
	fprintf(f, "stats_interval_ms = %u\n", c->stats_interval_ms ? c->stats_interval_ms : 1000);
	fprintf(f, "\ntree %u {\n", c->tree_id);
	fprintf(f, "  key = 0x%x\n", c->key);
	fprintf(f, "  qpn = 0x%x\n", wire_qpn_default(WIRE_QPN_SWITCH, c->tree_id));
	fprintf(f, "  slots = %u\n", c->nslots);
	fprintf(f, "  slot_bytes = %u\n", c->slot_bytes);
	fprintf(f, "  bsl = %u\n", c->bsl_bits);
	fprintf(f, "  role = root\n");
	fprintf(f, "  deterministic = %s\n", c->deterministic ? "yes" : "no");
	if (!c->no_auth) {
		char hex[2 * WIRE_AUTH_KEY_LEN + 1];
		wire_auth_key_hex(c->auth_key, hex);
		fprintf(f, "  auth_key = %s\n  auth_key_id = %u\n", hex, c->auth_key_id);
	} else {
		fprintf(f, "  auth = off\n");
	}
	for (int r = 0; r < c->nranks; r++) {
		char ip[LAUNCH_IP_LEN];
		launch_rank_ip(a, r, ip);
		fprintf(f, "  member = %d %s:4791 qpn 0x%x\n", r + 1, ip,
			wire_qpn_default(WIRE_QPN_MEMBER, (uint32_t)r + 1));
	}
	fprintf(f, "}\n");
	if (fclose(f) != 0)
		return -errno;
	return 0;
}

static void dump_file(const char *path, const char *what)
{
	char *txt = json_read_file(path, NULL);
	if (txt && *txt)
		fprintf(stderr, "---- %s (%s) ----\n%s---- end ----\n", what, path, txt);
	free(txt);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 255;
}

static void rm_tree(const char *dir)
{
	if (getenv("INCA_KEEP_TMP"))
		return;
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char p[600];
		while ((e = readdir(d)) != NULL) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

int launch_switch_start(const struct launch_cfg *c, const struct launch_addrs *a,
			const char *const *extra_args, struct launch_switch *sw)
{
	static const uint8_t zero[sizeof c->auth_key];

	memset(sw, 0, sizeof(*sw));
	sw->pid = -1;
	if (!c->no_auth && !memcmp(c->auth_key, zero, sizeof zero)) {
		fprintf(stderr, "launch: no random job key (getrandom failed); use --no-auth to run "
				"unauthenticated\n");
		return -ENOKEY;
	}
	if (c->switch_path)
		snprintf(sw->path, sizeof(sw->path), "%s", c->switch_path);
	else if (launch_find_switch(sw->path, sizeof(sw->path)) != 0) {
		fprintf(stderr, "launch: inca-switch not found (build it, or set $INCA_SWITCH)\n");
		return -ENOENT;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(sw->dir, sizeof(sw->dir), "%s/inca-launch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(sw->dir))
		return -errno;
	snprintf(sw->conf_path, sizeof(sw->conf_path), "%s/switch.conf", sw->dir);
	snprintf(sw->ready_path, sizeof(sw->ready_path), "%s/ready", sw->dir);
	snprintf(sw->stats_path, sizeof(sw->stats_path), "%s/stats.json", sw->dir);
	snprintf(sw->log_path, sizeof(sw->log_path), "%s/switch.log", sw->dir);
	int rc = write_config(c, a, sw);
	if (rc) {
		rm_tree(sw->dir);
		return rc;
	}

	const char *argv[32];
	char drop[32], seed[32];
	int n = 0;
	argv[n++] = sw->path;
	argv[n++] = "-c";
	argv[n++] = sw->conf_path;
	argv[n++] = "--ready-file";
	argv[n++] = sw->ready_path;
	if (c->switch_drop_rate > 0) {
		snprintf(drop, sizeof(drop), "%g", c->switch_drop_rate);
		snprintf(seed, sizeof(seed), "%llu", (unsigned long long)c->seed * 977 + 13);
		argv[n++] = "--drop-rate";
		argv[n++] = drop;
		argv[n++] = "--seed";
		argv[n++] = seed;
	}
	char cpu[16];
	if (c->switch_cpu >= 0) {
		snprintf(cpu, sizeof(cpu), "%d", c->switch_cpu);
		argv[n++] = "--cpus";
		argv[n++] = cpu;
	}
	if (c->reflect)
		argv[n++] = "--reflect";
	if (c->switch_verbose)
		argv[n++] = "-v";
	for (int i = 0; extra_args && extra_args[i] && n < 31; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		rc = -errno;
		rm_tree(sw->dir);
		return rc;
	}
	if (pid == 0) {
		/* The switch must not outlive a demo killed with ^C. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(sw->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		cpu_set_t one;
		CPU_ZERO(&one);
		if (c->switch_cpu >= 0 && c->switch_cpu < CPU_SETSIZE)
			CPU_SET(c->switch_cpu, &one);
		if (c->switch_cpu >= 0 && sched_setaffinity(0, sizeof(one), &one)) {
			if (fd >= 0)
				dprintf(fd, "launch: inca-switch on CPU %d: %s\n", c->switch_cpu,
					strerror(errno));
			_exit(127);
		}
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(sw->path, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", sw->path, strerror(errno));
		_exit(127);
	}
	sw->pid = pid;

	uint64_t deadline = util_now_ns() + 10ull * 1000000000ull;
	while (util_now_ns() < deadline) {
		if (access(sw->ready_path, F_OK) == 0)
			return 0;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "launch: inca-switch exited with status %d before ready\n",
				exit_code(st));
			dump_file(sw->conf_path, "switch config");
			dump_file(sw->log_path, "switch log");
			sw->pid = -1;
			rm_tree(sw->dir);
			return -EIO;
		}
		sleep_ms(5);
	}
	fprintf(stderr, "launch: inca-switch not ready after 10 s\n");
	dump_file(sw->log_path, "switch log");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	sw->pid = -1;
	rm_tree(sw->dir);
	return -ETIMEDOUT;
}

int launch_switch_stop(struct launch_switch *sw, struct json **stats)
{
	if (stats)
		*stats = NULL;
	if (sw->pid <= 0)
		return -ECHILD;
	kill(sw->pid, SIGTERM);
	int st = 0, code = -1;
	uint64_t deadline = util_now_ns() + 10ull * 1000000000ull;
	while (util_now_ns() < deadline) {
		pid_t w = waitpid(sw->pid, &st, WNOHANG);
		if (w == sw->pid) {
			code = exit_code(st);
			break;
		}
		if (w < 0) {
			code = 255;
			break;
		}
		sleep_ms(5);
	}
	if (code < 0) {
		fprintf(stderr, "launch: inca-switch ignored SIGTERM for 10 s, killing it\n");
		kill(sw->pid, SIGKILL);
		waitpid(sw->pid, &st, 0);
		code = exit_code(st);
	}
	sw->pid = -1;
	if (code != 0)
		dump_file(sw->log_path, "switch log");
	if (stats) {
		char *txt = json_read_file(sw->stats_path, NULL);
		if (txt) {
			size_t off = 0;
			*stats = json_parse(txt, &off);
			if (!*stats)
				fprintf(stderr, "launch: %s: JSON error at byte %zu\n", sw->stats_path,
					off);
			free(txt);
		} else {
			fprintf(stderr, "launch: no stats file %s\n", sw->stats_path);
		}
	}
	rm_tree(sw->dir);
	return code;
}

double launch_proc_cpu_s(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Fields after the parenthesised command name: state is field 3, utime 14, stime 15. */
	char *s = strrchr(buf, ')');
	if (!s)
		return -1;
	unsigned long long ut = 0, stime = 0;
	if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stime) !=
	    2)
		return -1;
	return (double)(ut + stime) / (double)sysconf(_SC_CLK_TCK);
}

void launch_comm_opts(const struct launch_cfg *c, const struct launch_addrs *a, int rank,
		      struct inca_comm_opts *o, char ipbuf[4][48])
{
	char ip[LAUNCH_IP_LEN];
	const struct launch_plan_rank *pr = c->plan ? &c->plan->ranks[rank] : NULL;
	if (pr)
		snprintf(ip, sizeof(ip), "%s", pr->ip);
	else
		launch_rank_ip(a, rank, ip);
	inca_comm_opts_init(o);
	o->rank = rank;
	o->size = c->nranks;
	if (c->plan)
		snprintf(ipbuf[0], 48, "%s:%u", c->plan->boot_ip,
			 c->plan->boot_port ? c->plan->boot_port : a->boot_port);
	else
		snprintf(ipbuf[0], 48, "%s:%u", a->boot_ip, a->boot_port);
	snprintf(ipbuf[1], 48, "%s", ip);
	snprintf(ipbuf[2], 48, "%s:4791", ip);
	o->bootstrap_addr = ipbuf[0];
	o->host_ip = ipbuf[1];
	if (!c->no_switch && c->plan && c->plan->am_addr[0]) {
		/* AM mode: the Aggregation Manager assigns the tree, switch, BFR-id and key. */
		o->am_addr = c->plan->am_addr;
		o->job_id = c->plan->job_id;
		o->job_credential = c->plan->job_credential;
		o->group_name = c->plan->group_name[0] ? c->plan->group_name : NULL;
		o->host_name = pr->host[0] ? pr->host : NULL;
		o->am_timeout_ms = 20000;
		o->am_tls_ca = c->plan->am_ca[0] ? c->plan->am_ca : NULL;
		o->am_insecure = c->plan->am_insecure;
		o->data_addr = ipbuf[2];
	} else if (!c->no_switch) {
		if (pr)
			snprintf(ipbuf[3], 48, "%s", pr->switch_addr);
		else
			snprintf(ipbuf[3], 48, "%s:%u", a->switch_ip, a->switch_port);
		o->switch_addr = ipbuf[3];
		o->data_addr = ipbuf[2];
	}
	uint16_t bfr = pr && pr->bfr_id ? pr->bfr_id : (uint16_t)(rank + 1);
	o->tree_id = c->tree_id;
	o->key = c->key;
	if (c->plan && c->plan->am_addr[0]) {
		/* the AM hands out the group key */
	} else if (!c->no_auth) {
		o->auth_key = c->auth_key;
		o->auth_key_id = c->auth_key_id;
	} else {
		o->no_auth = 1;
	}
	o->switch_qpn = wire_qpn_default(WIRE_QPN_SWITCH, c->tree_id);
	o->bfr_id = bfr;
	o->qpn = wire_qpn_default(WIRE_QPN_MEMBER, bfr);
	o->bsl_bits = c->bsl_bits;
	o->nslots = c->nslots;
	o->mtu = c->mtu;
	o->rto_us = c->rto_us;
	o->rto_max_us = c->rto_max_us;
	o->retx_limit = c->retx_limit;
	o->timeout_ms = c->timeout_ms;
	o->drop_rate = c->client_drop_rate;
	o->seed = c->seed * 1000003u + (uint64_t)rank * 7919u + 1;
	if (c->log_level >= 0) {
		o->log_fn = launch_log_stderr;
		o->log_ctx = (void *)(intptr_t)rank;
		o->log_level = c->log_level;
	}
}

void launch_log_stderr(void *ctx, int level, const char *msg)
{
	static const char *const lv[] = { "error", "warning", "info", "debug" };
	fprintf(stderr, "[rank %d] %s: %s\n", (int)(intptr_t)ctx,
		level >= 0 && level <= 3 ? lv[level] : "log", msg);
}

void *launch_shm_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void launch_shm_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes ? bytes : 1);
}

static int ranks_child(const struct launch_cfg *c, const struct launch_addrs *a, int rank,
		       launch_rank_fn fn, void *arg)
{
	struct inca_comm_opts o;
	char ipbuf[4][48];
	if (c->plan && c->plan->ranks[rank].netns[0]) {
		int rc = launch_enter_netns(c->plan->ranks[rank].netns);
		if (rc) {
			fprintf(stderr, "[rank %d] cannot enter network namespace %s: %s\n", rank,
				c->plan->ranks[rank].netns, strerror(-rc));
			return 2;
		}
	}
	launch_comm_opts(c, a, rank, &o, ipbuf);
	struct inca_comm *comm = NULL;
	int rc = inca_comm_create(&o, &comm);
	if (rc) {
		fprintf(stderr, "[rank %d] inca_comm_create: %s (%d)\n", rank, inca_strerror(rc), rc);
		return 2;
	}
	rc = fn(comm, arg);
	if (rc == 0 && c->rank_epilogue)
		rc = c->rank_epilogue(comm, c->epilogue_arg);
	inca_comm_destroy(comm);
	return rc < 0 || rc > 125 ? 1 : rc;
}

int launch_run_ranks(const struct launch_cfg *c, const struct launch_addrs *a, launch_rank_fn fn,
		     void *arg, int *status)
{
	int n = c->nranks;
	if (n < 1 || n > LAUNCH_MAX_RANKS)
		return -EINVAL;
	pid_t pids[LAUNCH_MAX_RANKS];
	int codes[LAUNCH_MAX_RANKS];
	bool done[LAUNCH_MAX_RANKS] = { 0 };
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			for (int k = 0; k < r; k++)
				waitpid(pids[k], NULL, 0);
			return -errno;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int rc = ranks_child(c, a, r, fn, arg);
			fflush(NULL);
			_exit(rc);
		}
		pids[r] = pid;
		codes[r] = -1;
	}

	uint64_t start = util_now_ns();
	uint64_t deadline = start + (uint64_t)(c->job_timeout_s ? c->job_timeout_s : 600) *
					    1000000000ull;
	int left = n;
	bool failed_once = false;
	while (left > 0) {
		bool progressed = false;
		for (int r = 0; r < n; r++) {
			if (done[r])
				continue;
			int st;
			pid_t w = waitpid(pids[r], &st, WNOHANG);
			if (w == pids[r] || w < 0) {
				done[r] = true;
				codes[r] = w < 0 ? 255 : exit_code(st);
				left--;
				progressed = true;
				if (codes[r] != 0 && !failed_once) {
					/* Peers of a dead rank block until their own timeouts; give
					 * them a bounded grace period to report, then stop them. */
					failed_once = true;
					uint64_t grace = util_now_ns() + 40ull * 1000000000ull;
					if (grace < deadline)
						deadline = grace;
				}
			}
		}
		if (left == 0)
			break;
		if (util_now_ns() > deadline) {
			for (int r = 0; r < n; r++) {
				if (done[r])
					continue;
				fprintf(stderr, "launch: rank %d still running after the time bound; "
						"killing it\n", r);
				kill(pids[r], SIGKILL);
				waitpid(pids[r], NULL, 0);
				done[r] = true;
				codes[r] = 124;
			}
			break;
		}
		if (!progressed)
			sleep_ms(2);
	}
	int bad = 0;
	for (int r = 0; r < n; r++) {
		if (status)
			status[r] = codes[r];
		if (codes[r] != 0)
			bad++;
	}
	return bad;
}

int launch_job(const struct launch_cfg *c, launch_rank_fn fn, void *arg, struct json **stats)
{
	struct launch_addrs a;
	if (stats)
		*stats = NULL;
	int rc = launch_addrs_pick(&a, c->addr_index, c->nranks);
	if (rc) {
		fprintf(stderr, "launch: no free loopback block for index %u\n", c->addr_index);
		return rc;
	}
	struct launch_switch sw;
	if (!c->no_switch) {
		rc = launch_switch_start(c, &a, NULL, &sw);
		if (rc)
			return rc;
	}
	int status[LAUNCH_MAX_RANKS];
	int bad = launch_run_ranks(c, &a, fn, arg, status);
	if (bad < 0) {
		if (!c->no_switch)
			launch_switch_stop(&sw, NULL);
		return bad;
	}
	for (int r = 0; r < c->nranks; r++)
		if (status[r] != 0)
			fprintf(stderr, "launch: rank %d exited with status %d\n", r, status[r]);
	if (!c->no_switch) {
		int sc = launch_switch_stop(&sw, stats);
		if (sc != 0) {
			fprintf(stderr, "launch: inca-switch exit status %d\n", sc);
			bad++;
		}
	}
	return bad;
}

void launch_sw_summarize(const struct json *stats, struct launch_sw_summary *s)
{
	memset(s, 0, sizeof(*s));
	if (!stats)
		return;
	/* docs/switch.md: engine counters are direct members of each "trees" entry; the
	 * per-QP objects inside a tree repeat names like rx_pkts, so read members, not sums.
	 * Drops: the switch-wide total (decoder, dispatch and engine reasons). */
	const struct json *trees = json_get(stats, "trees");
	for (const struct json *t = trees ? trees->kid : NULL; t; t = t->next) {
		s->rx_pkts += json_num(json_get(t, "rx_pkts"), 0);
		s->tx_pkts += json_num(json_get(t, "tx_pkts"), 0);
		s->contributions += json_num(json_get(t, "contributions"), 0);
		s->aggregations += json_num(json_get(t, "aggregations"), 0);
		s->duplicates += json_num(json_get(t, "duplicates"), 0);
		s->results_resent += json_num(json_get(t, "results_resent"), 0);
		s->notices += json_num(json_get(t, "notices"), 0);
		s->resends_limited += json_num(json_get(t, "resends_limited"), 0);
		s->notices_limited += json_num(json_get(t, "notices_limited"), 0);
	}
	s->drops = json_num(json_get(stats, "drops_total"), json_sum_all(json_get(stats, "drops")));
	s->sw_rx_pkts = json_num(json_get(stats, "rx_pkts"), 0);
	s->sw_tx_pkts = json_num(json_get(stats, "tx_pkts"), 0);
	s->own_cpu_workers = json_num(json_get(stats, "own_cpu_workers"), 0);
}

const char *launch_fmt_bytes(uint64_t b, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	while (u < 4 && b >= 1024 && b % 1024 == 0) {
		b /= 1024;
		u++;
	}
	snprintf(buf, cap, "%llu %s", (unsigned long long)b, units[u]);
	return buf;
}

int launch_parse_bytes(const char *s, uint64_t *out)
{
	return util_parse_bytes(s, out);
}
