/* sim/sim_config.c: the parameter table. One table drives defaults, the INI scenario parser
 * (libinih), "section.key=value" overrides from the command line and the dump of every
 * effective parameter written next to the results (Redis-style single source of truth). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "sim_module.h"

/* The row type (struct sim_param, sim_module.h) is shared with the modules: each brings the
 * rows of its own sections, which follow the core's below. */

static const char *const topo_names[] = { "fattree", "leafspine", "lyu4", "file", NULL };
static const char *const routing_names[] = { "ecmp", "spray", "adaptive", "flowlet", "spray_random",
					     "spray_ideal", NULL };
static const char *const transport_names[] = { "gbn", "sr", "ideal", NULL };
static const char *const cc_names[] = { "none", "dcqcn", "dctcp", "hpcc", NULL };
static const char *const wl_names[] = { "permutation", "incast", "alltoall", "allreduce",
					"cmatrix", "none", NULL };
static const char *const unit_names[] = { "ps", "us", NULL };

#define F(field) offsetof(struct sim_config, field)

static const struct sim_param core_params[] = {
	{ "sim", "seed", SIM_P_U64, F(seed), "1", NULL, "random seed; every component derives its own stream" },
	{ "sim", "stop_us", SIM_P_DBL, F(stop_us), "0", NULL, "stop at this simulated time (0 = when all flows finish)" },
	{ "sim", "progress_s", SIM_P_DBL, F(progress_s), "2", NULL, "wall seconds between progress lines on stderr (0 = off)" },
	{ "sim", "watchdog_events", SIM_P_U64, F(watchdog_events), "16000000", NULL, "stop (exit 4, with a diagnosis) when simulated time stands still or flows are active and nothing is delivered over this many events (+4 per flow; 0 = off)" },
	{ "sim", "watchdog_idle_us", SIM_P_DBL, F(watchdog_idle_us), "1000000", NULL, "... or nothing is delivered for this long while flows are active (at least 10 * host.rto_us; 0 = off)" },

	{ "topology", "type", SIM_P_ENUM, F(topo), "fattree", topo_names, "fattree | leafspine | lyu4 | file (topology.file)" },
	{ "topology", "file", SIM_P_STR, F(topo_file), "", NULL, "type = file: topology file (switches, hosts, links; docs/sim.md); relative to the scenario file" },
	{ "topology", "k", SIM_P_U32, F(k), "0", NULL, "fat tree radix (k pods, k^3/4 hosts; 0 = smallest that fits the connection matrix, else 4)" },
	{ "topology", "hosts_per_tor", SIM_P_U32, F(hosts_per_tor), "0", NULL, "hosts per ToR/leaf/L1 (0 = non-oversubscribed)" },
	{ "topology", "tors", SIM_P_U32, F(tors), "4", NULL, "leaf-spine: number of leaves (ToRs)" },
	{ "topology", "spines", SIM_P_U32, F(spines), "2", NULL, "leaf-spine: number of spines" },
	{ "topology", "parallel_links", SIM_P_U32, F(parallel_links), "1", NULL, "leaf-spine: parallel links per leaf-spine pair" },
	{ "topology", "racks", SIM_P_U32, F(racks), "2", NULL, "lyu4: computing racks (n)" },
	{ "topology", "l1_per_rack", SIM_P_U32, F(l1_per_rack), "2", NULL, "lyu4: L1 switches per computing rack (b)" },
	{ "topology", "l2_per_rack", SIM_P_U32, F(l2_per_rack), "2", NULL, "lyu4: L2 switches per computing rack (c)" },
	{ "topology", "switching_racks", SIM_P_U32, F(switching_racks), "2", NULL, "lyu4: switching racks (m)" },
	{ "topology", "l3_per_srack", SIM_P_U32, F(l3_per_srack), "2", NULL, "lyu4: L3 switches per switching rack (d)" },
	{ "topology", "l4_per_srack", SIM_P_U32, F(l4_per_srack), "2", NULL, "lyu4: L4 switches per switching rack (e)" },
	{ "topology", "host_gbps", SIM_P_DBL, F(host_gbps), "100", NULL, "host NIC link speed" },
	{ "topology", "tier1_gbps", SIM_P_DBL, F(tier1_gbps), "100", NULL, "ToR-agg / leaf-spine / L1-L2 link speed" },
	{ "topology", "tier2_gbps", SIM_P_DBL, F(tier2_gbps), "100", NULL, "agg-core / L2-L3 link speed" },
	{ "topology", "tier3_gbps", SIM_P_DBL, F(tier3_gbps), "100", NULL, "L3-L4 link speed" },
	{ "topology", "host_latency_ns", SIM_P_DBL, F(host_latency_ns), "500", NULL, "host link propagation (+ switch pipeline) delay" },
	{ "topology", "tier1_latency_ns", SIM_P_DBL, F(tier1_latency_ns), "500", NULL, "tier-1 link delay" },
	{ "topology", "tier2_latency_ns", SIM_P_DBL, F(tier2_latency_ns), "500", NULL, "tier-2 link delay" },
	{ "topology", "tier3_latency_ns", SIM_P_DBL, F(tier3_latency_ns), "500", NULL, "tier-3 link delay" },

	{ "switch", "routing", SIM_P_ENUM, F(routing), "ecmp", routing_names, "ecmp | spray (per-packet round robin at each switch) | spray_random (random port per packet) | spray_ideal (every flow split exactly evenly at every hop: an idealised bound) | adaptive | flowlet" },
	{ "switch", "flowlet_gap_us", SIM_P_DBL, F(flowlet_gap_us), "10", NULL, "idle gap that starts a new flowlet" },
	{ "switch", "buffer_bytes", SIM_P_U64, F(buffer_bytes), "1048576", NULL, "egress queue limit per port (lossy traffic)" },
	{ "switch", "shared_buffer_bytes", SIM_P_U64, F(shared_buffer_bytes), "0", NULL, "shared buffer per switch (0 = none)" },
	{ "switch", "ecn", SIM_P_BOOL, F(ecn), "true", NULL, "RED-style ECN marking on enqueue" },
	{ "switch", "ecn_kmin_bytes", SIM_P_U64, F(ecn_kmin_bytes), "409600", NULL, "no marking below" },
	{ "switch", "ecn_kmax_bytes", SIM_P_U64, F(ecn_kmax_bytes), "1638400", NULL, "always mark above" },
	{ "switch", "ecn_pmax", SIM_P_DBL, F(ecn_pmax), "0.2", NULL, "marking probability at Kmax" },
	{ "switch", "pfc", SIM_P_BOOL, F(pfc), "false", NULL, "lossless: PFC pause/resume on ingress occupancy" },
	{ "switch", "pfc_xoff_bytes", SIM_P_U64, F(pfc_xoff_bytes), "131072", NULL, "send PAUSE when an ingress port holds this much" },
	{ "switch", "pfc_xon_bytes", SIM_P_U64, F(pfc_xon_bytes), "65536", NULL, "send RESUME when it drains to this" },
	{ "switch", "pfc_headroom_bytes", SIM_P_U64, F(pfc_headroom_bytes), "0", NULL, "absorbs in-flight data after PAUSE (0 = 2*BDP + 2 MTU)" },

	{ "host", "transport", SIM_P_ENUM, F(transport), "gbn", transport_names, "gbn (go-back-N) | sr (selective repeat) | ideal (no ACKs)" },
	{ "host", "cc", SIM_P_ENUM, F(cc), "dcqcn", cc_names, "none | dcqcn | dctcp (window, ECN step marking at dctcp.k_bytes) | hpcc (window and pacing from INT)" },
	{ "host", "mtu_bytes", SIM_P_U32, F(mtu_bytes), "4096", NULL, "payload bytes per data packet" },
	{ "host", "header_bytes", SIM_P_U32, F(header_bytes), "64", NULL, "per-packet overhead on the wire (Eth+IP+UDP+BTH+ICRC+FCS)" },
	{ "host", "ack_bytes", SIM_P_U32, F(ack_bytes), "64", NULL, "size of ACK / NACK / CNP on the wire" },
	{ "host", "ack_every", SIM_P_U32, F(ack_every), "4", NULL, "ACK every n in-order packets (coalescing, as RoCE NICs do)" },
	{ "host", "rto_us", SIM_P_DBL, F(rto_us), "1000", NULL, "retransmission timeout" },
	{ "host", "max_inflight_bytes", SIM_P_U64, F(max_inflight_bytes), "0", NULL, "sender window (0 = none, rate-based only)" },
	{ "host", "rate_gbps", SIM_P_DBL, F(rate_gbps), "0", NULL, "cap on the sending rate (0 = line rate); with cc=none an ideal constant-rate sender" },
	{ "host", "sr_reorder_pkts", SIM_P_U32, F(sr_reorder_pkts), "64", NULL, "selective repeat: resend a hole once ACKs are this far past it" },

	{ "dcqcn", "g", SIM_P_DBL, F(dcqcn_g), "0.00390625", NULL, "alpha gain (1/256)" },
	{ "dcqcn", "alpha_timer_us", SIM_P_DBL, F(dcqcn_alpha_timer_us), "55", NULL, "alpha decays every K without CNP" },
	{ "dcqcn", "rate_timer_us", SIM_P_DBL, F(dcqcn_rate_timer_us), "55", NULL, "rate-increase timer T" },
	{ "dcqcn", "byte_counter_bytes", SIM_P_U64, F(dcqcn_byte_counter_bytes), "10485760", NULL, "rate-increase byte counter B" },
	{ "dcqcn", "f", SIM_P_U32, F(dcqcn_f), "5", NULL, "fast-recovery steps F" },
	{ "dcqcn", "rai_mbps", SIM_P_DBL, F(dcqcn_rai_mbps), "500", NULL, "additive increase R_AI (paper: 40 at 40G; too slow at 100G)" },
	{ "dcqcn", "rhai_mbps", SIM_P_DBL, F(dcqcn_rhai_mbps), "5000", NULL, "hyper increase R_HAI" },
	{ "dcqcn", "min_rate_mbps", SIM_P_DBL, F(dcqcn_min_rate_mbps), "100", NULL, "floor of the current rate" },
	{ "dcqcn", "cnp_interval_us", SIM_P_DBL, F(dcqcn_cnp_interval_us), "50", NULL, "NP sends at most one CNP per flow per interval" },
	{ "dcqcn", "initial_alpha", SIM_P_DBL, F(dcqcn_initial_alpha), "1", NULL, "alpha at flow start" },

	{ "workload", "type", SIM_P_ENUM, F(workload), "permutation", wl_names, "permutation | incast | alltoall | allreduce | cmatrix | none" },
	{ "workload", "size_bytes", SIM_P_U64, F(size_bytes), "2000000", NULL, "flow size (allreduce: buffer size per rank)" },
	{ "workload", "hosts", SIM_P_U32, F(wl_hosts), "0", NULL, "participating hosts 0..n-1 (0 = all)" },
	{ "workload", "incast_n", SIM_P_U32, F(incast_n), "8", NULL, "incast: number of senders" },
	{ "workload", "incast_dst", SIM_P_U32, F(incast_dst), "0", NULL, "incast: receiving host" },
	{ "workload", "start_us", SIM_P_DBL, F(start_us), "0", NULL, "start time of generated flows" },
	{ "workload", "file", SIM_P_STR, F(cmatrix), "", NULL, "htsim connection matrix (type = cmatrix); relative to the scenario file" },
	{ "workload", "cm_start_unit", SIM_P_ENUM, F(cm_start_unit), "ps", unit_names, "unit of 'start' in connection matrices: ps (htsim since 2023) | us (older htsim)" },

	{ "output", "dir", SIM_P_STR, F(out_dir), "", NULL, "directory for fct.csv, summary.json, params.ini, timeseries.csv" },
	{ "output", "timeseries_us", SIM_P_DBL, F(timeseries_us), "0", NULL, "sample link utilisation and queues every (0 = off)" },
};
#define NCORE (sizeof(core_params) / sizeof(core_params[0]))

/* The whole table: the core's rows, then each module's in registration order. */
static size_t nparams(void)
{
	size_t n = NCORE;
	for (unsigned m = 0; m < SIM_MOD_COUNT; m++)
		n += sim_modules[m]->nparams;
	return n;
}

static const struct sim_param *param_at(size_t i)
{
	if (i < NCORE)
		return &core_params[i];
	i -= NCORE;
	for (unsigned m = 0; m < SIM_MOD_COUNT; m++) {
		if (i < sim_modules[m]->nparams)
			return &sim_modules[m]->params[i];
		i -= sim_modules[m]->nparams;
	}
	return NULL;
}
#define NPARAMS nparams()

static int parse_value(struct sim_config *c, const struct sim_param *p, const char *v)
{
	char *end;
	void *dst = (char *)c + p->off;
	while (*v == ' ' || *v == '\t')
		v++;
	switch (p->type) {
	case SIM_P_U64:
	case SIM_P_U32: {
		if (*v == '-' || !*v)
			return -EINVAL;
		errno = 0;
		double d = 0;
		unsigned long long x = strtoull(v, &end, 0);
		if (*end == '.' || *end == 'e' || *end == 'E') { /* allow 2e6 */
			d = strtod(v, &end);
			if (!(d >= 0 && d < 1.8e19)) /* also rejects NaN */
				return -EINVAL;
			x = (unsigned long long)d;
		}
		while (*end == ' ')
			end++;
		if (errno || *end)
			return -EINVAL;
		if (p->type == SIM_P_U32) {
			if (x > UINT32_MAX)
				return -EINVAL;
			*(uint32_t *)dst = (uint32_t)x;
		} else {
			*(uint64_t *)dst = x;
		}
		return 0;
	}
	case SIM_P_DBL: {
		errno = 0;
		double d = strtod(v, &end);
		while (*end == ' ')
			end++;
		if (errno || *end || end == v || !isfinite(d) || d < 0)
			return -EINVAL;
		*(double *)dst = d;
		return 0;
	}
	case SIM_P_BOOL:
		if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcmp(v, "1"))
			*(bool *)dst = true;
		else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcmp(v, "0"))
			*(bool *)dst = false;
		else
			return -EINVAL;
		return 0;
	case SIM_P_ENUM:
		for (int i = 0; p->names[i]; i++)
			if (!strcasecmp(v, p->names[i])) {
				*(int *)dst = i;
				return 0;
			}
		return -EINVAL;
	case SIM_P_STR: {
		/* Only what params.ini can carry back unchanged: inih strips surrounding blanks,
		 * takes " ;" as the start of a comment and splits lines longer than its buffer
		 * (200 bytes in Debian's build), hence SIM_STR_MAX. */
		size_t n = strlen(v);
		if (n > SIM_STR_MAX || (n && (v[n - 1] == ' ' || v[n - 1] == '\t')))
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)v[i] < 0x20 || (v[i] == ';' && (!i || v[i - 1] == ' ' || v[i - 1] == '\t')))
				return -EINVAL;
		strcpy((char *)dst, v);
		return 0;
	}
	}
	return -EINVAL;
}

void sim_config_defaults(struct sim_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NPARAMS; i++)
		(void)parse_value(c, param_at(i), param_at(i)->def);
}

static const struct sim_param *find_param(const char *section, const char *key)
{
	const struct sim_param *hit = NULL;
	int nhits = 0;
	for (size_t i = 0; i < NPARAMS; i++) {
		if (strcasecmp(param_at(i)->key, key))
			continue;
		if (section && *section) {
			if (!strcasecmp(param_at(i)->section, section))
				return param_at(i);
		} else {
			hit = param_at(i);
			nhits++;
		}
	}
	return nhits == 1 ? hit : NULL;
}

int sim_config_set(struct sim_config *c, const char *name, const char *value)
{
	char sec[32] = "";
	const char *key = name, *dot = strchr(name, '.');
	if (dot) {
		size_t n = (size_t)(dot - name);
		if (n >= sizeof(sec))
			return -ENOENT;
		memcpy(sec, name, n);
		sec[n] = 0;
		key = dot + 1;
	}
	const struct sim_param *p = find_param(sec, key);
	if (!p)
		return -ENOENT;
	return parse_value(c, p, value);
}

int sim_config_set_arg(struct sim_config *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[96];
	if (!eq || (size_t)(eq - arg) >= sizeof(name))
		return -EINVAL;
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = 0;
	return sim_config_set(c, name, eq + 1);
}

struct load_ctx {
	struct sim_config *c;
	char *err;
	size_t errlen;
	int rc;
	const char *path;
	const char *text;        /* sim_config_load_string: the text (else read from path) */
};

/* Line `lineno` (1-based) of the scenario, without its line end, into buf ("" if absent). */
static void scenario_line(const struct load_ctx *lc, int lineno, char *buf, size_t len)
{
	FILE *f = lc->text ? fmemopen((void *)lc->text, strlen(lc->text), "r") : fopen(lc->path, "r");
	buf[0] = 0;
	if (!f)
		return;
	for (int i = 1; fgets(buf, (int)len, f); ) {
		size_t n = strlen(buf);
		bool whole = n && buf[n - 1] == '\n';
		if (i == lineno) {
			buf[strcspn(buf, "\r\n")] = 0;
			break;
		}
		if (whole)
			i++;
		buf[0] = 0;
	}
	fclose(f);
}

/* Why inih refused a line: it reports only the line number. */
static void syntax_reason(const struct load_ctx *lc, int lineno)
{
	char line[256];
	scenario_line(lc, lineno, line, sizeof(line));
	const char *p = line + strspn(line, " \t");
	const char *why = "expected 'key = value', '[section]' or a ';' comment";
	if (*p == '[' && !strchr(p, ']'))
		why = "section header without its closing ']'";
	snprintf(lc->err, lc->errlen, "%s:%d: syntax error: %s: %.80s", lc->path, lineno, why, p);
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *lc = user;
	const struct sim_param *p = find_param(section, name);
	int rc = p ? parse_value(lc->c, p, value) : -ENOENT;
	if (rc && !lc->rc) {
		lc->rc = rc;
		if (lc->err)
			snprintf(lc->err, lc->errlen, "%s: %s [%s] %s = %s", lc->path,
				 rc == -ENOENT ? "unknown parameter" : "bad value", section, name, value);
	}
	return rc == 0;
}

/* File parameters: a relative path in a scenario file is taken from that file's directory. */
static const struct { size_t off; const char *name; } path_params[] = {
	{ F(cmatrix), "workload.file" },
	{ F(topo_file), "topology.file" },
};
#define NPATHS (sizeof(path_params) / sizeof(path_params[0]))
struct path_before { char v[NPATHS][SIM_PATH_MAX]; };

static void paths_save(const struct sim_config *c, struct path_before *b)
{
	for (size_t i = 0; i < NPATHS; i++)
		strcpy(b->v[i], (const char *)c + path_params[i].off);
}

/* Shared tail of the two loaders: inih's result to our error convention, then make the file
 * parameters the scenario file set relative to that file. */
static int load_finish(struct sim_config *c, struct load_ctx *lc, int r,
		       const struct path_before *before)
{
	const char *path = lc->path;
	if (r < 0) {
		if (lc->err)
			snprintf(lc->err, lc->errlen, "%s: cannot open", path);
		return r == -1 ? -ENOENT : -ENOMEM;
	}
	if (r > 0) {
		/* r is the first bad line, refused by inih or by ini_cb. inih goes on after a
		 * syntax error (an unclosed '[section' leaves the keys below in the previous
		 * section), so a key error may follow a syntax error: report the first. */
		char line[256];
		scenario_line(lc, r, line, sizeof(line));
		const char *p = line + strspn(line, " \t");
		bool keyline = *p != '[' && strpbrk(p, "=:");
		if (!lc->rc || !keyline) {
			if (lc->err)
				syntax_reason(lc, r);
			return -EINVAL;
		}
	}
	if (lc->rc)
		return lc->rc;
	/* The result is made absolute so that params.ini, written elsewhere, names the same
	 * file when it is loaded again. */
	for (size_t i = 0; i < NPATHS; i++) {
		char *v = (char *)c + path_params[i].off;
		if (!strcmp(before->v[i], v) || !v[0] || v[0] == '/')
			continue;
		const char *slash = strrchr(path, '/');
		char buf[SIM_PATH_MAX], cwd[SIM_PATH_MAX];
		int n;
		if (path[0] == '/')
			cwd[0] = 0;
		else if (!getcwd(cwd, sizeof(cwd)))
			snprintf(cwd, sizeof(cwd), ".");
		if (slash)
			n = snprintf(buf, sizeof(buf), "%s%s%.*s/%s", cwd, cwd[0] ? "/" : "",
				     (int)(slash - path), path, v);
		else
			n = snprintf(buf, sizeof(buf), "%s/%s", cwd, v);
		if (n < 0 || n > SIM_STR_MAX) {
			if (lc->err)
				snprintf(lc->err, lc->errlen, "%s: %s: absolute path over %d bytes",
					 path, path_params[i].name, SIM_STR_MAX);
			return -ENAMETOOLONG;
		}
		strcpy(v, buf);
	}
	return 0;
}

int sim_config_load(struct sim_config *c, const char *path, char *err, size_t errlen)
{
	struct load_ctx lc = { c, err, errlen, 0, path, NULL };
	struct path_before before;
	paths_save(c, &before);
	return load_finish(c, &lc, ini_parse(path, ini_cb, &lc), &before);
}

int sim_config_load_string(struct sim_config *c, const char *text, const char *name, char *err,
			   size_t errlen)
{
	struct load_ctx lc = { c, err, errlen, 0, name, text };
	struct path_before before;
	paths_save(c, &before);
	return load_finish(c, &lc, ini_parse_string(text, ini_cb, &lc), &before);
}

static void print_value(const struct sim_config *c, const struct sim_param *p, FILE *f)
{
	const void *src = (const char *)c + p->off;
	switch (p->type) {
	case SIM_P_U64: fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)src); break;
	case SIM_P_U32: fprintf(f, "%u", *(const uint32_t *)src); break;
	case SIM_P_DBL: fprintf(f, "%.15g", *(const double *)src); break;
	case SIM_P_BOOL: fprintf(f, "%s", *(const bool *)src ? "true" : "false"); break;
	case SIM_P_ENUM: fprintf(f, "%s", p->names[*(const int *)src]); break;
	case SIM_P_STR: fprintf(f, "%s", (const char *)src); break;
	}
}

/* Core rows that are quiet like module rows: knobs that do not change results (the watchdog only
 * stops runs that would never end) or that only a few runs use (topology.file), so dumps of
 * every other run stay as they were. */
static bool core_quiet(const struct sim_param *p)
{
	return p->off == F(watchdog_events) || p->off == F(watchdog_idle_us) || p->off == F(topo_file);
}

/* A quiet (module) parameter still at its default is not dumped: see struct sim_param. */
static bool dump_skip(const struct sim_config *c, const struct sim_param *p)
{
	if (p >= core_params && p < core_params + NCORE && !core_quiet(p))
		return false;
	struct sim_config d;
	memset(&d, 0, sizeof(d));
	(void)parse_value(&d, p, p->def);
	size_t n = p->type == SIM_P_U64 ? sizeof(uint64_t) : p->type == SIM_P_U32 ? sizeof(uint32_t)
		: p->type == SIM_P_DBL ? sizeof(double) : p->type == SIM_P_BOOL ? sizeof(bool)
		: p->type == SIM_P_ENUM ? sizeof(int) : strlen((const char *)&d + p->off) + 1;
	return !memcmp((const char *)c + p->off, (const char *)&d + p->off, n);
}

/* The parameters in the order dumps list them: grouped by section, sections in the order they
 * first appear in the table (a module may add keys to a core section, such as [switch]), table
 * order within a section; with `skip`, without those dump_skip leaves out. Returns a malloc'ed
 * array of *n indices, NULL when out of memory. */
static size_t *dump_order(const struct sim_config *c, bool skip, size_t *n)
{
	size_t total = NPARAMS, k = 0;
	size_t *v = malloc(sizeof(*v) * (total ? total : 1));
	if (!v)
		return NULL;
	for (size_t i = 0; i < total; i++) {
		const char *sec = param_at(i)->section;
		size_t j = 0;
		while (j < i && strcmp(param_at(j)->section, sec))
			j++;
		if (j < i)
			continue; /* its section was listed with an earlier row */
		for (j = i; j < total; j++)
			if (!strcmp(param_at(j)->section, sec) && !(skip && dump_skip(c, param_at(j))))
				v[k++] = j;
	}
	*n = k;
	return v;
}

void sim_config_dump(const struct sim_config *c, FILE *f)
{
	size_t n, *v = dump_order(c, true, &n);
	if (!v) {
		fprintf(f, "; out of memory\n");
		return;
	}
	const char *sec = "";
	for (size_t k = 0; k < n; k++) {
		const struct sim_param *p = param_at(v[k]);
		if (strcmp(sec, p->section)) {
			sec = p->section;
			fprintf(f, "%s[%s]\n", k ? "\n" : "", sec);
		}
		fprintf(f, "%s = ", p->key);
		print_value(c, p, f);
		fputc('\n', f);
	}
	free(v);
}

/* JSON object of every parameter, grouped by section (used by the summary). */
void sim_config_dump_json(const struct sim_config *c, FILE *f, const char *indent);
void sim_config_dump_json(const struct sim_config *c, FILE *f, const char *indent)
{
	size_t n, *v = dump_order(c, true, &n);
	fprintf(f, "{");
	for (size_t k = 0; v && k < n; k++) {
		const struct sim_param *p = param_at(v[k]);
		bool first = !k || strcmp(param_at(v[k - 1])->section, p->section);
		bool last = k + 1 == n || strcmp(param_at(v[k + 1])->section, p->section);
		if (first)
			fprintf(f, "\n%s  \"%s\": {", indent, p->section);
		fprintf(f, "%s\n%s    \"%s\": ", first ? "" : ",", indent, p->key);
		if (p->type == SIM_P_ENUM || p->type == SIM_P_STR) {
			fputc('"', f);
			print_value(c, p, f);
			fputc('"', f);
		} else {
			print_value(c, p, f);
		}
		if (last)
			fprintf(f, "\n%s  }%s", indent, k + 1 == n ? "" : ",");
	}
	fprintf(f, "\n%s}", indent);
	free(v);
}

void sim_config_help(FILE *f)
{
	size_t n, *v = dump_order(NULL, false, &n);
	const char *sec = "";
	for (size_t k = 0; v && k < n; k++) {
		const struct sim_param *p = param_at(v[k]);
		if (strcmp(sec, p->section)) {
			sec = p->section;
			fprintf(f, "[%s]\n", sec);
		}
		fprintf(f, "  %-20s = %-12s %s\n", p->key, p->def, p->help);
	}
	free(v);
}
