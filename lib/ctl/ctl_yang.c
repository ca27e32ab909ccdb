/* lib/ctl: loads the embedded YANG modules (ctl_yang_modules[], generated from yang/) into a
 * libyang context, with an import callback so imports between them resolve without any
 * search directory. */
#include "ctl_yang.h"

#include <errno.h>
#include <string.h>

#include <libyang/libyang.h>

const struct ctl_yang_module *ctl_yang_find(const char *name, const char *revision)
{
	for (size_t i = 0; i < ctl_yang_nmodules; i++)
		if (!strcmp(ctl_yang_modules[i].name, name) &&
		    (!revision || !revision[0] || !strcmp(ctl_yang_modules[i].revision, revision)))
			return &ctl_yang_modules[i];
	return NULL;
}

static LY_ERR import_clb(const char *mod_name, const char *mod_rev, const char *submod_name,
			 const char *submod_rev, void *user_data, LYS_INFORMAT *format,
			 const char **module_data, void (**free_module_data)(void *model_data,
									     void *user_data))
{
	const struct ctl_yang_module *m;

	(void)submod_rev;
	(void)user_data;
	if (submod_name)
		return LY_ENOTFOUND;
	m = ctl_yang_find(mod_name, mod_rev);
	if (!m)
		return LY_ENOTFOUND;
	*format = LYS_IN_YANG;
	*module_data = m->text;
	*free_module_data = NULL;
	return LY_SUCCESS;
}

static int load_one(struct ly_ctx *ctx, const char *name, const char **features)
{
	const struct ctl_yang_module *m = ctl_yang_find(name, NULL);
	struct lys_module *mod = ly_ctx_get_module_implemented(ctx, name);
	struct ly_in *in = NULL;
	LY_ERR rc;

	if (mod)
		return 0;
	if (!m)
		return -ENOENT;
	if (ly_in_new_memory(m->text, &in))
		return -ENOMEM;
	rc = lys_parse(ctx, in, LYS_IN_YANG, features, &mod);
	ly_in_free(in, 0);
	return rc ? -EINVAL : 0;
}

int ctl_yang_load(struct ly_ctx *ctx)
{
	static const char *nc_features[] = { "writable-running", "rollback-on-error", "validate",
					     "xpath", NULL };
	int rc;

	ly_ctx_set_module_imp_clb(ctx, import_clb, NULL);
	/* ietf-netconf-acm only as an import (for nacm:default-deny-all): the switch keeps no NACM
	 * rules, so it does not implement the module's data. */
	if ((rc = load_one(ctx, "ietf-netconf", nc_features)) < 0 ||
	    (rc = load_one(ctx, "ietf-netconf-monitoring", NULL)) < 0 ||
	    (rc = load_one(ctx, CTL_YANG_MODULE, NULL)) < 0)
		return rc;
	return 0;
}
