/* lib/wire: encoder and strict decoder for INCA packets on RoCEv2.
 * Eth | IPv4 (DF) | UDP dst 4791 | BTH (0x2B) | RETH | ImmDt | INCA header | data | pad | ICRC.
 * The byte layout is specified in docs/protocol.md; this header is its C mirror.
 * No I/O, no allocation, no globals except constant tables: safe from any thread. */
#ifndef INCA_WIRE_H
#define INCA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/dtype.h"

#define WIRE_ROCE_UDP_PORT 4791
#define WIRE_ETH_LEN 14
#define WIRE_IPV4_LEN 20
#define WIRE_UDP_LEN 8
#define WIRE_BTH_LEN 12
#define WIRE_RETH_LEN 16
#define WIRE_IMMDT_LEN 4
#define WIRE_ICRC_LEN 4
#define WIRE_OPCODE_UC_WRITE_ONLY_IMM 0x2B
#define WIRE_PKEY_DEFAULT 0xFFFF
/* Length in bytes of the group key of data-plane authentication (docs/protocol.md §14): every
 * tree generation the AM builds has its own random key, named by a nonzero 32-bit key id. */
#define WIRE_AUTH_KEY_LEN 32

/* IBTA P_Key match, as an HCA checks a packet against its QP's P_Key: the low 15 bits
 * (partition) equal and at least one of the two a full member (bit 15 set). Two limited
 * members of one partition do not match. */
static inline int wire_pkey_match(uint16_t a, uint16_t b)
{
	return (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000) != 0;
}

#define WIRE_INCA_VERSION 1
#define WIRE_INCA_FIXED_LEN 20 /* INCA header without the bit-string */
#define WIRE_BSL_MIN 64        /* bits */
#define WIRE_BSL_MAX 4096

/* Bytes before the INCA header in the UDP payload (BTH + RETH + ImmDt). */
#define WIRE_ROCE_HDR_LEN (WIRE_BTH_LEN + WIRE_RETH_LEN + WIRE_IMMDT_LEN)
/* Largest UDP payload an INCA packet can have: headers + IB payload up to 4096 + pad + ICRC. */
#define WIRE_MAX_UDP_PAYLOAD (WIRE_ROCE_HDR_LEN + 4096 + 3 + WIRE_ICRC_LEN)
#define WIRE_MTU_MIN 256
#define WIRE_MTU_MAX 4096

/* INCA header flags (low nibble of byte 0). */
#define WIRE_F_RESULT 0x1 /* downward: an aggregation result (root -> members) */
#define WIRE_F_RETX 0x2   /* the sender retransmitted this packet after a timeout */
/* downward, header-only: a repair notice. The switch names in the bit-string the members (or
 * child switches) whose contribution to this slot round it still misses although a later
 * chunk completed or a waiting member asked; they resend it at once (docs/protocol.md
 * "Repair notices"). Never together with RESULT or RETX, Count 0. */
#define WIRE_F_NACK 0x4
/* An authentication block (WIRE_AUTH_LEN bytes, struct wire_auth) follows the bit-string,
 * before the data; its tag is a MAC over the packet (docs/protocol.md §14). */
#define WIRE_F_AUTH 0x8
#define WIRE_F_MASK 0xF

/* Authentication block: key id (4) | job epoch (4) | sender context (4) | nonce counter (8) |
 * tag (16). */
#define WIRE_AUTH_LEN 36
#define WIRE_AUTH_TAG_LEN 16
/* Sender contexts: a member's is its BFR-id (1..65535); a switch's is WIRE_AUTH_CTX_SWITCH |
 * its BFR-id in the tree (0 for a root). */
#define WIRE_AUTH_CTX_SWITCH 0x10000u
/* Bytes of MAC input before the data: RETH + ImmDt + INCA fixed header + bit-string (upward
 * packets only) + the auth block without its tag. */
#define WIRE_AUTH_AAD_MAX (WIRE_RETH_LEN + WIRE_IMMDT_LEN + WIRE_INCA_FIXED_LEN + 512 + \
			   WIRE_AUTH_LEN - WIRE_AUTH_TAG_LEN)

/* Collective codes (wire values). */
enum wire_coll {
	WIRE_COLL_ALLREDUCE = 1,
	WIRE_COLL_REDUCE = 2,
	WIRE_COLL_BCAST = 3,
	WIRE_COLL_BARRIER = 4,
	WIRE_COLL_ALLGATHER = 5,
	WIRE_COLL_REDUCE_SCATTER = 6,
	WIRE_COLL_ALLTOALL = 7,
	WIRE_COLL_SCATTER = 8,
	WIRE_COLL_GATHER = 9,
	WIRE_COLL_MAX = 9
};

/* Why a packet was rejected. 0 is success; values index wire_err_name(). */
enum wire_err {
	WIRE_OK = 0,
	WIRE_E_TRUNCATED,   /* shorter than its headers say */
	WIRE_E_ETHERTYPE,   /* not IPv4 */
	WIRE_E_IPV4,        /* version / IHL / options / total length */
	WIRE_E_IP_CSUM,     /* IPv4 header checksum */
	WIRE_E_FRAGMENT,    /* DF clear, MF set or fragment offset != 0 */
	WIRE_E_PROTO,       /* not UDP */
	WIRE_E_UDP_PORT,    /* destination port != 4791 */
	WIRE_E_UDP_LEN,     /* UDP length disagrees with the IP length */
	WIRE_E_OPCODE,      /* BTH opcode != 0x2B */
	WIRE_E_BTH,         /* TVer != 0 or reserved bits set */
	WIRE_E_PAD,         /* PadCnt does not make the IB payload a multiple of 4, or pad != 0 */
	WIRE_E_DMALEN,      /* RETH DMA length != INCA header + data */
	WIRE_E_VERSION,     /* INCA version != 1 */
	WIRE_E_FLAGS,       /* unknown flag bits */
	WIRE_E_COLL,        /* unknown collective */
	WIRE_E_DTYPE,       /* unknown data type */
	WIRE_E_OP,          /* unknown op, or op invalid for the type */
	WIRE_E_BSL,         /* BSL code outside 1..7 */
	WIRE_E_COUNT,       /* data length != count * element size */
	WIRE_E_RESERVED,    /* reserved field not zero */
	WIRE_E_ICRC,        /* ICRC mismatch */
	WIRE_E_TOO_BIG,     /* IB payload larger than 4096 */
	WIRE_E_COUNT_MAX_   /* number of reasons */
};
/* Stable snake_case name of a reason ("truncated", "icrc", ...), for counters and logs. */
const char *wire_err_name(enum wire_err e);

struct wire_bth {
	uint8_t opcode;
	uint8_t se, migreq, padcnt, tver;
	uint16_t pkey;
	uint8_t fecn, becn;
	uint32_t dest_qp; /* 24 bits */
	uint8_t ack_req;
	uint32_t psn; /* 24 bits */
};

struct wire_reth {
	uint64_t va;      /* byte offset of this chunk in the collective buffer */
	uint32_t rkey;    /* group key */
	uint32_t dma_len; /* INCA header + data bytes (the IB payload without pad) */
};

/* The INCA header. `bits` points at the BIER bit-string in wire order (bit position 1 is the
 * least significant bit of the last byte, RFC 8279); it is borrowed: from the packet buffer
 * after decode, from the caller before encode. */
struct wire_inca {
	uint8_t version; /* WIRE_INCA_VERSION */
	uint8_t flags;   /* WIRE_F_* */
	uint8_t coll;    /* enum wire_coll */
	uint8_t dtype;   /* enum wire_dtype */
	uint8_t op;      /* enum wire_op */
	uint16_t tree_id;
	uint16_t slot;
	uint32_t round;
	uint16_t bfr_id; /* sender's BFR-id (0: none, e.g. the root sending down) */
	uint8_t bsl_code; /* RFC 8296 BSL encoding: 1 = 64 bits ... 7 = 4096 bits */
	uint8_t si;       /* BIER set identifier */
	uint16_t count;   /* elements in the data */
	const uint8_t *bits; /* bsl/8 bytes */
	/* Owner BFR-id (offset 18, docs/protocol.md §4.1): for reduce and reduce-scatter the member
	 * that receives the result data, for bcast and allgather the member that provides it;
	 * the others get header-only results. 0 = none (every destination gets the data); must
	 * be 0 for allreduce and barrier. */
	uint16_t owner;
	/* Job epoch, carried in the authentication block (WIRE_F_AUTH); 0 without one. */
	uint32_t epoch;
};
/* 1 if a collective code carries an owner (reduce, bcast, allgather, reduce-scatter). */
static inline int wire_coll_has_owner(uint8_t coll)
{
	return coll == 2 || coll == 3 || coll == 5 || coll == 6;
}

/* The authentication block without the epoch (that is wire_inca.epoch). Meaningful only with
 * WIRE_F_AUTH. */
struct wire_auth {
	uint32_t key_id; /* which group key signed it */
	uint32_t ctx;    /* sender context (WIRE_AUTH_CTX_SWITCH) */
	uint64_t ctr;    /* nonce counter: never repeats for one (key, ctx) */
	uint8_t tag[WIRE_AUTH_TAG_LEN];
};

/* A decoded (or to-be-encoded) INCA packet: the UDP payload. Pointers are borrowed. */
struct wire_pkt {
	struct wire_bth bth;
	struct wire_reth reth;
	uint32_t imm; /* ImmDt: message id */
	struct wire_inca inca;
	struct wire_auth auth;
	const uint8_t *data; /* count * element size bytes */
	uint32_t data_len;
	uint32_t icrc; /* as carried (decode) */
};

/* Slots are grouped in aligned blocks of this many (block = slot / WIRE_SLOT_BLOCK). A switch
 * gives each of its worker threads whole blocks, and the kernel hands a GRO buffer to one
 * worker: so a sender never puts packets of two blocks into one GSO send (the tag of
 * util_udptx_add). 15: a block of full-size packets (15 x 4132 bytes) fits one send, whose UDP
 * payload is at most 65507 bytes; 16 would leave as 15 + 1. */
#define WIRE_SLOT_BLOCK 15
/* IPv4 IDs a receiver that cannot see them accepts: 0 .. WIRE_GSO_ID_SPAN - 1, every ID a GSO
 * send of up to 128 segments (the kernel's limit) can give a segment. */
#define WIRE_GSO_ID_SPAN 128

/* IPv4/UDP facts the ICRC covers but a UDP socket does not show. Addresses and ports in host
 * byte order (docs/protocol.md §7). */
struct wire_ipinfo {
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
	/* The IPv4 Identification. An encoder gives the ID the kernel will write: 0 for a datagram
	 * from an unconnected IP_PMTUDISC_DO socket, k for segment k of a UDP GSO send (the kernel
	 * numbers a send's segments 0, 1, 2 ...). */
	uint16_t ip_id;
	/* Decode only. The receiver cannot see the ID (it reads a UDP socket): ip_id is the first
	 * guess (a segment's index in a GRO buffer, else 0), and the ICRC also holds if it matches
	 * for another ID below WIRE_GSO_ID_SPAN. Costs nothing when the guess is right; otherwise
	 * about 150 XORs (plus 7 CRC shifts the first time a thread sees a length). */
	bool id_unseen;
};

/* Bit-string length in bytes for a BSL code (8..512), 0 if invalid. */
size_t wire_bsl_bytes(uint8_t bsl_code);
/* BSL code for a length in bits (64..4096, power of two), 0 if invalid. */
uint8_t wire_bsl_code(unsigned bsl_bits);
/* INCA header length for a BSL code (20 + bsl/8). */
size_t wire_inca_hdr_len(uint8_t bsl_code);
/* Largest data bytes per packet for a RoCE MTU (IB payload limit), element size and BSL code:
 * rounded down to a whole number of elements. 0 if nothing fits. */
size_t wire_max_data(unsigned mtu, size_t elem_size, uint8_t bsl_code);
/* UDP payload length of a packet (headers + data + pad + ICRC), without an auth block. */
size_t wire_udp_payload_len(uint8_t bsl_code, size_t data_len);
/* The same for packets with (auth true) or without an authentication block: every member of a
 * group uses one setting, so they all cut chunks identically. */
size_t wire_max_data_auth(unsigned mtu, size_t elem_size, uint8_t bsl_code, bool auth);
size_t wire_udp_payload_len_auth(uint8_t bsl_code, size_t data_len, bool auth);
/* UDP payload length pkt encodes to (its flags decide about the auth block). */
size_t wire_pkt_udp_len(const struct wire_pkt *pkt);
/* The MAC input before the data (WIRE_AUTH_AAD_MAX bytes at most) of a packet with
 * WIRE_F_AUTH, as encoded: RETH (VA, R_Key, DMA length), ImmDt, the INCA fixed header, the
 * bit-string unless the packet goes down (RESULT or NACK: the copies of one result or notice
 * differ there), and key id, epoch, context, counter. The data follows it in the MAC. The BTH
 * is not covered. Returns the length, 0 if pkt is not valid for encoding with an auth block. */
size_t wire_auth_aad(const struct wire_pkt *pkt, uint8_t *out);

/* Encode pkt into buf as a UDP payload (BTH .. ICRC). Computes padcnt, dma_len, version and the
 * ICRC over ip (which must describe the datagram the kernel will build); other fields are taken
 * from pkt as given. Returns the length written, or -EINVAL (bad field) / -ENOSPC (cap). */
int wire_encode_udp(uint8_t *buf, size_t cap, const struct wire_pkt *pkt,
		    const struct wire_ipinfo *ip);

/* Strictly decode a UDP payload. On success returns WIRE_OK and fills *out with pointers into
 * buf. If ip is non-NULL the ICRC is verified against it (WIRE_E_ICRC on mismatch), else the
 * ICRC is only read. Never reads outside buf[0..len). */
enum wire_err wire_decode_udp(const uint8_t *buf, size_t len, struct wire_pkt *out,
			      const struct wire_ipinfo *ip);

/* Full frames (Ethernet onward), for captures, the simulator and tests. Encode writes
 * Eth (given MACs) | IPv4 (DF, TTL 64, checksum) | UDP (checksum 0) | UDP payload. */
int wire_encode_frame(uint8_t *buf, size_t cap, const uint8_t dst_mac[6], const uint8_t src_mac[6],
		      const struct wire_pkt *pkt, const struct wire_ipinfo *ip);
/* Decode and check every layer, including the IPv4 checksum and the ICRC (always). On success
 * fills *out and, if ip_out is non-NULL, the addresses found. */
enum wire_err wire_decode_frame(const uint8_t *buf, size_t len, struct wire_pkt *out,
				struct wire_ipinfo *ip_out);

/* RoCEv2 ICRC of a UDP payload whose last 4 bytes are the ICRC field (not covered).
 * Cost: one CRC-32 pass over the payload. */
uint32_t wire_icrc(const struct wire_ipinfo *ip, const uint8_t *udp_payload, size_t len);
/* Check the ICRC of a UDP payload that wire_decode_udp accepted without ip (decode first,
 * authorise, then pay for the CRC): true if it holds for ip (id_unseen honoured). */
bool wire_icrc_check(const struct wire_ipinfo *ip, const uint8_t *udp_payload, size_t len);
/* Recompute the ICRC of an encoded UDP payload for ip (e.g. another IPv4 ID) in place.
 * Returns 0 or -EINVAL. */
int wire_set_icrc(uint8_t *udp_payload, size_t len, const struct wire_ipinfo *ip);

/* --- BIER bit-strings in wire order (RFC 8279 numbering). len is in bytes. --- */
/* Bit position (1..len*8) of BFR-id k in set si: returns 0 if k is not in that set. */
unsigned wire_bier_bp(uint16_t bfr_id, unsigned bsl_bits, uint8_t si);
/* BFR-id for bit position bp of set si. */
uint16_t wire_bier_bfr_id(unsigned bp, unsigned bsl_bits, uint8_t si);
void wire_bier_set(uint8_t *bits, size_t len, unsigned bp);
void wire_bier_clear(uint8_t *bits, size_t len, unsigned bp);
bool wire_bier_test(const uint8_t *bits, size_t len, unsigned bp);
/* Lowest set bit position at or above `from` (1-based), or 0 if none. */
unsigned wire_bier_next(const uint8_t *bits, size_t len, unsigned from);
unsigned wire_bier_popcount(const uint8_t *bits, size_t len);
bool wire_bier_empty(const uint8_t *bits, size_t len);

/* ---- Added by the wire helper: fan-out fast path (not in the original API) ----
 * A switch sends one result to many members; the copies differ only in headers (addresses,
 * DestQP, PSN, bit-string), so the CRC of the data is computed once and each copy's ICRC then
 * costs a pass over its ~100 header bytes plus one CRC combine step (tens of ns) instead of a
 * pass over up to 4 KiB. */
struct wire_dcrc {
	uint32_t crc; /* zlib crc32(0, data, len) */
	uint32_t op;  /* x^(8 len) mod P, which shifts a CRC over len bytes (the value of zlib's
		       * crc32_combine_gen(len)) */
	uint32_t len; /* data bytes */
};
/* Fill *out for data[0..len). Cost: one CRC-32 pass over the data. -EINVAL if len > 65535. */
int wire_data_crc(struct wire_dcrc *out, const uint8_t *data, size_t len);
/* Exactly wire_encode_udp (same bytes, same errors), given dcrc from wire_data_crc(pkt->data,
 * pkt->data_len); -EINVAL if dcrc->len != pkt->data_len. */
int wire_encode_udp_dcrc(uint8_t *buf, size_t cap, const struct wire_pkt *pkt,
			 const struct wire_ipinfo *ip, const struct wire_dcrc *dcrc);
/* Offset of the data in pkt's UDP payload (BTH + RETH + ImmDt + INCA header + the auth block if
 * its flags say so), 0 if its BSL code is invalid. */
size_t wire_pkt_data_off(const struct wire_pkt *pkt);
/* wire_encode_udp_dcrc without writing the data: buf[0..wire_pkt_data_off) and
 * buf[wire_pkt_data_off + data_len .. returned length) get exactly wire_encode_udp_dcrc's bytes
 * (headers, pad, ICRC over the data as it is now); the data's place is not touched, so a
 * sender can gather the datagram from those two parts with pkt->data in between. dcrc from
 * wire_data_crc(pkt->data, pkt->data_len), or NULL to compute it here. Same errors as
 * wire_encode_udp_dcrc. */
int wire_encode_udp_nodata(uint8_t *buf, size_t cap, const struct wire_pkt *pkt,
			   const struct wire_ipinfo *ip, const struct wire_dcrc *dcrc);
/* Exactly wire_encode_frame, with the shared data CRC of wire_encode_udp_dcrc. */
int wire_encode_frame_dcrc(uint8_t *buf, size_t cap, const uint8_t dst_mac[6],
			   const uint8_t src_mac[6], const struct wire_pkt *pkt,
			   const struct wire_ipinfo *ip, const struct wire_dcrc *dcrc);

#endif
