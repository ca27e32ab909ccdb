/* sim/sim_workload.c: workloads. Built-in generators (permutation, incast N->1, all-to-all,
 * ring AllReduce) and a reader for htsim's connection-matrix format with its triggers
 * (oneshot, multishot, barrier), so the same files drive both simulators. Generators that
 * need dependencies (ring AllReduce) are expressed with the same triggers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* ---- triggers ---------------------------------------------------------------------------- */
static uint32_t trig_slot(uint32_t id, uint32_t cap)
{
	return (uint32_t)sim_mix64(id) & (cap - 1);
}

static int trig_rehash(struct sim *s, uint32_t cap)
{
	uint32_t *h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->ntrigs; i++) {
		uint32_t j = trig_slot(s->trigs[i].id, cap);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = i + 1;
	}
	free(s->trig_hash);
	s->trig_hash = h;
	s->trig_hash_cap = cap;
	return 0;
}

struct sim_trigger *sim_trigger_get(struct sim *s, uint32_t id, bool create)
{
	if (s->trig_hash_cap) {
		uint32_t j = trig_slot(id, s->trig_hash_cap);
		while (s->trig_hash[j]) {
			struct sim_trigger *t = &s->trigs[s->trig_hash[j] - 1];
			if (t->id == id)
				return t;
			j = (j + 1) & (s->trig_hash_cap - 1);
		}
	}
	if (!create)
		return NULL;
	if (s->ntrigs == s->trigs_cap) {
		uint32_t cap = s->trigs_cap ? s->trigs_cap * 2 : 16;
		struct sim_trigger *v = realloc(s->trigs, sizeof(*v) * cap);
		if (!v)
			return NULL;
		s->trigs = v;
		s->trigs_cap = cap;
	}
	if ((s->ntrigs + 1) * 2 > s->trig_hash_cap &&
	    trig_rehash(s, s->trig_hash_cap ? s->trig_hash_cap * 2 : 64))
		return NULL;
	struct sim_trigger *t = &s->trigs[s->ntrigs++];
	memset(t, 0, sizeof(*t));
	t->id = id;
	uint32_t j = trig_slot(id, s->trig_hash_cap);
	while (s->trig_hash[j])
		j = (j + 1) & (s->trig_hash_cap - 1);
	s->trig_hash[j] = s->ntrigs;
	return t;
}

static int trig_add_target(struct sim_trigger *t, uint32_t flow)
{
	if (t->ntargets == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 4;
		uint32_t *v = realloc(t->targets, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		t->targets = v;
		t->cap = cap;
	}
	t->targets[t->ntargets++] = flow;
	return 0;
}

static void start_now(struct sim *s, uint32_t flow)
{
	struct sim_flow *f = &s->flows[flow];
	if (f->state == SIM_FLOW_WAIT && !sim_ev_pending(&f->start_ev))
		sim_schedule(s, &f->start_ev, s->now); /* as an event: no recursion from a completion */
}

/* Semantics as htsim: oneshot starts all its flows once; multishot starts the next one of its
 * flows on each activation; barrier starts all once it has been activated `count` times. */
void sim_trigger_activate(struct sim *s, uint32_t id)
{
	struct sim_trigger *t = sim_trigger_get(s, id, false);
	if (!t)
		return;
	switch (t->type) {
	case SIM_TRIG_ONESHOT:
		if (t->fired)
			return;
		t->fired = true;
		for (uint32_t i = 0; i < t->ntargets; i++)
			start_now(s, t->targets[i]);
		break;
	case SIM_TRIG_MULTISHOT:
		if (t->next < t->ntargets)
			start_now(s, t->targets[t->next++]);
		break;
	case SIM_TRIG_BARRIER:
		if (t->fired || (t->remaining && --t->remaining))
			return;
		t->fired = true;
		for (uint32_t i = 0; i < t->ntargets; i++)
			start_now(s, t->targets[i]);
		break;
	}
}

/* ---- htsim connection matrix -------------------------------------------------------------- */
static int parse_u64(const char *tok, uint64_t *out)
{
	char *end;
	if (!tok || *tok == '-' || !*tok)
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(tok, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_u32(const char *tok, uint32_t *out)
{
	uint64_t v;
	if (parse_u64(tok, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

#define CM_ERR(...) do { snprintf(s->err, sizeof(s->err), __VA_ARGS__); rc = -EINVAL; goto out; } while (0)

int sim_cmatrix_parse(struct sim *s, FILE *fp, const char *name)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	int rc = 0;
	uint64_t nodes = 0, nconns = 0, ntrigs = 0, nfail = 0;
	bool hdr_conns = false, hdr_trigs = false, hdr_fail = false;
	uint32_t conns_seen = 0, trigs_seen = 0, fails_seen = 0, first_flow = s->nflows;
	char *tok[64];
	while ((len = getline(&line, &cap, fp)) >= 0) {
		lineno++;
		int nt = 0;
		for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t && nt < 64;
		     t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt++] = t;
		if (nt == 0 || tok[0][0] == '#')
			continue;
		if (!strcmp(tok[0], "Nodes") || !strcmp(tok[0], "Connections") ||
		    !strcmp(tok[0], "Triggers") || !strcmp(tok[0], "Failures")) {
			uint64_t v;
			if (nt < 2 || parse_u64(tok[1], &v))
				CM_ERR("%s:%u: bad header line", name, lineno);
			if (tok[0][0] == 'N') {
				/* htsim builds its topology from Nodes; here the topology is configured,
				 * so the two must agree (topology.k = 0 sizes a fat tree from Nodes). */
				if (v != s->nhosts)
					CM_ERR("%s:%u: Nodes %llu does not match the topology (%u hosts); with "
					       "topology.type = fattree, topology.k = 0 sizes the tree from Nodes",
					       name, lineno, (unsigned long long)v, s->nhosts);
				nodes = v;
			}
			else if (tok[0][0] == 'C') { nconns = v; hdr_conns = true; }
			else if (tok[0][0] == 'T') { ntrigs = v; hdr_trigs = true; }
			else { nfail = v; hdr_fail = true; }
			continue;
		}
		char *arrow = strstr(tok[0], "->");
		if (arrow) {
			uint32_t src, dst, id = 0, trig = 0, sdt = 0, rdt = 0, prio = 0;
			uint64_t size = 0;
			double start_us = -1;
			bool endless = false, have_size = false;
			*arrow = 0;
			if (parse_u32(tok[0], &src) || parse_u32(arrow + 2, &dst))
				CM_ERR("%s:%u: bad connection endpoints", name, lineno);
			for (int i = 1; i < nt; i++) {
				const char *k = tok[i], *v = i + 1 < nt ? tok[i + 1] : NULL;
				uint32_t ignored;
				if (!strcmp(k, "addon"))
					continue;
				if (!v)
					CM_ERR("%s:%u: '%s' needs a value", name, lineno, k);
				i++;
				if (!strcmp(k, "start")) {
					/* htsim writes picoseconds (its generators print µs * 1e6);
					 * files from before late 2023 meant microseconds. */
					char *end;
					double t = strtod(v, &end);
					double us = s->cfg.cm_start_unit == SIM_UNIT_US ? t : t / 1e6;
					if (*end || end == v || !(us >= 0 && us <= 1e11))
						CM_ERR("%s:%u: bad start '%s'", name, lineno, v);
					start_us = us;
				} else if (!strcmp(k, "size")) {
					/* size 0: htsim's "no flow size", a flow that sends until the end */
					if (parse_u64(v, &size) || size > SIM_FLOW_MAX_BYTES)
						CM_ERR("%s:%u: bad size '%s'", name, lineno, v);
					endless = size == 0;
					have_size = true;
				} else if (!strcmp(k, "id")) {
					if (parse_u32(v, &id) || !id)
						CM_ERR("%s:%u: flow id must be a positive integer", name, lineno);
				} else if (!strcmp(k, "trigger")) {
					if (parse_u32(v, &trig) || !trig)
						CM_ERR("%s:%u: bad trigger id", name, lineno);
				} else if (!strcmp(k, "send_done_trigger")) {
					if (parse_u32(v, &sdt) || !sdt)
						CM_ERR("%s:%u: bad send_done_trigger", name, lineno);
				} else if (!strcmp(k, "recv_done_trigger")) {
					if (parse_u32(v, &rdt) || !rdt)
						CM_ERR("%s:%u: bad recv_done_trigger", name, lineno);
				} else if (!strcmp(k, "prio")) {
					/* The flow's traffic class (sim_tc.c); with one class it is
					 * read and ignored, as before classes existed. */
					uint32_t ncls = s->cfg.tc_classes;
					if (parse_u32(v, &prio))
						CM_ERR("%s:%u: bad prio", name, lineno);
					if (ncls > 1 && prio >= ncls)
						CM_ERR("%s:%u: prio %u is not a traffic class: switch.traffic_classes = "
						       "%u (classes 0 to %u)", name, lineno, prio, ncls, ncls - 1);
				} else if (!strcmp(k, "msg")) {
					if (parse_u32(v, &ignored))
						CM_ERR("%s:%u: bad %s", name, lineno, k);
				} else {
					CM_ERR("%s:%u: unknown token '%s'", name, lineno, k);
				}
			}
			if (start_us < 0 && !trig)
				CM_ERR("%s:%u: no start time or trigger", name, lineno);
			if (start_us >= 0 && trig)
				CM_ERR("%s:%u: both start time and trigger", name, lineno);
			if (!have_size)
				CM_ERR("%s:%u: no size", name, lineno);
			if (src >= s->nhosts || dst >= s->nhosts || (nodes && (src >= nodes || dst >= nodes)))
				CM_ERR("%s:%u: node %u out of range (%u hosts in the topology)", name, lineno,
				       src >= s->nhosts ? src : dst, s->nhosts);
			if (src == dst)
				CM_ERR("%s:%u: source equals destination", name, lineno);
			if (endless) {
				/* Enough bytes to keep the source's link busy until the stop time. */
				if (s->stop_ps == SIM_TIME_NEVER)
					CM_ERR("%s:%u: size 0 (send until the end) needs sim.stop_us", name, lineno);
				double secs = sim_time_to_s(s->stop_ps);
				size = (uint64_t)(secs * (double)s->hosts[src].port.rate_bps / 8) + 2ull * s->cfg.mtu_bytes;
				if (size > SIM_FLOW_MAX_BYTES)
					size = SIM_FLOW_MAX_BYTES;
			}
			struct sim_flow *f = sim_flow_new(s, src, dst, size,
							  trig ? 0 : sim_time_from_us_f(start_us), id);
			if (!f) {
				if ((size - 1) / s->cfg.mtu_bytes >= (1u << 31))
					CM_ERR("%s:%u: flow of more than 2^31 packets", name, lineno);
				rc = -ENOMEM;
				goto out;
			}
			f->endless = endless;
			if (s->cfg.tc_classes > 1)
				f->tc = (uint8_t)prio; /* < tc_classes; sim_tc.c refuses more than 8 */
			f->trig_start = trig;
			f->trig_send_done = sdt;
			f->trig_recv_done = rdt;
			if (trig) {
				struct sim_trigger *t = sim_trigger_get(s, trig, true);
				if (!t || trig_add_target(t, f->idx)) {
					rc = -ENOMEM;
					goto out;
				}
			}
			if (sdt && !sim_trigger_get(s, sdt, true)) { rc = -ENOMEM; goto out; }
			if (rdt && !sim_trigger_get(s, rdt, true)) { rc = -ENOMEM; goto out; }
			conns_seen++;
		} else if (!strcmp(tok[0], "trigger")) {
			uint32_t id = 0, count = 0;
			int type = -1;
			for (int i = 1; i < nt; i++) {
				if (!strcmp(tok[i], "id") && i + 1 < nt) {
					if (parse_u32(tok[++i], &id) || !id)
						CM_ERR("%s:%u: trigger id must be a positive integer", name, lineno);
				} else if (!strcmp(tok[i], "count") && i + 1 < nt) {
					if (parse_u32(tok[++i], &count))
						CM_ERR("%s:%u: bad count", name, lineno);
				} else if (!strcmp(tok[i], "oneshot") && type < 0) {
					type = SIM_TRIG_ONESHOT;
				} else if (!strcmp(tok[i], "multishot") && type < 0) {
					type = SIM_TRIG_MULTISHOT;
				} else if (!strcmp(tok[i], "barrier") && type < 0) {
					type = SIM_TRIG_BARRIER;
				} else {
					CM_ERR("%s:%u: unknown trigger token '%s'", name, lineno, tok[i]);
				}
			}
			if (!id)
				CM_ERR("%s:%u: trigger without id", name, lineno);
			if (type < 0)
				CM_ERR("%s:%u: trigger without type", name, lineno);
			struct sim_trigger *t = sim_trigger_get(s, id, true);
			if (!t) {
				rc = -ENOMEM;
				goto out;
			}
			if (t->defined)
				CM_ERR("%s:%u: trigger %u defined twice", name, lineno, id);
			t->defined = true;
			t->type = (uint8_t)type;
			t->count = count;
			t->remaining = count ? count : 1;
			trigs_seen++;
		} else if (!strcmp(tok[0], "failure")) {
			/* htsim: "failure switch_type AGG switch_id S link_id L" takes down the link
			 * between aggregation switch S and its L-th core (htsim models AGG only). */
			int type = -1;
			uint32_t sid = UINT32_MAX, lid = UINT32_MAX;
			for (int i = 1; i < nt; i += 2) {
				const char *v = i + 1 < nt ? tok[i + 1] : NULL;
				if (!v)
					CM_ERR("%s:%u: '%s' needs a value", name, lineno, tok[i]);
				if (!strcmp(tok[i], "switch_type")) {
					type = !strcmp(v, "TOR") ? 0 : !strcmp(v, "AGG") ? 1 : !strcmp(v, "CORE") ? 2 : -2;
					if (type == -2)
						CM_ERR("%s:%u: switch_type must be TOR, AGG or CORE", name, lineno);
				} else if (!strcmp(tok[i], "switch_id")) {
					if (parse_u32(v, &sid))
						CM_ERR("%s:%u: bad switch_id", name, lineno);
				} else if (!strcmp(tok[i], "link_id")) {
					if (parse_u32(v, &lid))
						CM_ERR("%s:%u: bad link_id", name, lineno);
				} else {
					CM_ERR("%s:%u: unknown failure attribute '%s'", name, lineno, tok[i]);
				}
			}
			if (type != 1 || sid == UINT32_MAX || lid == UINT32_MAX)
				CM_ERR("%s:%u: only 'failure switch_type AGG switch_id S link_id L' is modelled (as in htsim)", name, lineno);
			int frc = sim_topo_fail_agg_link(s, sid, lid);
			if (frc == -EINVAL)
				CM_ERR("%s:%u: no such AGG link (needs a fat tree, switch_id < k*k/2, link_id < k/2)", name, lineno);
			if (frc == -EALREADY)
				CM_ERR("%s:%u: link failed twice", name, lineno);
			fails_seen++;
		} else {
			CM_ERR("%s:%u: unknown line starting '%s'", name, lineno, tok[0]);
		}
	}
	if (conns_seen == 0)
		CM_ERR("%s: no connections (an empty run would prove nothing)", name);
	if (hdr_conns && conns_seen != nconns)
		CM_ERR("%s: header says %llu connections, file has %u", name, (unsigned long long)nconns, conns_seen);
	if (hdr_trigs && trigs_seen != ntrigs)
		CM_ERR("%s: header says %llu triggers, file has %u", name, (unsigned long long)ntrigs, trigs_seen);
	if (hdr_fail && fails_seen != nfail)
		CM_ERR("%s: header says %llu failures, file has %u", name, (unsigned long long)nfail, fails_seen);
	for (uint32_t i = 0; i < s->ntrigs; i++)
		if (!s->trigs[i].defined)
			CM_ERR("%s: trigger %u used but not defined", name, s->trigs[i].id);
	/* Flow ids must be unique: they name flows in the outputs. */
	{
		uint32_t n = s->nflows - first_flow, hc = 64;
		while (hc < n * 2)
			hc *= 2;
		uint32_t *h = calloc(hc, sizeof(*h));
		if (!h) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint32_t i = first_flow; i < s->nflows && !rc; i++) {
			uint32_t id = s->flows[i].user_id, j = trig_slot(id, hc);
			while (h[j] && s->flows[h[j] - 1].user_id != id)
				j = (j + 1) & (hc - 1);
			if (h[j]) {
				snprintf(s->err, sizeof(s->err), "%s: flow id %u used twice", name, id);
				rc = -EINVAL;
			}
			h[j] = i + 1;
		}
		free(h);
	}
	s->cm_failures += fails_seen;
	if (fails_seen && (rc = sim_topo_reroute(s)) != 0) {
		snprintf(s->err, sizeof(s->err), "%s: routing around the failed links failed", name);
		goto out;
	}
out:
	free(line);
	return rc;
}

int sim_cmatrix_load(struct sim *s, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(s->err, sizeof(s->err), "%.200s: cannot open connection matrix", path);
		return -ENOENT;
	}
	int rc = sim_cmatrix_parse(s, f, path);
	fclose(f);
	return rc;
}

/* "Nodes N" of a connection matrix (0 if absent/unreadable, UINT64_MAX if out of range): used
 * to size a fat tree. */
uint64_t sim_cmatrix_nodes(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[256];
	uint64_t n = 0;
	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f)) {
		char *p = buf, *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, "Nodes", 5) && (p[5] == ' ' || p[5] == '\t')) {
			errno = 0;
			unsigned long long v = strtoull(p + 5, &end, 10);
			n = errno || end == p + 5 ? UINT64_MAX : v;
			break;
		}
		if (strstr(buf, "->"))
			break;
	}
	fclose(f);
	return n;
}

/* ---- generators -------------------------------------------------------------------------- */
int sim_workload_build(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	uint32_t n = c->wl_hosts && c->wl_hosts <= s->nhosts ? c->wl_hosts : s->nhosts;
	sim_time_ps t0 = sim_time_from_us_f(c->start_us);
	uint64_t S = c->size_bytes;
	static const char *const wl_name[] = { "permutation", "incast", "alltoall", "allreduce" };
	if (c->wl_hosts > s->nhosts) {
		snprintf(s->err, sizeof(s->err), "workload.hosts = %u exceeds the %u hosts of the topology",
			 c->wl_hosts, s->nhosts);
		return -EINVAL;
	}
	if (c->workload <= SIM_WL_ALLREDUCE) {
		/* Generated flows: the same checks as sim_flow_new, with a reason. */
		uint64_t flow = c->workload == SIM_WL_ALLREDUCE ? (S + n - 1) / (n ? n : 1) : S;
		if (S == 0 || flow > SIM_FLOW_MAX_BYTES || (flow - 1) / c->mtu_bytes >= (1u << 31)) {
			snprintf(s->err, sizeof(s->err), "workload.size_bytes = %llu: flows must have 1 byte "
				 "to 1 TB and at most 2^31 packets", (unsigned long long)S);
			return -EINVAL;
		}
		if (n < 2) {
			snprintf(s->err, sizeof(s->err), "workload.hosts = %u: %s needs at least 2 hosts",
				 n, wl_name[c->workload]);
			return -EINVAL;
		}
	}
	switch (c->workload) {
	case SIM_WL_NONE:
		return 0;
	case SIM_WL_CMATRIX:
		if (!c->cmatrix[0]) {
			sim_set_err(s, "workload.type = cmatrix needs workload.file");
			return -EINVAL;
		}
		return sim_cmatrix_load(s, c->cmatrix);
	case SIM_WL_PERMUTATION: {
		if (n < 2)
			return -EINVAL;
		uint32_t *perm = malloc(sizeof(*perm) * n);
		if (!perm)
			return -ENOMEM;
		/* Uniform random derangement by rejection (about e tries on average). */
		for (bool ok = false; !ok;) {
			for (uint32_t i = 0; i < n; i++)
				perm[i] = i;
			for (uint32_t i = n - 1; i > 0; i--) {
				uint32_t j = (uint32_t)util_rng_below(&s->wl_rng, i + 1), t = perm[i];
				perm[i] = perm[j];
				perm[j] = t;
			}
			ok = true;
			for (uint32_t i = 0; i < n && ok; i++)
				ok = perm[i] != i;
		}
		for (uint32_t i = 0; i < n; i++)
			if (!sim_flow_new(s, i, perm[i], S, t0, 0)) {
				free(perm);
				return -ENOMEM;
			}
		free(perm);
		return 0;
	}
	case SIM_WL_INCAST: {
		uint32_t dst = c->incast_dst, k = c->incast_n;
		if (dst >= n || k == 0 || k >= n) {
			sim_set_err(s, "incast: need incast_dst < hosts and 0 < incast_n < hosts");
			return -EINVAL;
		}
		/* Senders: a random subset of the other hosts (partial Fisher-Yates). */
		uint32_t *cand = malloc(sizeof(*cand) * (n - 1));
		if (!cand)
			return -ENOMEM;
		for (uint32_t i = 0, j = 0; i < n; i++)
			if (i != dst)
				cand[j++] = i;
		for (uint32_t i = 0; i < k; i++) {
			uint32_t j = i + (uint32_t)util_rng_below(&s->wl_rng, n - 1 - i), t = cand[i];
			cand[i] = cand[j];
			cand[j] = t;
		}
		for (uint32_t i = 0; i < k; i++)
			if (!sim_flow_new(s, cand[i], dst, S, t0, 0)) {
				free(cand);
				return -ENOMEM;
			}
		free(cand);
		return 0;
	}
	case SIM_WL_ALLTOALL:
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < n; j++)
				if (i != j && !sim_flow_new(s, i, j, S, t0, 0))
					return -ENOMEM;
		return 0;
	case SIM_WL_ALLREDUCE: {
		/* Ring AllReduce: 2(n-1) steps (reduce-scatter then all-gather); in step k rank i
		 * sends one chunk of S/n bytes to rank i+1, once it has received step k-1's chunk
		 * from rank i-1. Flow (i, k) has index k*n + i; trigger id k*n + i + 1. */
		if (n < 2)
			return -EINVAL;
		uint32_t steps = 2 * (n - 1);
		uint64_t chunk = (S + n - 1) / n;
		for (uint32_t k = 0; k < steps; k++)
			for (uint32_t i = 0; i < n; i++) {
				struct sim_flow *f = sim_flow_new(s, i, (i + 1) % n, chunk, t0, 0);
				if (!f)
					return -ENOMEM;
				if (k > 0)
					f->trig_start = k * n + i + 1;
			}
		for (uint32_t k = 1; k < steps; k++)
			for (uint32_t i = 0; i < n; i++) {
				uint32_t id = k * n + i + 1;
				struct sim_trigger *t = sim_trigger_get(s, id, true);
				if (!t || trig_add_target(t, k * n + i))
					return -ENOMEM;
				t->defined = true;
				t->type = SIM_TRIG_ONESHOT;
				t->remaining = 1;
				s->flows[(k - 1) * n + (i + n - 1) % n].trig_recv_done = id;
			}
		return 0;
	}
	}
	return -EINVAL;
}
