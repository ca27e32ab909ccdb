/* inca-am counter table (counters.h): every counter of the GetStats reply described once: its
 * StatsReply field, help text, counter or gauge, and where the value lives. query.c fills the
 * reply and metrics.c writes the Prometheus exposition by walking it. No I/O. */
#include "counters.h"

#include <stddef.h>
#include <string.h>

#include "util/util.h"

static uint64_t get_uptime_ms(const struct am *am)
{
	return (util_now_ns() - am->start_ns) / NS_PER_MS;
}

static uint64_t get_active_groups(const struct am *am)
{
	uint64_t n = 0;

	for (const struct am_group *g = am->groups; g; g = g->next)
		n++;
	return n;
}

static uint64_t get_learned_jobs(const struct am *am)
{
	return am->nlearned;
}

#define S(f) offsetof(struct am_stats, f), NULL, false
const struct am_ctr am_ctrs[] = {
	{ "uptime_ms", "Time since the AM started, in milliseconds.", true, 0, get_uptime_ms,
	  true },
	{ "joins", "Join calls accepted.", false, S(joins) },
	{ "joins_denied", "Join calls refused (credential, validation, quota).", false,
	  S(joins_denied) },
	{ "sessions_denied", "Session streams refused (unknown member or bad token).", false,
	  S(sessions_denied) },
	{ "groups_created", "Groups created.", false, S(groups_created) },
	{ "groups_ready", "Groups that got an INC tree.", false, S(groups_ready) },
	{ "groups_fallback", "Groups sent to the host path.", false, S(groups_fallback) },
	{ "dismantles", "Trees dismantled.", false, S(dismantles) },
	{ "rebuilds", "Trees rebuilt after a failure.", false, S(rebuilds) },
	{ "heartbeat_timeouts", "Members declared gone for missed heartbeats.", false,
	  S(heartbeat_timeouts) },
	{ "switch_failures", "Switch polls or connections that failed.", false,
	  S(switch_failures) },
	{ "push_failures", "Tree pushes (NETCONF edits) that failed.", false, S(push_failures) },
	{ "journal_records", "Records appended to the journal.", false, S(journal_records) },
	{ "recovered_groups", "Groups recovered from the journal at start.", false,
	  S(recovered_groups) },
	{ "active_groups", "Groups the AM holds now, in any state.", true, 0, get_active_groups,
	  false },
	{ "rpc_unimplemented", "Calls of methods the AM does not implement.", false,
	  S(rpc_unimplemented) },
	{ "operator_denied", "Operator calls (Dismantle) refused.", false, S(operator_denied) },
	{ "failure_reports", "ReportFailure calls that dismantled a tree.", false,
	  S(failure_reports) },
	{ "failure_reports_denied", "ReportFailure calls refused (unknown member or bad token).",
	  false, S(failure_reports_denied) },
	{ "failure_reports_stale", "ReportFailure calls for an older generation (no action).",
	  false, S(failure_reports_stale) },
	{ "journal_damaged_records", "Damaged journal records dropped at start by --recover.",
	  false, S(journal_damaged_records) },
	{ "orphan_trees_removed", "Trees in the AM's range that no recovered group owned, removed.",
	  false, S(orphan_trees_removed) },
	{ "queries_denied", "Query and admin calls without a valid credential.", false,
	  S(queries_denied) },
	{ "learned_jobs", "Jobs whose credential a first joiner set.", true, 0, get_learned_jobs,
	  false },
	{ "learned_expired", "Learned credentials forgotten after first_joiner_ttl_s without a "
	  "group.", false, S(learned_expired) },
};
#undef S
const size_t am_nctrs = sizeof am_ctrs / sizeof am_ctrs[0];

uint64_t am_ctr_value(const struct am_ctr *c, const struct am *am)
{
	uint64_t v;

	if (c->get)
		return c->get(am);
	memcpy(&v, (const char *)&am->st + c->off, sizeof v);
	return v;
}

void am_stats_fill_reply(const struct am *am, Inca__Am__V1__StatsReply *rp)
{
	const ProtobufCMessageDescriptor *d = &inca__am__v1__stats_reply__descriptor;

	for (size_t i = 0; i < am_nctrs; i++) {
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(d, am_ctrs[i].name);
		uint64_t v = am_ctr_value(&am_ctrs[i], am);

		/* A table name without its uint64 field is a bug the am tests catch (the metric
		 * then has no GetStats twin). */
		if (f && f->type == PROTOBUF_C_TYPE_UINT64 && f->label != PROTOBUF_C_LABEL_REPEATED)
			memcpy((char *)rp + f->offset, &v, sizeof v);
	}
}

