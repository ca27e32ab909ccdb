/* bench-mac: cost of the packet MAC candidates on this machine, per packet, for a 4 KiB
 * packet's MAC input (4152 bytes) and a header-only one (100 bytes): AES-256-GMAC and
 * AES-128-GMAC through OpenSSL EVP, Poly1305 with a per-packet ChaCha20 one-time key through
 * OpenSSL, and the real wire_mac_sign path (lib/wire/gmac.c where the CPU allows) beside the
 * same path forced through EVP (INCA_MAC_IMPL=openssl). Prints
 * nanoseconds per packet (best of 5 runs). */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cli.h"
#include "wire/auth.h"

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t buf[4152];

static double gmac(const EVP_CIPHER *c, size_t len, int n)
{
	static const uint8_t key[32] = { 1 };
	uint8_t iv[12] = { 0 }, tag[16];
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int ol;
	EVP_EncryptInit_ex(x, c, NULL, key, NULL);
	double t = now_s();
	for (int i = 0; i < n; i++) {
		iv[11] = (uint8_t)i;
		iv[10] = (uint8_t)(i >> 8);
		EVP_EncryptInit_ex(x, NULL, NULL, NULL, iv);
		EVP_EncryptUpdate(x, NULL, &ol, buf, (int)len);
		EVP_EncryptFinal_ex(x, NULL, &ol);
		EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, 16, tag);
	}
	t = now_s() - t;
	EVP_CIPHER_CTX_free(x);
	return t / n * 1e9;
}

static double poly(size_t len, int n)
{
	static const uint8_t key[32] = { 1 }, zero[32];
	uint8_t iv[16] = { 0 }, pk[32], tag[16];
	EVP_MAC *m = EVP_MAC_fetch(NULL, "POLY1305", NULL);
	EVP_CIPHER_CTX *cc = EVP_CIPHER_CTX_new();
	int ol;
	size_t tl;
	double t = now_s();
	for (int i = 0; i < n; i++) {
		iv[15] = (uint8_t)i;
		EVP_EncryptInit_ex(cc, EVP_chacha20(), NULL, key, iv);
		EVP_EncryptUpdate(cc, pk, &ol, zero, 32);
		EVP_MAC_CTX *mc = EVP_MAC_CTX_new(m);
		EVP_MAC_init(mc, pk, 32, NULL);
		EVP_MAC_update(mc, buf, len);
		EVP_MAC_final(mc, tag, &tl, 16);
		EVP_MAC_CTX_free(mc);
	}
	t = now_s() - t;
	EVP_CIPHER_CTX_free(cc);
	EVP_MAC_free(m);
	return t / n * 1e9;
}

static double wire_path(size_t data_len, int n)
{
	static const uint8_t key[WIRE_AUTH_KEY_LEN] = { 1 };
	static uint8_t bits[8] = { 0, 0, 0, 0, 0, 0, 0, 1 };
	struct wire_mac *m;
	struct wire_pkt p;
	if (wire_mac_new(&m, key) < 0)
		return -1;
	memset(&p, 0, sizeof p);
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.inca = (struct wire_inca){ .version = 1, .flags = WIRE_F_AUTH, .coll = 1,
				     .dtype = WIRE_DT_FP32, .bsl_code = 1, .bfr_id = 1,
				     .count = (uint16_t)(data_len / 4), .bits = bits };
	p.auth.ctx = 1;
	p.data = buf;
	p.data_len = (uint32_t)data_len;
	double t = now_s();
	for (int i = 0; i < n; i++) {
		p.auth.ctr++;
		wire_mac_sign(m, &p);
	}
	t = now_s() - t;
	wire_mac_free(m);
	return t / n * 1e9;
}

#define BEST(expr)                                                                     \
	({                                                                             \
		double b_ = 1e30;                                                      \
		for (int r_ = 0; r_ < 5; r_++) {                                       \
			double v_ = (expr);                                            \
			if (v_ < b_)                                                   \
				b_ = v_;                                               \
		}                                                                      \
		b_;                                                                    \
	})

int main(int argc, char **argv)
{
	/* No options: the figures are fixed, --version and --help are all there is. */
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		util_cli_print_version("bench-mac");
		return 0;
	}
	if (argc > 1) {
		printf("usage: bench-mac [--version]: prints its table, takes no options\n");
		return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
	}
	const int n = 50000;
	memset(buf, 7, sizeof buf);
	printf("# bench-mac: ns per packet, best of 5 runs of %d\n", n);
	printf("%-44s %10s %10s\n", "candidate", "4152 B", "100 B");
	printf("%-44s %10.0f %10.0f\n", "AES-256-GMAC (EVP AES-256-GCM, AAD only)",
	       BEST(gmac(EVP_aes_256_gcm(), 4152, n)), BEST(gmac(EVP_aes_256_gcm(), 100, n)));
	printf("%-44s %10.0f %10.0f\n", "AES-128-GMAC (EVP AES-128-GCM, AAD only)",
	       BEST(gmac(EVP_aes_128_gcm(), 4152, n)), BEST(gmac(EVP_aes_128_gcm(), 100, n)));
	printf("%-44s %10.0f %10.0f\n", "ChaCha20 one-time key + Poly1305 (EVP_MAC)",
	       BEST(poly(4152, n)), BEST(poly(100, n)));
	printf("%-44s %10.0f %10.0f\n", "wire_mac_sign (4032 B data / header-only)",
	       BEST(wire_path(4032, n)), BEST(wire_path(0, n)));
	/* the same path forced through OpenSSL EVP (what CPUs without AES-NI/PCLMULQDQ run) */
	setenv("INCA_MAC_IMPL", "openssl", 1);
	printf("%-44s %10.0f %10.0f\n", "wire_mac_sign, INCA_MAC_IMPL=openssl",
	       BEST(wire_path(4032, n)), BEST(wire_path(0, n)));
	unsetenv("INCA_MAC_IMPL");
	return 0;
}
