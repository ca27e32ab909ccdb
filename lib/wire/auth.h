/* lib/wire authentication: the MAC of INCA packets that carry an authentication block
 * (WIRE_F_AUTH, docs/protocol.md §14). AES-256-GMAC (OpenSSL EVP, AES-GCM with the whole MAC
 * input as additional data and no plaintext) under a sub-key derived from the 32-byte group key
 * with HKDF-SHA256; the 96-bit GCM nonce is the sender context (4 bytes) followed by the nonce
 * counter (8 bytes), both from the auth block. A struct wire_mac is used by one thread at a
 * time. */
#ifndef INCA_WIRE_AUTH_H
#define INCA_WIRE_AUTH_H

#include "wire/wire.h"

struct wire_mac;

/* Derive the MAC key from the group key. 0, -ENOMEM or -EIO (OpenSSL failure). */
int wire_mac_new(struct wire_mac **out, const uint8_t key[WIRE_AUTH_KEY_LEN]);
void wire_mac_free(struct wire_mac *m);

/* Compute pkt->auth.tag over pkt (WIRE_F_AUTH set, auth.key_id/ctx/ctr and inca.epoch filled
 * in). 0, -EINVAL (not an encodable auth packet) or -EIO. */
int wire_mac_sign(struct wire_mac *m, struct wire_pkt *pkt);
/* Check pkt->auth.tag (a decoded packet). 0, -EBADMSG (wrong tag), -EINVAL or -EIO. */
int wire_mac_verify(struct wire_mac *m, const struct wire_pkt *pkt);

/* A nonce counter start that no earlier process using the same key is likely to have used:
 * 64 random bits (getrandom) with the top bit clear, so 2^63 packets fit before a wrap. */
uint64_t wire_auth_ctr_start(void);

/* Parse 64 hex digits into key. 0 or -EINVAL. */
int wire_auth_key_parse(const char *hex, uint8_t key[WIRE_AUTH_KEY_LEN]);
/* Fill key with random bytes (getrandom). 0 or -errno. */
int wire_auth_key_random(uint8_t key[WIRE_AUTH_KEY_LEN]);
/* Write key as 64 hex digits + NUL into out (at least 65 bytes). */
void wire_auth_key_hex(const uint8_t key[WIRE_AUTH_KEY_LEN], char *out);

#endif
