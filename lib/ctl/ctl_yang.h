/* lib/ctl: the YANG modules the INCA control plane speaks (the .yang files of yang/, embedded at build time
 * by yang/embed_yang.py) and a loader that puts them into a libyang context. Shared by the
 * NETCONF server in inca-switch and the ctl client, so neither needs module files at run time. */
#ifndef INCA_CTL_YANG_H
#define INCA_CTL_YANG_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl/model.h"

#define CTL_YANG_MODULE "inca-switch"
#define CTL_YANG_NS "urn:inca:yang:inca-switch"

struct ly_ctx;
struct lyd_node;

struct ctl_yang_module {
	const char *name, *revision, *text;
};
extern const struct ctl_yang_module ctl_yang_modules[];
extern const size_t ctl_yang_nmodules;

/* Module text by name (revision NULL or "" = any), NULL if not embedded. */
const struct ctl_yang_module *ctl_yang_find(const char *name, const char *revision);

/* Load ietf-netconf-acm, ietf-netconf (features writable-running, rollback-on-error, xpath),
 * ietf-netconf-monitoring and inca-switch into ctx (ietf-yang-types and ietf-inet-types are
 * libyang's own). Also installs an import callback serving the embedded texts.
 * Returns 0 or -EINVAL (the libyang message stays in the context's error log). */
int ctl_yang_load(struct ly_ctx *ctx);

/* Add the leaf `name` under parent (its module's namespace) with the printf-formatted value
 * (at most 511 characters). 0, or -1 if libyang refused it (the message is in the context). */
int ctl_yang_term(struct lyd_node *parent, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Add one leaf-list entry `name` per set bit i (below n) of mask m, valued nm(i). 0 or -1. */
int ctl_yang_add_mask(struct lyd_node *parent, const char *name, uint32_t m,
		      const char *(*nm)(unsigned), unsigned n);

/* ---- The YANG codec of struct ctl_tree (tree_yang.c): the one conversion between the model and
 * inca-switch:inca-switch/trees/tree, used by inca-am (edit-config, get-config) and by
 * inca-switch (replies, edit-config candidates). */

#define CTL_YANG_SECRETS 0x1u  /* include auth-key (an edit or a candidate, never a reply) */
#define CTL_YANG_AUTH_OFF 0x2u /* write auth "disabled" for a tree without a key */

/* Append t as a tree list entry under trees (the inca-switch trees container); *out (may be
 * NULL) gets the new entry. Leaves in schema order; zero QPNs are left out (defaults).
 * 0, or -EINVAL (a value the schema refuses; libyang's message is in the context). */
int ctl_tree_to_lyd(const struct ctl_tree *t, struct lyd_node *trees, unsigned flags,
		    struct lyd_node **out);

/* Fill t from a tree list entry: ctl_tree_init's defaults, then every config leaf present
 * (with its bit in t->given); addresses parsed, child BFR-ids sorted; the forwarding state is
 * ignored. Does not validate the whole tree (ctl_tree_finish does). 0, -ENOMEM, or -EINVAL
 * with the message and location in *e (t then holds nothing). */
int ctl_tree_from_lyd(const struct lyd_node *tn, struct ctl_tree *t, struct ctl_tree_err *e);

/* The data node of tree entry tn an error location names (the entry itself, its member or
 * child list entry, its parent container). */
const struct lyd_node *ctl_tree_err_node(const struct lyd_node *tn, const struct ctl_tree_err *e);

#endif
