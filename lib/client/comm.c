/* libinca communicator: option validation and defaults, create/destroy, accessors, statistics,
 * logging through the caller's log_fn, and the AllReduce path selection (INC vs. host ring).
 * The transports live in bootstrap.c, ring.c and inc.c. */
#include "client/client.h"

#include <errno.h>
#include <sys/random.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/rtt.h"
#include "wire/auth.h"
#include "wire/wire.h"

void client_log(const struct client_cfg *cfg, int level, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!cfg->log_fn || level > cfg->log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cfg->log_fn(cfg->log_ctx, level, msg);
}

/* A bare IPv4 address (no port), not 0.0.0.0: it is advertised to peers or covered by the
 * ICRC, so it must be the address packets really carry. */
static int parse_ip(const char *s, struct in_addr *out)
{
	struct sockaddr_in sa;

	if (strchr(s, ':') || util_parse_addr(s, 0, &sa) < 0 || sa.sin_addr.s_addr == INADDR_ANY)
		return -EINVAL;
	*out = sa.sin_addr;
	return 0;
}

/* "ip:port" or bare "ip" (default_port); the IP must be concrete. Port 0 allowed only if
 * allow_port0. */
static int parse_endpoint(const char *s, int default_port, bool allow_port0, struct sockaddr_in *out)
{
	if (util_parse_addr(s, default_port, out) < 0 || out->sin_addr.s_addr == INADDR_ANY)
		return -EINVAL;
	if (!allow_port0 && out->sin_port == 0)
		return -EINVAL;
	return 0;
}

int client_cfg_resolve(const struct inca_comm_opts *o, struct client_cfg *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->log_fn = o->log_fn;
	cfg->log_ctx = o->log_ctx;
	cfg->log_level = o->log_level;
	if (o->size < 1 || o->rank < 0 || o->rank >= o->size)
		return -EINVAL;
	cfg->rank = o->rank;
	cfg->size = o->size;

	if (parse_ip(o->host_ip ? o->host_ip : "127.0.0.1", &cfg->host_ip) < 0)
		return -EINVAL;
	if (o->peer_table || o->peer_listener) {
		if (!o->peer_table || !o->peer_listener || o->bootstrap_addr)
			return -EINVAL; /* the table and the listener go together, alone */
		cfg->have_peers = true;
	} else if (o->bootstrap_addr) {
		if (parse_endpoint(o->bootstrap_addr, -1, false, &cfg->bootstrap_sa) < 0)
			return -EINVAL;
		cfg->have_bootstrap = true;
	} else if (o->size > 1) {
		return -EINVAL;
	}

	/* Data-plane settings are validated even without a switch so a bad value never hides. */
	cfg->bsl_bits = o->bsl_bits ? o->bsl_bits : 64;
	cfg->bsl_code = wire_bsl_code(cfg->bsl_bits);
	if (!cfg->bsl_code)
		return -EINVAL;
	if (o->bfr_id) {
		cfg->bfr_id = o->bfr_id;
	} else {
		if (o->rank + 1 > 65535)
			return -EINVAL;
		cfg->bfr_id = (uint16_t)(o->rank + 1);
	}
	if ((cfg->bfr_id - 1u) / cfg->bsl_bits > 255)
		return -EINVAL; /* SI is one byte */
	cfg->si = (uint8_t)((cfg->bfr_id - 1u) / cfg->bsl_bits);
	cfg->tree_id = o->tree_id;
	cfg->key = o->key;
	cfg->switch_qpn =
		o->switch_qpn ? o->switch_qpn : wire_qpn_default(WIRE_QPN_SWITCH, o->tree_id);
	cfg->qpn = o->qpn ? o->qpn : wire_qpn_default(WIRE_QPN_MEMBER, cfg->bfr_id);
	if (cfg->switch_qpn > WIRE_QPN_MAX || cfg->qpn > WIRE_QPN_MAX)
		return -EINVAL;
	cfg->nslots = o->nslots ? o->nslots : 256;
	cfg->window = o->window; /* clamped to nslots when INC opens (the AM may set nslots) */
	cfg->mtu = o->mtu ? o->mtu : 4096;
	{ /* environment, not an option: the same setting for every communicator of a process */
		const char *e = getenv("INCA_BUSY_POLL_US");
		char *end = NULL;
		unsigned long long us = e && *e ? strtoull(e, &end, 10) : CLIENT_BUSY_POLL_US;
		if (e && *e && (*end || us > 1000000))
			return -EINVAL;
		cfg->busy_poll_ns = us * 1000ull;
	}
	{ /* environment too: "0" turns UDP GSO / GRO off on the INC socket (tests, comparisons) */
		const char *g = getenv("INCA_UDP_GSO"), *r = getenv("INCA_UDP_GRO");
		if ((g && *g && strcmp(g, "0") && strcmp(g, "1")) ||
		    (r && *r && strcmp(r, "0") && strcmp(r, "1")))
			return -EINVAL;
		cfg->udp_gso = !(g && !strcmp(g, "0"));
		cfg->udp_gro = !(r && !strcmp(r, "0"));
	}
	if (cfg->mtu < WIRE_MTU_MIN || cfg->mtu > WIRE_MTU_MAX)
		return -EINVAL;
	/* Every data type must fit at least one element per packet. */
	if (wire_max_data(cfg->mtu, 8, cfg->bsl_code) == 0)
		return -EINVAL;
	/* Default: 20 ms until the first RTT sample, then SRTT + 4 RTTVAR down to 2 ms. A value
	 * the caller sets is also the floor (util/rtt.h). */
	cfg->rto_us = o->rto_us ? o->rto_us : UTIL_RTT_INC_INITIAL_US;
	cfg->rto_min_us = o->rto_us ? o->rto_us : UTIL_RTT_INC_FLOOR_US;
	if (o->rto_max_us) {
		if (o->rto_max_us < cfg->rto_us)
			return -EINVAL;
		cfg->rto_max_us = o->rto_max_us;
	} else {
		cfg->rto_max_us = cfg->rto_us > UTIL_RTT_INC_MAX_US ? cfg->rto_us : UTIL_RTT_INC_MAX_US;
	}
	cfg->retx_limit = o->retx_limit ? o->retx_limit : 20;
	cfg->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	if (!(o->drop_rate >= 0.0 && o->drop_rate < 1.0)) /* also rejects NaN */
		return -EINVAL;
	cfg->drop_rate = o->drop_rate;
	cfg->seed = o->seed;
	{ /* INCA_AUTH=off: the environment's form of no_auth (launchers, MPI, scripts) */
		const char *a = getenv("INCA_AUTH");
		if (a && *a && strcmp(a, "on") && strcmp(a, "off"))
			return -EINVAL;
		cfg->no_auth = o->no_auth || (a && !strcmp(a, "off"));
	}
	if (!cfg->no_auth) {
		const char *k = getenv("INCA_AUTH_KEY"), *id = getenv("INCA_AUTH_KEY_ID");
		if (o->auth_key) {
			memcpy(cfg->auth_key, o->auth_key, WIRE_AUTH_KEY_LEN);
			cfg->auth_key_id = o->auth_key_id;
			cfg->auth = true;
		} else if (k && *k) {
			char *end = NULL;
			unsigned long long v = id && *id ? strtoull(id, &end, 0) : 0;
			if (wire_auth_key_parse(k, cfg->auth_key) < 0 || (id && *id && *end) ||
			    v > UINT32_MAX)
				return -EINVAL;
			cfg->auth_key_id = (uint32_t)v;
			cfg->auth = true;
		}
	}

	if (o->switch_addr) {
		if (parse_endpoint(o->switch_addr, WIRE_ROCE_UDP_PORT, false, &cfg->switch_sa) < 0)
			return -EINVAL;
		/* A standalone tree without a key runs unauthenticated only by explicit opt-out:
		 * a forgotten key must not silently mean unprotected results. */
		if (!cfg->auth && !cfg->no_auth) {
			client_log(cfg, 0, "switch_addr without a data-plane key: "
					   "set auth_key/auth_key_id (or INCA_AUTH_KEY/INCA_AUTH_KEY_ID), "
					   "or opt out with no_auth = 1 (INCA_AUTH=off)");
			return -ENOKEY;
		}
		cfg->have_switch = true;
	}
	if (o->data_addr) {
		if (parse_endpoint(o->data_addr, WIRE_ROCE_UDP_PORT, true, &cfg->data_sa) < 0)
			return -EINVAL;
	} else {
		cfg->data_sa.sin_family = AF_INET;
		cfg->data_sa.sin_addr = cfg->host_ip;
		cfg->data_sa.sin_port = htons(WIRE_ROCE_UDP_PORT);
	}

	return 0;
}

/* The job epoch (docs/protocol.md §8 "Job epochs"): the wall clock in seconds, never 0; with
 * several ranks the latest of theirs, agreed by a ring MAX, so every rank sends the same one
 * whichever bootstrap ran. One 4-byte ring collective per communicator. */
static int epoch_agree(struct inca_comm *c)
{
	uint32_t e = (uint32_t)time(NULL);
	int rc = 0;

	if (!e)
		e = 1;
	if (c->cfg.size > 1) {
		c->coll_seq++;
		rc = client_ring_allreduce(c, &e, &e, 1, INCA_UINT32, INCA_MAX);
	}
	c->epoch = e;
	return rc;
}

/* AM path: every rank must take the same path, but each learns its group's verdict on its own
 * stream. Two tiny ring collectives (MIN and MAX of the tree identity) make the ranks agree;
 * any disagreement turns INC off everywhere. */
static int am_agree(struct inca_comm *c)
{
	uint64_t mine = c->inc ? ((uint64_t)c->cfg.tree_id << 32 | c->cfg.key) : 0, lo = mine,
		 hi = mine;
	int rc;

	c->coll_seq++;
	rc = client_ring_allreduce(c, &lo, &lo, 1, INCA_UINT64, INCA_MIN);
	if (rc == 0) {
		c->coll_seq++;
		rc = client_ring_allreduce(c, &hi, &hi, 1, INCA_UINT64, INCA_MAX);
	}
	if (rc < 0)
		return rc;
	if (lo != hi && c->inc) {
		client_log(&c->cfg, 1, "am: ranks disagree on the tree: INC off");
		client_inc_close(c);
	}
	return 0;
}

/* The caller's options as this library's struct: the first struct_size bytes, the rest 0
 * (every field's default). A caller built against a newer header may pass a larger struct if
 * the fields this library does not know are all 0. peer_listener is consumed as soon as it
 * can be read (struct_size covers it), also on failure. */
static int opts_import(const struct inca_comm_opts *in, struct inca_comm_opts *o)
{
	const size_t lib_size = sizeof *o;
	size_t n = in->struct_size;

	memset(o, 0, sizeof *o);
	if (n < INCA_COMM_OPTS_SIZE_MIN)
		return -EINVAL;
	memcpy(o, in, n < lib_size ? n : lib_size);
	o->struct_size = (uint32_t)lib_size;
	for (size_t i = lib_size; i < n; i++) {
		if (((const unsigned char *)in)[i]) {
			inca_peer_listener_close(o->peer_listener);
			return -E2BIG;
		}
	}
	return 0;
}

int client_out_copy(void *out, size_t out_size, const void *src, size_t src_size,
		    size_t min_size)
{
	if (!out || out_size < min_size || out_size == 0)
		return -EINVAL;
	memcpy(out, src, out_size < src_size ? out_size : src_size);
	return 0;
}

int inca_comm_create(const struct inca_comm_opts *user_opts, struct inca_comm **out)
{
	struct inca_comm_opts opts_v, *opts = &opts_v;
	struct inca_comm *c;
	int rc;

	if (!user_opts || !out)
		return -EINVAL;
	*out = NULL;
	rc = opts_import(user_opts, opts);
	if (rc < 0)
		return rc;
	c = calloc(1, sizeof *c);
	if (!c) {
		inca_peer_listener_close(opts->peer_listener);
		return -ENOMEM;
	}
	c->ring_send_fd = c->ring_recv_fd = -1;
	c->boot_listener = opts->peer_listener;
	rc = client_cfg_resolve(opts, &c->cfg);
	if (rc < 0)
		goto fail;
	c->boot_peers = opts->peer_table;
	if (c->cfg.size > 1) {
		c->ring_tmp = malloc(CLIENT_RING_TMP_BYTES);
		if (!c->ring_tmp) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	/* AM path: join the group; on TREE_READY this fills the switch settings. */
	if (opts->am_addr) {
		if (opts->switch_addr) {
			rc = -EINVAL;
			goto fail;
		}
		rc = client_am_start(c, opts);
		if (rc < 0)
			goto fail;
	}
	/* Open the data plane first: a busy UDP port fails fast, before peers wait on us. */
	if (c->cfg.have_switch) {
		rc = client_inc_open(c);
		if (rc < 0)
			goto fail;
	}
	if (c->cfg.size > 1) {
		rc = client_bootstrap(c);
		if (rc < 0)
			goto fail;
	} else {
		uint8_t nonce[8] = { 0 };
		uint64_t t = util_now_ns();

		if (getrandom(nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
			memcpy(nonce, &t, sizeof nonce);
		c->round_base = client_round_base(nonce);
	}
	rc = epoch_agree(c);
	if (rc < 0)
		goto fail;
	if (c->am && c->cfg.size > 1) {
		rc = am_agree(c);
		if (rc < 0)
			goto fail;
	}
	inca_peer_listener_close(c->boot_listener);
	c->boot_listener = NULL;
	c->boot_peers = NULL;
	rc = client_coll_init(c);
	if (rc < 0)
		goto fail;
	client_log(&c->cfg, 2, "rank %d/%d ready (%s)", c->cfg.rank, c->cfg.size,
		   c->inc ? "inc+ring" : "ring");
	*out = c;
	return 0;
fail:
	client_log(&c->cfg, 0, "inca_comm_create: %s", inca_strerror(rc));
	inca_comm_destroy(c);
	return rc;
}

void inca_comm_destroy(struct inca_comm *c)
{
	if (!c)
		return;
	inca_peer_listener_close(c->boot_listener);
	if (c->coll)
		client_coll_free(c); /* stops the nonblocking progress thread first */
	client_am_stop(c);
	client_inc_close(c);
	client_host_close(c); /* host_coll.c: the mesh sockets and staging buffers */
	if (c->ring_send_fd >= 0)
		close(c->ring_send_fd);
	if (c->ring_recv_fd >= 0)
		close(c->ring_recv_fd);
	free(c->ring_tmp);
	free(c->peer_pf);
	free(c);
}

int inca_comm_rank(const struct inca_comm *c)
{
	return c ? c->cfg.rank : -EINVAL;
}

int inca_comm_size(const struct inca_comm *c)
{
	return c ? c->cfg.size : -EINVAL;
}

int inca_comm_get_stats(const struct inca_comm *c, struct inca_comm_stats *out, size_t out_size)
{
	if (!c)
		return -EINVAL;
	return client_out_copy(out, out_size, &c->stats, sizeof c->stats,
			       CLIENT_END_OF(struct inca_comm_stats, rx_nacks));
}

int inca_comm_get_auth_stats(const struct inca_comm *c, struct inca_auth_stats *out,
			     size_t out_size)
{
	struct inca_auth_stats s;

	if (!c)
		return -EINVAL;
	client_inc_auth_stats(c, &s);
	return client_out_copy(out, out_size, &s, sizeof s,
			       CLIENT_END_OF(struct inca_auth_stats, rx_bad_mac));
}

int inca_comm_get_io_stats(const struct inca_comm *c, struct inca_io_stats *out, size_t out_size)
{
	struct inca_io_stats s;

	if (!c)
		return -EINVAL;
	client_inc_io_stats(c, &s);
	return client_out_copy(out, out_size, &s, sizeof s,
			       CLIENT_END_OF(struct inca_io_stats, rx_gro_bufs));
}
