/* lib/wire authentication: the MAC of INCA packets that carry an authentication block
 * (WIRE_F_AUTH, docs/protocol.md §14). AES-256-GMAC (OpenSSL EVP, AES-GCM with the whole MAC
 * input as additional data and no plaintext; our own AES-NI/PCLMULQDQ code where the CPU has it,
 * the same tag at a third of OpenSSL 3's per-packet cost; INCA_MAC_IMPL=openssl forces EVP)
 * under a sub-key derived from the 32-byte group key
 * with HKDF-SHA256; the 96-bit GCM nonce is the sender context (4 bytes) followed by the nonce
 * counter (8 bytes), both from the auth block. A struct wire_mac is used by one thread at a
 * time. */
#ifndef INCA_WIRE_AUTH_H
#define INCA_WIRE_AUTH_H

#include <stdbool.h>

#include "wire/wire.h"

struct wire_mac;

/* Derive the MAC key from the group key. 0, -ENOMEM or -EIO (OpenSSL failure). */
int wire_mac_new(struct wire_mac **out, const uint8_t key[WIRE_AUTH_KEY_LEN]);
void wire_mac_free(struct wire_mac *m);
/* True if m computes tags with the AES-NI/PCLMULQDQ code, false if through OpenSSL EVP. */
bool wire_mac_is_fast(const struct wire_mac *m);

/* Compute pkt->auth.tag over pkt (WIRE_F_AUTH set, auth.key_id/ctx/ctr and inca.epoch filled
 * in). 0, -EINVAL (not an encodable auth packet) or -EIO. */
int wire_mac_sign(struct wire_mac *m, struct wire_pkt *pkt);
/* Check pkt->auth.tag (a decoded packet). 0, -EBADMSG (wrong tag), -EINVAL or -EIO. */
int wire_mac_verify(struct wire_mac *m, const struct wire_pkt *pkt);

/* A nonce counter start above every counter an earlier process with the same key and
 * context used: the wall clock in ms since 2024 (41 bits, good until 2093) shifted left 22,
 * plus 22 random bits, top bit clear. A process would have to send 4 million packets per
 * millisecond of its life to reach its successor's start, so a restarted sender is never
 * taken for a replay (struct wire_replay), and two senders that share a context by mistake
 * start apart unless they start in the same millisecond (then 22 random bits). */
uint64_t wire_auth_ctr_start(void);

/* Anti-replay window of one sender (IPsec style, RFC 4303 §3.4.3): the highest nonce counter
 * accepted and a bitmap of the WIRE_REPLAY_WINDOW counters below it, per job epoch. A packet
 * with a newer epoch (serial comparison) starts the window afresh; an older epoch, a counter
 * below the window or one already seen is a replay. Zero-initialise; one thread per window.
 * Check before the MAC (cheap drop of replays), update only once the MAC held. */
#define WIRE_REPLAY_WINDOW 1024
#define WIRE_REPLAY_WORDS (WIRE_REPLAY_WINDOW / 64 + 1)
struct wire_replay {
	bool used;
	uint32_t epoch;
	uint64_t top;
	uint64_t bits[WIRE_REPLAY_WORDS]; /* ring by counter / 64: bit ctr % 64 = seen */
};
/* 0: new; -EALREADY: counter already seen; -ESTALE: below the window or an older epoch. */
int wire_replay_check(const struct wire_replay *w, uint32_t epoch, uint64_t ctr);
/* Record an authentic packet (after wire_replay_check returned 0 and the MAC held). */
void wire_replay_update(struct wire_replay *w, uint32_t epoch, uint64_t ctr);

/* Parse 64 hex digits into key. 0 or -EINVAL. */
int wire_auth_key_parse(const char *hex, uint8_t key[WIRE_AUTH_KEY_LEN]);
/* Fill key with random bytes (getrandom). 0 or -errno. */
int wire_auth_key_random(uint8_t key[WIRE_AUTH_KEY_LEN]);
/* Write key as 64 hex digits + NUL into out (at least 65 bytes). */
void wire_auth_key_hex(const uint8_t key[WIRE_AUTH_KEY_LEN], char *out);

#endif
