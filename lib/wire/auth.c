/* AES-256-GMAC of INCA packets (see auth.h): gmac.c where the CPU has AES-NI and PCLMULQDQ,
 * OpenSSL EVP elsewhere; the key derivation, replay windows and key text helpers. */
#include "wire/auth.h"
#include "wire/wire_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

struct wire_mac {
	struct wire__gmac g; /* used when fast */
	bool fast;
	EVP_CIPHER_CTX *ctx; /* otherwise: AES-256-GCM with the key schedule done once */
};

static const char hkdf_info[] = "INCA packet MAC v1: AES-256-GMAC";

static int derive(const uint8_t key[WIRE_AUTH_KEY_LEN], uint8_t out[32])
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *k = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM p[4];
	int rc = -EIO;

	if (k) {
		p[0] = OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0);
		p[1] = OSSL_PARAM_construct_octet_string("key", (void *)key, WIRE_AUTH_KEY_LEN);
		p[2] = OSSL_PARAM_construct_octet_string("info", (void *)hkdf_info,
							 sizeof(hkdf_info) - 1);
		p[3] = OSSL_PARAM_construct_end();
		if (EVP_KDF_derive(k, out, 32, p) == 1)
			rc = 0;
	}
	EVP_KDF_CTX_free(k);
	EVP_KDF_free(kdf);
	return rc;
}

int wire_mac_new(struct wire_mac **out, const uint8_t key[WIRE_AUTH_KEY_LEN])
{
	uint8_t sub[32];
	struct wire_mac *m;
	int rc;

	if (!out || !key)
		return -EINVAL;
	*out = NULL;
	m = aligned_alloc(_Alignof(struct wire_mac),
			  (sizeof(*m) + _Alignof(struct wire_mac) - 1) & ~(_Alignof(struct wire_mac) - 1));
	if (!m)
		return -ENOMEM;
	memset(m, 0, sizeof(*m));
	rc = derive(key, sub);
	if (!rc && !wire__mac_evp_forced())
		m->fast = wire__gmac_init(&m->g, sub);
	if (!rc && !m->fast) {
		m->ctx = EVP_CIPHER_CTX_new();
		if (!m->ctx)
			rc = -ENOMEM;
		else if (EVP_EncryptInit_ex(m->ctx, EVP_aes_256_gcm(), NULL, sub, NULL) != 1 ||
			 EVP_CIPHER_CTX_ctrl(m->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1)
			rc = -EIO;
	}
	OPENSSL_cleanse(sub, sizeof(sub));
	if (rc) {
		wire_mac_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void wire_mac_free(struct wire_mac *m)
{
	if (!m)
		return;
	EVP_CIPHER_CTX_free(m->ctx);
	OPENSSL_cleanse(m, sizeof(*m));
	free(m);
}

static int compute(struct wire_mac *m, const struct wire_pkt *pkt, uint8_t tag[WIRE_AUTH_TAG_LEN])
{
	uint8_t aad[WIRE_AUTH_AAD_MAX], iv[12];
	size_t n;
	int ol;

	if (!m || !pkt)
		return -EINVAL;
	n = wire_auth_aad(pkt, aad);
	if (!n)
		return -EINVAL;
	if (m->fast) {
		wire__gmac_tag_nonce(&m->g, pkt->auth.ctx, pkt->auth.ctr, aad, n,
				     pkt->data_len ? pkt->data : NULL, pkt->data_len, tag);
		return 0;
	}
	for (int i = 0; i < 4; i++)
		iv[i] = (uint8_t)(pkt->auth.ctx >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(pkt->auth.ctr >> (56 - 8 * i));
	if (EVP_EncryptInit_ex(m->ctx, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(m->ctx, NULL, &ol, aad, (int)n) != 1 ||
	    (pkt->data_len && EVP_EncryptUpdate(m->ctx, NULL, &ol, pkt->data, (int)pkt->data_len) != 1) ||
	    EVP_EncryptFinal_ex(m->ctx, NULL, &ol) != 1 ||
	    EVP_CIPHER_CTX_ctrl(m->ctx, EVP_CTRL_GCM_GET_TAG, WIRE_AUTH_TAG_LEN, tag) != 1)
		return -EIO;
	return 0;
}

bool wire__mac_evp_forced(void)
{
	const char *e = getenv("INCA_MAC_IMPL");
	return e && strcmp(e, "openssl") == 0;
}

bool wire_mac_is_fast(const struct wire_mac *m)
{
	return m && m->fast;
}

int wire_mac_sign(struct wire_mac *m, struct wire_pkt *pkt)
{
	if (!pkt)
		return -EINVAL;
	return compute(m, pkt, pkt->auth.tag);
}

int wire_mac_verify(struct wire_mac *m, const struct wire_pkt *pkt)
{
	uint8_t tag[WIRE_AUTH_TAG_LEN];
	int rc = compute(m, pkt, tag);

	if (rc)
		return rc;
	return CRYPTO_memcmp(tag, pkt->auth.tag, WIRE_AUTH_TAG_LEN) ? -EBADMSG : 0;
}

/* 2024-01-01T00:00:00Z in ms since the Unix epoch: the counter clock's origin. */
#define CTR_CLOCK_ORIGIN_MS 1704067200000ull
#define CTR_RANDOM_BITS 22

uint64_t wire_auth_ctr_start(void)
{
	struct timespec ts;
	uint64_t r = 0, ms = 0;

	while (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		;
	if (clock_gettime(CLOCK_REALTIME, &ts) == 0) {
		ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
		ms = ms > CTR_CLOCK_ORIGIN_MS ? ms - CTR_CLOCK_ORIGIN_MS : 0;
	}
	return ((ms << CTR_RANDOM_BITS) | (r & ((1ull << CTR_RANDOM_BITS) - 1))) &
	       (UINT64_MAX >> 1);
}

int wire_replay_check(const struct wire_replay *w, uint32_t epoch, uint64_t ctr)
{
	int32_t de = (int32_t)(epoch - w->epoch);
	uint64_t back;

	if (!w->used || de > 0)
		return 0;
	if (de < 0)
		return -ESTALE;
	if (ctr > w->top)
		return 0;
	back = w->top - ctr;
	if (back >= WIRE_REPLAY_WINDOW)
		return -ESTALE;
	return w->bits[(ctr / 64) % WIRE_REPLAY_WORDS] & (1ull << (ctr % 64)) ? -EALREADY : 0;
}

void wire_replay_update(struct wire_replay *w, uint32_t epoch, uint64_t ctr)
{
	const uint64_t words = WIRE_REPLAY_WORDS;

	if (!w->used || (int32_t)(epoch - w->epoch) > 0) {
		memset(w->bits, 0, sizeof w->bits);
		w->used = true;
		w->epoch = epoch;
		w->top = ctr;
	} else if (ctr > w->top) {
		/* Slide: the words after the old top's up to the new top's are fresh. The bitmap
		 * is a ring of words indexed by counter with one word more than the window (RFC
		 * 6479), so a word that comes in never holds a counter still inside the window. */
		uint64_t ow = w->top / 64, nw = ctr / 64;

		if (nw - ow >= words)
			memset(w->bits, 0, sizeof w->bits);
		else
			for (uint64_t i = ow + 1; i <= nw; i++)
				w->bits[i % words] = 0;
		w->top = ctr;
	}
	w->bits[(ctr / 64) % words] |= 1ull << (ctr % 64);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int wire_auth_key_parse(const char *hex, uint8_t key[WIRE_AUTH_KEY_LEN])
{
	if (!hex || !key || strlen(hex) != 2 * WIRE_AUTH_KEY_LEN)
		return -EINVAL;
	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int wire_auth_key_random(uint8_t key[WIRE_AUTH_KEY_LEN])
{
	ssize_t n = getrandom(key, WIRE_AUTH_KEY_LEN, 0);
	return n == WIRE_AUTH_KEY_LEN ? 0 : n < 0 ? -errno : -EIO;
}

void wire_auth_key_hex(const uint8_t key[WIRE_AUTH_KEY_LEN], char *out)
{
	static const char d[] = "0123456789abcdef";
	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++) {
		out[2 * i] = d[key[i] >> 4];
		out[2 * i + 1] = d[key[i] & 15];
	}
	out[2 * WIRE_AUTH_KEY_LEN] = 0;
}
