/* Stand-in for lib/ctl when it is not built: the data-model free functions for real, every
 * NETCONF call failing with -ENOTSUP. inca-am then sees every switch as unreachable and gives
 * every group HOST_FALLBACK; the planner tests only need the free functions. */
#include <errno.h>
#include <stdlib.h>

#include "ctl/ctl.h"

void ctl_tree_free(struct ctl_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nchildren; i++)
		free(t->children[i].bfr_ids);
	free(t->children);
	free(t->members);
	t->children = NULL;
	t->members = NULL;
	t->nchildren = t->nmembers = 0;
}

void ctl_caps_free(struct ctl_caps *c)
{
	if (!c)
		return;
	free(c->links);
	c->links = NULL;
	c->nlinks = 0;
}

int ctl_connect(const char *target, const char *key_path, const char *known_hosts,
		struct ctl_conn **out)
{
	*out = NULL;
	return -ENOTSUP;
}

void ctl_disconnect(struct ctl_conn *c)
{
}

const char *ctl_conn_error(const struct ctl_conn *c)
{
	return "lib/ctl not built: NETCONF unavailable";
}

int ctl_get_caps(struct ctl_conn *c, struct ctl_caps *out)
{
	return -ENOTSUP;
}

int ctl_get_trees(struct ctl_conn *c, struct ctl_tree **out, size_t *n)
{
	return -ENOTSUP;
}

int ctl_put_tree(struct ctl_conn *c, const struct ctl_tree *t)
{
	return -ENOTSUP;
}

int ctl_delete_tree(struct ctl_conn *c, uint16_t tree_id)
{
	return -ENOTSUP;
}

int ctl_get_tree_stats(struct ctl_conn *c, struct ctl_tree_stats **out, size_t *n)
{
	return -ENOTSUP;
}
