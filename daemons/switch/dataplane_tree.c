/* inca-switch data plane: the runtime of a tree built from its configuration (the tree model):
 * neighbour table and hash, A-BM, BIFT, the engine's agg_tree_cfg (derived in one place,
 * tree_agg_cfg), one engine shard and QP counters per worker; tree sets and their RCU-like
 * replacement by NETCONF edits. */
#include "dataplane_int.h"

#include "wire/auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- tree runtime */

/* The engine's view of a tree (lib/agg): every field it takes from the configuration, plus the
 * tables built from it. The one place the model maps onto agg_tree_cfg; the shard fields are
 * set per worker. */
static struct agg_tree_cfg tree_agg_cfg(const struct ctl_tree *ct, const struct sw_tree *t)
{
	return (struct agg_tree_cfg){
		.tree_id = ct->id,
		.rkey = ct->key,
		.nslots = ct->slots,
		.slot_bytes = ct->slot_bytes,
		.bsl_bits = ct->bsl_bits,
		.si = ct->si,
		.abm = t->abm,
		.root = ct->root,
		.parent_nbr = ct->has_parent ? t->nnbr - 1 : AGG_NBR_NONE,
		.own_bfr_id = ct->bfr_id,
		.nbift = t->nbift,
		.bift = t->bift,
		.deterministic = ct->deterministic,
		.check_sender = ct->check_sender,
		.pkey = ct->pkey,
		.dtype_mask = ct->dtype_mask,
		.op_mask = ct->op_mask,
	};
}

/* Neighbours, hash, A-BM and BIFT of one tree (no engine yet). t->conf must be set. */
static int tree_build_tables(struct sw_tree *t, char *err, size_t cap)
{
	const struct ctl_tree *ct = &t->conf;
	size_t bsl_bytes = ct->bsl_bits / 8, nbift = 0, nbits = 0, k = 0;
	uint32_t hsize = 4;

	t->nnbr = (uint32_t)(ct->nmembers + ct->nchildren + (ct->has_parent ? 1 : 0));
	for (size_t i = 0; i < ct->nchildren; i++)
		nbits += ct->children[i].nbfr;
	nbits += ct->nmembers;
	while (hsize < 2 * t->nnbr)
		hsize <<= 1;
	t->hmask = hsize - 1;
	t->nbr = calloc(t->nnbr, sizeof *t->nbr);
	t->psn = aligned_alloc(64, t->nnbr * sizeof *t->psn);
	t->hash = calloc(hsize, sizeof *t->hash);
	t->abm = calloc(1, bsl_bytes);
	/* one F-BM per member, one per child */
	t->fbm = calloc(ct->nmembers + ct->nchildren + 1, bsl_bytes);
	t->bift = calloc(nbits + 1, sizeof *t->bift);
	if (!t->nbr || !t->psn || !t->hash || !t->abm || !t->fbm || !t->bift) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->nnbr; i++) {
		atomic_init(&t->psn[i].tx_next, 0);
		atomic_init(&t->psn[i].rx_next, UINT32_MAX);
	}
	for (size_t i = 0; i < ct->nmembers; i++, k++) {
		const struct ctl_member *m = &ct->members[i];
		unsigned bp = wire_bier_bp(m->bfr_id, ct->bsl_bits, ct->si);
		uint8_t *fbm = t->fbm + k * bsl_bytes;

		t->nbr[k] = (struct sw_nbr){ SW_NBR_MEMBER, m->bfr_id, m->addr, m->qpn };
		if (!bp) {
			snprintf(err, cap, "tree %u: BFR-id %u not in si %u", ct->id, m->bfr_id, ct->si);
			return -EINVAL;
		}
		wire_bier_set(t->abm, bsl_bytes, bp);
		wire_bier_set(fbm, bsl_bytes, bp);
		t->bift[nbift++] = (struct agg_bift_entry){ .bp = bp, .nbr = (uint32_t)k, .fbm = fbm };
	}
	for (size_t i = 0; i < ct->nchildren; i++, k++) {
		const struct ctl_child *c = &ct->children[i];
		uint8_t *fbm = t->fbm + k * bsl_bytes;

		t->nbr[k] = (struct sw_nbr){ SW_NBR_CHILD, 0, c->addr, c->qpn };
		for (size_t j = 0; j < c->nbfr; j++) {
			unsigned bp = wire_bier_bp(c->bfr_ids[j], ct->bsl_bits, ct->si);
			if (!bp) {
				snprintf(err, cap, "tree %u: BFR-id %u not in si %u", ct->id,
					 c->bfr_ids[j], ct->si);
				return -EINVAL;
			}
			wire_bier_set(t->abm, bsl_bytes, bp);
			wire_bier_set(fbm, bsl_bytes, bp);
		}
		for (size_t j = 0; j < c->nbfr; j++)
			t->bift[nbift++] = (struct agg_bift_entry){
				.bp = wire_bier_bp(c->bfr_ids[j], ct->bsl_bits, ct->si),
				.nbr = (uint32_t)k,
				.fbm = fbm,
			};
	}
	if (ct->has_parent) {
		t->nbr[k] = (struct sw_nbr){ SW_NBR_PARENT, 0, ct->parent, ct->parent_qpn };
		k++;
	}
	for (uint32_t i = 0; i < t->nnbr; i++) {
		uint32_t h = sw_nbr_hash(t->nbr[i].addr.sin_addr.s_addr, t->nbr[i].addr.sin_port,
				      t->hmask);
		while (t->hash[h])
			h = (h + 1) & t->hmask;
		t->hash[h] = i + 1;
	}
	t->nbift = nbift;
	t->acfg = tree_agg_cfg(ct, t);
	return 0;
}

static void tree_free(struct sw_tree *t)
{
	if (!t)
		return;
	for (unsigned i = 0; t->w && i < t->nworkers; i++) {
		agg_tree_destroy(t->w[i].agg);
		wire_mac_free(t->w[i].mac);
		free(t->w[i].replay);
		free(t->w[i].qp);
		free(t->w[i].snap_qp);
	}
	free(t->w);
	ctl_tree_free(&t->conf);
	free(t->nbr);
	free(t->psn);
	free(t->hash);
	free(t->abm);
	free(t->fbm);
	free(t->bift);
	free(t);
}

/* A complete runtime tree: tables plus one engine shard and QP counters per worker. */
int sw_tree_new(const struct ctl_tree *ct, unsigned nworkers, struct sw_tree **out,
		    char *err, size_t cap)
{
	struct sw_tree *t = calloc(1, sizeof *t);
	int rc;

	if (!t) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	if (ctl_tree_copy(&t->conf, ct) < 0) {
		free(t);
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	rc = tree_build_tables(t, err, cap);
	if (rc < 0)
		goto fail;
	t->nworkers = nworkers;
	t->max_sends = 1;
	t->w = calloc(nworkers, sizeof *t->w);
	if (!t->w) {
		rc = -ENOMEM;
		snprintf(err, cap, "out of memory");
		goto fail;
	}
	for (unsigned wi = 0; wi < nworkers; wi++) {
		struct agg_tree_cfg tc = t->acfg;

		tc.shard = (uint16_t)wi;
		tc.nshards = (uint16_t)nworkers;
		t->w[wi].qp = calloc(t->nnbr ? t->nnbr : 1, sizeof *t->w[wi].qp);
		t->w[wi].snap_qp = calloc(t->nnbr ? t->nnbr : 1, sizeof *t->w[wi].snap_qp);
		if (!t->w[wi].qp || !t->w[wi].snap_qp) {
			rc = -ENOMEM;
			snprintf(err, cap, "out of memory");
			goto fail;
		}
		if (t->conf.auth && (rc = wire_mac_new(&t->w[wi].mac, t->conf.auth_key)) < 0) {
			snprintf(err, cap, "tree %u: MAC key setup failed: %s", tc.tree_id,
				 strerror(-rc));
			goto fail;
		}
		if (t->conf.auth &&
		    !(t->w[wi].replay = calloc(t->nnbr ? t->nnbr : 1, sizeof *t->w[wi].replay))) {
			rc = -ENOMEM;
			snprintf(err, cap, "out of memory");
			goto fail;
		}
		rc = agg_tree_create(&tc, &t->w[wi].agg);
		if (rc < 0) {
			snprintf(err, cap, "tree %u: engine refused the configuration: %s",
				 tc.tree_id, strerror(-rc));
			goto fail;
		}
		if (agg_tree_max_sends(t->w[wi].agg) > t->max_sends)
			t->max_sends = agg_tree_max_sends(t->w[wi].agg);
	}
	atomic_init(&t->auth_ctr, wire_auth_ctr_start());
	*out = t;
	return 0;
fail:
	tree_free(t);
	return rc < 0 ? rc : -EINVAL;
}

void sw_treeset_free(struct sw_treeset *s, bool free_trees)
{
	if (!s)
		return;
	for (size_t i = 0; free_trees && i < s->ntrees; i++)
		tree_free(s->trees[i]);
	free(s->trees);
	free(s->index);
	free(s);
}

struct sw_treeset *sw_treeset_alloc(size_t n)
{
	struct sw_treeset *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->trees = calloc(n ? n : 1, sizeof *s->trees);
	s->index = malloc(65536 * sizeof *s->index);
	if (!s->trees || !s->index) {
		sw_treeset_free(s, false);
		return NULL;
	}
	memset(s->index, 0xff, 65536 * sizeof *s->index);
	s->max_sends = 1;
	return s;
}

void sw_treeset_add(struct sw_treeset *s, struct sw_tree *t)
{
	s->index[t->conf.id] = (uint16_t)s->ntrees;
	s->trees[s->ntrees++] = t;
	if (t->max_sends > s->max_sends)
		s->max_sends = t->max_sends;
}

/* ---------------------------------------------------------------- tree set updates */

void sw_switch_lock(struct sw_switch *sw)
{
	pthread_mutex_lock(&sw->ctl_lock);
}

void sw_switch_unlock(struct sw_switch *sw)
{
	pthread_mutex_unlock(&sw->ctl_lock);
}

const struct sw_treeset *sw_switch_trees(struct sw_switch *sw)
{
	return atomic_load_explicit(&sw->set, memory_order_acquire);
}

/* Make every running worker pass the top of its loop soon: one blocked waiting for traffic
 * would otherwise wait out SW_RX_TIMEOUT_MS (a tree push or a stats read through NETCONF
 * then took up to 50 ms). A worker that is busy just loops once more. */
void sw_wake_workers(struct sw_switch *sw)
{
	const uint64_t one = 1;

	for (unsigned i = 0; i < sw->nworkers; i++)
		if (sw->w[i].started && sw->w[i].wake_fd >= 0)
			(void)!write(sw->w[i].wake_fd, &one, sizeof one);
}

/* Grace period: every running worker must pass the top of its loop after the publication
 * (epoch e) before anything only the old set referenced may be freed. A worker passes it
 * within one batch once woken (and at least every SW_RX_TIMEOUT_MS anyway). */
static void wait_quiescent(struct sw_switch *sw, uint64_t e)
{
	sw_wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct sw_worker *w = &sw->w[i];

		if (!w->started)
			continue;
		while (atomic_load(&w->qs_epoch) < e && !atomic_load(&w->exited)) {
			struct timespec ts = { 0, 200 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

int sw_switch_set_trees(struct sw_switch *sw, const struct ctl_tree *trees, size_t n,
			char *err, size_t cap)
{
	struct sw_treeset *old, *nset;
	bool *kept = NULL;
	int rc = 0;
	uint64_t e;

	sw_switch_lock(sw);
	old = atomic_load(&sw->set);
	nset = sw_treeset_alloc(n);
	kept = calloc(old->ntrees ? old->ntrees : 1, sizeof *kept);
	if (!nset || !kept) {
		snprintf(err, cap, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		uint16_t oi = old->index[trees[i].id];
		struct sw_tree *t;

		if (nset->index[trees[i].id] != UINT16_MAX) {
			snprintf(err, cap, "tree %u given twice", trees[i].id);
			rc = -EINVAL;
			goto fail;
		}
		if (oi != UINT16_MAX && ctl_tree_equal(&old->trees[oi]->conf, &trees[i])) {
			kept[oi] = true; /* unchanged: keep engine state, PSNs, counters */
			sw_treeset_add(nset, old->trees[oi]);
			continue;
		}
		rc = sw_tree_new(&trees[i], sw->nworkers, &t, err, cap);
		if (rc < 0)
			goto fail;
		sw_treeset_add(nset, t);
	}
	/* Publish; workers pick the new set up at their next batch. */
	atomic_store(&sw->set, nset);
	e = atomic_fetch_add(&sw->epoch, 1) + 1;
	wait_quiescent(sw, e);
	for (size_t i = 0; i < old->ntrees; i++)
		if (!kept[i])
			tree_free(old->trees[i]);
	sw_treeset_free(old, false);
	free(kept);
	sw_switch_unlock(sw);
	return 0;
fail:
	/* Free only the trees built here (the kept ones belong to the old set). */
	for (size_t i = 0; nset && i < nset->ntrees; i++) {
		uint16_t oi = old->index[nset->trees[i]->conf.id];
		if (oi == UINT16_MAX || old->trees[oi] != nset->trees[i])
			tree_free(nset->trees[i]);
	}
	sw_treeset_free(nset, false);
	free(kept);
	sw_switch_unlock(sw);
	return rc;
}

