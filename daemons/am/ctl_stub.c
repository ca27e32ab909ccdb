/* Stand-in for lib/ctl's NETCONF client when it is not built: every NETCONF call fails with
 * -ENOTSUP, so inca-am sees every switch as unreachable and gives every group HOST_FALLBACK.
 * The data-model free functions come from lib/ctl/model.c, which is always built. */
#include <errno.h>
#include <stdlib.h>

#include "ctl/ctl.h"

int ctl_connect(const char *target, const char *key_path, const char *known_hosts,
		struct ctl_conn **out)
{
	*out = NULL;
	return -ENOTSUP;
}

int ctl_connect_timeout(const char *target, const char *key_path, const char *known_hosts,
			unsigned timeout_ms, struct ctl_conn **out)
{
	*out = NULL;
	return -ENOTSUP;
}

bool ctl_conn_broken(const struct ctl_conn *c)
{
	return true;
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
