/* `inca`: the operator's command line for the Aggregation Manager. `inca status` shows every
 * switch, link and client and their relationships, and every group with its tree (draft-liu
 * §3.1), through the AM's query RPCs; `inca dismantle` asks the AM to take a group down.
 * `--json` prints the same replies as one JSON document, field names as in the .proto. */
#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/support/log.h>

#include "am_rpc.h"
#include "util/cli.h"

static grpc_channel *ch;
static unsigned timeout_ms = 5000;
static const char *am_target, *ca_path;
static bool verbose, insecure;
/* the caller's credentials (AM_MD_*): the admin token, or a job id + its credential */
static grpc_metadata md[3];
static size_t nmd;

static void add_md(const char *key, const char *value)
{
	if (!value || !value[0])
		return;
	md[nmd].key = grpc_slice_from_static_string(key);
	md[nmd].value = grpc_slice_from_copied_string(value);
	nmd++;
}

/* gRPC logs every failed TLS handshake and connection attempt on stderr itself, several lines
 * per try; the one message that matters is printed by call(). -v lets them through. */
static volatile int tls_refused; /* gRPC logged a certificate or protocol failure of TLS */

static void grpc_log_quiet(gpr_log_func_args *a)
{
	/* The RPC's status says only "handshake failed", also when a lossy network dropped the
	 * connection mid-handshake; gRPC's log says why. A verdict on the certificate or a
	 * plaintext peer will not change on a retry. */
	if (a->message && (strstr(a->message, "CERTIFICATE_VERIFY_FAILED") ||
			   strstr(a->message, "certificate verify failed") ||
			   strstr(a->message, "WRONG_VERSION_NUMBER") ||
			   strstr(a->message, "wrong version number")))
		tls_refused = 1;
	if (verbose)
		fprintf(stderr, "grpc: %s:%d: %s\n", a->file, a->line, a->message);
}

static void *call(const char *method, const ProtobufCMessage *rq,
		  const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *rp = NULL;
	char err[512];
	/* fail fast: an AM that is down or a handshake that fails is reported at once */
	struct am_rpc_call_opts o = { md, nmd, true };
	int rc = am_rpc_unary_opts(ch, method, &o, rq, d, &rp, timeout_ms, err, sizeof err);

	/* ... but a connection lost on a lossy network (a handshake segment dropped, a SYN
	 * waiting out its 1 s retransmission) is tried once more, waiting for the channel to
	 * connect (gRPC backs off between connection attempts, and a fail-fast call made
	 * meanwhile fails at once) for the rest of the request's timeout. A TLS verdict (wrong
	 * CA, plaintext AM) is not retried, so that mistake is still reported at once. */
	if (rc == -ECONNREFUSED && !tls_refused) {
		uint64_t left_ms = timeout_ms > 300 ? timeout_ms - 300 : timeout_ms;
		struct am_rpc_call_opts w = { md, nmd, false };
		usleep(300000);
		rc = am_rpc_unary_opts(ch, method, &w, rq, d, &rp, left_ms, err, sizeof err);
	}
	if (rc < 0) {
		if (!insecure && (tls_refused || strstr(err, "SSL")))
			fprintf(stderr, "inca: no TLS connection to the AM at %s: its certificate is "
				"not signed by %s%s, or it serves plaintext (then --insecure); -v "
				"shows gRPC's own log\n", am_target,
				ca_path ? "the CA " : "a CA of the system's roots (pass --ca or "
						      "INCA_AM_CA)", ca_path ? ca_path : "");
		else if (rc == -ECONNREFUSED)
			fprintf(stderr, "inca: no connection to the AM at %s (%s)\n", am_target,
				insecure ? "down, or it requires TLS: drop --insecure" : "down?");
		else
			fprintf(stderr, "inca: %s: cannot reach the AM at %s: %s%s%s\n", method,
				am_target, strerror(-rc), err[0] ? ": " : "", err);
		return NULL;
	}
	return rp;
}

/* ---------------------------------------------------------------- JSON */

static void json_str(const char *p)
{
	putchar('"');
	for (; p && *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_msg(const ProtobufCMessage *m);

static void json_value(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		printf("%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		printf("%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		printf("%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		printf("%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		printf("%.9g", (double)*(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		printf("%.17g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		printf("%s", *(const protobuf_c_boolean *)p ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		if (ev)
			json_str(ev->name);
		else
			printf("%d", *(const int *)p);
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		json_str(*(char *const *)p);
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		json_msg(*(ProtobufCMessage *const *)p);
		break;
	default: /* bytes: key material never leaves the AM through this tool */
		printf("null");
		break;
	}
}

static size_t field_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

/* Any reply, every field, by its descriptor: a field added to the .proto shows up here
 * without a change to this file. */
static void json_msg(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d;

	if (!m) {
		printf("null");
		return;
	}
	d = m->descriptor;
	putchar('{');
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m;
		printf("%s", i ? "," : "");
		json_str(f->name);
		putchar(':');
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			const char *arr = *(char *const *)(base + f->offset);
			putchar('[');
			for (size_t k = 0; k < n; k++) {
				printf("%s", k ? "," : "");
				json_value(f, arr + k * field_size(f));
			}
			putchar(']');
		} else {
			json_value(f, base + f->offset);
		}
	}
	putchar('}');
}

/* status --json: one object, the replies of the text view's RPCs, plus "clients" (every
 * group's members with their group id, as the CLIENTS table lists them). */
static int show_json(const char *what)
{
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	bool all = !strcmp(what, "status");
	Inca__Am__V1__StatsReply *st = NULL;
	Inca__Am__V1__ListSwitchesReply *sw = NULL;
	Inca__Am__V1__ListLinksReply *ln = NULL;
	Inca__Am__V1__ListGroupsReply *gr = NULL;
	bool first = true;
	int rc = 1;

	if ((all || !strcmp(what, "stats")) &&
	    !(st = call("GetStats", &e.base, &inca__am__v1__stats_reply__descriptor)))
		goto out;
	if ((all || !strcmp(what, "switches")) &&
	    !(sw = call("ListSwitches", &e.base, &inca__am__v1__list_switches_reply__descriptor)))
		goto out;
	if ((all || !strcmp(what, "links")) &&
	    !(ln = call("ListLinks", &e.base, &inca__am__v1__list_links_reply__descriptor)))
		goto out;
	if ((all || !strcmp(what, "groups") || !strcmp(what, "clients")) &&
	    !(gr = call("ListGroups", &e.base, &inca__am__v1__list_groups_reply__descriptor)))
		goto out;
	putchar('{');
	if (all) {
		printf("\"am\":");
		json_str(am_target);
		first = false;
	}
	if (st) {
		printf("%s\"stats\":", first ? "" : ",");
		json_msg(&st->base);
		first = false;
	}
	if (sw) {
		printf("%s\"switches\":[", first ? "" : ",");
		for (size_t i = 0; i < sw->n_switches; i++) {
			printf("%s", i ? "," : "");
			json_msg(&sw->switches[i]->base);
		}
		putchar(']');
		first = false;
	}
	if (ln) {
		printf("%s\"links\":[", first ? "" : ",");
		for (size_t i = 0; i < ln->n_links; i++) {
			printf("%s", i ? "," : "");
			json_msg(&ln->links[i]->base);
		}
		putchar(']');
		first = false;
	}
	if (gr && (all || !strcmp(what, "clients"))) {
		bool k0 = true;
		printf("%s\"clients\":[", first ? "" : ",");
		for (size_t g = 0; g < gr->n_groups; g++)
			for (size_t i = 0; i < gr->groups[g]->n_members; i++) {
				printf("%s{\"group_id\":%" PRIu64 ",\"member\":", k0 ? "" : ",",
				       (uint64_t)gr->groups[g]->group_id);
				json_msg(&gr->groups[g]->members[i]->base);
				putchar('}');
				k0 = false;
			}
		putchar(']');
		first = false;
	}
	if (gr && (all || !strcmp(what, "groups"))) {
		printf("%s\"groups\":[", first ? "" : ",");
		for (size_t g = 0; g < gr->n_groups; g++) {
			printf("%s", g ? "," : "");
			json_msg(&gr->groups[g]->base);
		}
		putchar(']');
	}
	printf("}\n");
	rc = 0;
out:
	if (st)
		protobuf_c_message_free_unpacked(&st->base, NULL);
	if (sw)
		protobuf_c_message_free_unpacked(&sw->base, NULL);
	if (ln)
		protobuf_c_message_free_unpacked(&ln->base, NULL);
	if (gr)
		protobuf_c_message_free_unpacked(&gr->base, NULL);
	return rc;
}

/* ---------------------------------------------------------------- text */

static void print_ids(const uint32_t *v, size_t n)
{
	/* Ranges keep 4096-member groups readable: 1-8,12 */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		printf("%s%u", i ? "," : "", v[i]);
		if (j > i)
			printf("-%u", v[j]);
		i = j + 1;
	}
	if (n == 0)
		printf("-");
}

static int show_switches(void)
{
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	Inca__Am__V1__ListSwitchesReply *r =
		call("ListSwitches", &e.base, &inca__am__v1__list_switches_reply__descriptor);

	if (!r)
		return 1;
	printf("SWITCHES (%zu)\n", r->n_switches);
	printf("  %-12s %-5s %-6s %-21s %-13s %-11s %-6s %s\n", "name", "state", "role", "data-plane",
	       "slots used", "trees used", "bsl", "netconf");
	for (size_t i = 0; i < r->n_switches; i++) {
		Inca__Am__V1__SwitchInfo *s = r->switches[i];
		char slots[32], trees[32];
		snprintf(slots, sizeof slots, "%u/%u", s->used_slots, s->max_slots);
		snprintf(trees, sizeof trees, "%u/%u", s->used_trees, s->max_trees);
		printf("  %-12s %-5s %-6s %-21s %-13s %-11s %-6u %s\n", s->name, s->up ? "up" : "DOWN",
		       s->role[0] ? s->role : "-", s->data_addr[0] ? s->data_addr : "-", slots, trees,
		       s->max_bsl_bits, s->target);
		if (!s->up && s->last_error[0])
			printf("  %-12s   error: %s\n", "", s->last_error);
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

static int show_links(void)
{
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	Inca__Am__V1__ListLinksReply *r =
		call("ListLinks", &e.base, &inca__am__v1__list_links_reply__descriptor);

	if (!r)
		return 1;
	printf("LINKS (%zu)\n", r->n_links);
	for (size_t i = 0; i < r->n_links; i++) {
		Inca__Am__V1__LinkInfo *l = r->links[i];
		printf("  %-12s %-10s --%s--> %-6s %-12s %-21s %.1f Gbit/s\n", l->switch_name,
		       l->port[0] ? l->port : "-", l->up ? "up" : "DOWN", l->peer_kind, l->peer,
		       l->peer_addr[0] ? l->peer_addr : "", (double)l->speed_bps / 1e9);
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

static int show_groups(bool clients_only)
{
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	Inca__Am__V1__ListGroupsReply *r =
		call("ListGroups", &e.base, &inca__am__v1__list_groups_reply__descriptor);

	if (!r)
		return 1;
	if (clients_only) {
		size_t n = 0;
		for (size_t g = 0; g < r->n_groups; g++)
			n += r->groups[g]->n_members;
		printf("CLIENTS (%zu)\n", n);
		printf("  %-12s %-22s %-10s %-5s %-7s %-12s %-12s %s\n", "host", "data-plane", "group",
		       "rank", "bfr-id", "attached-to", "sends-to", "session");
		for (size_t g = 0; g < r->n_groups; g++)
			for (size_t i = 0; i < r->groups[g]->n_members; i++) {
				Inca__Am__V1__MemberInfo *m = r->groups[g]->members[i];
				char sess[32];
				snprintf(sess, sizeof sess, m->session_up ? "up (%llums)" : "DOWN (%llums)",
					 (unsigned long long)m->last_heartbeat_ms_ago);
				printf("  %-12s %-22s %-10llu %-5u %-7u %-12s %-12s %s\n",
				       m->host_name[0] ? m->host_name : "-", m->data_addr,
				       (unsigned long long)r->groups[g]->group_id, m->rank, m->bfr_id,
				       m->attach_switch[0] ? m->attach_switch : "?",
				       m->send_switch[0] ? m->send_switch : "-", sess);
			}
		protobuf_c_message_free_unpacked(&r->base, NULL);
		return 0;
	}
	printf("GROUPS (%zu)\n", r->n_groups);
	for (size_t g = 0; g < r->n_groups; g++) {
		Inca__Am__V1__GroupInfo *gi = r->groups[g];
		printf("  group %llu  job %s%s%s  %u/%u ranks  %s", (unsigned long long)gi->group_id,
		       gi->job_id, gi->group_name[0] ? "/" : "", gi->group_name, gi->joined, gi->size,
		       gi->state);
		if (gi->reason[0])
			printf(" (%s)", gi->reason);
		printf("\n");
		if (gi->n_tree) {
			printf("    tree %u  gen %u  %s  root %s  %u slots  bsl %u  mtu %u  ",
			       gi->tree_id, gi->generation, gi->n_tree > 1 ? "2-level" : "single-level",
			       gi->root_switch, gi->slots, gi->bsl_bits, gi->mtu);
			if (gi->auth_key_id)
				printf("auth key id %u\n", gi->auth_key_id);
			else
				printf("auth off\n");
			for (size_t k = 0; k < gi->n_tree; k++) {
				Inca__Am__V1__SwitchTree *t = gi->tree[k];
				printf("    %s%s [%s] %s qpn 0x%x %s  A-BM ", k ? "  +- " : "", t->switch_name,
				       t->role, t->data_addr, t->qpn, t->running ? "running" : "NOT RUNNING");
				print_ids(t->a_bm, t->n_a_bm);
				printf("  members ");
				print_ids(t->member_bfr_ids, t->n_member_bfr_ids);
				if (t->n_children) {
					printf("  children");
					for (size_t c = 0; c < t->n_children; c++)
						printf(" %s", t->children[c]);
				}
				printf("\n");
			}
		}
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

static int show_stats(void)
{
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	Inca__Am__V1__StatsReply *s = call("GetStats", &e.base, &inca__am__v1__stats_reply__descriptor);

	if (!s)
		return 1;
	printf("AM uptime %.1f s: %llu joins (%llu denied), %llu sessions denied, "
	       "%llu groups created, %llu ready, %llu host fallbacks, %llu dismantles, "
	       "%llu rebuilds, %llu heartbeat timeouts, %llu switch failures, %llu push failures, "
	       "%llu recovered, %llu active\n",
	       (double)s->uptime_ms / 1000, (unsigned long long)s->joins,
	       (unsigned long long)s->joins_denied, (unsigned long long)s->sessions_denied,
	       (unsigned long long)s->groups_created, (unsigned long long)s->groups_ready,
	       (unsigned long long)s->groups_fallback, (unsigned long long)s->dismantles,
	       (unsigned long long)s->rebuilds, (unsigned long long)s->heartbeat_timeouts,
	       (unsigned long long)s->switch_failures, (unsigned long long)s->push_failures,
	       (unsigned long long)s->recovered_groups, (unsigned long long)s->active_groups);
	/* Every kind of denial has its own counter (docs/am.md "Security"). */
	printf("denials: %llu joins, %llu sessions/leaves, %llu operator, %llu queries, %llu "
	       "failure reports; failure reports: %llu acted on, %llu stale\n",
	       (unsigned long long)s->joins_denied, (unsigned long long)s->sessions_denied,
	       (unsigned long long)s->operator_denied, (unsigned long long)s->queries_denied,
	       (unsigned long long)s->failure_reports_denied,
	       (unsigned long long)s->failure_reports, (unsigned long long)s->failure_reports_stale);
	if (s->journal_damaged_records || s->orphan_trees_removed)
		printf("recovery (--recover): %llu damaged journal records dropped, %llu trees no "
		       "recovered group owned removed\n",
		       (unsigned long long)s->journal_damaged_records,
		       (unsigned long long)s->orphan_trees_removed);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca [--am HOST:PORT] [--ca PEM | --insecure] [--admin-token T |\n"
		"            --job ID --credential S] [--timeout-ms N] [--json] [-v] COMMAND\n"
		"  status            switches, links, clients and groups with their trees (default)\n"
		"  switches | links | clients | groups | stats\n"
		"  dismantle GROUP-ID [--reason TEXT]   (needs the admin token)\n"
		"      --am HOST:PORT    the AM (default $INCA_AM or 127.0.0.1:50051)\n"
		"      --ca PEM          trust this CA for the AM's certificate (default\n"
		"                        $INCA_AM_CA, else the system's roots)\n"
		"      --insecure        plaintext gRPC, for an AM run with 'tls = off'\n"
		"                        (also INCA_AM_INSECURE=1)\n"
		"      --admin-token T   the admin credential: every group, dismantle\n"
		"                        (default $INCA_ADMIN_TOKEN; --token is the same)\n"
		"      --job ID          a job's credential: that job's groups only\n"
		"      --credential S    (default $INCA_JOB_ID, $INCA_JOB_CREDENTIAL)\n"
		"      --timeout-ms N    per request (default 5000)\n"
		"      --json            the same information as one JSON document on stdout\n"
		"  -v, --verbose         also show gRPC's own log lines\n"
		"  -h, --help            this text\n"
		"  -V, --version         print the version and exit\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "am", required_argument, NULL, 'a' },
		{ "ca", required_argument, NULL, 'C' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "reason", required_argument, NULL, 'r' },
		{ "token", required_argument, NULL, 'k' },
		{ "admin-token", required_argument, NULL, 'k' },
		{ "job", required_argument, NULL, 1 },
		{ "credential", required_argument, NULL, 2 },
		{ "insecure", no_argument, NULL, 3 },
		{ "json", no_argument, NULL, 'J' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const views[] = { "status", "switches", "links", "clients", "groups",
					     "stats", "dismantle", NULL };
	const char *am = getenv("INCA_AM"), *reason = "", *cmd;
	const char *token = getenv("INCA_ADMIN_TOKEN"), *job = getenv("INCA_JOB_ID");
	const char *cred = getenv("INCA_JOB_CREDENTIAL"), *ins = getenv("INCA_AM_INSECURE");
	uint64_t group_id = 0;
	bool json = false;
	long long ll;
	char err[256];
	int opt, rc = 0;

	if (!am)
		am = "127.0.0.1:50051";
	ca_path = getenv("INCA_AM_CA");
	insecure = ins && ins[0] && strcmp(ins, "0") != 0;
	while ((opt = getopt_long(argc, argv, "vhV", lo, NULL)) != -1) {
		switch (opt) {
		case 'a':
			am = optarg;
			break;
		case 'C':
			ca_path = optarg;
			break;
		case 't':
			if (util_cli_int("inca", "--timeout-ms", optarg, 1, 3600000, &ll))
				return 2;
			timeout_ms = (unsigned)ll;
			break;
		case 'r':
			reason = optarg;
			break;
		case 'k':
			token = optarg;
			break;
		case 'J':
			json = true;
			break;
		case 1:
			job = optarg;
			break;
		case 2:
			cred = optarg;
			break;
		case 3:
			insecure = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			util_cli_print_version("inca");
			return 0;
		default: /* getopt_long named the option */
			fprintf(stderr, "inca: --help lists the commands and options\n");
			return 2;
		}
	}
	am_target = am;
	cmd = optind < argc ? argv[optind] : "status";
	if (util_cli_choice("inca", "command", cmd, views) < 0)
		return 2;
	if (!strcmp(cmd, "dismantle")) {
		if (optind + 1 >= argc) {
			util_cli_error("inca", "dismantle needs a GROUP-ID (inca groups lists them)");
			return 2;
		}
		if (util_cli_u64("inca", "dismantle GROUP-ID", argv[optind + 1], 1, UINT64_MAX,
				 &group_id))
			return 2;
		if (json) {
			util_cli_error("inca", "--json applies to the views, not to dismantle");
			return 2;
		}
		optind++;
	}
	if (optind + 1 < argc) {
		util_cli_error("inca", "unexpected argument '%s'", argv[optind + 1]);
		return 2;
	}
	if (ca_path && !ca_path[0])
		ca_path = NULL;
	add_md(AM_MD_ADMIN_TOKEN, token);
	if (job && job[0]) {
		add_md(AM_MD_JOB_ID, job);
		add_md(AM_MD_JOB_CREDENTIAL, cred ? cred : "");
	}
	gpr_set_log_function(grpc_log_quiet);
	grpc_init();
	ch = am_rpc_channel(am, ca_path, insecure, err, sizeof err);
	if (!ch) {
		fprintf(stderr, "inca: %s\n", err);
		grpc_shutdown();
		return 1;
	}
	if (json && strcmp(cmd, "dismantle")) {
		rc = show_json(cmd);
	} else if (!strcmp(cmd, "status")) {
		printf("Aggregation Manager %s\n", am);
		rc = show_stats() || show_switches() || show_links() || show_groups(true) ||
		     show_groups(false);
	} else if (!strcmp(cmd, "switches")) {
		rc = show_switches();
	} else if (!strcmp(cmd, "links")) {
		rc = show_links();
	} else if (!strcmp(cmd, "clients")) {
		rc = show_groups(true);
	} else if (!strcmp(cmd, "groups")) {
		rc = show_groups(false);
	} else if (!strcmp(cmd, "stats")) {
		rc = show_stats();
	} else {
		Inca__Am__V1__DismantleRequest rq = INCA__AM__V1__DISMANTLE_REQUEST__INIT;
		void *rp;
		rq.group_id = group_id;
		rq.reason = (char *)reason;
		rq.admin_token = (char *)(token ? token : "");
		rp = call("Dismantle", &rq.base, &inca__am__v1__dismantle_reply__descriptor);
		if (rp) {
			printf("group %llu dismantled\n", (unsigned long long)rq.group_id);
			protobuf_c_message_free_unpacked(rp, NULL);
		}
		rc = !rp;
	}
	grpc_channel_destroy(ch);
	for (size_t i = 0; i < nmd; i++)
		grpc_slice_unref(md[i].value);
	grpc_shutdown();
	return rc ? 1 : 0;
}
