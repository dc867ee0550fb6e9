// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * xdp2 - count packets per IP protocol, then send them back out.
 *
 * Same parsing and counting as xdp1 (Ethernet, up to two VLAN tags, IPv4 or
 * IPv6; a per-CPU counter per IP protocol number), but instead of dropping
 * the packet the program swaps its source and destination MAC addresses and
 * returns XDP_TX, so the packet leaves through the interface it came in on,
 * addressed to its sender: a minimal reflector.
 *
 * Frames too short to hold an Ethernet header are dropped.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* Packets reflected, per CPU, indexed by IP protocol number (0..255). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 256);
} rxcnt SEC(".maps");

SEC("xdp")
int xdp_prog2(struct xdp_md *ctx)
{
	struct pyxdp_cursor c;
	struct ethhdr *eth = NULL;
	__u32 key = 0;
	__u64 *count;
	__be16 proto;

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, &eth);
	if (!eth)
		return XDP_DROP; /* not even an Ethernet header */

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (iph)
			key = iph->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (ip6h)
			key = ip6h->nexthdr;
	}

	count = bpf_map_lookup_elem(&rxcnt, &key);
	if (count)
		*count += 1;

	/* Address the frame back to its sender. */
	pyxdp_swap_macs(eth);
	return XDP_TX;
}

LICENSE("GPL");
