/* lib/ctl data model helpers that need no NETCONF: freeing trees and capabilities. Always built,
 * so inca-am's planner and its NETCONF stub share them with the real client in ctl.c. */
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
