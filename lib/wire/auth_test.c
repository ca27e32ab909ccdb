/* Unit tests for the authentication block and its MAC: round trips with the block, sizes,
 * every covered byte flipped fails verification, the uncovered ones (BTH, a downward packet's
 * bit-string) do not, a wrong key or context fails, and the encoder's checks; gmac.c gives
 * OpenSSL's AES-256-GCM tag for random keys, nonces and every split of the input, and
 * wire_mac_sign gives the same tag with and without it. */
#include "wire/auth.h"
#include "wire/wire_internal.h"
#include "util/test_check.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct wire_ipinfo IP = {
	.src_ip = 0xC6120001, .dst_ip = 0xC6120002, .src_port = 4791, .dst_port = 4791,
};

static uint8_t key1[WIRE_AUTH_KEY_LEN], key2[WIRE_AUTH_KEY_LEN];

static void make(struct wire_pkt *p, uint8_t *bits, float *data, unsigned n, uint8_t flags)
{
	memset(p, 0, sizeof(*p));
	p->bth = (struct wire_bth){ .opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM, .pkey = 0xFFFF,
				    .dest_qp = 0x101, .psn = 5 };
	p->reth = (struct wire_reth){ .va = 4096, .rkey = 0x1234 };
	p->imm = 1000;
	memset(bits, 0, 8);
	bits[7] = 2;
	p->inca = (struct wire_inca){ .version = 1, .flags = flags | WIRE_F_AUTH, .coll = 1,
				      .dtype = WIRE_DT_FP32, .op = WIRE_OP_SUM, .tree_id = 7, .slot = 3,
				      .round = 1000, .bfr_id = 2, .bsl_code = 1, .count = n,
				      .bits = bits, .epoch = 9 };
	p->auth = (struct wire_auth){ .key_id = 0x11, .ctx = 2, .ctr = 0x0123456789abcdefull };
	for (unsigned i = 0; i < n; i++)
		data[i] = (float)i * 0.5f;
	p->data = (const uint8_t *)data;
	p->data_len = n * 4;
}

static void test_roundtrip_and_tamper(uint8_t flags)
{
	struct wire_mac *m1, *m2;
	struct wire_pkt p, d;
	uint8_t bits[8], buf[WIRE_MAX_UDP_PAYLOAD], copy[WIRE_MAX_UDP_PAYLOAD];
	float data[64];
	unsigned n = flags & WIRE_F_NACK ? 0 : 5;

	CHECK(wire_mac_new(&m1, key1) == 0);
	CHECK(wire_mac_new(&m2, key2) == 0);
	make(&p, bits, data, n, flags);
	CHECK(wire_mac_sign(m1, &p) == 0);
	int len = wire_encode_udp(buf, sizeof(buf), &p, &IP);
	CHECK(len == (int)wire_pkt_udp_len(&p));
	CHECK(len == (int)wire_udp_payload_len_auth(1, n * 4, true));
	CHECK(wire_decode_udp(buf, (size_t)len, &d, &IP) == WIRE_OK);
	CHECK(d.inca.flags == p.inca.flags && d.inca.epoch == 9 && d.auth.key_id == 0x11 &&
	      d.auth.ctx == 2 && d.auth.ctr == p.auth.ctr &&
	      !memcmp(d.auth.tag, p.auth.tag, WIRE_AUTH_TAG_LEN));
	CHECK(d.reth.dma_len == 20 + 8 + WIRE_AUTH_LEN + n * 4);
	CHECK(d.data_len == n * 4 && !memcmp(d.data, data, n * 4));
	CHECK(wire_mac_verify(m1, &d) == 0);
	CHECK(wire_mac_verify(m2, &d) == -EBADMSG);
	/* Re-encoding the decoded packet gives the same bytes. */
	CHECK(wire_encode_udp(copy, sizeof(copy), &d, &IP) == len && !memcmp(copy, buf, (size_t)len));

	/* Flip every bit of every byte from the RETH to the data; the decoder (without ICRC, as a
	 * switch with auth runs) either rejects the packet or the MAC fails, except for the
	 * bit-string of a downward packet. */
	size_t bs_off = WIRE_ROCE_HDR_LEN + WIRE_INCA_FIXED_LEN;
	bool down = flags & (WIRE_F_RESULT | WIRE_F_NACK);
	int accepted_uncovered = 0;
	for (size_t off = WIRE_BTH_LEN; off < (size_t)len - WIRE_ICRC_LEN; off++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, buf, (size_t)len);
			copy[off] ^= (uint8_t)(1u << bit);
			if (wire_decode_udp(copy, (size_t)len, &d, NULL) != WIRE_OK)
				continue;
			int v = wire_mac_verify(m1, &d);
			if (down && off >= bs_off && off < bs_off + 8) {
				CHECK(v == 0);
				accepted_uncovered++;
			} else {
				CHECK_MSG(v != 0, "flags %#x: flip at %zu bit %d verified", flags, off,
					  bit);
			}
		}
	}
	CHECK(accepted_uncovered == (down ? 64 : 0));
	/* The BTH (DestQP, PSN) is not covered: per-copy fields. */
	memcpy(copy, buf, (size_t)len);
	copy[11] ^= 1;
	CHECK(wire_decode_udp(copy, (size_t)len, &d, NULL) == WIRE_OK && wire_mac_verify(m1, &d) == 0);
	/* A different sender context or counter is a different nonce: the tag fails. */
	CHECK(wire_decode_udp(buf, (size_t)len, &d, NULL) == WIRE_OK);
	d.auth.ctx = 3;
	CHECK(wire_mac_verify(m1, &d) == -EBADMSG);
	wire_mac_free(m1);
	wire_mac_free(m2);
}

static void test_sizes_and_checks(void)
{
	struct wire_pkt p;
	uint8_t bits[8], buf[WIRE_MAX_UDP_PAYLOAD];
	float data[1100];

	CHECK(wire_max_data_auth(4096, 4, 1, false) == wire_max_data(4096, 4, 1));
	CHECK(wire_max_data_auth(4096, 4, 1, true) == 4096 - 28 - 36);
	CHECK(wire_max_data_auth(256, 4, 1, true) == 192);
	/* A full auth packet fits exactly; one element more does not. */
	make(&p, bits, data, (unsigned)(wire_max_data_auth(4096, 4, 1, true) / 4), 0);
	CHECK(wire_encode_udp(buf, sizeof(buf), &p, &IP) > 0);
	make(&p, bits, data, (unsigned)(wire_max_data_auth(4096, 4, 1, true) / 4) + 1, 0);
	CHECK(wire_encode_udp(buf, sizeof(buf), &p, &IP) == -EINVAL);
	/* An epoch needs an auth block. */
	make(&p, bits, data, 1, 0);
	p.inca.flags = 0;
	CHECK(wire_encode_udp(buf, sizeof(buf), &p, &IP) == -EINVAL);
	p.inca.epoch = 0;
	int len = wire_encode_udp(buf, sizeof(buf), &p, &IP);
	CHECK(len == (int)wire_udp_payload_len(1, 4));
	struct wire_pkt d;
	CHECK(wire_decode_udp(buf, (size_t)len, &d, &IP) == WIRE_OK && d.inca.epoch == 0);
	CHECK(wire_auth_aad(&p, buf) == 0); /* no auth flag: no MAC input */
	/* Setting the AUTH flag on a packet without a block makes it too short or miscounted. */
	buf[WIRE_ROCE_HDR_LEN] |= WIRE_F_AUTH;
	CHECK(wire_decode_udp(buf, (size_t)len, &d, NULL) != WIRE_OK);

	uint8_t k[WIRE_AUTH_KEY_LEN];
	char hex[2 * WIRE_AUTH_KEY_LEN + 1];
	wire_auth_key_hex(key1, hex);
	CHECK(wire_auth_key_parse(hex, k) == 0 && !memcmp(k, key1, sizeof(k)));
	CHECK(wire_auth_key_parse("00", k) == -EINVAL);
	hex[5] = 'g';
	CHECK(wire_auth_key_parse(hex, k) == -EINVAL);
	CHECK(wire_auth_ctr_start() != wire_auth_ctr_start());
	/* Time-ordered starts: a later process starts above an earlier one's first 4M packets
	 * per millisecond (checked loosely: 1 ms later, more than 2^22 higher). */
	{
		uint64_t a = wire_auth_ctr_start(), b;
		struct timespec ms = { 0, 2000000 };
		nanosleep(&ms, NULL);
		b = wire_auth_ctr_start();
		CHECK(!(a >> 63) && !(b >> 63) && b > a + (1ull << 22));
	}
}

/* The anti-replay window: new counters pass, a repeat or anything below the window fails,
 * reordering inside the window passes once, a newer epoch restarts the window and an older
 * one is refused. */
static void test_replay(void)
{
	static struct wire_replay w; /* zero: no packet seen */
	const uint64_t base = 1ull << 40;
	const uint32_t e = 1000;

	CHECK(wire_replay_check(&w, e, base) == 0);
	wire_replay_update(&w, e, base);
	CHECK(wire_replay_check(&w, e, base) == -EALREADY);
	/* forward, with holes */
	for (uint64_t i = 1; i <= 100; i += 3) {
		CHECK(wire_replay_check(&w, e, base + i) == 0);
		wire_replay_update(&w, e, base + i);
	}
	CHECK(wire_replay_check(&w, e, base + 4) == -EALREADY);
	CHECK(wire_replay_check(&w, e, base + 5) == 0); /* a hole: late, not a replay */
	wire_replay_update(&w, e, base + 5);
	CHECK(wire_replay_check(&w, e, base + 5) == -EALREADY);
	/* a jump of exactly the window: everything at or below top - WINDOW is too old */
	uint64_t top = base + 100 + WIRE_REPLAY_WINDOW;
	CHECK(wire_replay_check(&w, e, top) == 0);
	wire_replay_update(&w, e, top);
	CHECK(wire_replay_check(&w, e, base + 100) == -ESTALE);
	CHECK(wire_replay_check(&w, e, top - WIRE_REPLAY_WINDOW + 1) == 0);
	CHECK(wire_replay_check(&w, e, top - 1) == 0);
	/* every counter of a window, in reverse order, passes once and then never again */
	uint64_t t2 = top + 10 * WIRE_REPLAY_WINDOW + 37;
	wire_replay_update(&w, e, t2);
	for (uint64_t i = 1; i < WIRE_REPLAY_WINDOW; i++) {
		CHECK(wire_replay_check(&w, e, t2 - i) == 0);
		wire_replay_update(&w, e, t2 - i);
	}
	for (uint64_t i = 0; i < WIRE_REPLAY_WINDOW; i++)
		CHECK(wire_replay_check(&w, e, t2 - i) == -EALREADY);
	CHECK(wire_replay_check(&w, e, t2 - WIRE_REPLAY_WINDOW) == -ESTALE);
	/* small forward steps keep the bits of the counters still inside */
	wire_replay_update(&w, e, t2 + 70);
	CHECK(wire_replay_check(&w, e, t2 + 70 - WIRE_REPLAY_WINDOW + 1) == -EALREADY);
	CHECK(wire_replay_check(&w, e, t2 + 69) == 0);
	/* epochs: an older one is refused whatever its counter, a newer one restarts the window
	 * (even below the old top: a new job's sender), and wraps compare as serial numbers */
	CHECK(wire_replay_check(&w, e - 1, t2 + 1000000) == -ESTALE);
	CHECK(wire_replay_check(&w, e + 1, 5) == 0);
	wire_replay_update(&w, e + 1, 5);
	CHECK(wire_replay_check(&w, e + 1, 5) == -EALREADY);
	CHECK(wire_replay_check(&w, e, t2 + 200) == -ESTALE);
	CHECK(wire_replay_check(&w, e + 1, 6) == 0);
	memset(&w, 0, sizeof w);
	wire_replay_update(&w, UINT32_MAX, 9);
	CHECK(wire_replay_check(&w, 1, 3) == 0); /* 1 is after UINT32_MAX */
}

/* OpenSSL's AES-256-GCM tag of AAD a || b with no plaintext. */
static void evp_tag(const uint8_t key[32], const uint8_t iv[12], const uint8_t *a, size_t alen,
		    const uint8_t *b, size_t blen, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int ol;
	CHECK(c != NULL);
	CHECK(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1);
	CHECK(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1);
	CHECK(EVP_EncryptInit_ex(c, NULL, NULL, key, iv) == 1);
	if (alen)
		CHECK(EVP_EncryptUpdate(c, NULL, &ol, a, (int)alen) == 1);
	if (blen)
		CHECK(EVP_EncryptUpdate(c, NULL, &ol, b, (int)blen) == 1);
	CHECK(EVP_EncryptFinal_ex(c, NULL, &ol) == 1);
	CHECK(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1);
	EVP_CIPHER_CTX_free(c);
}

static void test_gmac_matches_openssl(void)
{
	static struct wire__gmac g;
	static uint8_t buf[9000];
	uint8_t key[32], iv[12], t1[16], t2[16];
	unsigned seed = 12345;

	if (!wire__gmac_init(&g, key1)) {
		printf("auth_test: no AES-NI/PCLMULQDQ here, gmac.c comparison skipped\n");
		return;
	}
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)rand_r(&seed);
	for (int trial = 0; trial < 3000; trial++) {
		for (int i = 0; i < 32; i++)
			key[i] = (uint8_t)rand_r(&seed);
		for (int i = 0; i < 12; i++)
			iv[i] = (uint8_t)rand_r(&seed);
		/* short inputs exhaustively, then lengths across several power-table groups */
		size_t alen = trial < 600 ? (size_t)trial % 40 : (size_t)rand_r(&seed) % 700;
		size_t blen = trial < 600 ? (size_t)trial / 40 : (size_t)rand_r(&seed) % 8200;
		const uint8_t *a = buf + rand_r(&seed) % 64, *b = buf + 800 + rand_r(&seed) % 3;
		CHECK(wire__gmac_init(&g, key));
		/* every other trial on 128-bit lanes, as on a CPU without VPCLMULQDQ */
		if (trial % 2)
			g.wide = false;
		wire__gmac_tag(&g, iv, a, alen, blen ? b : NULL, blen, t1);
		evp_tag(key, iv, a, alen, b, blen, t2);
		if (memcmp(t1, t2, 16) != 0) {
			fprintf(stderr, "gmac mismatch: trial %d alen %zu blen %zu wide %d\n", trial,
				alen, blen, (int)g.wide);
			CHECK(0);
		}
		/* the same nonce given as (ctx, ctr), both big-endian in it */
		uint32_t ctx = 0;
		uint64_t ctr = 0;
		for (int i = 0; i < 4; i++)
			ctx = ctx << 8 | iv[i];
		for (int i = 4; i < 12; i++)
			ctr = ctr << 8 | iv[i];
		wire__gmac_tag_nonce(&g, ctx, ctr, a, alen, blen ? b : NULL, blen, t1);
		CHECK(memcmp(t1, t2, 16) == 0);
	}
}

/* A struct wire_mac on gmac.c and one on OpenSSL EVP sign a packet alike. */
static void test_mac_impls_agree(void)
{
	struct wire_mac *fast, *evp;
	struct wire_pkt p;
	uint8_t bits[8], t_fast[16];
	float data[1000];

	CHECK(wire_mac_new(&fast, key1) == 0);
	CHECK(setenv("INCA_MAC_IMPL", "openssl", 1) == 0);
	CHECK(wire_mac_new(&evp, key1) == 0);
	CHECK(unsetenv("INCA_MAC_IMPL") == 0);
	CHECK(!wire_mac_is_fast(evp));
	unsigned seed = 777;
	for (unsigned n = 0; n <= 1000; n += 37) {
		make(&p, bits, data, n, 0);
		p.auth.ctx = (uint32_t)rand_r(&seed) << 1 ^ (uint32_t)rand_r(&seed);
		p.auth.ctr = ((uint64_t)rand_r(&seed) << 33 ^ (uint64_t)rand_r(&seed) << 2) &
			     (UINT64_MAX >> 1);
		CHECK(wire_mac_sign(fast, &p) == 0);
		memcpy(t_fast, p.auth.tag, 16);
		CHECK(wire_mac_sign(evp, &p) == 0);
		CHECK(memcmp(t_fast, p.auth.tag, 16) == 0);
		CHECK(wire_mac_verify(fast, &p) == 0);
	}
	wire_mac_free(fast);
	wire_mac_free(evp);
}

int main(void)
{
	CHECK(wire_auth_key_random(key1) == 0);
	CHECK(wire_auth_key_random(key2) == 0);
	test_roundtrip_and_tamper(0);
	test_roundtrip_and_tamper(WIRE_F_RETX);
	test_roundtrip_and_tamper(WIRE_F_RESULT);
	test_roundtrip_and_tamper(WIRE_F_NACK);
	test_sizes_and_checks();
	test_replay();
	test_gmac_matches_openssl();
	test_mac_impls_agree();
	printf("auth_test: ok\n");
	return 0;
}
