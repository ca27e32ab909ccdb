/* lib/ctl: the NETCONF client (libnetconf2) inca-am uses to drive inca-switch over the
 * inca-switch YANG module (yang/); the data it moves are the model's structs (ctl/model.h).
 * Blocking calls, each bounded by the connection's timeout; one struct ctl_conn per thread at a
 * time (connections of different threads are independent). Returns 0 or -errno; the message of
 * the last failure (including NETCONF rpc-error text) is available from ctl_conn_error(). */
#ifndef INCA_CTL_H
#define INCA_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl/model.h"

struct ctl_conn;
/* target: "unix:/path/to/socket" or "ssh://user@host:port" (SSH public-key authentication with
 * the private key at key_path; the host key is checked against known_hosts when non-NULL,
 * otherwise accepted and logged). */
int ctl_connect(const char *target, const char *key_path, const char *known_hosts,
		struct ctl_conn **out);
/* The same with every wait bounded by timeout_ms (0: 5 s to send, 15 s for a reply): the
 * connect (UNIX: until the switch's hello; SSH: each libssh step, whole seconds) and each
 * request. A switch that stops answering costs at most that per call. */
int ctl_connect_timeout(const char *target, const char *key_path, const char *known_hosts,
			unsigned timeout_ms, struct ctl_conn **out);
void ctl_disconnect(struct ctl_conn *c);
const char *ctl_conn_error(const struct ctl_conn *c);
/* true once a request failed in transport (timeout, reset, garbled reply): every later
 * request fails with -ENOTCONN; disconnect and connect again. An rpc-error reply (a refused
 * edit) does not break the connection. */
bool ctl_conn_broken(const struct ctl_conn *c);

int ctl_get_caps(struct ctl_conn *c, struct ctl_caps *out);
/* All trees in the running datastore; *out owned by the caller (free each, then the array). */
int ctl_get_trees(struct ctl_conn *c, struct ctl_tree **out, size_t *n);
/* Create or replace tree t->id (edit-config merge/replace on running). The switch validates
 * before applying: on -EINVAL nothing changed and ctl_conn_error() says why. */
int ctl_put_tree(struct ctl_conn *c, const struct ctl_tree *t);
int ctl_delete_tree(struct ctl_conn *c, uint16_t tree_id);
int ctl_get_tree_stats(struct ctl_conn *c, struct ctl_tree_stats **out, size_t *n);

#endif
