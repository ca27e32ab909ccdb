/* lib/ctl: the YANG modules the INCA control plane speaks (the .yang files of yang/, embedded at build time
 * by yang/embed_yang.py) and a loader that puts them into a libyang context. Shared by the
 * NETCONF server in inca-switch and the ctl client, so neither needs module files at run time. */
#ifndef INCA_CTL_YANG_H
#define INCA_CTL_YANG_H

#include <stddef.h>

#define CTL_YANG_MODULE "inca-switch"
#define CTL_YANG_NS "urn:inca:yang:inca-switch"

struct ly_ctx;

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

#endif
