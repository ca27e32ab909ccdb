/* inca-switch NETCONF server (libnetconf2 2.0.x + libyang 2.1 + libssh): UNIX socket and SSH
 * endpoints; a thread per connection handshake (bounded per source and in total, with a
 * deadline), established sessions on one poll thread; get / get-config / edit-config /
 * validate / lock / unlock / get-schema on the inca-switch YANG module (yang/) and
 * ietf-netconf-monitoring state. Edits are validated (YANG, then the config parser's
 * semantic checks and the capacity limits) before the data plane's tree set is swapped.
 * Only compiled when SW_HAVE_NETCONF is defined (meson: have_netconf). See docs/netconf.md. */
#ifndef INCA_SW_NETCONF_H
#define INCA_SW_NETCONF_H

#include <stddef.h>

#include "config.h"
#include "switch.h"

struct sw_netconf_opts {
	const char *unix_path;       /* NULL: no UNIX endpoint */
	const char *ssh_addr;        /* "IP:PORT", NULL: no SSH endpoint */
	const char *hostkey_path;    /* SSH host private key (PEM / OpenSSH format) */
	const char *authorized_keys; /* OpenSSH authorized_keys: the only accepted client keys */
};

struct sw_netconf;

/* Set up the endpoints (sockets are listening on return) and start the server threads.
 * cfg must outlive the server; its trees are not used (the switch's running set is). */
int sw_netconf_start(struct sw_switch *sw, const struct sw_config *cfg,
		     const struct sw_netconf_opts *o, struct sw_netconf **out, char *err, size_t cap);
/* Stop the threads, close every session and the endpoints, free everything. NULL is fine. */
void sw_netconf_stop(struct sw_netconf *nc);

#endif
