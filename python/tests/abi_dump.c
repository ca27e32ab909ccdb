/* abi_dump: prints the size and field offsets of the public structs of include/inca/inca.h
 * as JSON, so python/tests/test_bindings.py can check that the ctypes declarations in
 * python/inca/_lib.py match the C layout exactly. */
#include <inca/inca.h>

#include <stddef.h>
#include <stdio.h>

/* One struct: {"__size__": [0, sizeof], "field": [offset, size], ...} in declaration order. */
#define F(s, f)                                                                    \
	printf("%s\"%s\": [%zu, %zu]", first++ ? ", " : "", #f, offsetof(struct s, f), \
	       sizeof(((struct s *)0)->f))
#define BEGIN(s)                                                                   \
	do {                                                                       \
		printf("%s\"%s\": {\"__size__\": [0, %zu], ", nstruct++ ? ",\n" : "", #s, \
		       sizeof(struct s));                                          \
		first = 0;                                                         \
	} while (0)
#define END() printf("}")

int main(void)
{
	int first = 0, nstruct = 0;

	printf("{");
	BEGIN(inca_comm_opts);
	F(inca_comm_opts, struct_size); F(inca_comm_opts, rank); F(inca_comm_opts, size); F(inca_comm_opts, bootstrap_addr);
	F(inca_comm_opts, host_ip); F(inca_comm_opts, switch_addr); F(inca_comm_opts, data_addr);
	F(inca_comm_opts, tree_id); F(inca_comm_opts, key); F(inca_comm_opts, switch_qpn);
	F(inca_comm_opts, qpn); F(inca_comm_opts, bfr_id); F(inca_comm_opts, bsl_bits);
	F(inca_comm_opts, nslots); F(inca_comm_opts, mtu); F(inca_comm_opts, rto_us);
	F(inca_comm_opts, rto_max_us); F(inca_comm_opts, retx_limit);
	F(inca_comm_opts, timeout_ms); F(inca_comm_opts, drop_rate); F(inca_comm_opts, seed);
	F(inca_comm_opts, log_fn); F(inca_comm_opts, log_ctx); F(inca_comm_opts, log_level);
	F(inca_comm_opts, am_addr); F(inca_comm_opts, job_id); F(inca_comm_opts, job_credential);
	F(inca_comm_opts, group_name); F(inca_comm_opts, host_name);
	F(inca_comm_opts, am_attach_hint); F(inca_comm_opts, am_tls_ca);
	F(inca_comm_opts, am_timeout_ms); F(inca_comm_opts, window);
	F(inca_comm_opts, deterministic); F(inca_comm_opts, auth_key);
	F(inca_comm_opts, auth_key_id); F(inca_comm_opts, no_auth);
	F(inca_comm_opts, peer_table); F(inca_comm_opts, peer_listener);
	F(inca_comm_opts, am_insecure);
	END();
	BEGIN(inca_auth_stats);
	F(inca_auth_stats, enabled); F(inca_auth_stats, key_id); F(inca_auth_stats, tx_signed);
	F(inca_auth_stats, rx_verified); F(inca_auth_stats, rx_missing);
	F(inca_auth_stats, rx_bad_key_id); F(inca_auth_stats, rx_bad_ctx);
	F(inca_auth_stats, rx_bad_mac); F(inca_auth_stats, rx_replay);
	F(inca_auth_stats, rx_epoch); F(inca_auth_stats, epoch); F(inca_auth_stats, opted_out);
	END();
	BEGIN(inca_comm_stats);
	F(inca_comm_stats, tx_pkts); F(inca_comm_stats, tx_bytes); F(inca_comm_stats, rx_pkts);
	F(inca_comm_stats, rx_bytes); F(inca_comm_stats, retransmits); F(inca_comm_stats, timeouts);
	F(inca_comm_stats, rx_dup_results); F(inca_comm_stats, rx_bad);
	F(inca_comm_stats, injected_drops); F(inca_comm_stats, inc_calls);
	F(inca_comm_stats, ring_calls); F(inca_comm_stats, rx_nacks);
	END();
	BEGIN(inca_io_stats);
	F(inca_io_stats, gso); F(inca_io_stats, gro); F(inca_io_stats, tx_syscalls);
	F(inca_io_stats, tx_msgs); F(inca_io_stats, gso_sends); F(inca_io_stats, gso_failed);
	F(inca_io_stats, rx_syscalls); F(inca_io_stats, rx_bufs); F(inca_io_stats, rx_gro_bufs);
	END();
	BEGIN(inca_am_info);
	F(inca_am_info, group_id); F(inca_am_info, inc_enabled); F(inca_am_info, state);
	F(inca_am_info, tree_id); F(inca_am_info, generation); F(inca_am_info, reconnects);
	F(inca_am_info, reason);
	END();
	BEGIN(inca_coll_counts);
	F(inca_coll_counts, calls); F(inca_coll_counts, failovers);
	END();
	BEGIN(inca_coll_args);
	F(inca_coll_args, coll); F(inca_coll_args, sendbuf); F(inca_coll_args, recvbuf);
	F(inca_coll_args, count); F(inca_coll_args, dt); F(inca_coll_args, op);
	F(inca_coll_args, root); F(inca_coll_args, algo);
	END();
	/* enum values the bindings hard-code */
	printf(",\n\"enums\": {\"INCA_BF16\": %d, \"INCA_FP64\": %d, \"INCA_BXOR\": %d, "
	       "\"INCA_ALGO_LINEAR\": %d, \"INCA_COLL_BARRIER\": %d, \"INCA_COLL_COUNT\": %d, "
	       "\"INCA_ALGO_COUNT\": %d, \"INCA_DTYPE_COUNT\": %d, \"INCA_OP_COUNT\": %d}",
	       INCA_BF16, INCA_FP64, INCA_BXOR, INCA_ALGO_LINEAR, INCA_COLL_BARRIER,
	       INCA_COLL_COUNT, INCA_ALGO_COUNT, INCA_DTYPE_COUNT, INCA_OP_COUNT);
	printf(", \"INCA_COLL_MAX\": %d, \"INCA_ALGO_MAX\": %d", INCA_COLL_MAX, INCA_ALGO_MAX);
	printf(", \"INCA_COMM_OPTS_SIZE_MIN\": %zu", (size_t)INCA_COMM_OPTS_SIZE_MIN);
	printf(", \"INCA_PEER_HANDLE_BYTES\": %d}\n", INCA_PEER_HANDLE_BYTES);
	return 0;
}
