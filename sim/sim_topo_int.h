/* sim/sim_topo_int.h: what the topology builder (sim_topo.c) and the topology-file reader and
 * writer (sim_topo_file.c) share: a topology as lists of nodes and links, before any port
 * exists. Not installed; only the sim sources, tests and fuzz harnesses include it. */
#ifndef INCA_SIM_TOPO_INT_H
#define INCA_SIM_TOPO_INT_H

#include <stdint.h>
#include <stdio.h>

#include "sim_int.h"

/* Limits of the data structures: node and port ids are 32 bits, a switch has at most 65535
 * ports; beyond ~16 M hosts or 64 M links a run would not fit in memory anyway. */
#define SIM_TOPO_MAX_HOSTS (1u << 24)
#define SIM_TOPO_MAX_SWITCHES (1u << 24)
#define SIM_TOPO_MAX_LINKS (1u << 26)
#define SIM_TOPO_MAX_PORTS 65535u

/* One link between node ids a and b (hosts 0..H-1, switch j is H+j). Port order follows link
 * order: each link gives a and b their next port. rate_bps 0: speed and latency come from
 * the tier parameters of `tier` (0 host link, 1..3 switch tiers; sim_topo_tier_link). */
struct sim_topo_link {
	uint32_t a, b;
	uint8_t tier;
	uint64_t rate_bps;
	sim_time_ps latency_ps;
};
struct sim_topo_links {
	struct sim_topo_link *v;
	uint32_t n, cap;
};

/* The nodes of a topology: counts, switch tiers and names, host names (NULL: "h<id>"). */
struct sim_topo_nodes {
	uint32_t nhosts, nsw;
	uint8_t *tier;           /* per switch, 1 = edge (ToR, leaf, L1) */
	char (*names)[32];       /* per switch */
	char (*hnames)[32];      /* per host, or NULL */
	double oversub;          /* reported in summary.json */
};

/* Appends a link with speed and latency from the tier parameters. 0 or -ENOMEM. */
int sim_topo_add_link(struct sim_topo_links *l, uint32_t a, uint32_t b, uint8_t tier);
/* Speed and latency of a link of tier t under configuration c: topology.host_* for t = 0,
 * topology.tier<t>_* for t = 1..3 (tier3 for anything above). */
void sim_topo_tier_link(const struct sim_config *c, unsigned t, uint64_t *rate_bps,
			sim_time_ps *latency_ps);
void sim_topo_nodes_free(struct sim_topo_nodes *nd);

/* Size limits of a topology file; NULL stands for the limits above (tests pass smaller ones). */
struct sim_topo_limits {
	uint32_t hosts, switches, links, ports;
};

/* sim_topo_file.c: the topology file (docs/sim.md "Topology files"). Parses f (name is used in
 * messages) into l and nd with every link's speed and latency resolved (defaults from c).
 * On error returns -EINVAL (or -ENOMEM) with "name:line: reason" in err; l and nd are then
 * empty. On success the caller owns l->v and nd (sim_topo_nodes_free). */
int sim_topo_file_parse(const struct sim_config *c, FILE *f, const char *name,
			const struct sim_topo_limits *lim, struct sim_topo_links *l,
			struct sim_topo_nodes *nd, char *err, size_t errlen);
/* The same from the file c->topo_file, the reason in s->err. */
int sim_topo_file_read(struct sim *s, struct sim_topo_links *l, struct sim_topo_nodes *nd);

#endif
