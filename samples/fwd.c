// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * fwd - IPv4/IPv6 forwarding in XDP using the kernel's routing tables.
 *
 * For each IPv4 or IPv6 packet the program asks the kernel FIB where the
 * packet would go (bpf_fib_lookup, with the ingress device, addresses,
 * TOS/flow label and length). When the lookup succeeds, i.e. the route is
 * known and the next hop's MAC address is already resolved, the program
 * does what the IP forwarding path would: decrements the TTL (updating the
 * IPv4 header checksum incrementally) or the IPv6 hop limit, rewrites the
 * MAC addresses with the ones the lookup returned, and redirects the frame
 * to the egress device through tx_ports, a BPF_MAP_TYPE_DEVMAP_HASH keyed
 * by ifindex (user space adds every device that may be used for egress).
 *
 * In every other case (lookup failure, TTL about to expire, egress device
 * not in tx_ports, not IP) the packet is passed to the normal stack, which
 * will route it, answer with ICMP errors or resolve the neighbour.
 *
 * fib_results counts the lookups per BPF_FIB_LKUP_RET_* code.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* Flow label and traffic class of the first IPv6 header word. */
#define IPV6_FLOWINFO_MASK bpf_htonl(0x0FFFFFFF)

/* Egress devices, keyed by ifindex; the value is the ifindex again. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} tx_ports SEC(".maps");

/* Lookups per result code (BPF_FIB_LKUP_RET_*), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 16);
} fib_results SEC(".maps");

/* Flags for bpf_fib_lookup, e.g. BPF_FIB_LOOKUP_DIRECT to skip policy
 * routing rules (.rodata, set before loading). */
const volatile __u32 fib_flags = 0;

static __always_inline void count_result(long rc)
{
	__u32 key = rc < 0 ? 15 : (__u32)rc;
	__u64 *n;

	n = bpf_map_lookup_elem(&fib_results, &key);
	if (n)
		*n += 1;
}

/* TTL - 1, with the header checksum updated for the changed 16-bit word
 * (TTL and protocol share one). */
static __always_inline void ipv4_decrement_ttl(struct iphdr *iph)
{
	__be16 old = *(__be16 *)&iph->ttl;

	iph->ttl--;
	iph->check = pyxdp_csum_replace2(iph->check, old, *(__be16 *)&iph->ttl);
}

/* After a successful lookup: new MACs, then out through tx_ports. */
static __always_inline int forward(struct ethhdr *eth, struct bpf_fib_lookup *fib)
{
	__builtin_memcpy(eth->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib->smac, ETH_ALEN);
	return bpf_redirect_map(&tx_ports, fib->ifindex, 0);
}

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx)
{
	struct bpf_fib_lookup fib = {};
	struct pyxdp_cursor c;
	struct ethhdr *eth = NULL;
	struct iphdr *iph = NULL;
	struct ipv6hdr *ip6h = NULL;
	__be16 proto;
	long rc;

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, &eth);
	/* A VLAN-tagged frame would need its tag rewritten too: leave those
	 * to the stack. */
	if (!eth || c.pos != (void *)(eth + 1))
		return XDP_PASS;

	if (proto == bpf_htons(ETH_P_IP)) {
		iph = pyxdp_parse_ipv4(&c);
		if (!iph || iph->ttl <= 1)
			return XDP_PASS;
		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.l4_protocol = iph->protocol;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		ip6h = pyxdp_parse_ipv6(&c);
		if (!ip6h || ip6h->hop_limit <= 1)
			return XDP_PASS;
		fib.family = AF_INET6;
		fib.flowinfo = *(__be32 *)ip6h & IPV6_FLOWINFO_MASK;
		fib.l4_protocol = ip6h->nexthdr;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, sizeof(fib.ipv6_dst));
	} else {
		return XDP_PASS;
	}
	fib.ifindex = ctx->ingress_ifindex;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), fib_flags);
	count_result(rc);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;

	/* Only forward to devices user space has put in the map. */
	if (!bpf_map_lookup_elem(&tx_ports, &fib.ifindex))
		return XDP_PASS;

	if (iph)
		ipv4_decrement_ttl(iph);
	else if (ip6h)
		ip6h->hop_limit--;
	return forward(eth, &fib);
}

LICENSE("GPL");
