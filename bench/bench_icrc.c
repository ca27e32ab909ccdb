/* Micro-benchmark of the per-packet wire costs in the switch: ICRC, strict decode (with ICRC)
 * and encode, for full-MTU and small packets. Prints figures; asserts nothing.
 * Built by bench/meson.build as bench-icrc (links wire and util). */
#include <stdio.h>
#include <string.h>

#include "util/cli.h"
#include "util/util.h"
#include "wire/wire.h"

static volatile uint32_t sink;

static void run(const char *name, uint16_t count, uint8_t bsl_code)
{
	static uint8_t data[4096], bits[512], buf[WIRE_MAX_UDP_PAYLOAD];
	struct wire_ipinfo ip = { 0x7F00000Bu, 0x7F000001u, 4791, 4791, 0, false };
	struct wire_pkt p;
	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.bth.pkey = WIRE_PKEY_DEFAULT;
	p.inca.coll = WIRE_COLL_ALLREDUCE;
	p.inca.dtype = WIRE_DT_FP32;
	p.inca.op = WIRE_OP_SUM;
	p.inca.bsl_code = bsl_code;
	p.inca.count = count;
	p.inca.bits = bits;
	p.data = data;
	p.data_len = count * 4u;
	int len = wire_encode_udp(buf, sizeof(buf), &p, &ip);
	if (len < 0) {
		printf("%s: encode failed %d\n", name, len);
		return;
	}

	const int iters = 200000;
	uint64_t t0 = util_now_ns();
	for (int i = 0; i < iters; i++)
		sink += wire_icrc(&ip, buf, (size_t)len);
	uint64_t t1 = util_now_ns();
	struct wire_pkt d;
	for (int i = 0; i < iters; i++)
		sink += (uint32_t)wire_decode_udp(buf, (size_t)len, &d, &ip);
	uint64_t t2 = util_now_ns();
	for (int i = 0; i < iters; i++)
		sink += (uint32_t)wire_encode_udp(buf, sizeof(buf), &p, &ip);
	uint64_t t3 = util_now_ns();
	for (int i = 0; i < iters; i++)
		sink += (uint32_t)wire_decode_udp(buf, (size_t)len, &d, NULL);
	uint64_t t4 = util_now_ns();
	/* fan-out: one data CRC, then per copy only the headers are hashed */
	struct wire_dcrc dcrc;
	wire_data_crc(&dcrc, p.data, p.data_len);
	for (int i = 0; i < iters; i++) {
		ip.dst_ip = 0x7F00000Au + (uint32_t)(i & 7);
		sink += (uint32_t)wire_encode_udp_dcrc(buf, sizeof(buf), &p, &ip, &dcrc);
	}
	uint64_t t5 = util_now_ns();
	ip.dst_ip = 0x7F000001u;

	double icrc_ns = (double)(t1 - t0) / iters, dec_ns = (double)(t2 - t1) / iters;
	double enc_ns = (double)(t3 - t2) / iters, dec0_ns = (double)(t4 - t3) / iters;
	double fan_ns = (double)(t5 - t4) / iters;
	printf("%-22s %5d B  icrc %7.1f ns (%5.2f GB/s, %5.2f Mpps)  decode+icrc %7.1f ns  "
	       "decode-only %5.1f ns  encode %7.1f ns  encode(dcrc) %6.1f ns\n",
	       name, len, icrc_ns, len / icrc_ns, 1e3 / icrc_ns, dec_ns, dec0_ns, enc_ns, fan_ns);
	printf("{\"bench\":\"icrc\",\"case\":\"%s\",\"udp_payload_bytes\":%d,\"icrc_ns\":%.1f,"
	       "\"icrc_gbytes_per_s\":%.3f,\"decode_icrc_ns\":%.1f,\"decode_only_ns\":%.1f,"
	       "\"encode_ns\":%.1f,\"encode_dcrc_ns\":%.1f}\n",
	       name, len, icrc_ns, len / icrc_ns, dec_ns, dec0_ns, enc_ns, fan_ns);
}

int main(int argc, char **argv)
{
	/* No options: the figures are fixed, --version and --help are all there is. */
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		util_cli_print_version("bench-icrc");
		return 0;
	}
	if (argc > 1) {
		printf("usage: bench-icrc [--version]: prints its table, takes no options\n");
		return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
	}
	run("fp32 x1017 BSL64", 1017, 1);
	run("fp32 x256 BSL64", 256, 1);
	run("fp32 x1 BSL64", 1, 1);
	run("fp32 x891 BSL4096", 891, 7);
	return 0;
}
