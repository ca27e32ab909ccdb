// SPDX-License-Identifier: Apache-2.0
/* XDP program of inca-switch --xdp (docs/switch.md, "AF_XDP data path"). It redirects INCA
 * traffic — unfragmented IPv4 without options, UDP to the configured destination address and
 * port — to the AF_XDP socket bound to the receiving queue, and passes everything else (ARP,
 * ICMP, TCP, other UDP) to the kernel. A queue without a socket in the map passes too.
 *
 * The daemon fills `cfg` (one entry) before it attaches the program; until then nothing matches.
 * `counters` (per CPU): 0 = redirected, 1 = passed, 2 = redirect failed. Section xdp.frags: the
 * program only reads the first buffer of a frame (the headers), so it accepts multi-buffer
 * frames, which lets veth keep an MTU above one page. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct inca_xdp_cfg {
	__u32 ip_be;   /* switch address, network order; 0 = match nothing */
	__u16 port_be; /* UDP destination port, network order */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct inca_xdp_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline int count(__u32 k, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &k);

	if (c)
		*c += 1;
	return verdict;
}

SEC("xdp.frags")
int inca_xdp_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct udphdr *udp;
	struct inca_xdp_cfg *c;
	__u32 zero = 0;
	long rc;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return count(1, XDP_PASS);
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > end || iph->ihl != 5 || iph->protocol != IPPROTO_UDP ||
	    (iph->frag_off & bpf_htons(0x3FFF))) /* MF or a fragment offset */
		return count(1, XDP_PASS);
	udp = (void *)(iph + 1);
	if ((void *)(udp + 1) > end)
		return count(1, XDP_PASS);
	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c || !c->ip_be || iph->daddr != c->ip_be || udp->dest != c->port_be)
		return count(1, XDP_PASS);
	rc = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (rc == XDP_REDIRECT)
		return count(0, XDP_REDIRECT);
	return count(2, (int)rc);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
