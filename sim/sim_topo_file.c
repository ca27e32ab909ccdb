/* sim/sim_topo_file.c: topology files (topology.type = file): a line-based text format of
 * switches, hosts and links, read into the node and link lists that the generators of
 * sim_topo.c emit (so routing, ECMP and spraying work unchanged), and written back from a
 * built simulation (sim_write_topology). The format is documented in docs/sim.md
 * "Topology files"; every refusal names the file, the line and the reason. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sim_topo_int.h"

#define TF_LINE_MAX 1023       /* characters per line */
#define TF_TOKENS_MAX 8
#define TF_TIER_MAX 255
#define TF_SW 0x80000000u      /* node reference while parsing: switch index | TF_SW, or host index */
#define TF_NOT_GIVEN SIM_TIME_NEVER

struct tf_node {
	char name[32];
	uint32_t line;           /* where it was declared */
	uint32_t link_line;      /* host: line of its link, 0 = none yet */
	uint32_t degree;         /* switch: ports so far */
	uint8_t tier;            /* switch: tier=N, 0 = derived from the distance to hosts */
	bool has_host;           /* switch: an edge switch */
};

struct tf_parser {
	const struct sim_config *c;
	const char *name;
	uint32_t line;
	char *err;
	size_t errlen;
	struct tf_node *host, *sw;
	uint32_t nh, ns, hcap, scap;
	uint32_t *ht;            /* names: open addressing, reference + 1 (0 = empty) */
	uint32_t htcap, htn;
	struct sim_topo_links l; /* a, b: references until the end of the parse */
	struct sim_topo_limits lim;
};

static int tf_err(struct tf_parser *p, uint32_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int tf_err(struct tf_parser *p, uint32_t line, const char *fmt, ...)
{
	int n = line ? snprintf(p->err, p->errlen, "%s:%u: ", p->name, line)
		     : snprintf(p->err, p->errlen, "%s: ", p->name);
	if (n >= 0 && (size_t)n < p->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static struct tf_node *tf_ref(struct tf_parser *p, uint32_t ref)
{
	return ref & TF_SW ? &p->sw[ref & ~TF_SW] : &p->host[ref];
}

/* ---- names ------------------------------------------------------------------------------- */
static uint64_t tf_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a, then mixed */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return sim_mix64(h);
}

/* Slot of name in the table: its entry, or the empty slot where it goes. */
static uint32_t *tf_slot(struct tf_parser *p, const char *name)
{
	size_t n = strlen(name);
	uint32_t mask = p->htcap - 1, i = (uint32_t)tf_hash(name, n) & mask;
	while (p->ht[i] && strcmp(tf_ref(p, p->ht[i] - 1)->name, name))
		i = (i + 1) & mask;
	return &p->ht[i];
}

static int tf_grow_names(struct tf_parser *p)
{
	if (2 * (p->htn + 1) <= p->htcap)
		return 0;
	uint32_t cap = p->htcap ? p->htcap * 2 : 1024;
	uint32_t *old = p->ht, oldcap = p->htcap;
	p->ht = calloc(cap, sizeof(*p->ht));
	if (!p->ht) {
		p->ht = old;
		return -ENOMEM;
	}
	p->htcap = cap;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i])
			*tf_slot(p, tf_ref(p, old[i] - 1)->name) = old[i];
	free(old);
	return 0;
}

static bool tf_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 31 || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-' || ch == '.'))
			return false;
	}
	return true;
}

/* ---- values ------------------------------------------------------------------------------ */
static bool tf_dbl(const char *v, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (end == v || *end || errno || !isfinite(d) || d < lo || d > hi)
		return false;
	*out = d;
	return true;
}

static bool tf_u32(const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t x = 0;
	if (!*v)
		return false;
	for (const char *q = v; *q; q++) {
		if (*q < '0' || *q > '9' || x > hi)
			return false;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	if (x < lo || x > hi)
		return false;
	*out = (uint32_t)x;
	return true;
}

/* ---- lines ------------------------------------------------------------------------------- */
static int tf_node_decl(struct tf_parser *p, char **tok, int nt, bool is_sw)
{
	const char *kw = is_sw ? "switch" : "host";
	if (nt < 2)
		return tf_err(p, p->line, "'%s' needs a name: %s NAME%s", kw, kw, is_sw ? " [tier=N]" : "");
	if (!tf_name_ok(tok[1]))
		return tf_err(p, p->line, "bad name '%.40s': 1 to 31 characters of A-Z a-z 0-9 _ . - "
			      "(not starting with -)", tok[1]);
	if (!strcmp(tok[1], "all"))
		return tf_err(p, p->line, "the name 'all' is reserved (trace.links = all)");
	uint8_t tier = 0;
	for (int i = 2; i < nt; i++) {
		uint32_t t;
		if (!is_sw)
			return tf_err(p, p->line, "unexpected '%.40s': a host line is 'host NAME'", tok[i]);
		if (strncmp(tok[i], "tier=", 5))
			return tf_err(p, p->line, "unexpected '%.40s': a switch line is 'switch NAME [tier=N]'",
				      tok[i]);
		if (tier)
			return tf_err(p, p->line, "tier given twice");
		if (!tf_u32(tok[i] + 5, 1, TF_TIER_MAX, &t))
			return tf_err(p, p->line, "bad tier '%.40s': an integer from 1 (edge) to %u",
				      tok[i] + 5, TF_TIER_MAX);
		tier = (uint8_t)t;
	}
	if (is_sw ? p->ns >= p->lim.switches : p->nh >= p->lim.hosts)
		return tf_err(p, p->line, "too many %s (at most %u)", is_sw ? "switches" : "hosts",
			      is_sw ? p->lim.switches : p->lim.hosts);
	if (tf_grow_names(p))
		return -ENOMEM;
	uint32_t *slot = tf_slot(p, tok[1]);
	if (*slot)
		return tf_err(p, p->line, "duplicate name '%s' (first declared at line %u)", tok[1],
			      tf_ref(p, *slot - 1)->line);
	struct tf_node **v = is_sw ? &p->sw : &p->host;
	uint32_t *n = is_sw ? &p->ns : &p->nh, *cap = is_sw ? &p->scap : &p->hcap;
	if (*n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 64;
		struct tf_node *nv = realloc(*v, sizeof(**v) * nc);
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	struct tf_node *d = &(*v)[*n];
	memset(d, 0, sizeof(*d));
	strcpy(d->name, tok[1]);
	d->line = p->line;
	d->tier = tier;
	*slot = (is_sw ? *n | TF_SW : *n) + 1;
	p->htn++;
	(*n)++;
	return 0;
}

static int tf_link(struct tf_parser *p, char **tok, int nt)
{
	if (nt < 3)
		return tf_err(p, p->line, "'link' needs two nodes: link A B [gbps=G] [latency_ns=L] [count=N]");
	uint32_t ref[2];
	for (int i = 0; i < 2; i++) {
		uint32_t e = p->htcap ? *tf_slot(p, tok[1 + i]) : 0;
		if (!e)
			return tf_err(p, p->line, "unknown node '%.40s' (declare it with a switch or host "
				      "line before the links that use it)", tok[1 + i]);
		ref[i] = e - 1;
	}
	if (ref[0] == ref[1])
		return tf_err(p, p->line, "self-loop: link from '%s' to itself", tok[1]);
	if (!(ref[0] & TF_SW) && !(ref[1] & TF_SW))
		return tf_err(p, p->line, "link between two hosts '%s' and '%s': a host links to a switch",
			      tok[1], tok[2]);
	double gbps = 0, ns = -1;
	uint32_t count = 0;
	for (int i = 3; i < nt; i++) {
		const char *eq = strchr(tok[i], '=');
		const char *v = eq ? eq + 1 : "";
		size_t kl = eq ? (size_t)(eq - tok[i]) : strlen(tok[i]);
		if (kl == 4 && !strncmp(tok[i], "gbps", 4)) {
			if (gbps)
				return tf_err(p, p->line, "gbps given twice");
			if (!tf_dbl(v, 1, 3200, &gbps))
				return tf_err(p, p->line, "bad gbps '%.40s': a number from 1 to 3200", v);
		} else if (kl == 10 && !strncmp(tok[i], "latency_ns", 10)) {
			if (ns >= 0)
				return tf_err(p, p->line, "latency_ns given twice");
			if (!tf_dbl(v, 0, 1e9, &ns))
				return tf_err(p, p->line, "bad latency_ns '%.40s': a number from 0 to 1e9", v);
		} else if (kl == 5 && !strncmp(tok[i], "count", 5)) {
			if (count)
				return tf_err(p, p->line, "count given twice");
			if (!tf_u32(v, 1, p->lim.ports, &count))
				return tf_err(p, p->line, "bad count '%.40s': an integer from 1 to %u", v,
					      p->lim.ports);
		} else {
			return tf_err(p, p->line, "unknown option '%.40s' (expected gbps=, latency_ns= or "
				      "count=)", tok[i]);
		}
	}
	if (!count)
		count = 1;
	for (int i = 0; i < 2; i++) {
		struct tf_node *d = tf_ref(p, ref[i]);
		if (ref[i] & TF_SW) {
			if ((uint64_t)d->degree + count > p->lim.ports)
				return tf_err(p, p->line, "switch '%s' would have more than %u ports", d->name,
					      p->lim.ports);
			continue;
		}
		if (d->link_line)
			return tf_err(p, p->line, "host '%s' already has a link (line %u): hosts are "
				      "single-homed", d->name, d->link_line);
		if (count > 1)
			return tf_err(p, p->line, "count=%u on the link of host '%s': hosts are "
				      "single-homed", count, d->name);
	}
	if ((uint64_t)p->l.n + count > p->lim.links)
		return tf_err(p, p->line, "too many links (at most %u)", p->lim.links);
	for (int i = 0; i < 2; i++) {
		struct tf_node *d = tf_ref(p, ref[i]);
		if (ref[i] & TF_SW) {
			d->degree += count;
			if (!(ref[1 - i] & TF_SW))
				d->has_host = true;
		} else {
			d->link_line = p->line;
		}
	}
	for (uint32_t k = 0; k < count; k++) {
		if (sim_topo_add_link(&p->l, ref[0], ref[1], 0))
			return -ENOMEM;
		struct sim_topo_link *lk = &p->l.v[p->l.n - 1];
		lk->rate_bps = gbps ? (uint64_t)(gbps * 1e9 + 0.5) : 0;
		lk->latency_ps = ns >= 0 ? (sim_time_ps)(ns * 1000 + 0.5) : TF_NOT_GIVEN;
	}
	return 0;
}

static int tf_line(struct tf_parser *p, char *s, size_t len)
{
	size_t chars = len && s[len - 1] == '\n' ? len - 1 : len;
	if (chars > TF_LINE_MAX)
		return tf_err(p, p->line, "line longer than %d characters", TF_LINE_MAX);
	if (memchr(s, 0, len))
		return tf_err(p, p->line, "NUL byte in the line");
	char *hash = strchr(s, '#');
	if (hash)
		*hash = 0;
	char *tok[TF_TOKENS_MAX];
	int nt = 0;
	char *save = NULL;
	const char *blanks = " \t\r\n\v\f";
	for (char *q = strtok_r(s, blanks, &save); q; q = strtok_r(NULL, blanks, &save)) {
		if (nt == TF_TOKENS_MAX)
			return tf_err(p, p->line, "too many fields (at most %d)", TF_TOKENS_MAX);
		tok[nt++] = q;
	}
	if (!nt)
		return 0;
	if (!strcmp(tok[0], "switch"))
		return tf_node_decl(p, tok, nt, true);
	if (!strcmp(tok[0], "host"))
		return tf_node_decl(p, tok, nt, false);
	if (!strcmp(tok[0], "link"))
		return tf_link(p, tok, nt);
	return tf_err(p, p->line, "unknown keyword '%.40s' (expected switch, host or link)", tok[0]);
}

/* ---- after the last line: connectivity, tiers, numbering ----------------------------------- */
/* Switches in breadth-first order over switch-to-switch links, from the sources already in
 * queue[0 .. *qt) (dist set to 0 there); dist[] of unreached switches stays UINT32_MAX. */
static void tf_bfs(const uint32_t *off, const uint32_t *adj, uint32_t *dist, uint32_t *queue,
		   uint32_t qt)
{
	for (uint32_t qh = 0; qh < qt; qh++) {
		uint32_t u = queue[qh];
		for (uint32_t k = off[u]; k < off[u + 1]; k++)
			if (dist[adj[k]] == UINT32_MAX) {
				dist[adj[k]] = dist[u] + 1;
				queue[qt++] = adj[k];
			}
	}
}

static int tf_finish(struct tf_parser *p, struct sim_topo_nodes *nd)
{
	if (!p->nh)
		return tf_err(p, 0, "no hosts (declare them with 'host NAME' and link each to a switch)");
	for (uint32_t i = 0; i < p->nh; i++)
		if (!p->host[i].link_line)
			return tf_err(p, p->host[i].line, "host '%s' has no link (each host needs exactly "
				      "one link to a switch)", p->host[i].name);
	uint32_t S = p->ns, H = p->nh;
	uint32_t *off = calloc((size_t)S + 1, sizeof(*off)), *dist = malloc(sizeof(*dist) * S);
	uint32_t *queue = malloc(sizeof(*queue) * S), *adj = NULL;
	int rc = -ENOMEM;
	if (!off || !dist || !queue)
		goto out;
	/* Switch-to-switch adjacency (CSR). */
	uint64_t nadj = 0;
	for (uint32_t i = 0; i < p->l.n; i++)
		if ((p->l.v[i].a & TF_SW) && (p->l.v[i].b & TF_SW)) {
			off[(p->l.v[i].a & ~TF_SW) + 1]++;
			off[(p->l.v[i].b & ~TF_SW) + 1]++;
			nadj += 2;
		}
	for (uint32_t j = 0; j < S; j++)
		off[j + 1] += off[j];
	if (!(adj = malloc(sizeof(*adj) * (nadj ? nadj : 1))))
		goto out;
	{
		uint32_t *fill = dist; /* borrowed as fill pointers */
		memcpy(fill, off, sizeof(*fill) * S);
		for (uint32_t i = 0; i < p->l.n; i++) {
			uint32_t a = p->l.v[i].a, b = p->l.v[i].b;
			if ((a & TF_SW) && (b & TF_SW)) {
				adj[fill[a & ~TF_SW]++] = b & ~TF_SW;
				adj[fill[b & ~TF_SW]++] = a & ~TF_SW;
			}
		}
	}
	/* Connected: every switch reachable from the switch of the first host. */
	uint32_t first = UINT32_MAX;
	for (uint32_t i = 0; i < p->l.n && first == UINT32_MAX; i++)
		if (p->l.v[i].a == 0 || p->l.v[i].b == 0)
			first = (p->l.v[i].a == 0 ? p->l.v[i].b : p->l.v[i].a) & ~TF_SW;
	for (uint32_t j = 0; j < S; j++)
		dist[j] = UINT32_MAX;
	dist[first] = 0;
	queue[0] = first;
	tf_bfs(off, adj, dist, queue, 1);
	for (uint32_t j = 0; j < S; j++)
		if (dist[j] == UINT32_MAX) {
			rc = tf_err(p, p->sw[j].line, "switch '%s' is not connected to the rest of the fabric "
				    "(no path to host '%s')", p->sw[j].name, p->host[0].name);
			goto out;
		}
	/* Tiers: given, or 1 + hops to the nearest edge switch. */
	uint32_t qt = 0;
	for (uint32_t j = 0; j < S; j++) {
		dist[j] = p->sw[j].has_host ? 0 : UINT32_MAX;
		if (p->sw[j].has_host)
			queue[qt++] = j;
	}
	tf_bfs(off, adj, dist, queue, qt);
	if (!(nd->tier = malloc(S)) || !(nd->names = malloc(sizeof(*nd->names) * S)) ||
	    !(nd->hnames = malloc(sizeof(*nd->hnames) * H)))
		goto out;
	for (uint32_t j = 0; j < S; j++) {
		uint32_t t = p->sw[j].tier ? p->sw[j].tier : dist[j] + 1;
		nd->tier[j] = (uint8_t)(t > TF_TIER_MAX ? TF_TIER_MAX : t);
		memcpy(nd->names[j], p->sw[j].name, 32);
	}
	for (uint32_t i = 0; i < H; i++)
		memcpy(nd->hnames[i], p->host[i].name, 32);
	/* Node ids (hosts 0..H-1, switch j is H+j), link tiers, default speeds. Oversubscription:
	 * the largest ratio of host to uplink capacity over the edge switches. */
	double *hbps = calloc(S, sizeof(double)), *ubps = calloc(S, sizeof(double));
	if (!hbps || !ubps) {
		free(hbps);
		free(ubps);
		goto out;
	}
	for (uint32_t i = 0; i < p->l.n; i++) {
		struct sim_topo_link *lk = &p->l.v[i];
		bool sa = lk->a & TF_SW, sb = lk->b & TF_SW;
		uint32_t ia = lk->a & ~TF_SW, ib = lk->b & ~TF_SW;
		lk->tier = !sa || !sb ? 0 : nd->tier[ia] < nd->tier[ib] ? nd->tier[ia] : nd->tier[ib];
		uint64_t rate;
		sim_time_ps lat;
		sim_topo_tier_link(p->c, lk->tier, &rate, &lat);
		if (!lk->rate_bps)
			lk->rate_bps = rate;
		if (lk->latency_ps == TF_NOT_GIVEN)
			lk->latency_ps = lat;
		if (sa && sb) {
			ubps[ia] += (double)lk->rate_bps;
			ubps[ib] += (double)lk->rate_bps;
		} else {
			hbps[sa ? ia : ib] += (double)lk->rate_bps;
		}
		lk->a = sa ? H + ia : ia;
		lk->b = sb ? H + ib : ib;
	}
	nd->oversub = 0;
	for (uint32_t j = 0; j < S; j++)
		if (hbps[j] > 0 && ubps[j] > 0 && hbps[j] / ubps[j] > nd->oversub)
			nd->oversub = hbps[j] / ubps[j];
	if (nd->oversub == 0)
		nd->oversub = 1; /* no edge switch with uplinks: a single switch */
	free(hbps);
	free(ubps);
	nd->nhosts = H;
	nd->nsw = S;
	rc = 0;
out:
	free(off);
	free(dist);
	free(queue);
	free(adj);
	return rc;
}

int sim_topo_file_parse(const struct sim_config *c, FILE *f, const char *name,
			const struct sim_topo_limits *lim, struct sim_topo_links *l,
			struct sim_topo_nodes *nd, char *err, size_t errlen)
{
	static const struct sim_topo_limits max = { SIM_TOPO_MAX_HOSTS, SIM_TOPO_MAX_SWITCHES,
		SIM_TOPO_MAX_LINKS, SIM_TOPO_MAX_PORTS };
	struct tf_parser p = { .c = c, .name = name, .err = err, .errlen = errlen,
			       .lim = lim ? *lim : max };
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	memset(nd, 0, sizeof(*nd));
	memset(l, 0, sizeof(*l));
	while (!rc && (n = getline(&buf, &cap, f)) >= 0) {
		p.line++;
		rc = tf_line(&p, buf, (size_t)n);
	}
	if (!rc && ferror(f))
		rc = tf_err(&p, 0, "read error");
	if (!rc)
		rc = tf_finish(&p, nd);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory reading the topology", name);
	free(buf);
	free(p.host);
	free(p.sw);
	free(p.ht);
	if (rc) {
		free(p.l.v);
		sim_topo_nodes_free(nd);
		return rc;
	}
	*l = p.l;
	return 0;
}

int sim_topo_file_read(struct sim *s, struct sim_topo_links *l, struct sim_topo_nodes *nd)
{
	const char *path = s->cfg.topo_file;
	if (!path[0]) {
		sim_set_err(s, "topology.type = file needs topology.file (the topology file to read)");
		return -EINVAL;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(s->err, sizeof(s->err), "topology.file: cannot open %.200s: %s", path,
			 strerror(errno));
		return -ENOENT;
	}
	int rc = sim_topo_file_parse(&s->cfg, f, path, NULL, l, nd, s->err, sizeof(s->err));
	fclose(f);
	return rc;
}

/* ---- writing ----------------------------------------------------------------------------- */
int sim_write_topology(const struct sim *s, FILE *f)
{
	fprintf(f, "# inca-sim topology (docs/sim.md \"Topology files\"): %u hosts, %u switches, "
		   "%u links.\n# Host ids follow the order of the host lines, ports the order of the "
		   "link lines.\n", s->nhosts, s->nsw, s->nlinks);
	for (uint32_t j = 0; j < s->nsw; j++)
		fprintf(f, "switch %s tier=%u\n", s->sws[j].n.name, s->sws[j].n.tier);
	for (uint32_t i = 0; i < s->nhosts; i++)
		fprintf(f, "host %s\n", s->hosts[i].n.name);
	/* Link i has ports 2i (its first node) and 2i+1; consecutive identical links are
	 * parallel links, written once with count=. */
	for (uint32_t i = 0; i < s->nlinks;) {
		const struct sim_port *pa = s->ports[2 * i], *pb = s->ports[2 * i + 1];
		uint32_t n = 1;
		while (i + n < s->nlinks) {
			const struct sim_port *qa = s->ports[2 * (i + n)], *qb = s->ports[2 * (i + n) + 1];
			if (qa->node != pa->node || qb->node != pb->node || qa->rate_bps != pa->rate_bps ||
			    qa->latency_ps != pa->latency_ps || n == SIM_TOPO_MAX_PORTS)
				break;
			n++;
		}
		fprintf(f, "link %s %s gbps=%.15g latency_ns=%.15g", pa->node->name, pb->node->name,
			(double)pa->rate_bps / 1e9, (double)pa->latency_ps / 1000.0);
		if (n > 1)
			fprintf(f, " count=%u", n);
		fputc('\n', f);
		i += n;
	}
	return ferror(f) ? -EIO : 0;
}
