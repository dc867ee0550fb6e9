// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * xdp1 - count packets per IP protocol, then drop them.
 *
 * For every packet the program walks the Ethernet header, up to two VLAN
 * tags (802.1AD outer, 802.1Q inner), and an IPv4 or IPv6 header, and
 * counts the packet in a per-CPU array indexed by the IP protocol number
 * (the IPv6 "next header" value; 0 for non-IP traffic). Then it returns
 * XDP_DROP: attached to an interface it is a packet sink with statistics,
 * in the spirit of the Linux kernel's xdp1 sample.
 *
 * User space sums the per-CPU values of rxcnt[proto] to get the totals.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* Packets seen, per CPU, indexed by IP protocol number (0..255). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 256);
} rxcnt SEC(".maps");

/*
 * The IP protocol number of the packet, 0 when it is not IPv4/IPv6 or a
 * header is cut short.
 */
static __always_inline __u32 packet_ip_protocol(struct xdp_md *ctx)
{
	struct pyxdp_cursor c;
	__be16 proto;

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, NULL);

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		return iph ? iph->protocol : 0;
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		return ip6h ? ip6h->nexthdr : 0;
	}
	return 0;
}

SEC("xdp")
int xdp_prog1(struct xdp_md *ctx)
{
	__u32 key = packet_ip_protocol(ctx);
	__u64 *count;

	/* key is at most 255, so the lookup always finds a slot; the NULL
	 * check is still required by the verifier. */
	count = bpf_map_lookup_elem(&rxcnt, &key);
	if (count)
		*count += 1; /* per-CPU slot: no atomic needed */

	return XDP_DROP;
}

LICENSE("GPL");
