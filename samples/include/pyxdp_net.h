/* SPDX-License-Identifier: MIT */
/*
 * pyxdp_net.h - packet headers and bounds-checked parsing helpers shared by
 * pyxdp's sample programs.
 *
 * Every parser takes a cursor (current position and the end of the packet)
 * and checks the header fits before returning a pointer to it, in the form
 * the kernel verifier can follow: "if (pos + size > end) fail".
 */
#ifndef PYXDP_NET_H
#define PYXDP_NET_H

#include "pyxdp_bpf.h"

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>

/*
 * <linux/icmp.h> includes <linux/if.h>, which pulls in the C library's
 * <sys/socket.h>: there is no C library for the BPF target. The ICMP header
 * only needs IFNAMSIZ from it, so mark <linux/if.h> as already included and
 * supply that one constant.
 */
#ifndef _LINUX_IF_H
#define _LINUX_IF_H
#define IFNAMSIZ 16
#endif
#include <linux/icmp.h>

/* Address families for struct bpf_fib_lookup (from the C library's
 * <sys/socket.h>, which the BPF target does not have). */
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* IPv4 frag_off bits (host order; the kernel keeps these out of UAPI). */
#define PYXDP_IP_CE 0x8000     /* congestion (reserved) */
#define PYXDP_IP_DF 0x4000     /* don't fragment */
#define PYXDP_IP_MF 0x2000     /* more fragments */
#define PYXDP_IP_OFFSET 0x1fff /* fragment offset, in 8-byte units */

/* ICMPv6 is not in <linux/in.h>. */
#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

/* One 802.1Q / 802.1AD tag, as it follows the two MAC addresses: the tag
 * control information, then the EtherType of what comes next. (The kernel
 * has no UAPI struct for it.) */
struct pyxdp_vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

/* How many VLAN tags the parsers skip (QinQ: an outer 802.1AD tag and an
 * inner 802.1Q tag). */
#define PYXDP_MAX_VLAN_TAGS 2

struct pyxdp_cursor {
	void *pos;
	void *end;
};

static __always_inline void pyxdp_cursor_init(struct pyxdp_cursor *c, struct xdp_md *ctx)
{
	c->pos = (void *)(long)ctx->data;
	c->end = (void *)(long)ctx->data_end;
}

static __always_inline int pyxdp_is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/*
 * Parse the Ethernet header and up to PYXDP_MAX_VLAN_TAGS VLAN tags. Returns
 * the EtherType of the payload (network byte order), or 0 if the packet is
 * too short. *eth_out, when not NULL, receives the Ethernet header.
 */
static __always_inline __be16 pyxdp_parse_eth(struct pyxdp_cursor *c, struct ethhdr **eth_out)
{
	struct ethhdr *eth = c->pos;
	__be16 proto;

	if ((void *)(eth + 1) > c->end)
		return 0;
	c->pos = eth + 1;
	if (eth_out)
		*eth_out = eth;
	proto = eth->h_proto;

#pragma unroll
	for (int i = 0; i < PYXDP_MAX_VLAN_TAGS; i++) {
		struct pyxdp_vlan_hdr *vlan = c->pos;

		if (!pyxdp_is_vlan(proto))
			break;
		if ((void *)(vlan + 1) > c->end)
			return 0;
		c->pos = vlan + 1;
		proto = vlan->encap_proto;
	}
	return proto;
}

/* IPv4 header, options included. Returns NULL if it does not fit or its
 * IHL is below 5. */
static __always_inline struct iphdr *pyxdp_parse_ipv4(struct pyxdp_cursor *c)
{
	struct iphdr *iph = c->pos;
	__u32 hdr_len;

	if ((void *)(iph + 1) > c->end)
		return NULL;
	hdr_len = iph->ihl * 4;
	if (hdr_len < sizeof(*iph))
		return NULL;
	if (c->pos + hdr_len > c->end)
		return NULL;
	c->pos += hdr_len;
	return iph;
}

/* Fixed IPv6 header (extension headers are left to the caller). */
static __always_inline struct ipv6hdr *pyxdp_parse_ipv6(struct pyxdp_cursor *c)
{
	struct ipv6hdr *ip6h = c->pos;

	if ((void *)(ip6h + 1) > c->end)
		return NULL;
	c->pos = ip6h + 1;
	return ip6h;
}

/* A fixed-size header of type T at the cursor, or NULL. */
#define pyxdp_parse_hdr(c, T)                                                   \
	({                                                                      \
		T *__h = (c)->pos;                                              \
		if ((void *)(__h + 1) > (c)->end)                               \
			__h = NULL;                                             \
		else                                                            \
			(c)->pos = __h + 1;                                     \
		__h;                                                            \
	})

/* Swap the source and destination MAC addresses in place. */
static __always_inline void pyxdp_swap_macs(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

/* ------------------------------------------------------------------------ */
/* Internet checksum (RFC 1071) helpers                                      */
/* ------------------------------------------------------------------------ */

/* Fold a 32-bit one's-complement sum (as bpf_csum_diff returns it) to 16
 * bits and complement it: the value to store in a checksum field. */
static __always_inline __u16 pyxdp_csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Checksum of an IPv4 header without options (its check field must be 0),
 * computed with bpf_csum_diff. */
static __always_inline __u16 pyxdp_ipv4_csum(struct iphdr *iph)
{
	__s64 sum = bpf_csum_diff(NULL, 0, (__be32 *)iph, sizeof(*iph), 0);

	return pyxdp_csum_fold((__u64)sum);
}

/*
 * Incremental update (RFC 1624, eqn. 3) of a checksum field after a 16-bit
 * word of the covered data changed from old to new:
 *   HC' = ~(~HC + ~m + m')
 */
static __always_inline __sum16 pyxdp_csum_replace2(__sum16 check, __be16 old, __be16 new)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~old;
	sum += new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__sum16)~sum;
}

#endif /* PYXDP_NET_H */
